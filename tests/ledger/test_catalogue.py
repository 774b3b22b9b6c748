"""Page-script catalogue: compiled-hash merge (ledger.md §12.3), resolution (§8.2), the shipped
default set, and the autoscroll script type-checking against the host types."""

from __future__ import annotations

import hashlib

import pytest
from psycopg import AsyncConnection
from psycopg.rows import dict_row

from ledger.crawl.scripts import (
    CompiledMismatch,
    add_script,
    default_catalogue,
    default_set,
    inline_script,
    load_defaults,
    merge_compiled,
    resolve,
)

A, B, C = "a" * 64, "b" * 64, "c" * 64
WITH = {"typescript": "6.0.3", "hostTypes": "v0.2.0"}


def pinned(id_, version=1, **extra):
    return {"id": id_, "version": version, "phase": "behavior", "source": "x", "sha256": A, "options": {}, **extra}


def compiled(*items):
    return {**WITH, "scripts": [{"id": i, "version": v, "sha256": h} for i, v, h in items]}


def test_merge_records_hashes():
    out = merge_compiled([pinned("autoscroll"), pinned("autofetch")], compiled(("autoscroll", 1, B), ("autofetch", 1, B)))
    assert out.changed
    assert [(s["jsSha256"], s["compiledWith"]) for s in out.scripts] == [(B, WITH), (B, WITH)]


@pytest.mark.parametrize("pins,report,status,key", [
    ([pinned("autoscroll"), pinned("autofetch")], [("autoscroll", 1, B)], 400, "autofetch@1"),
    ([pinned("autoscroll")], [("autoscroll", 1, B), ("x", 1, B)], 400, "x@1"),
    ([pinned("autoscroll", 3)], [("autoscroll", 2, B)], 400, "autoscroll@2"),
])
def test_merge_refusals(pins, report, status, key):
    with pytest.raises(CompiledMismatch) as err:
        merge_compiled(pins, compiled(*report))
    assert (err.value.status, err.value.script_id) == (status, key)


def test_merge_conflict_on_changed_js():
    with pytest.raises(CompiledMismatch) as err:
        merge_compiled([pinned("autoscroll", jsSha256=B, compiledWith=WITH)], compiled(("autoscroll", 1, C)))
    assert err.value.status == 409
    assert "bbbbbbbbbbbb\u2026 \u2192 cccccccccccc\u2026" in err.value.message


def test_merge_unchanged_and_compiler_update():
    pins = [pinned("autoscroll", jsSha256=B, compiledWith=WITH)]
    assert not merge_compiled(pins, compiled(("autoscroll", 1, B))).changed
    newer = merge_compiled(pins, {**compiled(("autoscroll", 1, B)), "typescript": "6.0.4"})
    assert newer.changed and newer.scripts[0]["compiledWith"]["typescript"] == "6.0.4"
    assert pins[0]["compiledWith"] == WITH  # input untouched
    assert merge_compiled([], compiled()).changed is False


def test_inline_script_pinning_and_names():
    s = inline_script("hide-banner", "preload", "document.title;", {"a": 1})
    assert (s["id"], s["version"], s["phase"]) == ("inline-hide-banner", 1, "preload")
    assert s["sha256"] == hashlib.sha256("document.title;".encode()).hexdigest()
    for bad in ("Bad Name", "x" * 60):
        with pytest.raises(ValueError, match="lowercase"):
            inline_script(bad, "behavior", "1;", None)


@pytest.mark.anyio
async def test_resolution_against_the_table(migrated_db_url):
    async with await AsyncConnection.connect(migrated_db_url, row_factory=dict_row, autocommit=True) as conn:
        assert await add_script(conn, "zeta", "z1;") == (1, True)
        assert await add_script(conn, "zeta", "z1;") == (1, False)          # same source reused
        assert await add_script(conn, "zeta", "z2;") == (2, True)
        assert await add_script(conn, "zeta", "z2;", options={"k": 1}) == (3, True)  # options differ
        assert await add_script(conn, "alpha", "a1;") == (1, True)
        await conn.execute("UPDATE scripts SET enabled = false WHERE id = 'zeta' AND version = 3")
        # default: highest *enabled* version per id, ordered by id
        assert [(s["id"], s["version"]) for s in await default_set(conn)] == [("alpha", 1), ("zeta", 2)]
        # named: newest regardless of enabled, caller's order; id@n exact; unknown reported
        found, missing = await resolve(conn, ["zeta", "alpha@1", "zeta@1", "nope", "alpha@9"])
        assert [(s["id"], s["version"]) for s in found] == [("zeta", 3), ("alpha", 1), ("zeta", 1)]
        assert missing == ["nope", "alpha@9"]
        assert found[0]["sha256"] == hashlib.sha256(b"z2;").hexdigest()
        with pytest.raises(ValueError):
            await add_script(conn, "inline-x", "1;")
        with pytest.raises(ValueError):
            await add_script(conn, "ok", "1;", phase="after")


@pytest.mark.anyio
async def test_load_defaults_is_idempotent(migrated_db_url):
    async with await AsyncConnection.connect(migrated_db_url, row_factory=dict_row, autocommit=True) as conn:
        first = await load_defaults(conn)
        second = await load_defaults(conn)
        assert ("autoscroll", 1, True) in first
        assert ("autoscroll", 1, False) in second
        (row,) = [s for s in await default_set(conn) if s["id"] == "autoscroll"]
        assert row["phase"] == "behavior"
        assert row["sha256"] == hashlib.sha256(row["source"].encode("utf-8")).hexdigest()


@pytest.fixture(scope="module")
def autoscroll_js() -> dict:
    """The shipped autoscroll compiled by the ts-compile stand-in's compiler (with host.d.ts),
    plus the diagnostics of a misspelt copy."""
    from devstack.tscompile.child import NodeCompiler

    (autoscroll,) = [s for s in default_catalogue() if s["id"] == "autoscroll"]
    compiler = NodeCompiler(timeout_s=240)
    try:
        out = compiler.compile([{"id": "autoscroll", "source": autoscroll["source"]}])
        broken = compiler.compile([{"id": "autoscroll",
                                    "source": autoscroll["source"].replace("remainingMs", "remaining")}])
    finally:
        compiler.close()
    return {"ts": autoscroll["source"], "out": out, "broken": broken}


def test_autoscroll_type_checks_against_host_types(autoscroll_js):
    assert "__bh.remainingMs" in autoscroll_js["ts"] and "__bh.report" in autoscroll_js["ts"]
    out = autoscroll_js["out"]
    assert "diagnostics" not in out, out.get("diagnostics")
    assert out["outputs"]["autoscroll"].startswith('"use strict";')
    assert any(d["code"] == "TS2551" for d in autoscroll_js["broken"]["diagnostics"])


LAZY_PAGE = """<!doctype html><html><body style="margin:0">
<div id="feed"></div>
<script>
  var chunks = 0;
  function more() { const d = document.createElement('div'); d.style.height = '1500px';
                    d.className = 'chunk'; document.getElementById('feed').appendChild(d); chunks++; }
  more();
  addEventListener('scroll', () => {
    if (chunks < 6 && scrollY + innerHeight >= document.documentElement.scrollHeight - 200) more();
  });
</script></body></html>"""


def run_in_chromium(js: str, budget_ms: int, options: dict | None = None, content: str = LAZY_PAGE) -> tuple[list, int]:
    """Run a behavior the way the capture server does (its __bh runtime, CDP evaluate with
    awaitPromise) on a page that grows while scrolled; returns (reports, chunks loaded)."""
    from playwright.sync_api import sync_playwright

    from waggle_capture.behaviors import RUNTIME_JS

    flags = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--no-first-run", "--disable-quic"]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=flags, headless=True)
        try:
            page = browser.new_page(viewport={"width": 800, "height": 600})
            page.set_content(content)
            page.evaluate(RUNTIME_JS, [{"autoscroll": options}, budget_ms])
            cdp = page.context.new_cdp_session(page)
            res = cdp.send("Runtime.evaluate", {"expression": js, "awaitPromise": True})
            assert "exceptionDetails" not in res, res
            return page.evaluate("() => globalThis.__bhReports"), page.evaluate("() => globalThis.chunks ?? 0")
        finally:
            browser.close()


def test_autoscroll_scrolls_lazy_content_and_reports(autoscroll_js):
    js = autoscroll_js["out"]["outputs"]["autoscroll"]
    reports, chunks = run_in_chromium(js, 20_000, {"delayMs": 50, "settleRounds": 2})
    (report,) = reports
    assert chunks == 6
    assert report["id"] == "autoscroll"
    data = report["data"]
    assert data["stoppedBy"] == "bottom"
    assert data["finalHeight"] == 6 * 1500  # every lazy chunk was loaded
    assert data["scrolledPx"] == 6 * 1500 - 600  # down to the very bottom of the viewport
    assert data["steps"] >= (6 * 1500 - 600) // 480
    # a budget that runs low stops the scroll early and says so
    (short,), chunks = run_in_chromium(js, 1_000, {"delayMs": 50, "reserveMs": 900})
    assert short["data"]["stoppedBy"] == "budget" and chunks < 6


SHORT_PAGE = """<!doctype html><html><body style="margin:0"><h1>one screen</h1>
<script>addEventListener('scroll', () => { globalThis.chunks = -1; });</script></body></html>"""


def test_autoscroll_leaves_a_page_that_fits_its_viewport_at_once(autoscroll_js):
    """No step, no idle rounds: a one-screen page is released to the settle immediately (its
    rounds would hold the host's next capture back by settleRounds × delayMs for nothing)."""
    js = autoscroll_js["out"]["outputs"]["autoscroll"]
    (report,), scrolled = run_in_chromium(js, 20_000, {"delayMs": 400, "settleRounds": 3}, content=SHORT_PAGE)
    assert report["data"] == {"steps": 0, "scrolledPx": 0, "finalHeight": 600, "stoppedBy": "fits"}
    assert scrolled == 0 and report["elapsedMs"] < 400  # less than one round: nothing was waited

"""The web page on a phone and for everyone (issue 30 item 4; decisions 261–264), in real Chromium
against the whole local stack.

Every view at 1280 × 800 and 390 × 844 (a phone): nothing wider than the screen
(``document.documentElement.scrollWidth`` ≤ the viewport), URLs not squeezed into fragments,
"Sign out" inside the header, taps landing on the button under the finger, and axe-core
(pinned npm package, devstack/) with no serious or critical violation. Signed out only the
sign-in shows; form errors are sentences next to their fields; Start says "Starting…"; a crawl
started elsewhere appears in the open list; Captured never says less than the progress line;
the archives count is exact; ``/favicon.ico`` answers. ``WAGGLE_SCREENSHOTS=1`` writes
``docs/web-<view>.png`` (1280) and ``docs/web-<view>-phone.png`` (390).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.site import Site
from tests.web.test_browser import FINAL, facts_apart, page_html, sign_in, stray_nulls

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
AXE = ROOT / "devstack" / "node_modules" / "axe-core" / "axe.min.js"
SIZES = {1280: 800, 390: 844}
# a long page name (and query): the URL the phone must break sensibly
LONG = "the-waggle-dance-of-the-honeybee-tells-the-direction-and-distance-of-flowers.html"
LONG_QUERY = "?from=a-phone-sized-screen&lang=en"
# the views these tests shoot (test_browser.py leaves these files to them)
VIEWS = ("signin", "crawls", "start", "start-errors", "crawl", "archives", "search")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("phone-site")
    (root / LONG).write_text(page_html("Waggle dance", ["a.html", "b.html"]))
    (root / "a.html").write_text(page_html("Bees A", [LONG]))
    (root / "b.html").write_text(page_html("Bees B", []))
    s = Site(root, "User-agent: *\nAllow: /\n")
    try:
        yield s
    finally:
        s.stop()


def context_at(browser, width: int):
    context = browser.new_context(viewport={"width": width, "height": SIZES[width]}, has_touch=width < 600)
    page = context.new_page()
    page.set_default_timeout(45000)  # the machine is shared and often loaded
    return context, page


def fits(page) -> None:
    """Nothing is wider than the screen; names the widest element when something is."""
    wide = page.evaluate("""() => {
        const w = window.innerWidth;
        let worst = null;
        for (const e of document.querySelectorAll('body *')) {
          const r = e.getBoundingClientRect();
          if (r.width && r.right > w + 0.5 && (!worst || r.right > worst.right))
            worst = {right: Math.round(r.right), tag: e.tagName, id: e.id, cls: e.className, text: (e.textContent || '').slice(0, 60)};
        }
        return {scroll: document.documentElement.scrollWidth, width: w, worst};
    }""")
    assert wide["scroll"] <= wide["width"], wide


def header_holds_its_controls(page) -> None:
    """Sign out (and everything else of the header) inside the header and the screen."""
    boxes = page.evaluate("""() => {
        const h = document.querySelector('header').getBoundingClientRect();
        return [...document.querySelectorAll('header > *')].filter((e) => e.offsetParent)
          .map((e) => { const r = e.getBoundingClientRect();
            return {id: e.id || e.className, inside: r.left >= h.left - 0.5 && r.right <= Math.min(h.right, window.innerWidth) + 0.5
              && r.top >= h.top - 0.5 && r.bottom <= h.bottom + 0.5}; });
    }""")
    assert all(b["inside"] for b in boxes), boxes


def urls_read_whole(page) -> None:
    """A URL cell is wide enough to read (≥ 20 characters a line), never a column of fragments."""
    narrow = page.evaluate("""() => [...document.querySelectorAll('td.url, .hit-url')]
        .map((e) => ({w: e.getBoundingClientRect().width, ch: parseFloat(getComputedStyle(e).fontSize) * 0.55,
                      text: e.textContent.slice(0, 40)}))
        .filter((c) => c.w < 20 * c.ch)""")
    assert not narrow, narrow


def taps_land(page) -> None:
    """The middle of every visible button in a list is that button (nothing overlaps it)."""
    missed = page.evaluate("""() => [...document.querySelectorAll('td button, td a')].filter((b) => b.offsetParent)
        .filter((b) => { const r = b.getClientRects()[0];
          const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
          return r.top >= 0 && r.bottom <= window.innerHeight && !(hit && (hit === b || b.contains(hit))); })
        .map((b) => b.textContent)""")
    assert not missed, missed


def axe_clean(page) -> None:
    """axe-core's serious and critical violations: none."""
    assert AXE.is_file(), "axe-core is installed by scripts/bootstrap (devstack/package.json)"
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.add_script_tag(path=str(AXE))
    found = page.evaluate("""async () => (await axe.run(document, {resultTypes: ['violations']})).violations
        .map((v) => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' '))}))""")
    bad = [v for v in found if v["impact"] in ("serious", "critical")]
    assert not bad, bad


def check_view(page, name: str, width: int) -> None:
    page.wait_for_timeout(300)  # layout settles after the last answer
    fits(page)
    header_holds_its_controls(page)
    urls_read_whole(page)
    taps_land(page)
    assert stray_nulls(page) == [], name  # an absent part of the view never reads "null"
    if name == "crawl":  # each fact's value beside its label (Seeds sat a row below, far left)
        assert page.locator('#crawl-facts dd[data-fact="seeds"]').inner_text().startswith("http")
        assert facts_apart(page) == [], width
    axe_clean(page)
    shot = page.screenshot()
    assert shot[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("WAGGLE_SCREENSHOTS") == "1":
        (DOCS / f"web-{name}{'' if width > 600 else '-phone'}.png").write_bytes(shot)


def bearer(local_stack) -> dict[str, str]:
    return {"Authorization": "Bearer " + local_stack.token()}


@pytest.fixture(scope="module")
def watched(local_stack, browser, site) -> Iterator[dict]:
    """A crawl started through the API (elsewhere) while the phone shows the crawls list; then
    its page watched to the end. → ``{crawlId, appeared_s, samples: [(facts, progress line)]}``."""
    context, page = context_at(browser, 390)
    try:
        sign_in(local_stack, page)
        page.wait_for_function("!(document.getElementById('crawls-status')?.textContent ?? 'Loading').startsWith('Loading')")
        page.evaluate("window.__same_page = true")
        r = httpx.post(local_stack.api_url + "/api/crawls", headers=bearer(local_stack), timeout=30,
                       json={"seeds": [site.url + "/" + LONG + LONG_QUERY], "maxDepth": 1, "maxPages": 4,
                             "perHostDelayMs": 400})
        assert r.status_code == 202, r.text
        crawl_id = r.json()["crawlId"]
        t0 = time.monotonic()
        page.wait_for_selector(f"tr.crawl[data-id='{crawl_id}']", timeout=30000)
        appeared = time.monotonic() - t0
        assert page.evaluate("window.__same_page === true")  # no reload: the list polled
        page.click(f"tr.crawl[data-id='{crawl_id}'] a")
        page.wait_for_selector("#crawl-facts")
        samples = []
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            seen = page.evaluate("""() => {
                const d = (k) => document.querySelector(`#crawl-facts dd[data-fact='${k}']`);
                const p = document.getElementById('level-progress');
                return d('state') && {state: d('state').textContent.trim(), captured: d('captured').textContent,
                                      progress: p ? p.querySelector('strong').textContent : null};
            }""")
            if seen:
                samples.append(seen)
                if seen["state"] in FINAL:
                    break
            page.wait_for_timeout(250)
        yield {"crawlId": crawl_id, "appeared_s": appeared, "samples": samples}
    finally:
        context.close()


def test_signed_out_only_the_sign_in_shows(local_stack, browser) -> None:
    for width in SIZES:
        context, page = context_at(browser, width)
        try:
            page.goto(local_stack.api_url + "/")
            page.wait_for_selector("#signin")
            # `header nav {display:flex}` once beat `hidden`: links that did nothing showed
            for hidden in ("#nav", "#nav a[data-view='crawls']", "#nav a[data-view='archives']", "#search-box", "#signout"):
                assert page.locator(hidden).is_hidden(), hidden
            check_view(page, "signin", width)
        finally:
            context.close()


def test_a_crawl_started_elsewhere_appears_and_captured_agrees_with_progress(watched) -> None:
    # the list polls while nothing runs too (10 s), so a crawl started elsewhere shows
    assert watched["appeared_s"] < 25, watched["appeared_s"]
    samples = watched["samples"]
    assert samples and samples[-1]["state"] == "succeeded", samples[-3:]
    for s in samples:  # "Captured" never says less than the progress line under it
        captured = int(s["captured"].split()[0])
        if s["progress"]:
            in_flight = int(re.search(r"\((\d+) captured", s["progress"]).group(1))
            assert captured >= in_flight, s
    assert int(samples[-1]["captured"]) == 3, samples[-1]  # the long page, a.html, b.html


@pytest.mark.parametrize("width", list(SIZES))
def test_every_view_fits_the_screen_and_passes_axe(local_stack, browser, watched, width: int) -> None:
    crawl_id = watched["crawlId"]
    context, page = context_at(browser, width)
    try:
        sign_in(local_stack, page)
        loaded = {
            "crawls": ("#/crawls", f"tr.crawl[data-id='{crawl_id}']"),
            "start": ("#/start", "#start-form"),
            "crawl": (f"#/crawls/{crawl_id}", "table#pages tr.page"),
            "archives": (f"#/archives?crawl={crawl_id}", "tr.archive"),
            "search": ("#/search?q=waggle", "#search-status:not(:has-text('Searching'))"),
        }
        for name, (hash_, ready) in loaded.items():
            page.goto(local_stack.api_url + "/" + hash_)
            page.wait_for_selector(ready)
            if name == "archives":
                page.wait_for_function("/ of /.test(document.getElementById('archives-status')?.textContent ?? '')")
            check_view(page, name, width)
    finally:
        context.close()


def test_the_archives_count_is_exact(local_stack, browser, watched) -> None:
    crawl_id = watched["crawlId"]
    context, page = context_at(browser, 390)
    try:
        sign_in(local_stack, page)
        deadline = time.monotonic() + 90
        while True:  # archives are admitted after the level report, their tuples by the outbox
            page.goto(local_stack.api_url + f"/#/archives?crawl={crawl_id}")
            page.reload()
            page.wait_for_function("/ of |No archives/.test(document.getElementById('archives-status')?.textContent ?? '')")
            if page.locator("tr.archive").count() == 3 or time.monotonic() > deadline:
                break
            page.wait_for_timeout(1000)
        listed = httpx.get(local_stack.api_url + "/api/archives/count", params={"crawl": crawl_id},
                           headers=bearer(local_stack), timeout=30).json()["count"]
        assert listed == 3 and page.inner_text("#archives-status") == "3 of 3 archives"
        page.goto(local_stack.api_url + "/#/archives")
        page.reload()
        page.wait_for_function("/ of /.test(document.getElementById('archives-status')?.textContent ?? '')")
        total = httpx.get(local_stack.api_url + "/api/archives/count", headers=bearer(local_stack), timeout=30).json()["count"]
        shown = page.locator("tr.archive").count()
        assert page.inner_text("#archives-status") == f"{shown:,} of {total:,} archive{'' if total == 1 else 's'}"
        assert shown == min(total, 50) or not page.locator("#more").is_hidden()
    finally:
        context.close()


def test_form_errors_are_sentences_next_to_their_fields_and_start_says_starting(local_stack, browser, site) -> None:
    context, page = context_at(browser, 390)
    try:
        sign_in(local_stack, page)
        page.goto(local_stack.api_url + "/#/start")
        page.wait_for_selector("#start-form")
        page.fill("#maxPages", "abc")
        page.fill("#maxDepth", "99")
        page.click("#start")  # no seeds
        page.wait_for_selector("#maxPages-error:not(:empty)")
        said = {f: page.inner_text(f"#{f}-error") for f in ("seeds", "maxPages", "maxDepth")}
        assert said == {"seeds": "Give at least one seed URL.", "maxPages": "Max pages must be a whole number.",
                        "maxDepth": "Depth must be 10 or less."}, said
        for f in ("seeds", "maxPages", "maxDepth"):  # next to its field: just under it, described by it
            gap = page.evaluate(f"""() => document.getElementById('{f}-error').getBoundingClientRect().top
                - document.getElementById('{f}').getBoundingClientRect().bottom""")
            assert 0 <= gap < 60, (f, gap)
            assert page.get_attribute(f"#{f}", "aria-invalid") == "true"
            assert page.get_attribute(f"#{f}", "aria-describedby") == f"{f}-error"
        check_view(page, "start-errors", 390)
        # "Starting…" from the click until the ledger answers
        page.evaluate("""() => { window.__labels = [];
            new MutationObserver(() => window.__labels.push(document.getElementById('start')?.textContent))
              .observe(document.getElementById('start'), {childList: true, characterData: true, subtree: true}); }""")
        page.fill("#seeds", site.url + "/b.html")
        page.fill("#maxPages", "1")
        page.fill("#maxDepth", "0")
        page.click("#start")
        page.wait_for_url(re.compile(r".*#/crawls/[0-9a-f-]{36}$"))
        assert "Starting…" in page.evaluate("window.__labels"), page.evaluate("window.__labels")
        page.wait_for_selector("#crawl-facts")
        deadline = time.monotonic() + 120
        while page.inner_text("#crawl-facts dd[data-fact='state']").strip() not in FINAL:
            assert time.monotonic() < deadline
            page.wait_for_timeout(500)
    finally:
        context.close()


def test_the_favicon_answers_and_no_load_asks_for_a_missing_file(local_stack, browser) -> None:
    r = httpx.get(local_stack.api_url + "/favicon.ico", timeout=10)
    assert r.status_code == 200 and r.headers["content-type"].startswith("image/svg+xml") and b"<svg" in r.content
    context, page = context_at(browser, 390)
    missing: list[str] = []
    context.on("response", lambda resp: missing.append(resp.url) if resp.status == 404 else None)
    try:
        sign_in(local_stack, page)
        page.goto(local_stack.api_url + "/#/archives")
        page.reload()
        page.wait_for_selector("#archives-status")
        page.wait_for_timeout(1000)
        icon = page.evaluate("document.querySelector('link[rel=icon]').href")
        assert httpx.get(icon, timeout=10).status_code == 200
        assert not missing, missing
    finally:
        context.close()

"""Hostile level report bodies (issue 14, level report v2) through the real ledger over HTTP:
wrong shapes and types → 400 naming the field, counts over the settings → 413 naming the
limit, bodies over 32 MiB streamed without a Content-Length → 413; nothing is recorded by a
refused report, and the same crawl then accepts a good one."""

from __future__ import annotations

import uuid

import httpx
import psycopg
import pytest

from tests.hostile.conftest import WHO, start_ledger

NO_SCRIPTS = {"typescript": "6.0.3", "hostTypes": "v0.2.0", "scripts": []}
SEED = "https://a.test/"


@pytest.fixture(scope="module")
def small_caps(create_database, migrated_template, ledger_fga, s3_server, _webhook_server):
    server, ledger = start_ledger(create_database, migrated_template, ledger_fga, s3_server, _webhook_server,
                                  report_links_per_page=5, report_links_max=12, report_results_max=3)
    yield ledger
    server.stop()


@pytest.fixture
def crawl(small_caps):
    r = httpx.post(f"{small_caps.url}/api/crawls", json={"seeds": [SEED], "maxDepth": 2, "scripts": []},
                   headers=WHO, timeout=30)
    assert r.status_code == 202, r.text
    crawl_id = r.json()["crawlId"]
    yield crawl_id
    httpx.post(f"{small_caps.url}/api/crawls/{crawl_id}/failed", json={"reason": "test over"}, headers=WHO, timeout=30)


def links(n, prefix="https://a.test/p"):
    return [{"href": f"{prefix}{i}", "rel": None} for i in range(n)]


def result(**extra):
    return {"url": SEED, "status": "captured", **extra}


def post(ledger, crawl_id, results, **kw):
    return httpx.post(f"{ledger.url}/api/crawls/{crawl_id}/pages",
                      json={"depth": 0, "results": results, "compiled": NO_SCRIPTS}, headers=WHO, timeout=60, **kw)


def nothing_recorded(ledger, crawl_id):
    with psycopg.connect(ledger.db_url) as conn:
        reports = conn.execute("SELECT count(*) FROM crawl_level_reports WHERE crawl_id = %s", (crawl_id,)).fetchone()[0]
        pages = conn.execute("SELECT count(*), min(state) FROM crawl_pages WHERE crawl_id = %s", (crawl_id,)).fetchone()
        depth = conn.execute("SELECT current_depth FROM crawls WHERE id = %s", (crawl_id,)).fetchone()[0]
    return reports == 0 and tuple(pages) == (1, "pending") and depth == 0


TASK = str(uuid.uuid4())


@pytest.mark.parametrize("bad,needle", [
    (result(links="https://a.test/x"), "results.0.links"),
    (result(links=[{"href": 5}]), "results.0.links.0.href"),
    (result(links=[{"href": ""}]), "results.0.links.0.href"),
    (result(links=[{"rel": "x"}]), "results.0.links.0.href is required"),
    (result(links=[{"href": "https://a.test/x", "text": "more"}]), "unknown field results.0.links.0.text"),
    (result(links=[{"href": "https://a.test/" + "x" * 9000}]), "at most 8192 characters"),
    (result(links=[{"href": "https://a.test/x", "rel": ["nofollow"]}]), "results.0.links.0.rel"),
    (result(links=[{"href": "https://a.test/\x00"}]), "NUL character"),
    (result(links=[{"href": "https://a.test/x", "rel": "a\x00"}]), "links.0.rel contains a NUL"),
    (result(linksOverflow=-1), "results.0.linksOverflow"),
    (result(linksOverflow="many"), "results.0.linksOverflow"),
    (result(manifestSummary={"status": "success"}), "manifestSummary needs a manifestLocation"),
    (result(taskId=TASK, manifestLocation="s3://b/k", manifestSummary={"status": "great"}),
     "results.0.manifestSummary.status"),
    (result(taskId=TASK, manifestLocation="s3://b/k", manifestSummary={"status": "success", "wacz": 1}),
     "results.0.manifestSummary.wacz"),
    (result(taskId=TASK, manifestLocation="s3://b/k", manifestSummary={"status": "success", "size": 1}),
     "unknown field results.0.manifestSummary.size"),
])
def test_wrong_shapes_are_400_naming_the_field(small_caps, crawl, bad, needle):
    r = post(small_caps, crawl, [bad])
    assert r.status_code == 400 and needle in r.json()["error"], r.text
    assert nothing_recorded(small_caps, crawl)


@pytest.mark.parametrize("results,needle", [
    ([result(links=links(6))], "results.0.links has 6 links; at most 5 per result (WAGGLE_REPORT_LINKS_PER_PAGE)"),
    ([result(links=links(5)), result(links=links(5, "https://a.test/q")), result(links=links(3, "https://a.test/r"))],
     "13 inline links; at most 12 in one report (WAGGLE_REPORT_LINKS_MAX)"),
    ([result()] * 4, "4 results; at most 3"),
])
def test_counts_over_the_settings_are_413_naming_the_limit(small_caps, crawl, results, needle):
    r = post(small_caps, crawl, results)
    assert r.status_code == 413 and needle in r.json()["error"], r.text
    assert nothing_recorded(small_caps, crawl)


def test_a_good_report_after_refusals_is_accepted(small_caps, crawl):
    assert post(small_caps, crawl, [result(links=links(6))]).status_code == 413
    r = post(small_caps, crawl, [result(links=links(5), linksOverflow=1)])
    assert r.status_code == 200, r.text
    assert [n["url"] for n in r.json()["next"]] == [f"https://a.test/p{i}" for i in range(5)]


def test_a_streamed_body_over_32_mib_is_413(small_caps, crawl):
    chunk = b" " * (1024 * 1024)

    def body():  # no Content-Length: chunked transfer, cut off by the ledger while reading
        yield b'{"depth": 0, "compiled": {}, "results": ['
        for _ in range(40):
            yield chunk
        yield b"]}"

    r = httpx.post(f"{small_caps.url}/api/crawls/{crawl}/pages", content=body(),
                   headers={**WHO, "content-type": "application/json"}, timeout=120)
    assert r.status_code == 413 and "32 MiB" in r.json()["error"]
    assert nothing_recorded(small_caps, crawl)


def test_the_text_check_names_the_place_and_passes_lookalikes():
    """The one-pass check (orjson) and the walk agree: NUL and lone surrogates are named where
    they are; a backslash followed by "u0000" is ordinary text; a >64-bit integer passes."""
    from ledger.api.crawls import _storable_quick

    for bad, where in (({"a": ["x", "y\x00"]}, "body.a.1"), ({"b": {"c": "\udfff"}}, "body.b.c")):
        with pytest.raises(ValueError, match=where.replace(".", r"\.") + " contains"):
            _storable_quick(bad, "body")
    for fine in ({"a": "\\u0000"}, {"a": "x\\\\u0000"}, {"n": 2 ** 70}, {"a": ["\u00e9", None, 1.5]}):
        _storable_quick(fine, "body")

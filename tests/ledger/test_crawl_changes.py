"""What changed between two crawls (issue 27 items 3 and 5, decision 211): ``GET
/api/crawls/{id}/changes`` against the real ledger, Postgres, OpenFGA and the S3 stand-in, with
WACZs written by the capture server's own WARC writer (a revisit record where the organization
held the payload). Pages new, changed, unchanged and gone are counted and listed; each side of a
page replays inside its own crawl's collection; a revisit whose original the caller may not view
is listed as missing, never replayed; outsiders get 404."""

from __future__ import annotations

import tempfile
import uuid
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest

from waggle_capture.recorder import Exchange
from waggle_capture.revisits import Revisits, payload_digest
from waggle_capture.wacz import build_wacz, pages_jsonl
from waggle_capture.warc import cdxj_index, write_warc
from ledger.archive.digests import normal
from ledger.archive.main_document import main_document_of_cdxj
from tests.fixtures.ledger import LedgerHarness, ledger_settings, open_ledger
from tests.fixtures.s3_store import store_of

pytestmark = pytest.mark.anyio
WHO = LedgerHarness.who()
OUTSIDER = LedgerHarness.who("mallory", "evil")
GLOBEX = LedgerHarness.who("bob", "globex")
WHEN = datetime(2026, 11, 30, 10, 0, 0, tzinfo=timezone.utc)
SITE = "https://s.test/"


def body(text: str) -> bytes:
    return f"<html><body>{(text + ': a paragraph of words. ') * 100}</body></html>".encode()  # ≥ 1,024 B: revisit-able


@pytest.fixture
def settings(migrated_db_url, ledger_fga, fake_webhook, s3_server):
    ledger_fga.write(writes=["user:bob submitter organization:globex"], ignore_existing=True)
    return ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, s3_bucket=s3_server.bucket)




def wacz(url: str, payload: bytes, held: dict | None = None) -> bytes:
    """A capture server WACZ of one 200 page (a revisit record when ``held`` names its digest)."""
    ex = Exchange(url=url, method="GET", started=WHEN, status=200, status_text="OK",
                  resp_headers=[("Content-Type", "text/html")], body=payload)
    revisits = Revisits(held=held, lookup="ok") if held is not None else None
    with tempfile.TemporaryDirectory() as tmp:
        warc = Path(tmp) / "data.warc.gz"
        write_warc(warc, task_id="t", url=url, software="test", exchanges=[ex], denied=[], created=WHEN,
                   revisits=revisits)
        out = Path(tmp) / "x.wacz"
        build_wacz(out, warc=warc, cdxj=cdxj_index(warc), pages=pages_jsonl("t", url, "2026-11-30T10:00:00Z", "x"),
                   extra=[], datapackage={"browserhive:capture": {"revisits": revisits.report()}} if revisits else {})
        return out.read_bytes()


async def start(h, seeds, who=WHO) -> str:
    r = await h.client.post("/api/crawls", json={"seeds": seeds, "scripts": [], "perHostDelayMs": 0}, headers=who)
    assert r.status_code == 202, r.text
    return r.json()["crawlId"]


def finish(db, crawl_id):
    with psycopg.connect(db) as conn:
        conn.execute("UPDATE crawls SET state = 'succeeded', stop_reason = 'completed', finished_at = now()"
                     " WHERE id = %s", (crawl_id,))


def capture(db, s3_server, fga, crawl_id, url, payload, *, held=None, org="acme", viewable=True) -> str:
    """Page ``url`` of the crawl captured with ``payload``: WACZ in S3, archive row, the page's
    digest in the organization's index (a response) or its revisit row (``held``), and (``viewable``) the tuple sharing
    the archive with the organization's members. → archive id."""
    task = str(uuid.uuid4())
    key = f"{task}_{crawl_id}.wacz"
    s3_server.client().put_object(Bucket=s3_server.bucket, Key=key, Body=wacz(url, payload, held))
    with psycopg.connect(db) as conn:
        conn.execute("UPDATE crawl_pages SET state = 'captured', task_id = %s WHERE crawl_id = %s AND url = %s",
                     (task, crawl_id, url))
        aid = str(conn.execute(
            "INSERT INTO archives (task_id, correlation_id, bucket, object_key, source_url, captured_at, wacz_complete)"
            " VALUES (%s, %s, %s, %s, %s, now(), true) RETURNING id",
            (task, crawl_id, s3_server.bucket, key, url)).fetchone()[0])
        if held is not None:  # what admission records of a revisit (ledger.archive.digests.record_digests)
            conn.execute("INSERT INTO archive_revisits (archive_id, digest) VALUES (%s, %s)",
                         (aid, normal(payload_digest(payload))))
        else:
            conn.execute("INSERT INTO payload_digests (org_id, digest, uri, captured_at, archive_id)"
                         " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                         (org, normal(payload_digest(payload)), url, WHEN, aid))
    if viewable:
        fga.write(writes=[{"user": f"organization:{org}#member", "relation": "viewer", "object": f"archive:{aid}"}])
    return aid


def fail(db, crawl_id, url):
    with psycopg.connect(db) as conn:
        conn.execute("UPDATE crawl_pages SET state = 'failed', skip_reason = 'http_error: HTTP 404'"
                     " WHERE crawl_id = %s AND url = %s", (crawl_id, url))


def held_by(url: str, payload: bytes) -> dict:
    return {payload_digest(payload): {"uri": url, "date": "2026-11-30T10:00:00Z"}}


def replay_of(side: dict) -> dict:
    q = parse_qs(urlsplit(side["replay"]).fragment.partition("?")[2])
    return {k: v[0] for k, v in q.items()}


async def test_new_changed_unchanged_and_gone_are_counted_and_each_change_replays_both_captures(
        settings, s3_server, ledger_fga):
    db = settings.database_url
    u = {n: SITE + n for n in ("same", "changed", "gone", "revisited", "failed-before", "new")}
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        first = await start(h, [u[n] for n in ("same", "changed", "gone", "revisited", "failed-before")])
        a = {n: capture(db, s3_server, ledger_fga, first, u[n], body(n + " v1"))
             for n in ("same", "changed", "gone", "revisited")}
        fail(db, first, u["failed-before"])
        finish(db, first)
        second = await start(h, list(u.values()))
        b = {n: capture(db, s3_server, ledger_fga, second, u[n], body(n + (" v2" if n == "changed" else " v1")))
             for n in ("same", "changed", "failed-before", "new")}
        b["revisited"] = capture(db, s3_server, ledger_fga, second, u["revisited"], body("revisited v1"),
                                 held=held_by(u["revisited"], body("revisited v1")))
        fail(db, second, u["gone"])

        r = await h.client.get(f"/api/crawls/{second}/changes", params={"since": first}, headers=WHO)
        assert r.status_code == 200, r.text
        got = r.json()
        assert got["counts"] == {"new": 2, "changed": 1, "unchanged": 2, "gone": 1, "notCompared": 0}
        assert [e["url"] for e in got["new"]] == [u["failed-before"], u["new"]]
        assert got["new"][0]["before"]["state"] == "failed" and got["new"][1]["before"] is None
        assert [e["url"] for e in got["unchanged"]] == [u["same"], u["revisited"]]
        assert got["unchanged"][1]["now"]["revisit"] is True  # stored as a revisit, compared by its digest
        assert [e["url"] for e in got["gone"]] == [u["gone"]] and got["gone"][0]["now"]["state"] == "failed"
        assert got["sinceChosen"] == "given" and got["since"]["crawlId"] == first
        [changed] = got["changed"]
        assert changed["url"] == u["changed"]
        now, before = changed["now"], changed["before"]
        assert (now["archiveId"], before["archiveId"]) == (b["changed"], a["changed"])
        assert now["digest"] == normal(payload_digest(body("changed v2"))) != before["digest"]
        assert (now["httpStatus"], now["missing"], before["missing"]) == (200, None, None)
        # each side opens in its own crawl's collection, at the page (the links search hits use)
        assert replay_of(now) == {"archive": b["changed"], "crawl": second, "url": u["changed"],
                                  "captured": now["capturedAt"]}
        assert replay_of(before)["crawl"] == first and replay_of(before)["archive"] == a["changed"]

        # the indexes were read once: asking again reads none from S3
        with psycopg.connect(db) as conn:
            kept = conn.execute("SELECT count(*) FROM archive_main_documents").fetchone()[0]
            conn.execute("UPDATE archive_main_documents SET http_status = 299")
        again = (await h.client.get(f"/api/crawls/{second}/changes", params={"since": first}, headers=WHO)).json()
        assert kept == 9 and again["changed"][0]["now"]["httpStatus"] == 299
        assert (got["limitsDiffer"], got["goneNote"]) == ([], None)  # same limits, not stopped short

        # run with a smaller budget that it used up: a gone page it reached and failed is gone for
        # sure (no note); one it never reached may be there still — said so
        with psycopg.connect(db) as conn:
            conn.execute("UPDATE crawls SET max_pages = 5, stop_reason = 'max_pages' WHERE id = %s", (second,))
        reached = (await h.client.get(f"/api/crawls/{second}/changes", params={"since": first}, headers=WHO)).json()
        assert reached["limitsDiffer"] and reached["goneNote"] is None, reached["goneNote"]
        with psycopg.connect(db) as conn:
            conn.execute("DELETE FROM crawl_pages WHERE crawl_id = %s AND url = %s", (second, u["gone"]))
        narrow = (await h.client.get(f"/api/crawls/{second}/changes", params={"since": first}, headers=WHO)).json()
        [differ] = narrow["limitsDiffer"]
        assert differ["option"] == "maxPages" and differ["now"] == 5 and differ["before"] != 5, differ
        assert "maxPages 5 now" in narrow["goneNote"] and "stopped short (max_pages)" in narrow["goneNote"]
        assert "not necessarily gone from the site" in narrow["goneNote"]
        from ledger.client.changes import report_lines
        assert any(line.startswith("  note: ") for line in report_lines(narrow, "http://x/"))
        listed = [line for line in report_lines(narrow, "http://x/", unchanged=True) if line.startswith("unchanged ")]
        assert listed == [f"unchanged  {u['same']}", f"unchanged  {u['revisited']}"]
        assert not any(line.startswith("unchanged ") for line in report_lines(narrow, "http://x/"))


async def test_pages_a_stopped_crawl_never_tried_are_neither_gone_nor_new(settings, s3_server, ledger_fga):
    """A trial stopped a crawl after 11 of 23 pages: the 12 it never tried read as gone, and as new
    in the next full run compared with it. They are not compared, with the reason, both ways."""
    db = settings.database_url
    u = {n: SITE + n for n in ("a", "b", "c")}
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        full = await start(h, list(u.values()))
        for n in u:
            capture(db, s3_server, ledger_fga, full, u[n], body(n))
        finish(db, full)
        stopped = await start(h, list(u.values()))
        capture(db, s3_server, ledger_fga, stopped, u["a"], body("a"))
        r = await h.client.post(f"/api/crawls/{stopped}/stop", headers=WHO)
        assert r.status_code == 200, r.text
        again = await start(h, list(u.values()))
        for n in u:
            capture(db, s3_server, ledger_fga, again, u[n], body(n))
        finish(db, again)

        short = (await h.client.get(f"/api/crawls/{stopped}/changes", params={"since": full}, headers=WHO)).json()
        after = (await h.client.get(f"/api/crawls/{again}/changes", params={"since": stopped}, headers=WHO)).json()
    assert short["counts"] == {"new": 0, "changed": 0, "unchanged": 1, "gone": 0, "notCompared": 2}, short["counts"]
    assert {(e["url"], e["why"]) for e in short["notCompared"]} == {(u["b"], "not-reached"), (u["c"], "not-reached")}
    assert all("stopped before this page was captured" in e["reason"] for e in short["notCompared"])
    assert after["counts"] == {"new": 0, "changed": 0, "unchanged": 1, "gone": 0, "notCompared": 2}, after["counts"]
    assert {e["why"] for e in after["notCompared"]} == {"not-reached-before"}
    assert after["notCompared"][0]["reason"].startswith("in the earlier crawl: the crawl was stopped")


async def test_the_default_is_the_previous_finished_crawl_of_the_same_seeds(settings, s3_server, ledger_fga):
    db = settings.database_url
    seeds = [SITE + "a", SITE + "b"]
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        first = await start(h, seeds)
        none_yet = await h.client.get(f"/api/crawls/{first}/changes", headers=WHO)
        assert none_yet.status_code == 409 and "give since" in none_yet.json()["error"]
        asked = await h.client.get(f"/api/crawls/{first}/changes/since", headers=WHO)  # the same, without an error
        assert asked.status_code == 200 and asked.json()["since"] is None and asked.json()["sinceChosen"] is None
        assert "no earlier finished crawl" in asked.json()["reason"] == none_yet.json()["noEarlierCrawl"]
        capture(db, s3_server, ledger_fga, first, seeds[0], body("a"))
        finish(db, first)
        other = await start(h, [SITE + "a"])  # other seeds: never the default
        finish(db, other)
        second = await start(h, list(reversed(seeds)))  # the same set in another order
        capture(db, s3_server, ledger_fga, second, seeds[0], body("a2"))
        r = await h.client.get(f"/api/crawls/{second}/changes", headers=WHO)
        assert r.status_code == 200, r.text
        assert (r.json()["since"]["crawlId"], r.json()["sinceChosen"]) == (first, "same-seeds")
        asked = (await h.client.get(f"/api/crawls/{second}/changes/since", headers=WHO)).json()
        assert (asked["since"], asked["sinceChosen"], asked["reason"]) == (first, "same-seeds", None)
        for who in (OUTSIDER, GLOBEX):  # not a submitter anywhere; a submitter of another organization
            assert (await h.client.get(f"/api/crawls/{second}/changes/since", headers=who)).status_code == 404
        assert r.json()["counts"]["changed"] == 1
        # a running crawl's pages not captured yet are not called gone
        capture(db, s3_server, ledger_fga, first, seeds[1], body("b"))
        assert [e["why"] for e in (await h.client.get(f"/api/crawls/{second}/changes", headers=WHO)).json()
                ["notCompared"]] == ["not-captured-yet"]


async def test_among_crawls_of_the_same_seeds_one_with_the_same_limits_comes_first(settings, s3_server, ledger_fga):
    """A trial deleted two workflows of one seed: the full crawl's changes were then taken since the
    other workflow's newer one-page crawl. The same limits now win over recency."""
    db = settings.database_url
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        full = await start(h, [SITE])
        finish(db, full)
        r = await h.client.post("/api/crawls", headers=WHO, json={"seeds": [SITE], "scripts": [], "perHostDelayMs": 0,
                                                                   "maxPages": 1})
        assert r.status_code == 202, r.text
        one_page = r.json()["crawlId"]
        finish(db, one_page)
        again = await start(h, [SITE])
        asked = (await h.client.get(f"/api/crawls/{again}/changes/since", headers=WHO)).json()
    assert (asked["since"], asked["sinceChosen"]) == (full, "same-seeds")


async def test_outsiders_and_bad_since_are_refused(settings, s3_server, ledger_fga):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        mine = await start(h, [SITE])
        finish(settings.database_url, mine)
        theirs = await start(h, ["https://g.test/"], who=GLOBEX)
        finish(settings.database_url, theirs)
        again = await start(h, [SITE])
        url = f"/api/crawls/{again}/changes"
        assert (await h.client.get(url, params={"since": mine}, headers=OUTSIDER)).status_code == 404
        assert (await h.client.get(url, params={"since": mine}, headers=GLOBEX)).status_code == 404
        # both crawls must be the caller's: another organization's crawl is as absent as none
        assert (await h.client.get(url, params={"since": theirs}, headers=WHO)).status_code == 404
        assert (await h.client.get(url, params={"since": str(uuid.uuid4())}, headers=WHO)).status_code == 404
        bad = await h.client.get(url, params={"since": "yesterday"}, headers=WHO)
        assert bad.status_code == 400 and "since must be a crawl id" in bad.json()["error"]
        self_ = await h.client.get(url, params={"since": again}, headers=WHO)
        assert self_.status_code == 400 and "itself" in self_.json()["error"]
        ok = await h.client.get(url, headers=WHO)
        assert ok.status_code == 200 and ok.json()["since"]["crawlId"] == mine


async def test_a_revisit_whose_original_is_not_viewable_is_listed_as_missing_never_replayed(
        settings, s3_server, ledger_fga):
    """Issue 27 item 5, the changes view's side: a recrawl's page changed to a payload the
    organization already held in an archive the caller may not view, so its document is a
    revisit of that original — the page is still compared (its own archive holds the digest) but
    its side says ``original-not-viewable`` and has no replay link (the collection lists the same
    archive as missing); a page whose own archive is not viewable is not compared and reveals no
    digest."""
    db = settings.database_url
    u = {n: SITE + n for n in ("kept", "moved", "private")}
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        first = await start(h, list(u.values()))
        capture(db, s3_server, ledger_fga, first, u["kept"], body("kept"))
        capture(db, s3_server, ledger_fga, first, u["moved"], body("moved v1"))
        original = capture(db, s3_server, ledger_fga, first, u["private"], body("orig"), viewable=False)
        finish(db, first)
        second = await start(h, list(u.values()))
        capture(db, s3_server, ledger_fga, second, u["kept"], body("kept"), held=held_by(u["kept"], body("kept")))
        capture(db, s3_server, ledger_fga, second, u["moved"], body("orig"), held=held_by(u["private"], body("orig")))
        capture(db, s3_server, ledger_fga, second, u["private"], body("orig v2"), viewable=False)
        r = await h.client.get(f"/api/crawls/{second}/changes", headers=WHO)
        assert r.status_code == 200, r.text
        got = r.json()
        assert got["counts"] == {"new": 0, "changed": 1, "unchanged": 1, "gone": 0, "notCompared": 1}
        [kept] = got["unchanged"]
        assert kept["now"]["revisit"] is True and kept["now"]["replay"] and kept["now"]["missing"] is None
        [moved] = got["changed"]
        assert moved["now"]["digest"] == normal(payload_digest(body("orig")))
        assert moved["now"]["replay"] is None and moved["now"]["missing"]["why"] == "original-not-viewable"
        assert moved["before"]["replay"] and moved["before"]["missing"] is None
        [hidden] = got["notCompared"]
        assert (hidden["url"], hidden["why"]) == (u["private"], "not-viewable")
        assert hidden["now"]["digest"] is None and hidden["before"]["digest"] is None  # never read for this caller
        assert hidden["now"]["replay"] is None and hidden["before"]["missing"]["why"] == "not-viewable"
        coll = (await h.client.get(f"/api/crawls/{second}/collection", headers=WHO)).json()
        assert original not in [m["archiveId"] for m in coll["resources"]]
        assert "original-not-viewable" in [m["why"] for m in coll["missing"]]


def test_the_main_document_is_the_final_urls_record_and_a_revisit_carries_its_digest():
    cdxj = "\n".join([
        's.test)/ 20261130100000 {"url": "https://s.test/", "status": "301", "digest": "sha256:AAA", "mime": "text/html"}',
        's.test)/a 20261130100001 {"url": "https://s.test/a", "status": "200", "digest": "sha256:bbb=", "mime": "warc/revisit"}',
        's.test)/a.css 20261130100001 {"url": "https://s.test/a.css", "status": "200", "digest": "sha256:CCC"}',
        "not a line"])
    got = main_document_of_cdxj(cdxj, ["https://s.test/a", "https://s.test/"])
    assert (got.url, got.digest, got.http_status, got.revisit) == ("https://s.test/a", "sha256:BBB", 200, True)
    only_redirect = main_document_of_cdxj(cdxj, ["https://s.test/"])
    assert (only_redirect.digest, only_redirect.http_status) == ("sha256:AAA", 301)
    assert main_document_of_cdxj(cdxj, ["https://s.test/none"]).digest is None


async def test_with_workflows_the_default_is_the_previous_crawl_of_the_same_workflow(settings, s3_server, ledger_fga):
    """A crawl of a workflow (``crawls.workflow_id``, migration 260) is compared with the
    workflow's previous finished crawl, even when a crawl of the same seeds outside it ran in
    between; a crawl without one, by seeds."""
    db = settings.database_url
    flow = str(uuid.uuid4())
    with psycopg.connect(db) as conn:
        conn.execute("INSERT INTO workflows (id, org_id, name, options, created_by) VALUES (%s, %s, 'w', '{}', 't')",
                     (flow, WHO.get("X-Waggle-Organizations", "org")))

    def in_workflow(crawl_id):
        with psycopg.connect(db) as conn:
            conn.execute("UPDATE crawls SET workflow_id = %s WHERE id = %s", (flow, crawl_id))

    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        w1 = await start(h, [SITE])
        in_workflow(w1)
        finish(db, w1)
        by_hand = await start(h, [SITE])
        finish(db, by_hand)
        w2 = await start(h, [SITE])
        in_workflow(w2)
        r = await h.client.get(f"/api/crawls/{w2}/changes", headers=WHO)
        assert r.status_code == 200, r.text
        assert (r.json()["since"]["crawlId"], r.json()["sinceChosen"]) == (w1, "workflow")
        finish(db, w2)
        later = await start(h, [SITE])
        r = await h.client.get(f"/api/crawls/{later}/changes", headers=WHO)
        assert (r.json()["since"]["crawlId"], r.json()["sinceChosen"]) == (w2, "same-seeds")

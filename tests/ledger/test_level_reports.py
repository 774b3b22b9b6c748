"""The level report (POST /api/crawls/{id}/pages): manifest bookkeeping (ledger.md §12.2),
links from the S3 stand-in (scope, nofollow, fragments, in-call dedup, malformed/huge files),
budget and stop reasons, the compiled merge, and waggle's ordering rules (idempotent re-send,
409 for late, duplicate or out-of-order reports)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime

import psycopg
import pytest

from ledger.s3 import S3Store
from tests.fixtures.ledger import LedgerHarness, ledger_settings, open_ledger, refused_url

pytestmark = pytest.mark.anyio
WHO = LedgerHarness.who()
NO_SCRIPTS = {"typescript": "6.0.3", "hostTypes": "v0.2.0", "scripts": []}


def store_of(s3_server, bucket=None):
    return S3Store(s3_server.endpoint, bucket or s3_server.bucket, s3_server.region,
                   s3_server.access_key_id, s3_server.secret_access_key)


def put_links(s3_server, links, *, raw: bytes | None = None) -> str:
    key = f"{uuid.uuid4()}_crawl.links.json"
    body = raw if raw is not None else json.dumps({"taskId": "t", "url": "u", "links": links}).encode()
    s3_server.client().put_object(Bucket=s3_server.bucket, Key=key, Body=body)
    return key


def rows(db_url, sql, *args):
    with psycopg.connect(db_url) as conn:
        return conn.execute(sql, args).fetchall()


@pytest.fixture
def settings(migrated_db_url, ledger_fga, fake_webhook, s3_server):
    return ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, s3_bucket=s3_server.bucket,
                           links_max_bytes=4096)


async def start(h, **body):
    body = {"seeds": ["https://a.test/"], "scripts": [], **body}
    r = await h.client.post("/api/crawls", json=body, headers=WHO)
    assert r.status_code == 202, r.text
    return r.json()["crawlId"]


def report(depth, results, compiled=NO_SCRIPTS):
    return {"depth": depth, "results": results, "compiled": compiled}


async def post(h, crawl_id, body, headers=WHO):
    return await h.client.post(f"/api/crawls/{crawl_id}/pages", json=body, headers=headers)


TASK = "0193b6a1-3c1d-7a2e-9f00-1234567890ab"


@pytest.mark.parametrize("result,needle", [
    ({"taskId": TASK}, "exactly one of manifestLocation or manifestError"),
    ({"taskId": TASK, "manifestLocation": "s3://b/x", "manifestError": "e"}, "exactly one"),
    ({"manifestLocation": "s3://b/x"}, "need a taskId"),
    ({"taskId": "job-1", "manifestError": "e"}, "UUID"),
    ({"submittedAt": "2026-09-19T14:53:36"}, "submittedAt"),  # date-time needs an offset
    ({"extra": 1}, "unknown field results.0.extra"),
])
async def test_result_schema_400_changes_nothing(settings, s3_server, result, needle):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h)
        r = await post(h, crawl_id, report(0, [{"url": "https://a.test/", "status": "captured", **result}]))
        assert r.status_code == 400 and needle in r.json()["error"], r.text
        r = await post(h, crawl_id, {"depth": 0, "results": []})
        assert r.status_code == 400 and "compiled is required" in r.json()["error"]
    assert rows(settings.database_url, "SELECT count(*) FROM capture_submissions")[0][0] == 0
    assert rows(settings.database_url, "SELECT count(*) FROM crawl_level_reports")[0][0] == 0
    assert rows(settings.database_url, "SELECT state FROM crawl_pages")[0][0] == "pending"


async def test_manifest_bookkeeping_and_page_outcomes(settings, s3_server):
    bucket = s3_server.bucket
    tasks = [str(uuid.uuid4()) for _ in range(3)]
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/1", "https://a.test/2", "https://a.test/3"], maxDepth=0)
        r = await post(h, crawl_id, report(0, [
            {"url": "https://a.test/1", "status": "captured", "taskId": tasks[0], "correlationId": "c-1",
             "manifestLocation": f"s3://{bucket}/elsewhere/x y+z.result.json",
             "submittedAt": "2026-09-19T14:53:36.759Z", "finishedAt": "2026-09-19T14:53:40.000+00:00"},
            {"url": "https://a.test/2", "status": "failed", "skipReason": "timeout", "taskId": tasks[1],
             "manifestError": f"s3://{bucket}/x.result.json: not written within 10000ms"},
            {"url": "https://a.test/3#frag", "status": "captured", "taskId": tasks[2],
             "manifestLocation": "s3://someone-else/k.result.json"},
            {"url": "https://never-requested.test/", "status": "captured"},  # matches no row: ignored
        ]))
        assert r.status_code == 200, r.text
        assert r.json() == {"next": [], "stopReason": "max_depth"}
    subs = {str(t): (c, k, e) for t, c, k, e in rows(
        settings.database_url, "SELECT task_id, correlation_id, manifest_key, manifest_error FROM capture_submissions")}
    assert subs[tasks[0]] == ("c-1", "elsewhere/x y+z.result.json", None)
    assert subs[tasks[1]] == (crawl_id, None, f"s3://{bucket}/x.result.json: not written within 10000ms")
    assert subs[tasks[2]][1] is None and "someone-else" in subs[tasks[2]][2]
    pages = {u: (s, r_, t, sub) for u, s, r_, t, sub in rows(
        settings.database_url, "SELECT url, state, skip_reason, task_id, submitted_at FROM crawl_pages")}
    assert pages["https://a.test/1"][:3] == ("captured", None, tasks[0])
    assert pages["https://a.test/1"][3] == datetime.fromisoformat("2026-09-19T14:53:36.759+00:00")
    assert pages["https://a.test/2"][:2] == ("failed", "timeout")
    assert pages["https://a.test/3"][0] == "captured"
    # the result that matched no page of this level is not counted
    assert rows(settings.database_url, "SELECT pages_captured FROM crawls")[0][0] == 2


async def test_links_scope_nofollow_fragments_dedup_and_bad_files(settings, s3_server, fake_webhook, caplog):
    good1 = put_links(s3_server, [
        {"href": "https://a.test/p1", "rel": None},
        {"href": "https://a.test/p1#section"},                   # same page
        {"href": "https://a.test/p2", "rel": "nofollow"},
        {"href": "https://other.test/x"},                        # out of scope
        {"href": "http://a.test/p3"},                            # other origin (http)
        {"href": "https://a.test/"},                             # the seed: already known
    ])
    good2 = put_links(s3_server, [{"href": "https://a.test/p4"}, {"href": "https://a.test/p1"}])
    bad_json = put_links(s3_server, [], raw=b"{not json")
    not_object = put_links(s3_server, [], raw=b"[1, 2]")
    huge = put_links(s3_server, [{"href": f"https://a.test/h{i}"} for i in range(400)])
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/", "https://a.test/b"])
        results = [{"url": "https://a.test/", "status": "captured",
                    "linksLocation": f"s3://some-other-bucket/{good1}"},  # reported bucket is ignored
                   {"url": "https://a.test/b", "status": "captured", "linksLocation": good2}]
        results += [{"url": f"https://a.test/x{i}", "status": "captured", "linksLocation": f"s3://b/{k}"}
                    for i, k in enumerate([bad_json, not_object, huge, "missing.links.json"])]
        r = await post(h, crawl_id, report(0, results))
        assert r.status_code == 200, r.text
        body = r.json()
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
    page_links = body.pop("pageLinks")  # decision 232: each page's share, discovered = kept + Σ dropped
    assert body == {"stopReason": None, "next": [{"url": "https://a.test/p1", "host": "a.test", "depth": 1},
                                                 {"url": "https://a.test/p4", "host": "a.test", "depth": 1}]}
    assert page_links == [
        {"url": "https://a.test/", "discovered": 6, "kept": 1,
         "dropped": {"duplicate": 2, "nofollow": 1, "out_of_scope": 2}},  # #section and the seed; p2; other, http
        {"url": "https://a.test/b", "discovered": 2, "kept": 1, "dropped": {"duplicate": 1}}]  # p1: the page above's
    assert view["drops"] == {"nofollow": 1, "out_of_scope": 2}
    assert view["pagesDiscovered"] == 3  # in-scope unique links (p1, the seed, p4)
    assert view["currentDepth"] == 1
    logged = caplog.text
    assert "not JSON" in logged and "not an object with a links array" in logged and "larger than" in logged
    assert [b["depth"] for b in fake_webhook.bodies(crawl_id)] == [0, 1]
    assert [f["url"] for f in fake_webhook.bodies(crawl_id)[1]["frontier"]] == ["https://a.test/p1", "https://a.test/p4"]


async def test_budget_truncation_keeps_first_reason(settings, s3_server):
    links = put_links(s3_server, [{"href": f"https://a.test/{i}"} for i in range(5)])
    more = put_links(s3_server, [{"href": "https://a.test/deeper"}])
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, maxPages=3, maxDepth=3)
        r = await post(h, crawl_id, report(0, [{"url": "https://a.test/", "status": "captured",
                                                "linksLocation": links}]))
        assert [n["url"] for n in r.json()["next"]] == ["https://a.test/0", "https://a.test/1"]
        assert r.json()["stopReason"] is None
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        assert (view["state"], view["stopReason"]) == ("running", "max_pages")
        r = await post(h, crawl_id, report(1, [{"url": "https://a.test/0", "status": "captured", "linksLocation": more},
                                               {"url": "https://a.test/1", "status": "failed", "skipReason": "x"}]))
        assert r.json() == {"next": [], "stopReason": "max_pages",  # the budget took none of its links (decision 232)
                            "pageLinks": [{"url": "https://a.test/0", "discovered": 1, "kept": 0,
                                           "dropped": {"max_pages": 1}}]}
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
    assert (view["state"], view["stopReason"], view["pagesCaptured"]) == ("succeeded", "max_pages", 2)


async def test_empty_results_end_the_crawl_failed(settings, s3_server):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h)
        r = await post(h, crawl_id, report(0, []))
        # round 21: nothing captured is a failure, not "completed" (ledger.crawl.outcome)
        assert r.json() == {"next": [], "stopReason": "failed"}
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        assert view["state"] == "failed" and view["error"].startswith("nothing was captured: https://a.test/")


async def test_reports_are_idempotent_and_ordered(settings, s3_server, fake_webhook):
    links = put_links(s3_server, [{"href": "https://a.test/next"}])
    first = report(0, [{"url": "https://a.test/", "status": "captured", "linksLocation": links,
                        "finishedAt": "2026-09-19T14:53:40.123Z"}])
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h)
        # a report for a level not in flight changes nothing
        r = await post(h, crawl_id, report(1, []))
        assert r.status_code == 409 and r.json()["expectedDepth"] == 0
        a = await post(h, crawl_id, first)
        assert a.status_code == 200 and len(a.json()["next"]) == 1
        before = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        # identical re-send (lost response): same answer, nothing re-counted, no second dispatch
        b = await post(h, crawl_id, first)
        assert (b.status_code, b.json()) == (200, a.json())
        assert len(fake_webhook.bodies(crawl_id)) == 2
        # a different report for the recorded depth
        changed = report(0, [{"url": "https://a.test/", "status": "failed", "skipReason": "x"}])
        r = await post(h, crawl_id, changed)
        assert r.status_code == 409 and "already accepted" in r.json()["error"]
        # a stale depth / a future depth
        r = await post(h, crawl_id, report(2, []))
        assert r.status_code == 409 and r.json()["expectedDepth"] == 1
        after = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        assert after == before
        # the flow carries lastFinishedAt of the host into the next level
        assert fake_webhook.bodies(crawl_id)[1]["frontier"] == [
            {"url": "https://a.test/next", "host": "a.test", "lastFinishedAt": "2026-09-19T14:53:40.123Z",
             "hostDelayMs": 2000}]
        # close; a late report is refused, the re-send of an accepted one still answers the same
        await h.client.post(f"/api/crawls/{crawl_id}/failed", json={"reason": "operator"}, headers=WHO)
        r = await post(h, crawl_id, report(1, [{"url": "https://a.test/next", "status": "captured"}]))
        assert r.status_code == 409 and r.json()["state"] == "failed"
        assert (await post(h, crawl_id, first)).json() == a.json()
        final = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        assert (final["state"], final["pagesCaptured"]) == ("failed", 1)
        # unknown crawl, and no permission
        assert (await post(h, str(uuid.uuid4()), first)).status_code == 404
        r = await post(h, crawl_id, first, headers=LedgerHarness.who("mallory", "acme"))
        assert (r.status_code, r.json()) == (404, {"error": "not found"})


async def test_compiled_merge_through_the_route(settings, s3_server):
    js1, js2 = "1" * 64, "2" * 64
    links = put_links(s3_server, [{"href": "https://a.test/n"}])
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        async with h.services.pool.connection() as conn:
            from ledger.crawl.scripts import add_script
            await add_script(conn, "autoscroll", "let a = 1;")
        crawl_id = await start(h, scripts=["autoscroll"])
        r = await post(h, crawl_id, report(0, [], {**NO_SCRIPTS, "scripts": []}))
        assert (r.status_code, r.json()["scriptId"]) == (400, "autoscroll@1")
        good = {**NO_SCRIPTS, "scripts": [{"id": "autoscroll", "version": 1, "sha256": js1}]}
        r = await post(h, crawl_id, report(0, [{"url": "https://a.test/", "status": "captured",
                                                "linksLocation": links}], good))
        assert r.status_code == 200
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        assert view["scripts"][0]["jsSha256"] == js1
        assert view["scripts"][0]["compiledWith"] == {"typescript": "6.0.3", "hostTypes": "v0.2.0"}
        bad = {**NO_SCRIPTS, "scripts": [{"id": "autoscroll", "version": 1, "sha256": js2}]}
        r = await post(h, crawl_id, report(1, [{"url": "https://a.test/n", "status": "captured"}], bad))
        assert r.status_code == 409 and r.json()["scriptId"] == "autoscroll@1"
        assert "111111111111\u2026 \u2192 222222222222\u2026" in r.json()["error"]
        assert (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()["currentDepth"] == 1


async def test_store_unavailable_is_503_and_a_retry_succeeds(settings, s3_server):
    links = put_links(s3_server, [{"href": "https://a.test/n"}])
    body = report(0, [{"url": "https://a.test/", "status": "captured", "linksLocation": links}])
    down = S3Store(refused_url().rsplit("/api/", 1)[0], s3_server.bucket, s3_server.region,
                   s3_server.access_key_id, s3_server.secret_access_key, connect_timeout_s=0.5, read_timeout_s=0.5)
    async with open_ledger(settings, s3=down) as h:
        crawl_id = await start(h)
        r = await post(h, crawl_id, body)
        assert r.status_code == 503 and "retry" in r.json()["error"]
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        assert (view["state"], view["pagesCaptured"], view["currentDepth"]) == ("running", 0, 0)
        h.services.s3 = store_of(s3_server)
        r = await post(h, crawl_id, body)
        assert r.status_code == 200 and r.json()["next"][0]["url"] == "https://a.test/n"

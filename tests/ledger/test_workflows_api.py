"""Crawl workflows through the routes (issue 27 item 2 and its bad input, decision 201), on real
Postgres and the real OpenFGA server: save, view, edit, run (never two at once: a due run while
one runs is skipped with its reason), history, schedules kept in (fake) Windmill, who may do
what, and deletion keeping the crawls."""

from __future__ import annotations

import uuid

import pytest

from tests.fixtures.ledger import LedgerHarness, ledger_settings, open_ledger
from tests.ledger.test_level_reports import NO_SCRIPTS, rows, store_of

pytestmark = pytest.mark.anyio
WHO = LedgerHarness.who()
OPTIONS = {"seeds": ["https://a.test/"], "scripts": [], "maxDepth": 1, "perHostDelayMs": 3000}


@pytest.fixture
def settings(migrated_db_url, ledger_fga, fake_webhook, s3_server):
    # carol: member of acme only (contextual); erin: admin of acme; dave: submitter of contoso
    ledger_fga.write(writes=["user:erin admin organization:acme", "user:dave submitter organization:contoso"],
                     ignore_existing=True)
    return ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, s3_bucket=s3_server.bucket)


async def create(h, headers=WHO, **body):
    body = {"name": f"docs {uuid.uuid4().hex[:6]}", "options": OPTIONS, **body}
    return await h.client.post("/api/workflows", json=body, headers=headers)


async def created(h, **body) -> dict:
    r = await create(h, **body)
    assert r.status_code == 201, r.text
    return r.json()


async def run(h, wid, headers=WHO, **body):
    return await h.client.post(f"/api/workflows/{wid}/run", json=body or None, headers=headers)


async def history(h, wid, headers=WHO):
    r = await h.client.get(f"/api/workflows/{wid}/history", headers=headers)
    assert r.status_code == 200, r.text
    return r.json()["runs"]


async def test_save_view_list_and_run_with_the_saved_options(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        wf = await created(h, notes="the docs, weekly", options={**OPTIONS, "scope": "same-origin"})
        wid = wf["workflowId"]
        assert (wf["organization"], wf["createdBy"], wf["notes"], wf["schedule"]) == ("acme", "alice",
                                                                                      "the docs, weekly", None)
        # the options as CrawlRequest normalized them, only the fields given (defaults apply at run time)
        assert wf["options"] == {**OPTIONS, "scope": "origin"}
        got = (await h.client.get(f"/api/workflows/{wid}", headers=WHO)).json()
        assert (got["canRun"], got["canEdit"]) == (True, True)
        listed = (await h.client.get("/api/workflows", headers=WHO)).json()["workflows"]
        assert [w["workflowId"] for w in listed] == [wid] and listed[0]["lastCrawl"] is None
        r = await run(h, wid)
        assert r.status_code == 202, r.text
        crawl_id = r.json()["crawlId"]
        crawl = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        listed = (await h.client.get("/api/workflows", headers=WHO)).json()["workflows"]
    assert (crawl["workflowId"], crawl["seeds"], crawl["maxDepth"], crawl["scope"]) == (
        wid, ["https://a.test/"], 1, "origin")
    assert crawl["workflow"] == {"workflowId": wid, "name": wf["name"]}  # the crawl names its workflow
    assert fake_webhook.bodies(crawl_id)[0]["frontier"][0]["hostDelayMs"] == 3000  # a saved option reached the flow
    assert listed[0]["lastCrawl"]["crawlId"] == crawl_id
    assert rows(settings.database_url, "SELECT workflow_id::text FROM crawls") == [(wid,)]


async def test_a_run_while_one_runs_is_skipped_with_its_reason_then_runs_after(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        wid = (await created(h))["workflowId"]
        first = (await run(h, wid)).json()["crawlId"]
        second = await run(h, wid, trigger="schedule")
        assert second.status_code == 409
        assert second.json()["runningCrawl"] == first and "skipped" in second.json()["error"]
        await h.client.post(f"/api/crawls/{first}/stop", headers=WHO)  # ended: the next run starts
        third = await run(h, wid)
        assert third.status_code == 202, third.text
        runs = await history(h, wid)
    assert [(r["outcome"], r["trigger"]) for r in runs] == [("started", "manual"), ("skipped", "schedule"),
                                                            ("started", "manual")]
    assert first in runs[1]["reason"] and runs[1]["crawl"] is None
    assert runs[2]["crawl"]["crawlId"] == first and runs[2]["crawl"]["state"] == "succeeded"
    assert runs[0]["crawl"]["crawlId"] == third.json()["crawlId"]
    assert len(fake_webhook.bodies()) == 2  # the skipped run dispatched nothing


async def test_two_runs_at_once_start_one_crawl(settings, s3_server, fake_webhook):
    import asyncio

    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        wid = (await created(h))["workflowId"]
        answers = await asyncio.gather(*(run(h, wid) for _ in range(4)))
    assert sorted(a.status_code for a in answers) == [202, 409, 409, 409]
    assert rows(settings.database_url, "SELECT count(*) FROM crawls") == [(1,)]


@pytest.mark.parametrize("cron, needle", [
    ("61 * * * *", "'61 * * * *' is not a valid cron expression"),
    ("0 4 * *", "'0 4 * *' is not a cron expression of 5 fields"),
    ("0 0 4 * * *", "'0 0 4 * * *' is not a cron expression of 5 fields"),
    ("0 4 * * funday", "'0 4 * * funday' is not a valid cron expression"),
    ("0 0 30 2 *", "'0 0 30 2 *' is not a valid cron expression"),
])
async def test_invalid_cron_is_a_400_naming_it(settings, s3_server, fake_webhook, cron, needle):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        r = await create(h, schedule={"cron": cron, "timeZone": "UTC"})
    assert r.status_code == 400 and needle in r.json()["error"], r.text
    assert "schedule" in r.json()["fields"]
    assert rows(settings.database_url, "SELECT count(*) FROM workflows") == [(0,)]
    assert fake_webhook.schedules == {}


@pytest.mark.parametrize("tz", ["Mars/Olympus", "utc+2", "../etc/passwd", "Europe/"])
async def test_invalid_time_zone_is_a_400(settings, s3_server, fake_webhook, tz):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        r = await create(h, schedule={"cron": "0 4 * * *", "timeZone": tz})
    assert r.status_code == 400 and "is not an IANA time zone" in r.json()["error"] and tz in r.json()["error"]
    assert r.json()["fields"] == {"timeZone": r.json()["error"]}


@pytest.mark.parametrize("options, field", [
    ({"seeds": ["https://a.test/"], "maxDepth": 99}, "options"),
    ({"seeds": ["https://a.test/"], "fromTargets": {}}, "options"),
    ({"seeds": ["https://a.test/"], "sitemapz": True}, "options"),
    ({"seeds": ["https://a.test/"], "maxPages": 10**9}, "maxPages"),
    ({"seeds": ["htp://typo"]}, "seeds"),  # saved, every scheduled run would be refused (trial)
    ({"seeds": ["https://a.test/", "ftp://x"]}, "seeds"),
])
async def test_bad_options_are_refused_like_post_crawls(settings, s3_server, fake_webhook, options, field):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        r = await create(h, options=options)
        direct = await h.client.post("/api/crawls", json=options, headers=WHO)
    assert r.status_code == direct.status_code == 400, r.text
    assert field in r.json()["fields"]


async def test_an_edit_to_an_unusable_seed_is_refused_and_changes_nothing(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        wid = (await created(h))["workflowId"]
        before = (await h.client.get(f"/api/workflows/{wid}", headers=WHO)).json()
        r = await h.client.patch(f"/api/workflows/{wid}", json={"options": {"seeds": ["htp://typo"]}}, headers=WHO)
        after = (await h.client.get(f"/api/workflows/{wid}", headers=WHO)).json()
    assert r.status_code == 400 and "htp://typo" in r.json()["error"] and "seeds" in r.json()["fields"], r.text
    assert after["options"] == before["options"]


async def test_schedule_is_a_windmill_schedule_kept_in_step(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        wf = await created(h, schedule={"cron": "30  4 * * 1-5", "timeZone": "Asia/Tokyo"})
        wid, path = wf["workflowId"], wf["schedule"]["windmillSchedule"]
        assert wf["schedule"]["cron"] == "30 4 * * 1-5" and len(wf["schedule"]["nextRuns"]) == 3
        assert all(t.endswith("+09:00") and "T04:30:00" in t for t in wf["schedule"]["nextRuns"])
        sent = fake_webhook.schedules[path]
        assert (sent["schedule"], sent["timezone"], sent["script_path"], sent["is_flow"]) == (
            "0 30 4 * * 1-5", "Asia/Tokyo", "f/waggle/run_workflow", False)
        assert sent["args"]["workflow_id"] == wid and sent["args"]["token"].startswith("$var:")
        r = await h.client.patch(f"/api/workflows/{wid}", json={"schedule": {"cron": "0 * * * *"}}, headers=WHO)
        assert r.status_code == 200, r.text
        assert (fake_webhook.schedules[path]["schedule"], fake_webhook.schedules[path]["timezone"]) == (
            "0 0 * * * *", "UTC")
        bad = await h.client.patch(f"/api/workflows/{wid}", json={"schedule": {"cron": "every day"}}, headers=WHO)
        assert bad.status_code == 400 and "'every day'" in bad.json()["error"]
        r = await h.client.patch(f"/api/workflows/{wid}", json={"schedule": None, "notes": "by hand now"},
                                 headers=WHO)
        assert (r.json()["schedule"], r.json()["notes"]) == (None, "by hand now")
        assert fake_webhook.schedules == {}


@pytest.mark.parametrize("cron, every", [("* * * * *", "1 minute"), ("*/15 * * * 1-5", "15 minutes"),
                                         ("0,30 9 * * *", "30 minutes"), ("0 4,5 * * *", None),
                                         ("0 * * * *", None), ("0 4 * * *", None), ("0 3 * * 0", None)])
async def test_a_schedule_more_often_than_hourly_is_saved_with_a_warning(settings, s3_server, fake_webhook, cron, every):
    """Decision 403: crawls closer together than an hour are allowed but answered with
    ``schedule.warning`` naming how often; an hourly or rarer schedule has none."""
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        wf = await created(h, schedule={"cron": cron})
        shown = (await h.client.get(f"/api/workflows/{wf['workflowId']}", headers=WHO)).json()
        edited = (await h.client.patch(f"/api/workflows/{wf['workflowId']}", json={"notes": "n"}, headers=WHO)).json()
    for answer in (wf, shown, edited):
        if every is None:
            assert "warning" not in answer["schedule"], answer["schedule"]
        else:
            assert answer["schedule"]["warning"].startswith(
                f"schedule {cron!r} starts a crawl every {every} at its closest, more often than once an hour"), answer
            assert "skipped" in answer["schedule"]["warning"] and "'0 * * * *'" in answer["schedule"]["warning"]
    assert wf["schedule"]["windmillSchedule"] in fake_webhook.schedules  # saved as given


async def test_windmill_refusing_the_schedule_saves_nothing(settings, s3_server, fake_webhook):
    fake_webhook.schedules_mode = "error"
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        r = await create(h, schedule={"cron": "0 4 * * *"})
    assert r.status_code == 503 and "Windmill refused" in r.json()["error"]
    assert rows(settings.database_url, "SELECT count(*) FROM workflows") == [(0,)]


async def test_who_may_view_run_and_edit(settings, s3_server, fake_webhook):
    carol = LedgerHarness.who("carol", "acme")  # a member: views only
    erin = LedgerHarness.who("erin", "acme")  # the organization's admin: edits
    flow = LedgerHarness.who("waggle-flow", "acme")  # a submitter: runs (the schedule's token)
    dave = LedgerHarness.who("dave", "contoso")  # another organization: nothing
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        wid = (await created(h))["workflowId"]
        assert (await h.client.get(f"/api/workflows/{wid}", headers=carol)).json()["canRun"] is False
        assert (await run(h, wid, headers=carol)).status_code == 404
        assert (await h.client.patch(f"/api/workflows/{wid}", json={"notes": "x"}, headers=carol)).status_code == 404
        assert (await h.client.patch(f"/api/workflows/{wid}", json={"notes": "x"}, headers=flow)).status_code == 404
        assert (await h.client.patch(f"/api/workflows/{wid}", json={"notes": "y"}, headers=erin)).status_code == 200
        for call in (h.client.get(f"/api/workflows/{wid}", headers=dave),
                     h.client.get(f"/api/workflows/{wid}/history", headers=dave),
                     run(h, wid, headers=dave),
                     h.client.delete(f"/api/workflows/{wid}", headers=dave)):
            assert (await call).status_code == 404
        assert (await h.client.get("/api/workflows", headers=dave)).json()["workflows"] == []
        assert (await h.client.post("/api/workflows", json={"name": "x", "options": OPTIONS},
                                    headers=carol)).status_code == 404  # no can_submit on acme
        r = await run(h, wid, headers=flow, trigger="schedule")
        assert r.status_code == 202, r.text
        assert (await h.client.get(f"/api/workflows/{uuid.uuid4()}", headers=WHO)).status_code == 404
    assert rows(settings.database_url, "SELECT org_id, requested_by FROM crawls") == [("acme", "waggle-flow")]


async def test_same_name_twice_is_a_409(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        await created(h, name="nightly")
        again = await create(h, name="nightly")
        other = await created(h, name="weekly")
        rename = await h.client.patch(f"/api/workflows/{other['workflowId']}", json={"name": "nightly"}, headers=WHO)
    assert again.status_code == 409 and "nightly" in again.json()["error"]
    assert rename.status_code == 409


async def test_delete_keeps_the_crawls_and_archives(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        wid = (await created(h, schedule={"cron": "0 4 * * *"}))["workflowId"]
        crawl_id = (await run(h, wid)).json()["crawlId"]
        r = await h.client.delete(f"/api/workflows/{wid}", headers=WHO)
        assert r.json() == {"deleted": wid, "crawlsKept": 1}
        assert (await h.client.get(f"/api/workflows/{wid}", headers=WHO)).status_code == 404
        crawl = await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)
    assert crawl.status_code == 200 and crawl.json()["workflowId"] is None and crawl.json()["workflow"] is None
    assert fake_webhook.schedules == {}
    assert rows(settings.database_url, "SELECT count(*) FROM workflow_runs") == [(0,)]


async def test_saved_options_that_no_longer_validate_are_refused_and_recorded(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        wid = (await created(h))["workflowId"]
        async with h.services.pool.connection() as conn:  # as if a rule had tightened since it was saved
            await conn.execute("UPDATE workflows SET options = options || '{\"maxDepth\": 99}' WHERE id = %s", (wid,))
        r = await run(h, wid)
        runs = await history(h, wid)
    assert r.status_code == 400 and "no longer validate" in r.json()["error"] and "maxDepth" in r.json()["error"]
    assert (runs[0]["outcome"], runs[0]["crawl"]) == ("refused", None) and "maxDepth" in runs[0]["reason"]


async def test_from_targets_workflow_is_the_nightly_crawl(settings, s3_server, fake_webhook):
    """The nightly trigger_crawl as a workflow: fromTargets, a schedule; its targets read at each run."""
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        wid = (await created(h, name="nightly", options={"fromTargets": {}, "scripts": []},
                             schedule={"cron": "0 4 * * *", "timeZone": "Asia/Tokyo"}))["workflowId"]
        empty = await run(h, wid, trigger="schedule")
        async with h.services.pool.connection() as conn:
            await conn.execute("INSERT INTO capture_targets (org_id, url) VALUES ('acme', 'https://t.test/')")
        r = await run(h, wid, trigger="schedule")
        runs = await history(h, wid)
    assert empty.status_code == 400 and "no enabled capture targets" in empty.json()["error"]
    assert r.status_code == 202
    assert [x["outcome"] for x in runs] == ["started", "refused"]
    assert rows(settings.database_url, "SELECT seeds FROM crawls") == [(["https://t.test/"],)]


_ = NO_SCRIPTS


async def test_a_paused_crawl_is_a_run_in_progress(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        wid = (await created(h))["workflowId"]
        crawl_id = (await run(h, wid)).json()["crawlId"]
        async with h.services.pool.connection() as conn:  # no level in flight: the pause is at once
            await conn.execute("UPDATE crawls SET level_state = 'waiting' WHERE id = %s", (crawl_id,))
        assert (await h.client.post(f"/api/crawls/{crawl_id}/pause", headers=WHO)).json() == {"state": "paused"}
        r = await run(h, wid)
    assert r.status_code == 409 and "still paused" in r.json()["error"] and r.json()["runningCrawl"] == crawl_id

"""Windmill's workflow schedules and the ledger's workflows kept in step (decision 352), on real
Postgres with the fake Windmill: the ledger's commit fails after Windmill took the change (a
deferred constraint trigger refuses the commit, as a lost connection or a full disk would), and
a reconciler pass repairs it both ways; a pass waits for a route's transaction in flight."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest

from ledger.crawl import workflow_schedule
from ledger.crawl.schedule_reconcile import hold_shared, reconcile
from tests.ledger.test_level_reports import rows, store_of
from tests.ledger.test_workflows_api import WHO, create, created, settings  # noqa: F401 — the fixture
from tests.fixtures.ledger import open_ledger

pytestmark = pytest.mark.anyio

FAIL_COMMIT = """
CREATE FUNCTION refuse_commit() RETURNS trigger LANGUAGE plpgsql AS
  $$ BEGIN RAISE EXCEPTION 'the test refuses this commit'; END $$;
CREATE CONSTRAINT TRIGGER refuse_commit AFTER INSERT OR UPDATE OR DELETE ON workflows
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_commit();
"""


def commits_fail(db_url: str, on: bool) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        if on:
            conn.execute(FAIL_COMMIT)
        else:
            conn.execute("DROP TRIGGER refuse_commit ON workflows; DROP FUNCTION refuse_commit()")


async def pass_(h):
    return (await reconcile(h.services.pool, h.services.http, h.services.settings)).as_dict()


async def test_a_schedule_taken_before_a_failed_create_is_deleted(settings, s3_server, fake_webhook):
    commits_fail(settings.database_url, True)
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        r = await create(h, schedule={"cron": "0 4 * * *"})
        assert r.status_code >= 500 and "Traceback" not in r.text
        [path] = fake_webhook.schedules  # Windmill took it; the ledger did not
        assert rows(settings.database_url, "SELECT count(*) FROM workflows") == [(0,)]
        commits_fail(settings.database_url, False)
        kept = await created(h, schedule={"cron": "0 5 * * *"})  # a workflow in step is left alone
        assert await pass_(h) == {"created": [], "updated": [], "deleted": [path]}
        assert await pass_(h) == {"created": [], "updated": [], "deleted": []}
    assert list(fake_webhook.schedules) == [kept["schedule"]["windmillSchedule"]]


@pytest.mark.parametrize("change, repaired", [
    ("remove", "created"),  # Windmill deleted the schedule, the workflow still has it
    ("cron", "updated"),  # Windmill took the new cron, the workflow kept the old
    ("delete", "created"),  # Windmill deleted it, the workflow's deletion did not commit
])
async def test_a_failed_edit_or_delete_is_repaired_to_the_workflow(settings, s3_server, fake_webhook, change, repaired):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        wf = await created(h, schedule={"cron": "30 4 * * 1-5", "timeZone": "Asia/Tokyo"})
        wid, path = wf["workflowId"], wf["schedule"]["windmillSchedule"]
        before = dict(fake_webhook.schedules[path])
        commits_fail(settings.database_url, True)
        if change == "delete":
            r = await h.client.delete(f"/api/workflows/{wid}", headers=WHO)
        else:
            body = {"schedule": None} if change == "remove" else {"schedule": {"cron": "0 * * * *"}}
            r = await h.client.patch(f"/api/workflows/{wid}", json=body, headers=WHO)
        assert r.status_code >= 500
        commits_fail(settings.database_url, False)
        drifted = fake_webhook.schedules.get(path)
        assert drifted is None if change != "cron" else drifted["schedule"] == "0 0 * * * *"
        assert (await pass_(h))[repaired] == [path]
        got = (await h.client.get(f"/api/workflows/{wid}", headers=WHO)).json()
    now = fake_webhook.schedules[path]
    assert (now["schedule"], now["timezone"], now["args"]) == (before["schedule"], "Asia/Tokyo", before["args"])
    assert got["schedule"]["cron"] == "30 4 * * 1-5" and got["schedule"]["windmillSchedule"] == path


async def test_drift_made_in_windmill_is_repaired_and_the_column_follows(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        a = await created(h, schedule={"cron": "0 4 * * *"})
        b = await created(h)
        pa = a["schedule"]["windmillSchedule"]
        fake_webhook.schedules[pa]["timezone"] = "Europe/Paris"  # edited by hand in Windmill
        stray = workflow_schedule.path_of(uuid.uuid4())
        fake_webhook.schedules[stray] = {"schedule": "0 0 1 * * *", "timezone": "UTC", "args": {}}
        fake_webhook.schedules["f/waggle/daily"] = {"schedule": "0 0 4 * * *", "timezone": "UTC"}  # not ours
        fake_webhook.schedules[workflow_schedule.path_of(b["workflowId"])] = {
            "schedule": "0 0 1 * * *", "timezone": "UTC", "args": {"workflow_id": b["workflowId"]}}
        async with h.services.pool.connection() as conn:  # the column says a schedule Windmill lacks
            await conn.execute("UPDATE workflows SET windmill_schedule = 'f/waggle/workflow_x' WHERE id = %s",
                               (b["workflowId"],))
        done = await pass_(h)
    assert (done["created"], done["updated"]) == ([], [pa])
    assert sorted(done["deleted"]) == sorted([stray, workflow_schedule.path_of(b["workflowId"])])
    assert fake_webhook.schedules[pa]["timezone"] == "UTC" and "f/waggle/daily" in fake_webhook.schedules
    assert sorted(rows(settings.database_url, "SELECT windmill_schedule FROM workflows"), key=str) == sorted(
        [(pa,), (None,)], key=str)


async def test_windmill_down_repairs_nothing_and_says_so(settings, s3_server, fake_webhook):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        await created(h, schedule={"cron": "0 4 * * *"})
        fake_webhook.schedules.clear()
        fake_webhook.schedules_mode = "error"
        with pytest.raises(workflow_schedule.ScheduleUnavailable, match="Windmill refused to list"):
            await pass_(h)
        fake_webhook.schedules_mode = "ok"
        assert len((await pass_(h))["created"]) == 1


async def test_a_pass_waits_for_a_route_transaction_in_flight(settings, s3_server, fake_webhook):
    """A schedule Windmill holds for a workflow whose row is not committed yet is not an orphan."""
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        wid = uuid.uuid4()
        async with h.services.pool.connection() as conn:
            async with conn.transaction():
                await hold_shared(conn)
                await conn.execute("INSERT INTO workflows (id, org_id, name, options, schedule_cron, schedule_tz,"
                                   " created_by) VALUES (%s, 'acme', 'mid-way', '{}', '0 4 * * *', 'UTC', 'alice')",
                                   (wid,))
                await workflow_schedule.put(h.services.http, settings, wid, "mid-way", "0 4 * * *", "UTC")
                task = asyncio.create_task(pass_(h))
                await asyncio.sleep(0.5)
                assert not task.done()  # waiting for this transaction
            done = await task
    assert done["deleted"] == [] and workflow_schedule.path_of(wid) in fake_webhook.schedules

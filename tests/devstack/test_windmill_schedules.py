"""The local Windmill runner's schedules (devstack.windmill.schedules), kept like Windmill's: fire
times in the schedule's time zone (6 fields, seconds first), one job per fire time, no backfill
of missed ones, ``$var:`` arguments resolved when the job starts, disabled ones silent; and the
routes (create/update/get/exists/setenabled/delete, the tick hook) over HTTP."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import httpx
import pytest

from devstack.windmill.schedules import BadSchedule, Schedules, next_fire

UTC = timezone.utc


def test_next_fire_is_in_the_schedules_zone_across_daylight_saving():
    paris = ZoneInfo("Europe/Paris")
    # 04:00 Paris: 03:00 UTC in winter, 02:00 UTC after the change of 2026-03-29
    got = next_fire("0 0 4 * * *", "Europe/Paris", datetime(2026, 3, 28, 12, tzinfo=UTC))
    assert got == datetime(2026, 3, 29, 4, tzinfo=paris) and got.astimezone(UTC).hour == 2
    assert next_fire("0 0 4 * * *", "Europe/Paris", datetime(2026, 1, 10, 12, tzinfo=UTC)).astimezone(UTC).hour == 3
    assert next_fire("30 */5 * * * *", "UTC", datetime(2026, 1, 1, 0, 4, 59, tzinfo=UTC)) == datetime(
        2026, 1, 1, 0, 5, 30, tzinfo=UTC)
    # strictly after: at a fire time, the next one
    assert next_fire("0 * * * * *", "UTC", datetime(2026, 1, 1, 0, 1, tzinfo=UTC)) == datetime(
        2026, 1, 1, 0, 2, tzinfo=UTC)


@pytest.mark.parametrize("expr, tz, needle", [
    ("0 4 * * *", "UTC", "6 fields"),
    ("*/10 0 4 * * *", "UTC", "one number"),
    ("0 61 4 * * *", "UTC", "invalid cron"),
    ("0 0 4 * * *", "Mars/Base", "unknown timezone"),
])
def test_bad_schedules_are_refused(expr, tz, needle):
    with pytest.raises(BadSchedule, match=needle):
        next_fire(expr, tz, datetime(2026, 1, 1, tzinfo=UTC))


def _schedules(tmp_path, started):
    variables = {"u/admin/waggle_token": "the-token"}
    return Schedules(tmp_path, lambda is_flow, path, args: started.append((is_flow, path, args)) or f"job-{len(started)}",
                     variables.get)


def test_tick_fires_once_per_due_time_without_backfill_and_resolves_vars(tmp_path):
    started: list = []
    s = _schedules(tmp_path, started)
    s.create({"path": "f/waggle/workflow_x", "schedule": "0 */5 * * * *", "timezone": "UTC",
              "script_path": "f/waggle/run_workflow", "is_flow": False,
              "args": {"workflow_id": "x", "token": "$var:u/admin/waggle_token", "missing": "$var:u/admin/nothing"}})
    due = datetime.fromisoformat(s.get("f/waggle/workflow_x")["next_at"])
    assert due.minute % 5 == 0 and due.second == 0
    assert s.tick(due - timedelta(seconds=1)) == []
    fired = s.tick(due)
    assert [f["path"] for f in fired] == ["f/waggle/workflow_x"] and fired[0]["jobId"] == "job-1"
    assert started == [(False, "f/waggle/run_workflow", {"workflow_id": "x", "token": "the-token", "missing": None})]
    assert s.tick(due) == []  # one job per fire time
    # an hour later: the 11 missed fire times are not run, one job now, the next 5 minutes on
    later = due + timedelta(hours=1)
    assert len(s.tick(later)) == 1 and len(started) == 2
    assert datetime.fromisoformat(s.get("f/waggle/workflow_x")["next_at"]) == later + timedelta(minutes=5)
    # persisted: a new runner on the same state keeps the schedule (and does not backfill)
    again = _schedules(tmp_path, [])
    assert again.get("f/waggle/workflow_x")["args"]["token"] == "$var:u/admin/waggle_token"


def test_disabled_updated_and_deleted_schedules(tmp_path):
    started: list = []
    s = _schedules(tmp_path, started)
    s.create({"path": "f/a/s", "schedule": "0 0 4 * * *", "timezone": "UTC", "script_path": "f/a/x", "args": {}})
    with pytest.raises(BadSchedule, match="already exists"):
        s.create({"path": "f/a/s", "schedule": "0 0 4 * * *", "timezone": "UTC", "script_path": "f/a/x"})
    due = datetime.fromisoformat(s.get("f/a/s")["next_at"])
    assert s.set_enabled("f/a/s", False)
    assert s.tick(due) == [] and started == []
    assert s.set_enabled("f/a/s", True)
    assert s.update("f/a/s", {"schedule": "0 30 6 * * *", "timezone": "Asia/Tokyo"})
    due = datetime.fromisoformat(s.get("f/a/s")["next_at"])
    assert due.astimezone(ZoneInfo("Asia/Tokyo")).strftime("%H:%M:%S") == "06:30:00"
    assert len(s.tick(due)) == 1
    assert s.delete("f/a/s") and not s.delete("f/a/s") and not s.update("f/a/s", {})
    assert s.tick(datetime(2100, 1, 1, tzinfo=UTC)) == []


def test_routes_over_http(tmp_path):
    from devstack.windmill.app import create_app
    from devstack.windmill.store import Store
    from tests.fixtures.ledger import ServerThread

    started: list = []

    class FakeEngine:
        def start_script(self, path, args):
            started.append((path, args))
            return "job-1"

        def shutdown(self):
            pass

    store = Store(tmp_path)
    store.put_variable("u/admin/waggle_api_url", "http://127.0.0.1:9")
    server = ServerThread(create_app(FakeEngine(), store, token="t", workspace="waggle")).start()
    try:
        with httpx.Client(base_url=f"{server.url}/api/w/waggle/schedules", headers={"Authorization": "Bearer t"}) as c:
            body = {"path": "f/waggle/workflow_1", "schedule": "0 0 4 * * *", "timezone": "UTC",
                    "script_path": "f/waggle/run_workflow", "is_flow": False,
                    "args": {"waggle_url": "$var:u/admin/waggle_api_url"}}
            assert c.post("/create", json=body).status_code == 201
            assert c.post("/create", json={**body, "path": "f/b", "schedule": "0 4 * * *"}).status_code == 400
            assert c.get("/exists/f/waggle/workflow_1").json() is True
            assert c.post("/create", json={**body, "path": "f/other/x"}).status_code == 201
            assert [i["path"] for i in c.get("/list", params={"path_start": "f/waggle/workflow_"}).json()] == [
                "f/waggle/workflow_1"]  # the ledger's reconciler lists its own (decision 352)
            assert [i["path"] for i in c.get("/list", params={"per_page": 1, "page": 2}).json()] == ["f/waggle/workflow_1"]
            assert c.delete("/delete/f/other/x").status_code == 200  # its 04:00 would fire with the tick below
            assert c.post("/update/f/waggle/workflow_1", json={"schedule": "0 0 5 * * *", "timezone": "UTC",
                                                             "args": body["args"]}).status_code == 200
            due = c.get("/get/f/waggle/workflow_1").json()["next_at"]
            assert "T05:00:00" in due
            assert c.post("/../schedules_local/tick", json={"now": "2026-01-01T00:00:00"}).status_code in (400, 404)
            fired = httpx.post(f"{server.url}/api/w/waggle/schedules_local/tick", json={"now": due},
                               headers={"Authorization": "Bearer t"}).json()
            assert fired == [{"path": "f/waggle/workflow_1", "jobId": "job-1", "scheduledFor": due}]
            assert started == [("f/waggle/run_workflow", {"waggle_url": "http://127.0.0.1:9"})]
            assert c.delete("/delete/f/waggle/workflow_1").status_code == 200
            assert c.get("/exists/f/waggle/workflow_1").json() is False
            assert httpx.get(f"{server.url}/api/w/waggle/schedules/list").status_code == 401  # the token guards it
    finally:
        server.stop()

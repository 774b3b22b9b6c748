"""Schedules of the local Windmill runner: Windmill's schedule primitive, kept the same way.

A schedule is Windmill's ``NewSchedule`` (``path``, ``schedule``: cron with 6 fields, seconds
first; ``timezone``: IANA; ``script_path``, ``is_flow``, ``args``, ``enabled``, ``summary``).
As on Windmill: it fires at each time the expression names in its time zone, one job per fire
time, missed fire times are not run afterwards (no backfill), ``$var:<path>`` arguments are
replaced by the variable's value when the job starts, and a disabled schedule does not fire.

Local-runner limits: the seconds field must be one number (0–59); the other five fields are
cron as cronsim reads it (ranges, steps, lists, names, ``L``, ``#``).

The runner ticks once a second on the real clock; :meth:`Schedules.tick` with an explicit
``now`` is the test hook (``POST /api/w/{ws}/schedules_local/tick``): it fires what would be
due at that instant, so a test need not wait for a minute to pass.
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

log = logging.getLogger("windmill.schedules")

FIELDS = ("path", "schedule", "timezone", "script_path", "is_flow", "args", "enabled", "summary")


class BadSchedule(ValueError):
    """A schedule Windmill would refuse (400): bad cron, unknown time zone, missing field."""


def _parts(expr: str) -> tuple[int, str]:
    fields = expr.split()
    if len(fields) != 6:
        raise BadSchedule(f"invalid cron {expr!r}: expected 6 fields (seconds first), got {len(fields)}")
    if not fields[0].isdigit() or not 0 <= int(fields[0]) <= 59:
        raise BadSchedule(f"invalid cron {expr!r}: the local runner takes one number (0-59) as seconds")
    return int(fields[0]), " ".join(fields[1:])


def next_fire(expr: str, tz: str, after: datetime) -> datetime:
    """The first fire time of ``expr`` (6 fields) in ``tz`` strictly after ``after`` (aware).
    Raises :class:`BadSchedule`."""
    second, rest = _parts(expr)
    try:
        where = ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise BadSchedule(f"unknown timezone {tz!r}") from None
    start = after.astimezone(where).replace(second=0, microsecond=0) - timedelta(minutes=1)
    try:
        for minute in CronSim(rest, start):
            fire = minute.replace(second=second)
            if fire > after:
                return fire
    except CronSimError as exc:
        raise BadSchedule(f"invalid cron {expr!r}: {exc}") from None
    raise BadSchedule(f"cron {expr!r} never fires")


class Schedules:
    """Schedules persisted in ``STATE/schedules.json``; fires jobs through ``start`` (``(kind,
    path, args) -> job id``) with ``$var:`` args resolved by ``variable`` (path → value or None)."""

    def __init__(self, state_dir: Path, start: Callable[[bool, str, dict], str],
                 variable: Callable[[str], str | None]) -> None:
        self._file = Path(state_dir) / "schedules.json"
        self._start, self._variable = start, variable
        self._lock = threading.RLock()
        self._items: dict[str, dict] = json.loads(self._file.read_text()) if self._file.exists() else {}
        now = datetime.now(timezone.utc)
        for item in self._items.values():  # a runner that was down does not backfill
            item["next_at"] = next_fire(item["schedule"], item["timezone"], now).isoformat()
        self._stop = threading.Event()

    def _save(self) -> None:
        tmp = self._file.with_name(self._file.name + ".tmp")
        tmp.write_text(json.dumps(self._items, indent=2))
        tmp.replace(self._file)

    # -- the API ---------------------------------------------------------------
    def create(self, body: dict) -> str:
        for key in ("path", "schedule", "timezone", "script_path"):
            if not isinstance(body.get(key), str) or not body[key]:
                raise BadSchedule(f"{key} is required")
        with self._lock:
            if body["path"] in self._items:
                raise BadSchedule(f"schedule {body['path']} already exists")
            item = {k: body.get(k) for k in FIELDS}
            item.update(is_flow=bool(body.get("is_flow")), args=body.get("args") or {},
                        enabled=body.get("enabled", True) is not False, last_job=None)
            item["next_at"] = next_fire(item["schedule"], item["timezone"], datetime.now(timezone.utc)).isoformat()
            self._items[item["path"]] = item
            self._save()
        return item["path"]

    def update(self, path: str, body: dict) -> bool:
        """``EditSchedule``: schedule, timezone, args. False when no such schedule."""
        with self._lock:
            item = self._items.get(path)
            if item is None:
                return False
            schedule, tz = body.get("schedule", item["schedule"]), body.get("timezone", item["timezone"])
            next_at = next_fire(schedule, tz, datetime.now(timezone.utc))
            item.update(schedule=schedule, timezone=tz, args=body.get("args", item["args"]), next_at=next_at.isoformat())
            self._save()
            return True

    def set_enabled(self, path: str, enabled: bool) -> bool:
        with self._lock:
            item = self._items.get(path)
            if item is None:
                return False
            item["enabled"] = bool(enabled)
            if enabled:
                item["next_at"] = next_fire(item["schedule"], item["timezone"], datetime.now(timezone.utc)).isoformat()
            self._save()
            return True

    def delete(self, path: str) -> bool:
        with self._lock:
            gone = self._items.pop(path, None) is not None
            self._save()
            return gone

    def get(self, path: str) -> dict | None:
        with self._lock:
            item = self._items.get(path)
            return dict(item) if item else None

    def list(self) -> list[dict]:
        with self._lock:
            return [dict(v) for _, v in sorted(self._items.items())]

    # -- firing ----------------------------------------------------------------
    def _args(self, args: dict) -> dict:
        out = {}
        for key, value in args.items():
            if isinstance(value, str) and value.startswith("$var:"):
                value = self._variable(value[len("$var:"):])
            out[key] = value
        return out

    def tick(self, now: datetime | None = None) -> list[dict]:
        """Fire every enabled schedule due at ``now`` (default: the clock) once, then set its
        next fire time after ``now``; returns ``[{path, jobId, scheduledFor}]``."""
        now = now or datetime.now(timezone.utc)
        fired = []
        with self._lock:
            for item in self._items.values():
                due = datetime.fromisoformat(item["next_at"])
                if not item["enabled"] or due > now:
                    continue
                item["next_at"] = next_fire(item["schedule"], item["timezone"], now).isoformat()
                try:
                    job = self._start(item["is_flow"], item["script_path"], self._args(item["args"]))
                except Exception as exc:  # noqa: BLE001 — Windmill records the error and keeps the schedule
                    item["error"] = f"{type(exc).__name__}: {exc}"
                    log.warning("schedule %s could not start %s: %s", item["path"], item["script_path"], exc)
                    continue
                item["last_job"], item["error"] = job, None
                fired.append({"path": item["path"], "jobId": job, "scheduledFor": due.isoformat()})
            if fired:
                self._save()
        return fired

    def run_forever(self, period_s: float = 1.0) -> None:
        while not self._stop.wait(period_s):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 — one bad tick must not stop the schedules
                log.exception("schedule tick failed")

    def stop(self) -> None:
        self._stop.set()

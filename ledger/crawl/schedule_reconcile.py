"""Keep Windmill's workflow schedules and the ledger's workflows in step (decision 352).

A route changes the workflow row and Windmill's schedule in one ledger transaction, Windmill
last, so Windmill refusing leaves the ledger unchanged. The other way round cannot be one
transaction: the commit can fail after Windmill took the change (a schedule with no workflow,
or a workflow whose schedule is gone). :func:`reconcile` repairs both ways from the ledger's
rows, which are the truth:

* a workflow with a schedule whose Windmill schedule is missing or differs (cron, zone,
  workflow id) → created or updated (its ``enabled`` is Windmill's: a person may pause it there);
* a Windmill schedule under ``f/waggle/workflow_`` whose workflow is gone or has no schedule
  → deleted;
* ``workflows.windmill_schedule`` set to what Windmill now holds.

Runs as the background loop ``schedules`` (first round at start-up, then every
``WAGGLE_SCHEDULE_RECONCILE_INTERVAL_S``). The routes hold :data:`LOCK` shared for their
transaction and a pass holds it exclusively, so a pass never sees a route's half-made change
(a schedule created for a workflow whose row is not committed yet) and deletes it.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from psycopg import AsyncConnection

from ledger.crawl import workflow_schedule as schedules

log = logging.getLogger("waggle.schedules")

LOCK = (0x7767_7363, 1)  # "wgsc": advisory lock of workflow schedule changes


async def hold_shared(conn: AsyncConnection) -> None:
    """In a route's transaction that changes a workflow's schedule: wait for a running pass."""
    await conn.execute("SELECT pg_advisory_xact_lock_shared(%s, %s)", LOCK)


@dataclass
class Repairs:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[str]]:
        return asdict(self)


def _differs(wanted: dict, have: dict) -> bool:
    return (have.get("schedule") != schedules.windmill_cron(wanted["schedule_cron"])
            or have.get("timezone") != wanted["schedule_tz"]
            or (have.get("args") or {}).get("workflow_id") != str(wanted["id"]))


async def reconcile(pool: Any, http: Any, settings: Any) -> Repairs:
    """One pass (see the module's doc). Raises :class:`schedules.ScheduleUnavailable` when
    Windmill does not answer (nothing repaired after that point; the next pass goes on)."""
    repairs = Repairs()
    if not schedules.configured(settings):
        return repairs
    async with pool.connection() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", LOCK)
        cur = await conn.execute("SELECT id, name, schedule_cron, schedule_tz, windmill_schedule FROM workflows")
        rows = {schedules.path_of(r["id"]): dict(r) for r in await cur.fetchall()}
        held = await schedules.held(http, settings)
        for path, row in rows.items():
            have = held.get(path)
            if row["schedule_cron"] and (have is None or _differs(row, have)):
                await schedules.put(http, settings, row["id"], row["name"], row["schedule_cron"], row["schedule_tz"])
                (repairs.created if have is None else repairs.updated).append(path)
            now_at = path if row["schedule_cron"] else None
            if row["windmill_schedule"] != now_at:
                await conn.execute("UPDATE workflows SET windmill_schedule = %s WHERE id = %s", (now_at, row["id"]))
        for path in held:
            if path not in rows or not rows[path]["schedule_cron"]:
                await schedules.remove(http, settings, path)
                repairs.deleted.append(path)
    for kind, paths in repairs.as_dict().items():
        for path in paths:
            workflow: uuid.UUID | None = schedules.workflow_of(path)
            log.warning("Windmill schedule %s %s to match workflow %s (the ledger and Windmill had drifted)",
                        path, kind, workflow)
    return repairs

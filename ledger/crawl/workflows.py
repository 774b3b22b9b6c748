"""Saved crawl workflows: rows, runs and history (migration 260, decision 201).

A workflow holds ``options``: the ``POST /api/crawls`` body as ``ledger.api.crawls.CrawlRequest``
validated it (JSON, defaults included). Who may view, run and edit one is OpenFGA's (type
``workflow``); this module never decides that. Runs of one workflow never overlap: starting
one takes the workflow's row lock and refuses (409, recorded as ``skipped``) while one of its
crawls is ``running`` or ``paused`` (:func:`guard_idle`, called inside the crawl's own start
transaction).
"""

from __future__ import annotations

import uuid
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from ledger.crawl import workflow_grants as grants
from ledger.crawl.errors import Refused
from ledger.crawl.times import iso_ms

ACTIVE = ("running", "paused")  # a crawl in one of these states is a run in progress


def view(row: dict, last: dict | None = None) -> dict:
    """A workflow's JSON (camelCase): id, organization, name, notes, options, schedule, times,
    and ``lastCrawl`` (``{crawlId, state, startedAt}`` or None) when ``last`` is given."""
    out = {
        "workflowId": str(row["id"]),
        "organization": row["org_id"],
        "name": row["name"],
        "notes": row["notes"],
        "options": row["options"],
        "schedule": ({"cron": row["schedule_cron"], "timeZone": row["schedule_tz"],
                      "windmillSchedule": row["windmill_schedule"]} if row["schedule_cron"] else None),
        "createdBy": row["created_by"],
        "createdAt": iso_ms(row["created_at"]),
        "updatedAt": iso_ms(row["updated_at"]),
    }
    if last is not None or "last_crawl_id" in row:
        crawl_id = (last or {}).get("id") or row.get("last_crawl_id")
        out["lastCrawl"] = None if crawl_id is None else {
            "crawlId": str(crawl_id), "state": (last or {}).get("state") or row.get("last_crawl_state"),
            "startedAt": iso_ms((last or {}).get("started_at") or row.get("last_crawl_started_at"))}
    return out


def tuples(workflow_id: uuid.UUID, org_id: str, creator: str) -> list[dict]:
    """The OpenFGA tuples of a new workflow: its organization (parent) and its creator (editor)."""
    obj = f"workflow:{workflow_id}"
    return [{"user": f"organization:{org_id}", "relation": "parent", "object": obj},
            {"user": f"user:{creator}", "relation": "editor", "object": obj}]


def _name_taken(name: str, org_id: str) -> Refused:
    why = f"organization {org_id} already has a workflow named {name!r}; choose another name"
    return Refused(409, why, fields={"name": why})


async def create(conn: AsyncConnection, *, org_id: str, name: str, notes: str, options: dict,
                 cron: str | None, tz: str | None, creator: str) -> dict:
    """Insert a workflow and queue its tuples in ``fga_outbox`` (same transaction: the caller's).
    Raises :class:`Refused` 409 when the organization has a workflow of that name."""
    workflow_id = uuid.uuid4()
    async with conn.transaction():  # a savepoint: the name clash is refused, not an aborted transaction
        cur = await conn.execute(
            "INSERT INTO workflows (id, org_id, name, notes, options, schedule_cron, schedule_tz, created_by)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT ON CONSTRAINT workflows_org_name DO NOTHING"
            " RETURNING *", (workflow_id, org_id, name, notes, Jsonb(options), cron, tz, creator))
        row = await cur.fetchone()
    if row is None:
        raise _name_taken(name, org_id)
    await conn.execute("INSERT INTO fga_outbox (payload) VALUES (%s)",
                       (Jsonb({"writes": tuples(workflow_id, org_id, creator)}),))
    await grants.record(conn, workflow_id, creator, "editor", creator)
    return dict(row)


async def get(conn: AsyncConnection, workflow_id: uuid.UUID, *, lock: bool = False) -> dict | None:
    cur = await conn.execute("SELECT * FROM workflows WHERE id = %s" + (" FOR UPDATE" if lock else ""),
                             (workflow_id,))
    row = await cur.fetchone()
    return dict(row) if row else None


async def list_in(conn: AsyncConnection, ids: list[str]) -> list[dict]:
    """The workflows of ``ids`` (those still stored), by name, each with its last crawl."""
    cur = await conn.execute(
        "SELECT w.*, c.id AS last_crawl_id, c.state AS last_crawl_state, c.started_at AS last_crawl_started_at"
        " FROM workflows w LEFT JOIN LATERAL (SELECT id, state, started_at FROM crawls"
        "  WHERE workflow_id = w.id ORDER BY started_at DESC LIMIT 1) c ON true"
        " WHERE w.id = ANY(%s::uuid[]) ORDER BY w.name, w.id", (ids,))
    return [dict(r) for r in await cur.fetchall()]


async def update(conn: AsyncConnection, workflow_id: uuid.UUID, changes: dict) -> dict:
    """Set the given columns (``name, notes, options, schedule_cron, schedule_tz,
    windmill_schedule``) and ``updated_at``. Raises :class:`Refused` 409 on a name clash."""
    allowed = {"name", "notes", "options", "schedule_cron", "schedule_tz", "windmill_schedule"}
    assert set(changes) <= allowed, set(changes) - allowed
    sets = ", ".join(f"{k} = %s" for k in changes)
    values = [Jsonb(v) if k == "options" else v for k, v in changes.items()]
    try:
        async with conn.transaction():
            cur = await conn.execute(f"UPDATE workflows SET {sets}{', ' if sets else ''}updated_at = now()"
                                     " WHERE id = %s RETURNING *", (*values, workflow_id))
            row = await cur.fetchone()
    except Exception as exc:  # noqa: BLE001 — only the name constraint is turned into a refusal
        if getattr(getattr(exc, "diag", None), "constraint_name", None) == "workflows_org_name":
            raise _name_taken(changes["name"], "this organization") from None
        raise
    if row is None:
        raise Refused(404, "not found")
    return dict(row)


async def delete(conn: AsyncConnection, workflow_id: uuid.UUID) -> dict | None:
    """Delete the workflow row (its crawls stay, ``workflow_id`` set to NULL; its run records go)
    and queue the deletion of its tuples (its parent, its creator's and every grant's). Returns
    the deleted row, or None. The row is locked first: a grant changed meanwhile either
    committed before (its tuple is read below) or finds the workflow gone (decision 404)."""
    if await get(conn, workflow_id, lock=True) is None:
        return None
    granted = await grants.tuples_of_all(conn, workflow_id)
    cur = await conn.execute("DELETE FROM workflows WHERE id = %s RETURNING *", (workflow_id,))
    row = await cur.fetchone()
    if row is None:
        return None
    await conn.execute("INSERT INTO fga_outbox (payload) VALUES (%s)",
                       (Jsonb({"deletes": _unique([*tuples(workflow_id, row["org_id"], row["created_by"]), *granted])}),))
    return dict(row)


def _unique(items: list[dict]) -> list[dict]:
    """Tuples without repeats (OpenFGA refuses a Write naming one tuple twice)."""
    return list({(t["user"], t["relation"], t["object"]): t for t in items}.values())


async def guard_idle(conn: AsyncConnection, workflow_id: uuid.UUID) -> None:
    """Inside a crawl's start transaction: lock the workflow's row (two starts of one workflow,
    on any replica, go one after the other) and raise :class:`Refused` 409 ``{error,
    runningCrawl}`` while one of its crawls is running or paused; 404 when it is gone."""
    if await get(conn, workflow_id, lock=True) is None:
        raise Refused(404, "not found")
    cur = await conn.execute(
        "SELECT id, state FROM crawls WHERE workflow_id = %s AND state = ANY(%s) ORDER BY started_at LIMIT 1",
        (workflow_id, list(ACTIVE)))
    busy = await cur.fetchone()
    if busy is not None:
        raise Refused(409, f"skipped: crawl {busy['id']} of this workflow is still {busy['state']}; a workflow"
                           " never runs twice at once (run it again when that crawl has ended, or stop it)",
                      runningCrawl=str(busy["id"]))


async def record_run(pool: Any, workflow_id: uuid.UUID, *, trigger: str, requested_by: str, outcome: str,
                     crawl_id: uuid.UUID | None = None, reason: str | None = None) -> None:
    """One ``workflow_runs`` row (its own transaction: a refused start rolled its own back)."""
    async with pool.connection() as conn:
        await conn.execute(
            "INSERT INTO workflow_runs (workflow_id, trigger, requested_by, outcome, crawl_id, reason)"
            " SELECT id, %s, %s, %s, %s, %s FROM workflows WHERE id = %s",
            (trigger, requested_by, outcome, crawl_id, reason[:2000] if reason else None, workflow_id))


async def history(conn: AsyncConnection, workflow_id: uuid.UUID, limit: int) -> list[dict]:
    """The workflow's runs, newest first: ``{at, trigger, requestedBy, outcome, reason, crawl}``
    where ``crawl`` is ``{crawlId, state, stopReason, startedAt, finishedAt, pagesCaptured}`` or None."""
    cur = await conn.execute(
        "SELECT r.*, c.state, c.stop_reason, c.started_at, c.finished_at, c.pages_captured"
        " FROM workflow_runs r LEFT JOIN crawls c ON c.id = r.crawl_id"
        " WHERE r.workflow_id = %s ORDER BY r.at DESC, r.id DESC LIMIT %s", (workflow_id, limit))
    out = []
    for r in await cur.fetchall():
        crawl = None if r["crawl_id"] is None else {
            "crawlId": str(r["crawl_id"]), "state": r["state"], "stopReason": r["stop_reason"],
            "startedAt": iso_ms(r["started_at"]), "finishedAt": iso_ms(r["finished_at"]),
            "pagesCaptured": r["pages_captured"]}
        out.append({"at": iso_ms(r["at"]), "trigger": r["trigger"], "requestedBy": r["requested_by"],
                    "outcome": r["outcome"], "reason": r["reason"], "crawl": crawl})
    return out

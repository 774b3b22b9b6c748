"""Who was granted what on a crawl workflow (migration 360, decision 351).

A grant gives one user one role on one workflow: ``editor`` (view, run, edit, grant),
``runner`` (view and run) or ``viewer`` (view). Each is a row of ``workflow_grants`` and the
OpenFGA tuple ``user:<subject> <role> workflow:<id>``; the tuple is queued in ``fga_outbox`` in
the caller's transaction, like every tuple the ledger writes. OpenFGA decides; these rows say
what was written, so they can be listed and taken back (one role per user: a new role replaces
the old, its tuple deleted in the same outbox row).
"""

from __future__ import annotations

import re
import uuid

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from ledger.crawl.errors import Refused
from ledger.crawl.times import iso_ms

ROLES = ("editor", "runner", "viewer")
SUBJECT_MAX = 200
# OpenFGA object ids may not hold whitespace or '#'; '*' would be "every user", which we do not offer
_BAD_SUBJECT = re.compile(r"[\s#*\x00-\x1f\x7f]")


def check_subject(subject: str) -> str:
    """The subject of ``user`` (``user:alice`` or ``alice`` → ``alice``); :class:`Refused` 400
    (field ``user``) when empty, longer than 200 characters, or holding whitespace, ``#`` or ``*``."""
    subject = subject.removeprefix("user:")
    if not subject or len(subject) > SUBJECT_MAX or _BAD_SUBJECT.search(subject):
        why = (f"user {subject!r} is not a user's subject: give it as the identity provider names the user"
               f" (1–{SUBJECT_MAX} characters, no spaces, '#' or '*'; a grant names one user, never everyone)")
        raise Refused(400, why, fields={"user": why})
    return subject


def check_role(role: str) -> str:
    """``role`` when it is one of :data:`ROLES`; :class:`Refused` 400 (field ``role``) otherwise."""
    if role not in ROLES:
        why = f"role {role!r} is not a workflow role: give viewer (view), runner (view and run) or editor (also edit and grant)"
        raise Refused(400, why, fields={"role": why})
    return role


def tuple_of(workflow_id: uuid.UUID | str, subject: str, role: str) -> dict:
    return {"user": f"user:{subject}", "relation": role, "object": f"workflow:{workflow_id}"}


def view(row: dict) -> dict:
    """``{user, role, grantedBy, grantedAt}``."""
    return {"user": row["subject"], "role": row["role"], "grantedBy": row["granted_by"],
            "grantedAt": iso_ms(row["granted_at"])}


async def listed(conn: AsyncConnection, workflow_id: uuid.UUID) -> list[dict]:
    """The workflow's grants (:func:`view`), editors first, then by user."""
    cur = await conn.execute(
        "SELECT * FROM workflow_grants WHERE workflow_id = %s"
        " ORDER BY array_position(%s::text[], role), subject", (workflow_id, list(ROLES)))
    return [view(r) for r in await cur.fetchall()]


async def record(conn: AsyncConnection, workflow_id: uuid.UUID, subject: str, role: str, by: str) -> None:
    """Insert the grant row only (the tuple is queued by the caller): the creator's editor grant."""
    await conn.execute("INSERT INTO workflow_grants (workflow_id, subject, role, granted_by) VALUES (%s, %s, %s, %s)"
                       " ON CONFLICT DO NOTHING", (workflow_id, subject, role, by))


async def put(conn: AsyncConnection, workflow_id: uuid.UUID, subject: str, role: str, by: str) -> tuple[dict, str | None]:
    """Give ``subject`` ``role`` (replacing another role it had) and queue the tuple change.
    Returns ``(grant, previous role or None)``; nothing is queued when the role is unchanged.
    Raises :class:`Refused` 404 when the workflow is gone (a delete committed after the caller's
    Check: decision 404)."""
    async with conn.transaction():
        await _still_there(conn, workflow_id)
        cur = await conn.execute("SELECT role FROM workflow_grants WHERE workflow_id = %s AND subject = %s FOR UPDATE",
                                 (workflow_id, subject))
        old = await cur.fetchone()
        previous = old["role"] if old else None
        if previous != role:
            cur = await conn.execute(
                "INSERT INTO workflow_grants (workflow_id, subject, role, granted_by) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (workflow_id, subject) DO UPDATE SET role = excluded.role,"
                " granted_by = excluded.granted_by, granted_at = now()", (workflow_id, subject, role, by))
            payload: dict = {"writes": [tuple_of(workflow_id, subject, role)]}
            if previous:
                payload["deletes"] = [tuple_of(workflow_id, subject, previous)]
            await conn.execute("INSERT INTO fga_outbox (payload) VALUES (%s)", (Jsonb(payload),))
        cur = await conn.execute("SELECT * FROM workflow_grants WHERE workflow_id = %s AND subject = %s",
                                 (workflow_id, subject))
        return view(await cur.fetchone()), previous


async def revoke(conn: AsyncConnection, workflow_id: uuid.UUID, subject: str) -> str | None:
    """Take back ``subject``'s grant and queue its tuple's deletion; its role, or None when it had none.
    Raises :class:`Refused` 404 when the workflow is gone (as :func:`put`)."""
    await _still_there(conn, workflow_id)
    cur = await conn.execute("DELETE FROM workflow_grants WHERE workflow_id = %s AND subject = %s RETURNING role",
                             (workflow_id, subject))
    row = await cur.fetchone()
    if row is None:
        return None
    await conn.execute("INSERT INTO fga_outbox (payload) VALUES (%s)",
                       (Jsonb({"deletes": [tuple_of(workflow_id, subject, row["role"])]}),))
    return row["role"]


GONE = ("this workflow was deleted while its grants were being changed: nothing was granted or taken"
        " back (`waggle workflows list` shows the workflows that remain)")


async def _still_there(conn: AsyncConnection, workflow_id: uuid.UUID) -> None:
    """Key-share lock the workflow's row for the grant's transaction, or :class:`Refused` 404
    (:data:`GONE`). A delete holds the row from before it reads the grants it cascades
    (``ledger.crawl.workflows.delete``), so a grant either waits for it and finds the row gone,
    or commits first and has its tuple deleted with the others — never a grant row (foreign
    key: an error 500) or a tuple left on a deleted workflow."""
    cur = await conn.execute("SELECT 1 FROM workflows WHERE id = %s FOR KEY SHARE", (workflow_id,))
    if await cur.fetchone() is None:
        raise Refused(404, GONE)


async def tuples_of_all(conn: AsyncConnection, workflow_id: uuid.UUID) -> list[dict]:
    """Every grant's tuple (read before the workflow's row goes: its rows cascade)."""
    cur = await conn.execute("SELECT subject, role FROM workflow_grants WHERE workflow_id = %s", (workflow_id,))
    return [tuple_of(workflow_id, r["subject"], r["role"]) for r in await cur.fetchall()]

"""Saved seed URLs per organization (``capture_targets``; ``waggle targets …``, ledger.md §11).

URLs are parsed like seeds (WHATWG, http(s) only, no ``user:password@``, at most 2,048 characters,
fragment dropped); any unreadable, credentialed or too long URL means nothing is added and the bad ones are named. Unknown ids on enable/disable/rm change nothing.
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from ledger.crawl import traps
from ledger.crawl.urls import USERINFO_REFUSED, InvalidUrl, has_userinfo, parse_http_url


class TargetsError(ValueError):
    """Nothing was changed; ``str()`` says why (unreadable URLs or unknown ids, named)."""


def add(conn: Connection, org_id: str, urls: list[str], labels: list[str] | None = None) -> dict[str, list]:
    """Add ``urls`` for ``org_id``; returns ``{"added": [(id, url)], "enabled": [...], "kept": [...]}``.

    An existing disabled URL is re-enabled; existing enabled rows are untouched. Raises
    :class:`TargetsError` naming every unreadable URL (then nothing is added).
    """
    if not org_id:
        raise TargetsError("--org is required")
    parsed, bad, too_long, secret = [], [], [], []
    for raw in urls:
        try:
            p = parse_http_url(raw)
        except InvalidUrl:
            bad.append(raw)
            continue
        if has_userinfo(p):
            secret.append(p.origin + "/…")
            continue
        if traps.too_long(p.url, p.key):
            too_long.append(traps.shown(p.url))
        parsed.append(p.url)
    if bad:
        raise TargetsError("not http(s) URLs, nothing added: " + ", ".join(traps.shown(repr(b)) for b in bad))
    if secret:
        raise TargetsError(f"URLs with user:password@ ({USERINFO_REFUSED}), nothing added: " + ", ".join(secret))
    if too_long:
        raise TargetsError(f"URLs longer than {traps.MAX_URL_LENGTH:,} characters (a crawl never follows them;"
                           " shorten them), nothing added: " + ", ".join(too_long))
    if not parsed:
        raise TargetsError("no URLs given")
    wanted = list(dict.fromkeys(parsed))
    out: dict[str, list] = {"added": [], "enabled": [], "kept": []}
    with conn.transaction():
        rows = conn.execute(
            "SELECT id, url, enabled FROM capture_targets WHERE org_id = %s AND url = ANY(%s)", (org_id, wanted)
        ).fetchall()
        existing = {r[1]: (r[0], r[2]) for r in rows}
        for url in wanted:
            if url in existing:
                target_id, enabled = existing[url]
                if enabled:
                    out["kept"].append((target_id, url))
                else:
                    conn.execute("UPDATE capture_targets SET enabled = true, updated_at = now() WHERE id = %s",
                                 (target_id,))
                    out["enabled"].append((target_id, url))
            else:
                target_id = conn.execute(
                    "INSERT INTO capture_targets (url, org_id, labels) VALUES (%s, %s, %s) RETURNING id",
                    (url, org_id, labels or []),
                ).fetchone()[0]
                out["added"].append((target_id, url))
    return out


def list_targets(conn: Connection, org_id: str | None = None) -> list[dict[str, Any]]:
    """Targets (of ``org_id`` when given) ordered by organization then id."""
    sql = "SELECT id, org_id, url, enabled, labels FROM capture_targets"
    args: tuple = ()
    if org_id:
        sql += " WHERE org_id = %s"
        args = (org_id,)
    rows = conn.execute(sql + " ORDER BY org_id, id", args).fetchall()
    return [{"id": r[0], "org": r[1], "url": r[2], "enabled": r[3], "labels": list(r[4])} for r in rows]


def _check_ids(conn: Connection, org_id: str, ids: list[int]) -> None:
    found = {r[0] for r in conn.execute(
        "SELECT id FROM capture_targets WHERE org_id = %s AND id = ANY(%s)", (org_id, ids)).fetchall()}
    missing = [i for i in ids if i not in found]
    if missing:
        raise TargetsError(f"no such targets in {org_id}, nothing changed: " + ", ".join(map(str, missing)))


def set_enabled(conn: Connection, org_id: str, ids: list[int], enabled: bool) -> int:
    """Enable/disable targets of ``org_id``; returns how many rows changed. Raises
    :class:`TargetsError` naming unknown ids (nothing changed)."""
    with conn.transaction():
        _check_ids(conn, org_id, ids)
        cur = conn.execute(
            "UPDATE capture_targets SET enabled = %s, updated_at = now()"
            " WHERE org_id = %s AND id = ANY(%s) AND enabled <> %s",
            (enabled, org_id, ids, enabled),
        )
        return cur.rowcount


def remove(conn: Connection, org_id: str, ids: list[int]) -> int:
    """Delete targets of ``org_id``; raises :class:`TargetsError` naming unknown ids."""
    with conn.transaction():
        _check_ids(conn, org_id, ids)
        return conn.execute("DELETE FROM capture_targets WHERE org_id = %s AND id = ANY(%s)", (org_id, ids)).rowcount

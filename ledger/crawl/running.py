"""The check before anything is recorded or sent for a crawl: it exists and is running."""

from __future__ import annotations

from typing import Any

from ledger.crawl.errors import Refused


async def require_running(conn: Any, crawl_id: Any, consequence: str, *, lock: bool = False) -> dict | None:
    """The row of crawl ``crawl_id`` (``crawls.*``, read in ``conn``; ``lock``: ``FOR UPDATE``,
    held to the end of the caller's transaction), or None when there is no such crawl. Raises
    :class:`Refused` 409 "the crawl is <state>, not running: <consequence>" when it is not running."""
    cur = await conn.execute(f"SELECT * FROM crawls WHERE id = %s{' FOR UPDATE' if lock else ''}", (crawl_id,))
    crawl = await cur.fetchone()
    if crawl is not None and crawl["state"] != "running":
        raise Refused(409, f"the crawl is {crawl['state']}, not running: {consequence}")
    return crawl

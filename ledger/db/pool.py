"""The ledger's async connection pool (psycopg 3 + psycopg_pool)."""

from __future__ import annotations

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool


async def open_pool(database_url: str, *, min_size: int = 1, max_size: int = 10) -> AsyncConnectionPool:
    """An opened pool whose connections return rows as dicts; close it with ``await pool.close()``.

    Raises ``psycopg_pool.PoolTimeout`` when no connection can be made within 30 s.
    """
    pool = AsyncConnectionPool(
        database_url,
        min_size=min_size,
        max_size=max_size,
        kwargs={"row_factory": dict_row},
        open=False,
    )
    await pool.open(wait=True, timeout=30)
    return pool

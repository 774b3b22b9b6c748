"""Where the ledger's Postgres is: ``WAGGLE_DATABASE_URL`` or an embedded server (pgserver).

The embedded server keeps its data under ``state_dir/pg`` and survives the process that
started it (pgserver shares one server per data directory), so ``waggle db migrate`` and
``waggle serve`` see the same database.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ledger.settings import Settings

log = logging.getLogger(__name__)


def database_url(settings: Settings) -> str:
    """The connection URL to use: the configured one, else the embedded server's.

    Starting the embedded server needs the ``dev`` extra (pgserver); raises ``RuntimeError``
    saying so when it is not installed.
    """
    if settings.database_url:
        return settings.database_url
    try:
        import pgserver
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RuntimeError(
            "WAGGLE_DATABASE_URL is not set and the embedded Postgres (pgserver, extra `dev`) "
            "is not installed: set WAGGLE_DATABASE_URL or `pip install .[dev]`"
        ) from exc
    data = Path(settings.state_dir) / "pg"
    data.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(str(data), cleanup_mode=None)
    log.info("embedded Postgres under %s", data)
    return server.get_uri()

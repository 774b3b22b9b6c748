"""A real ledger over HTTP for the hostile-input tests (module-scoped: one per test file).

``hostile_ledger`` → object with ``url``, ``settings``, ``db_url``, ``who`` (dev headers of alice,
a submitter of acme) and ``webhook`` (the fake Windmill webhook). Everything on 127.0.0.1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.fixtures.ledger import ServerThread, ledger_settings

WHO = {"X-Waggle-Subject": "alice", "X-Waggle-Organizations": "acme"}


@dataclass
class HostileLedger:
    url: str
    settings: Any
    db_url: str
    webhook: Any
    who: dict


def start_ledger(create_database, migrated_template, fga, s3_server, webhook, **overrides):
    from ledger.api.app import create_app

    db_url = create_database(template=migrated_template)
    settings = ledger_settings(
        db_url, fga, webhook.url,
        s3_endpoint=s3_server.endpoint, s3_bucket=s3_server.bucket, s3_region=s3_server.region,
        s3_access_key_id=s3_server.access_key_id, s3_secret_access_key=s3_server.secret_access_key,
        **overrides,
    )
    server = ServerThread(create_app(settings, periodic=False)).start()
    return server, HostileLedger(server.url, settings, db_url, webhook, dict(WHO))


@pytest.fixture(scope="module")
def hostile_ledger(create_database, migrated_template, ledger_fga, s3_server, _webhook_server):
    server, ledger = start_ledger(create_database, migrated_template, ledger_fga, s3_server, _webhook_server,
                                  links_max_bytes=64 * 1024)
    try:
        yield ledger
    finally:
        server.stop()

"""A ledger with archives, for route and picker tests (real HTTP, Postgres, S3, real OpenFGA server).

Archives (captured_at descending = listing order):
* ``acme_new``  — org acme, submitted by alice, ``waczComplete`` false (incomplete badge);
* ``acme_old``  — org acme, submitted by alice, complete;
* ``contoso``   — org contoso, submitted by carol;
* ``beta_nosub`` — org beta, no submitter (nobody owns it).
Each has a WACZ object with distinct bytes under a key with a space and ``+``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import psycopg

from ledger.archive.admission import admit_level
from ledger.db.pool import open_pool
from ledger.s3 import S3Store
from tests.archive.helpers import manifest, put_json, wacz_bytes
from tests.fixtures.ledger import ServerThread

SPEC = [  # name, org, submitter, complete, timestamp
    ("acme_new", "acme", "alice", False, "2026-09-24T10:00:00.300Z"),
    ("acme_old", "acme", "alice", True, "2026-09-23T10:00:00.200Z"),
    ("contoso", "contoso", "carol", True, "2026-09-22T10:00:00.100Z"),
    ("beta_nosub", "beta", None, None, "2026-09-21T10:00:00.000Z"),
]


@dataclass
class ArchiveLedger:
    url: str
    db_url: str
    fga: Any
    s3: Any
    settings: Any
    server: ServerThread
    archives: dict[str, dict] = field(default_factory=dict)  # name -> {id, key, body, org}

    def stop(self) -> None:
        self.server.stop()


def settings_for(db_url: str, fga: Any, s3_server: Any, **overrides: Any) -> Any:
    from ledger.settings import Settings

    values: dict[str, Any] = dict(
        database_url=db_url, dev_identity=True, fga_api_url=fga.api_url, fga_store_id=fga.store_id,
        fga_model_id=fga.model_id, s3_endpoint=s3_server.endpoint, s3_bucket=s3_server.bucket,
        s3_region=s3_server.region, s3_access_key_id=s3_server.access_key_id,
        s3_secret_access_key=s3_server.secret_access_key, drain_interval_s=0.1, reconcile_interval_s=3600.0,
    )
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def serve(settings: Any) -> ServerThread:
    from ledger.api.app import create_app

    server = ServerThread(None)
    settings.api_port = server.port
    server.app = server.server.config.app = create_app(settings)
    return server.start()


async def _admit(db_url: str, s3_server: Any, store: S3Store) -> dict[str, dict]:
    out: dict[str, dict] = {}
    pool = await open_pool(db_url, max_size=2)
    try:
        for name, org, by, complete, ts in SPEC:
            task = str(uuid.uuid4())
            wacz_key = f"org/{org}/2026-09/{task}_crawl 1+x.wacz"
            body = wacz_bytes(f"https://{org}.example/{name}")
            s3_server.client().put_object(Bucket=s3_server.bucket, Key=wacz_key, Body=body,
                                          ContentType="application/wacz+zip")
            mkey = f"org/{org}/2026-09/{task}_crawl 1+x.result.json"
            put_json(s3_server, mkey, manifest(task, wacz_key=wacz_key, complete=complete, timestamp=ts,
                                               url=f"https://{org}.example/{name}"))
            async with pool.connection() as conn, conn.transaction():
                got = await admit_level(conn, store, bucket=s3_server.bucket, org_id=org, submitted_by=by,
                                        results=[{"url": f"https://{org}.example/{name}", "status": "captured",
                                                  "taskId": task, "manifestLocation": f"s3://{s3_server.bucket}/{mkey}"}])
            assert got.registered == 1
            async with pool.connection() as conn:
                row = await (await conn.execute("SELECT id FROM archives WHERE task_id = %s", (task,))).fetchone()
            out[name] = {"id": str(row["id"]), "key": wacz_key, "body": body, "org": org, "task": task}
    finally:
        await pool.close()
    return out


def start_archive_ledger(db_url: str, fga: Any, s3_server: Any) -> ArchiveLedger:
    settings = settings_for(db_url, fga, s3_server)
    store = S3Store(s3_server.endpoint, s3_server.bucket, s3_server.region, s3_server.access_key_id,
                    s3_server.secret_access_key)
    archives = asyncio.run(_admit(db_url, s3_server, store))
    server = serve(settings)
    # the service's own periodic outbox worker delivers the tuples
    deadline = time.monotonic() + 60
    while True:
        with psycopg.connect(db_url) as conn:
            pending = conn.execute("SELECT count(*) FROM fga_outbox WHERE processed_at IS NULL").fetchone()[0]
        if pending == 0:
            break
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError("the ledger's outbox worker did not deliver the tuples")
        time.sleep(0.05)
    return ArchiveLedger(server.url, db_url, fga, s3_server, settings, server, archives)

"""A ledger with archives of two organizations to index and search (real HTTP, Postgres, S3,
OpenFGA stand-in). See :func:`search_stack`."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest

from ledger.db.pool import open_pool
from ledger.s3 import S3Store
from tests.archive.ledger_stack import serve, settings_for
from tests.search.helpers import admit, html_page, insert_crawl, pdf_bytes, wacz

PAGES = {  # name: (org, crawl key, url, html or pdf bytes, timestamp)
    "tides": ("acme", "a", "https://harbour.example/tides",
              "<html lang=en><title>Tide tables</title><body><h2>Spring tide</h2><p>The lighthouse keeper"
              " writes the spring tide times in a book. Fish &amp; chips &lt;3 at the quay.</p></body></html>",
              "2026-09-24T10:00:00Z"),
    "keeper": ("acme", "a", "https://harbour.example/keeper",
               "<html lang=en><title>The lighthouse keeper</title><body><p>A keeper of the light tends the lamp"
               " every night; ships pass the rocks safely.</p></body></html>", "2026-09-23T10:00:00Z"),
    "german": ("acme", "a", "https://harbour.example/de",
               "<html lang=de><title>Die Leuchttürme</title><body><p>Die Wärter zählen die Schiffe im Hafen"
               " jeden Abend.</p></body></html>", "2026-09-22T10:00:00Z"),
    "report": ("acme", "a", "https://harbour.example/report.pdf", None, "2026-09-21T10:00:00Z"),
    "coast": ("acme", "b", "https://coast.example/old", "<html><title>Old coast</title><body><p>An old lighthouse"
              " on the coast, painted red and white, now a museum for visitors.</p></body></html>",
              "2025-05-01T10:00:00Z"),
    "rival": ("contoso", "c", "https://contoso.example/lh", "<html lang=en><title>Contoso lighthouse plans"
              "</title><body><p>Secret lighthouse plans of contoso.</p></body></html>", "2026-09-24T11:00:00Z"),
}


@dataclass
class SearchStack:
    db_url: str
    fga: Any
    s3_server: Any
    store: S3Store
    crawls: dict[str, str]
    archives: dict[str, str] = field(default_factory=dict)
    servers: list[Any] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.servers[0].url

    def body(self, name: str) -> bytes:
        org, _c, url, html, _ts = PAGES[name]
        if html is None:
            return wacz(url, [(url, 200, "application/pdf", pdf_bytes("Annual tide report for the harbour", "Tides 2026"), {})])
        return html_page(url, html)

    def admit(self, name: str, *, org: str, crawl: str, url: str, body: bytes, timestamp: str) -> str:
        async def go() -> str:
            pool = await open_pool(self.db_url, max_size=2)
            try:
                return await admit(pool, self.s3_server, self.store, org=org, crawl=crawl, url=url, body=body,
                                   timestamp=timestamp)
            finally:
                await pool.close()

        self.archives[name] = asyncio.run(go())
        return self.archives[name]

    def wait_outbox(self) -> None:
        deadline = time.monotonic() + 60
        while True:
            with psycopg.connect(self.db_url) as conn:
                if conn.execute("SELECT count(*) FROM fga_outbox WHERE processed_at IS NULL").fetchone()[0] == 0:
                    return
            assert time.monotonic() < deadline, "the outbox worker did not deliver the tuples"
            time.sleep(0.05)

    def start(self, **overrides: Any) -> Any:
        values = dict(crawl_webhook_url="http://127.0.0.1:9/none", crawl_webhook_token="t", search_sweep_interval_s=3600.0)
        values.update(overrides)
        server = serve(settings_for(self.db_url, self.fga, self.s3_server, **values))
        self.servers.append(server)
        return server


@pytest.fixture(scope="module")
def search_stack(create_database, migrated_template, fga_server, s3_server):
    """Six archives (acme: crawls a and b; contoso: crawl c) admitted and their tuples delivered;
    one ledger serving (not indexed yet). ``flow`` submits for both organizations."""
    db_url = create_database(template=migrated_template)
    fga = fga_server.new_store()
    fga.write(["user:flow submitter organization:acme", "user:flow submitter organization:contoso"])
    store = S3Store(s3_server.endpoint, s3_server.bucket, s3_server.region, s3_server.access_key_id,
                    s3_server.secret_access_key)
    crawls = {"a": insert_crawl(db_url, "acme"), "b": insert_crawl(db_url, "acme"), "c": insert_crawl(db_url, "contoso")}
    stack = SearchStack(db_url, fga, s3_server, store, crawls)
    stack.start()  # its search sweep leaves archives younger than 120 s to /index
    for name, (org, ck, url, _html, ts) in PAGES.items():
        stack.admit(name, org=org, crawl=crawls[ck], url=url, body=stack.body(name), timestamp=ts)
    stack.wait_outbox()
    try:
        yield stack
    finally:
        for s in stack.servers:
            s.stop()


@pytest.fixture(scope="module")
def indexed_stack(search_stack):
    """:func:`search_stack` with every crawl indexed."""
    import httpx

    for crawl in search_stack.crawls.values():
        r = httpx.post(f"{search_stack.url}/api/crawls/{crawl}/index", timeout=60,
                       headers={"X-Waggle-Subject": "flow", "X-Waggle-Organizations": "acme,contoso"})
        assert r.status_code == 200, r.text
    return search_stack

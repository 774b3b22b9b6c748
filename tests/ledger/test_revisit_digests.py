"""The per-organization digest index of revisit records (decision 181, issue 27 item 1): filled
at admission from the WACZ's CDXJ (real WARCs written by the capture server's writer, real S3
stand-in, real Postgres), answered by ``POST /api/crawls/{id}/digests`` for the crawl's
organization only; the archives a recrawl's revisits refer to."""

from __future__ import annotations

import asyncio

import json
import tempfile
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest

from waggle_capture.recorder import Exchange
from waggle_capture.revisits import Revisits, payload_digest
from waggle_capture.wacz import build_wacz, pages_jsonl
from waggle_capture.warc import cdxj_index, write_warc
from ledger.archive.admission import admit_many, check_archives
from ledger.archive.digests import referred_archives
from ledger.archive.manifest import read_manifest
from ledger.s3 import S3Store
from tests.archive.helpers import manifest, put_wacz
from tests.fixtures.ledger import LedgerHarness, ledger_settings, open_ledger
from tests.ledger.test_host_leases import WHO, start

pytestmark = pytest.mark.anyio

GLOBEX = LedgerHarness.who("bob", "globex")
PAGE = b"<html><body>" + b"same payload " * 200 + b"</body></html>"  # 2.6 kB: eligible
WHEN = datetime(2026, 11, 30, 10, 0, 0, tzinfo=timezone.utc)


@pytest.fixture
def settings(migrated_db_url, ledger_fga, fake_webhook):
    """alice submits for acme, bob for globex (two organizations side by side)."""
    ledger_fga.write(writes=["user:bob submitter organization:globex"], ignore_existing=True)
    return ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url)


def wacz(url: str, body: bytes, held: dict | None = None, behaviors: list[dict] | None = None,
         runtime: dict | None = None) -> bytes:
    """A capture server WACZ of one 200 response (a revisit record when ``held`` names its digest;
    ``behaviors``/``runtime``: its datapackage's ``settings.behaviors``/``behaviorRuntime``)."""
    ex = Exchange(url=url, method="GET", started=WHEN, status=200, status_text="OK",
                  resp_headers=[("Content-Type", "text/html")], body=body)
    revisits = Revisits(held=held or {}, lookup="ok") if held is not None else None
    with tempfile.TemporaryDirectory() as tmp:
        warc = Path(tmp) / "data.warc.gz"
        write_warc(warc, task_id="t", url=url, software="test", exchanges=[ex], denied=[], created=WHEN,
                   revisits=revisits)
        pkg = {"browserhive:capture": {"revisits": revisits.report()}} if revisits else {"title": "x"}
        if behaviors is not None:
            pkg.setdefault("browserhive:capture", {})["settings"] = {
                "behaviors": behaviors, **({"behaviorRuntime": runtime} if runtime else {})}
        out = Path(tmp) / "x.wacz"
        build_wacz(out, warc=warc, cdxj=cdxj_index(warc), pages=pages_jsonl("t", url, "2026-11-30T10:00:00Z", "x"),
                   extra=[], datapackage=pkg)
        return out.read_bytes()


async def admit(h, s3_server, crawl_id: str, org: str, data: bytes) -> str:
    task = str(uuid.uuid4())
    m = read_manifest(manifest(task, correlationId=crawl_id, wacz_key=f"{task}.wacz"))
    put_wacz(s3_server, m.artifacts.wacz, data)
    store = S3Store(s3_server.endpoint, s3_server.bucket, s3_server.region, s3_server.access_key_id,
                    s3_server.secret_access_key)
    indexed: dict = {}
    [finding] = await check_archives(store, [m], indexed=indexed)
    assert finding.problem is None
    async with h.services.pool.connection() as conn, conn.transaction():
        [got] = await admit_many(conn, [m], org_id=org, submitted_by=None, problems=[None], indexed=indexed)
    return got.archive_id


async def test_digests_are_held_per_organization_and_revisits_refer_to_the_first_capture(settings, s3_server):
    digest = payload_digest(PAGE)
    async with open_ledger(settings) as h:
        first = await start(h, ["https://s.test/"], 0)
        original = await admit(h, s3_server, first, "acme", wacz("https://s.test/a", PAGE))
        await admit(h, s3_server, first, "acme", wacz("https://s.test/b", PAGE))  # later capture: not kept
        r = await h.client.post(f"/api/crawls/{first}/digests", json={"digests": [digest, "sha256:AAAA"]}, headers=WHO)
        assert r.status_code == 200, r.text
        assert r.json() == {"held": {digest: {"uri": "https://s.test/a", "date": "2026-11-30T10:00:00Z",
                                              "container": f"{original}.wacz"}}}
        # BrowserHive drops the base32 padding: the same digest
        r = await h.client.post(f"/api/crawls/{first}/digests", json={"digests": [digest.rstrip("=")]}, headers=WHO)
        assert list(r.json()["held"]) == [digest.rstrip("=")]

        other = await start_as(h, GLOBEX)
        theirs = await h.client.post(f"/api/crawls/{other}/digests", json={"digests": [digest]}, headers=GLOBEX)
        assert theirs.status_code == 200 and theirs.json() == {"held": {}}  # never across organizations
        peek = await h.client.post(f"/api/crawls/{first}/digests", json={"digests": [digest]}, headers=GLOBEX)
        assert peek.status_code == 404
        bad = [await h.client.post(f"/api/crawls/{first}/digests", json=b, headers=WHO)
               for b in ({}, {"digests": []}, {"digests": ["no colon"]}, {"digests": ["sha256:A"] * 5001})]
        assert [b.status_code for b in bad] == [400] * 4, [b.text for b in bad]

        again = await start(h, ["https://s.test/"], 0)
        held = {digest: {"uri": "https://s.test/a", "date": "2026-11-30T10:00:00Z"}}
        revisit = await admit(h, s3_server, again, "acme", wacz("https://s.test/a", PAGE, held))
        assert await referred_archives(h.services.pool, again) == [original]
        assert await referred_archives(h.services.pool, first) == []  # its originals are its own
        assert await referred_archives(h.services.pool, other) == []
        async with h.services.pool.connection() as conn:
            row = await (await conn.execute("SELECT revisit_count, revisit_bytes_saved FROM archives WHERE id = %s",
                                            (revisit,))).fetchone()
            n = await (await conn.execute("SELECT count(*) AS n FROM payload_digests WHERE archive_id = %s",
                                          (revisit,))).fetchone()
        assert (row["revisit_count"], row["revisit_bytes_saved"], n["n"]) == (1, len(PAGE), 0)


async def test_a_second_organization_gets_no_revisit_of_the_first_ones_payload(settings, s3_server):
    """globex archives the same bytes after acme did: its lookup answers nothing, so its capture
    stores the body; once globex holds it, globex's own original is named."""
    digest = payload_digest(PAGE)
    async with open_ledger(settings) as h:
        acme = await start(h, ["https://s.test/"], 0)
        await admit(h, s3_server, acme, "acme", wacz("https://s.test/a", PAGE))
        globex = await start_as(h, GLOBEX)
        r = await h.client.post(f"/api/crawls/{globex}/digests", json={"digests": [digest]}, headers=GLOBEX)
        assert r.json() == {"held": {}}
        await admit(h, s3_server, globex, "globex", wacz("https://g.test/copy", PAGE))
        r = await h.client.post(f"/api/crawls/{globex}/digests", json={"digests": [digest]}, headers=GLOBEX)
        assert r.json()["held"][digest]["uri"] == "https://g.test/copy"


async def start_as(h, who) -> str:
    r = await h.client.post("/api/crawls", json={"seeds": ["https://g.test/"], "scripts": [], "perHostDelayMs": 0,
                                                 "maxDepth": 1}, headers=who)
    assert r.status_code == 202, r.text
    return r.json()["crawlId"]


async def test_a_late_admission_by_the_reconciler_fills_the_index(settings, s3_server):
    """A capture the level report never admitted (S3 down then, a crashed flow): the reconciler
    admits it later and its payload digests enter its organization's index all the same."""
    from ledger.archive.reconciler import reconcile
    from tests.archive.helpers import put_json

    body = b"<html><body>" + b"late capture " * 300 + b"</body></html>"
    task = str(uuid.uuid4())
    key = f"{task}_crawl-1_smoke.result.json"
    m = manifest(task, wacz_key=f"{task}.wacz", url="https://late.test/")
    put_wacz(s3_server, m["artifacts"]["wacz"], wacz("https://late.test/", body))
    put_json(s3_server, key, m)
    store = S3Store(s3_server.endpoint, s3_server.bucket, s3_server.region, s3_server.access_key_id,
                    s3_server.secret_access_key)
    async with open_ledger(settings) as h:
        crawl = await start(h, ["https://late.test/"], 0)
        async with h.services.pool.connection() as conn:
            await conn.execute("INSERT INTO capture_submissions (task_id, org_id, submitted_by, manifest_key)"
                               " VALUES (%s, 'acme', 'alice', %s)", (task, key))
        result = await reconcile(h.services.pool, store)
        assert result.registered >= 1
        r = await h.client.post(f"/api/crawls/{crawl}/digests", json={"digests": [payload_digest(body)]}, headers=WHO)
        assert r.json()["held"][payload_digest(body)]["uri"] == "https://late.test/"


async def test_a_recrawls_collection_holds_the_originals_its_revisits_refer_to(settings, s3_server):
    """Issue 27 item 1 with issue 25: the archive holding a revisit's original is a member of the
    recrawl's collection (role ``original``) for whoever may view it, and listed as missing
    (``original-not-viewable``) for whoever may not — never replayed from elsewhere."""
    from ledger.authz.outbox import drain_all

    digest = payload_digest(PAGE)
    store = S3Store(s3_server.endpoint, s3_server.bucket, s3_server.region, s3_server.access_key_id,
                    s3_server.secret_access_key)
    async with open_ledger(settings.model_copy(update={"s3_bucket": s3_server.bucket}), s3=store) as h:
        first = await start(h, ["https://s.test/"], 0)
        original = await admit(h, s3_server, first, "acme", wacz("https://s.test/a", PAGE))
        again = await start(h, ["https://s.test/"], 0)
        held = {digest: {"uri": "https://s.test/a", "date": "2026-11-30T10:00:00Z"}}
        await admit(h, s3_server, again, "acme", wacz("https://s.test/a", PAGE, held))
        await drain_all(h.services.pool, h.services.authz)
        r = await h.client.get(f"/api/crawls/{again}/collection", headers=WHO)
        assert r.status_code == 200, r.text
        originals = [m for m in r.json()["resources"] if m.get("role") == "original"]
        assert [m["archiveId"] for m in originals] == [original]
        assert originals[0]["path"].endswith(f"/members/{originals[0]['archiveId']}.wacz")  # a member path like every member
        for _ in range(120):  # the one-file download says how many members are originals (it stands alone)
            d = await h.client.post(f"/api/crawls/{again}/download", headers=WHO)
            if d.status_code != 202:
                break
            await asyncio.sleep(0.5)
        assert d.status_code == 200, d.text
        listed = r.json()["resources"]
        assert (d.json()["members"], d.json()["originals"]) == (len(listed), len(originals)) and originals, d.json()

        async with h.services.pool.connection() as conn:  # the original no longer viewable by acme
            await conn.execute("DELETE FROM fga_outbox")
        h.services.authz.viewable = _hiding(h.services.authz.viewable, original)
        r = await h.client.get(f"/api/crawls/{again}/collection", headers=WHO)
        body = r.json()
        assert original not in [m["archiveId"] for m in body["resources"]]
        assert [m["why"] for m in body["missing"] if m["why"] == "original-not-viewable"] == ["original-not-viewable"]


def _warc_records(data: bytes) -> list:
    """The WARC records of a capture server WACZ (``data``), headers read with warcio."""
    import io
    import zipfile

    from warcio.archiveiterator import ArchiveIterator

    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        warc = zf.read("archive/data.warc.gz")
    return [r.rec_headers for r in ArchiveIterator(io.BytesIO(warc))]


async def test_a_recrawl_at_another_url_names_the_member_holding_its_original(settings, s3_server, tmp_path):
    """Found by a new-user trial: crawl B of a docs copy on another port stored its seed as a
    revisit of crawl A's capture at another URL; ReplayWeb.page said "Original Archived Page
    Missing" (wabac.js looks the original up by ``WARC-Refers-To-Target-URI`` only in the
    revisit's own member, its ``relation.requires`` and ``WARC-Refers-To-Container`` — and the
    pages query opens A's member for none of B's pages). The lookup now names the original's
    member; the revisit record carries it, it is a member of B's collection under that name; the
    combined file keeps A's records but lists only B's pages (decision 322)."""
    import httpx

    from ledger.archive import combined
    from ledger.authz.outbox import drain_all

    a_url, b_url = "http://docs.test:8001/index.html", "http://docs.test:8002/index.html"  # one copy, two ports
    digest = payload_digest(PAGE)
    store = S3Store(s3_server.endpoint, s3_server.bucket, s3_server.region, s3_server.access_key_id,
                    s3_server.secret_access_key)
    async with open_ledger(settings.model_copy(update={"s3_bucket": s3_server.bucket}), s3=store) as h:
        crawl_a = await start(h, [a_url], 0)
        original = await admit(h, s3_server, crawl_a, "acme", wacz(a_url, PAGE))
        crawl_b = await start(h, [b_url], 0)
        r = await h.client.post(f"/api/crawls/{crawl_b}/digests", json={"digests": [digest]}, headers=WHO)
        held = r.json()["held"]
        assert held == {digest: {"uri": a_url, "date": "2026-11-30T10:00:00Z", "container": f"{original}.wacz"}}
        data = wacz(b_url, PAGE, held)
        [revisit] = [rec for rec in _warc_records(data) if rec.get_header("WARC-Type") == "revisit"]
        assert revisit.get_header("WARC-Target-URI") == b_url
        assert revisit.get_header("WARC-Refers-To-Target-URI") == a_url
        assert revisit.get_header("WARC-Refers-To-Container") == f"{original}.wacz"
        mine = await admit(h, s3_server, crawl_b, "acme", data)
        async with h.services.pool.connection() as conn:  # B's seed page captured into that archive
            await conn.execute("UPDATE crawl_pages SET state = 'captured', task_id ="
                               " (SELECT task_id::text FROM archives WHERE id = %s) WHERE crawl_id = %s",
                               (mine, crawl_b))
        await drain_all(h.services.pool, h.services.authz)

        r = await h.client.get(f"/api/crawls/{crawl_b}/collection", headers=WHO)
        members = {m["name"]: m for m in r.json()["resources"]}
        assert members[revisit.get_header("WARC-Refers-To-Container")]["role"] == "original"
        assert members[f"{mine}.wacz"].get("role") is None
        t = await h.client.post(f"/api/crawls/{crawl_b}/collection/ticket", headers=WHO)
        player = (await h.client.get(t.json()["path"])).json()  # the player's page list: B's page only
        assert [(p["url"], p["filename"]) for p in player["initialPages"]] == [(b_url, f"{mine}.wacz")]
        assert player["totalPages"] == 1

        signed = {}  # each member's path, the original's too: Check, then 302 to a signed URL
        for m in r.json()["resources"]:
            read = await h.client.get(m["path"], headers=WHO)
            assert read.status_code == 302, (m, read.text)
            signed[m["archiveId"]] = read.headers["location"]

        def fetch(member: dict, path) -> None:
            path.write_bytes(httpx.get(signed[member["archiveId"]]).content)

        out = tmp_path / "crawl.wacz"
        combined.build(r.json()["resources"], fetch, out, title="b", crawl_id=crawl_b, missing=[])
        import zipfile

        with zipfile.ZipFile(out) as zf:
            pages = [json.loads(x) for x in zf.read("pages/pages.jsonl").decode().splitlines()[1:]]
            index = [json.loads(line.split(" ", 2)[2]) for line in zf.read("indexes/index.cdx").decode().splitlines()]
        assert [p["url"] for p in pages] == [b_url]  # only the crawl's own pages
        assert sorted((i["url"], i.get("mime")) for i in index) == [(a_url, "text/html"), (b_url, "warc/revisit")]


def test_a_container_that_is_not_a_member_name_is_not_written():
    """Only a plain ``<name>.wacz`` becomes ``WARC-Refers-To-Container`` (no path, no URL)."""
    digest = payload_digest(PAGE)
    for bad in ("../x.wacz", "http://s3/x.wacz", "x.warc", "", None):
        held = {digest: {"uri": "https://s.test/a", "date": "2026-11-30T10:00:00Z", "container": bad}}
        [revisit] = [rec for rec in _warc_records(wacz("https://s.test/b", PAGE, held))
                     if rec.get_header("WARC-Type") == "revisit"]
        assert revisit.get_header("WARC-Refers-To-Container") is None, bad
        assert revisit.get_header("WARC-Refers-To-Target-URI") == "https://s.test/a"


def _hiding(viewable, hidden: str):
    """``Authz.viewable`` as if OpenFGA had lost the tuples of archive ``hidden``."""
    async def wrapped(identity, ids):
        return set(await viewable(identity, ids)) - {hidden}
    return wrapped


async def test_a_recrawls_unchanged_page_is_found_by_search_with_its_originals_text(settings, s3_server):
    """Found by a new user: a recrawl's unchanged page (its document a revisit record) had "no
    HTML or PDF response" and was never found. It is indexed with its original's text, through
    the organization's own digest index; another organization's archive is never read."""
    from ledger.search.indexer import index_archives

    body = b"<html lang='en'><head><title>Tide tables</title></head><body>" + b"spring tide at the quay " * 80 \
        + b"</body></html>"
    digest = payload_digest(body)
    store = S3Store(s3_server.endpoint, s3_server.bucket, s3_server.region, s3_server.access_key_id,
                    s3_server.secret_access_key)
    async with open_ledger(settings.model_copy(update={"s3_bucket": s3_server.bucket}), s3=store) as h:
        first = await start(h, ["https://s.test/"], 0)
        await admit(h, s3_server, first, "acme", wacz("https://s.test/tides", body))
        again = await start(h, ["https://s.test/"], 0)
        held = {digest: {"uri": "https://s.test/tides", "date": "2026-11-30T10:00:00Z"}}
        revisit = await admit(h, s3_server, again, "acme", wacz("https://s.test/tides", body, held))
        theirs = await start_as(h, GLOBEX)  # another organization's revisit of the same payload
        stray = await admit(h, s3_server, theirs, "globex", wacz("https://s.test/tides", body, held))

        done = await index_archives(h.services.pool, store)
        assert done.deferred == 0 and done.indexed == 3
        async with h.services.pool.connection() as conn:
            rows = {str(r["archive_id"]): r for r in await (await conn.execute(
                "SELECT archive_id, title, problem, tsv @@ websearch_to_tsquery('english', 'spring tide') AS hit"
                " FROM archive_text")).fetchall()}
        assert (rows[revisit]["title"], rows[revisit]["problem"], rows[revisit]["hit"]) == ("Tide tables", None, True)
        assert rows[stray]["title"] == "" and "no longer holds" in rows[stray]["problem"]  # never acme's text

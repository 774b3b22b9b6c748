"""The previous capture of a page for conditional requests (decision 331, issue 27 item 4): the
main document's validators kept at admission from the WACZ's datapackage (real WARCs by the
capture server's writer, real S3 stand-in, real Postgres), answered by ``POST
/api/crawls/{id}/previous`` for the crawl's organization only, with a signed ranged GET that
really holds the original record (read back with the capture server's own reader)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import httpx
import pytest

from waggle_capture.conditional import read_original
from waggle_capture.recorder import Exchange
from waggle_capture.revisits import Revisits, payload_digest
from waggle_capture.wacz import build_wacz, pages_jsonl
from waggle_capture.warc import cdxj_index, write_warc
from ledger.s3 import S3Store
from tests.fixtures.ledger import ledger_settings, open_ledger
from tests.ledger.test_host_leases import WHO, start
from tests.ledger.test_revisit_digests import GLOBEX, PAGE, WHEN, admit, start_as

pytestmark = pytest.mark.anyio

@pytest.fixture
def settings(migrated_db_url, ledger_fga, fake_webhook):
    """alice submits for acme, bob for globex (two organizations side by side)."""
    ledger_fga.write(writes=["user:bob submitter organization:globex"], ignore_existing=True)
    return ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url)


def store(s3_server) -> S3Store:
    """The S3 stand-in the originals are read from (and signed for)."""
    return S3Store(s3_server.endpoint, s3_server.bucket, s3_server.region, s3_server.access_key_id,
                   s3_server.secret_access_key)


ETAG, MODIFIED = '"v1-abc"', "Mon, 30 Nov 2026 09:00:00 GMT"


def wacz(url: str, body: bytes, validators: dict | None) -> bytes:
    """A capture server WACZ of one 200 page (a style sheet beside it, so the page's record is
    not the first one), its datapackage reporting ``validators`` (extension conditional)."""
    css = Exchange(url=url + "style.css", method="GET", started=WHEN, status=200, status_text="OK",
                   resp_headers=[("Content-Type", "text/css")], body=b"p { margin: 0 }" * 100)
    ex = Exchange(url=url, method="GET", started=WHEN, status=200, status_text="OK",
                  resp_headers=[("Content-Type", "text/html"), ("ETag", ETAG), ("Last-Modified", MODIFIED)], body=body)
    with tempfile.TemporaryDirectory() as tmp:
        warc = Path(tmp) / "data.warc.gz"
        write_warc(warc, task_id="t", url=url, software="test", exchanges=[css, ex], denied=[], created=WHEN)
        pkg = {"browserhive:capture": {"conditional": {"lookup": "none", "sent": False, "notModified": False,
                                                       "validators": validators}}}
        out = Path(tmp) / "x.wacz"
        build_wacz(out, warc=warc, cdxj=cdxj_index(warc), pages=pages_jsonl("t", url, "2026-11-30T10:00:00Z", "x"),
                   extra=[], datapackage=pkg)
        return out.read_bytes()


def validators(url: str, body: bytes) -> dict:
    return {"url": url, "etag": ETAG, "lastModified": MODIFIED, "digest": payload_digest(body)}


async def test_previous_names_the_validators_and_a_range_that_holds_the_original(settings, s3_server):
    url = "https://s.test/a"
    async with open_ledger(settings, s3=store(s3_server)) as h:
        first = await start(h, ["https://s.test/"], 0)
        await admit(h, s3_server, first, "acme", wacz(url, PAGE, validators(url, PAGE)))
        again = await start(h, ["https://s.test/"], 0)
        r = await h.client.post(f"/api/crawls/{again}/previous", json={"url": url}, headers=WHO)
        assert r.status_code == 200, r.text
        ans = r.json()
        assert (ans["etag"], ans["lastModified"], ans["uri"], ans["date"]) == (
            ETAG, MODIFIED, url, "2026-11-30T10:00:00Z")
        o = ans["original"]
        got = httpx.get(o["url"], headers={"range": f"bytes={o['offset']}-{o['offset'] + o['length'] - 1}"},
                        timeout=10)
        assert got.status_code == 206
        original = read_original(got.content, url, ans["digest"])
        assert original.body == PAGE and original.status == 200
        assert ("ETag", ETAG) in original.headers

        # never across organizations: globex's crawl of the same URL is told nothing, and may not ask acme's
        theirs = await start_as(h, GLOBEX)
        r = await h.client.post(f"/api/crawls/{theirs}/previous", json={"url": url}, headers=GLOBEX)
        assert r.status_code == 200 and r.json() == {}
        peek = await h.client.post(f"/api/crawls/{again}/previous", json={"url": url}, headers=GLOBEX)
        assert peek.status_code == 404
        # a page never seen before: nothing
        r = await h.client.post(f"/api/crawls/{again}/previous", json={"url": "https://s.test/new"}, headers=WHO)
        assert r.json() == {}
        bad = [await h.client.post(f"/api/crawls/{again}/previous", json=b, headers=WHO)
               for b in ({}, {"url": ""}, {"url": "ftp://s.test/a"}, {"url": url, "more": 1})]
        assert [b.status_code for b in bad] == [400] * 4, [b.text for b in bad]
        assert "url" in bad[2].text


async def test_no_validators_or_no_original_means_no_conditional_request(settings, s3_server):
    """A page that sent neither ETag nor Last-Modified, or whose original is no longer held
    (its archive deleted), gets ``{}``: the capture server then asks unconditionally."""
    async with open_ledger(settings, s3=store(s3_server)) as h:
        crawl = await start(h, ["https://s.test/"], 0)
        await admit(h, s3_server, crawl, "acme", wacz("https://s.test/plain", PAGE, None))
        other = PAGE.replace(b"same", b"else")
        kept = await admit(h, s3_server, crawl, "acme",
                           wacz("https://s.test/gone", other, validators("https://s.test/gone", other)))
        r = await h.client.post(f"/api/crawls/{crawl}/previous", json={"url": "https://s.test/plain"}, headers=WHO)
        assert r.json() == {}
        r = await h.client.post(f"/api/crawls/{crawl}/previous", json={"url": "https://s.test/gone"}, headers=WHO)
        assert r.json()["original"]["length"] > 0
        async with h.services.pool.connection() as conn:
            await conn.execute("DELETE FROM archives WHERE id = %s", (kept,))
        r = await h.client.post(f"/api/crawls/{crawl}/previous", json={"url": "https://s.test/gone"}, headers=WHO)
        assert r.json() == {}


def revisit_wacz(url: str, body: bytes, original_uri: str, validators: dict) -> bytes:
    """A capture server WACZ whose main document ``url`` is a ``revisit`` of ``original_uri``'s
    payload (decision 181: dedup at any URL), its datapackage reporting ``validators``."""
    ex = Exchange(url=url, method="GET", started=WHEN, status=200, status_text="OK",
                  resp_headers=[("Content-Type", "text/html"), ("ETag", ETAG), ("Last-Modified", MODIFIED)], body=body)
    held = {payload_digest(body): {"uri": original_uri, "date": "2026-11-30T10:00:00Z"}}
    revisits = Revisits(held=held, lookup="ok")
    with tempfile.TemporaryDirectory() as tmp:
        warc = Path(tmp) / "data.warc.gz"
        write_warc(warc, task_id="t", url=url, software="test", exchanges=[ex], denied=[], created=WHEN,
                   revisits=revisits)
        pkg = {"browserhive:capture": {"revisits": revisits.report(),
                                       "conditional": {"lookup": "none", "sent": False, "notModified": False,
                                                       "validators": validators}}}
        out = Path(tmp) / "x.wacz"
        build_wacz(out, warc=warc, cdxj=cdxj_index(warc), pages=pages_jsonl("t", url, "2026-11-30T10:00:00Z", "x"),
                   extra=[], datapackage=pkg)
        return out.read_bytes()


@pytest.mark.parametrize("same_crawl", [False, True], ids=["earlier-crawl", "same-crawl"])
async def test_a_page_first_archived_as_a_revisit_of_another_url_is_asked_conditionally(settings, s3_server,
                                                                                        same_crawl):
    """Decision 392: page B's earlier capture was a revisit of page A's payload (another URL,
    another crawl or the same one); B's validators were kept, and B's next crawl is answered with
    them and the range of A's record (the digest's original, at A's URL) — which the capture
    server's reader accepts for that URI and digest. Neighbours: A itself is answered with its own
    record; an organization that holds neither learns nothing."""
    a, b = "https://s.test/a", "https://s.test/b"
    async with open_ledger(settings, s3=store(s3_server)) as h:
        first = await start(h, ["https://s.test/"], 0)
        await admit(h, s3_server, first, "acme", wacz(a, PAGE, validators(a, PAGE)))
        second = first if same_crawl else await start(h, ["https://s.test/"], 0)
        await admit(h, s3_server, second, "acme", revisit_wacz(b, PAGE, a, validators(b, PAGE)))
        third = await start(h, ["https://s.test/"], 0)
        r = await h.client.post(f"/api/crawls/{third}/previous", json={"url": b}, headers=WHO)
        assert r.status_code == 200, r.text
        ans = r.json()
        assert (ans["etag"], ans["lastModified"], ans["uri"]) == (ETAG, MODIFIED, a), ans
        o = ans["original"]
        got = httpx.get(o["url"], headers={"range": f"bytes={o['offset']}-{o['offset'] + o['length'] - 1}"},
                        timeout=10)
        assert got.status_code == 206
        original = read_original(got.content, ans["uri"], ans["digest"])
        assert original.body == PAGE and original.status == 200
        mine = (await h.client.post(f"/api/crawls/{third}/previous", json={"url": a}, headers=WHO)).json()
        assert mine["uri"] == a and mine["original"]["offset"] == o["offset"]
        theirs = await start_as(h, GLOBEX)
        r = await h.client.post(f"/api/crawls/{theirs}/previous", json={"url": b}, headers=GLOBEX)
        assert r.status_code == 200 and r.json() == {}

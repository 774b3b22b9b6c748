"""The capture server's side of extension ``conditional`` (decision 331) without a browser: the
validators go on the page's first GET only and only with the original in hand; a failed lookup or
read, or an original whose digest differs, sends nothing conditional; a 304 becomes a
``server-not-modified`` revisit (the 304's own head kept in the datapackage's report) that warcio reads.
The browser path is tests/e2e/test_conditional_recrawl.py."""

from __future__ import annotations

import asyncio
import io
from datetime import datetime, timezone

import httpx
from warcio.archiveiterator import ArchiveIterator

from waggle_capture.conditional import PROFILE, Conditional, Original, prepare, read_original
from waggle_capture.recorder import Exchange
from waggle_capture.revisits import payload_digest
from waggle_capture.warc import write_warc

URL = "http://127.0.0.1:9/page.html"
BODY = b"<html><body>" + b"the page " * 300 + b"</body></html>"
WHEN = datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)
SPEC = {"url": "http://ledger.test/api/crawls/c/previous", "token": "t"}


def original_record(body: bytes = BODY, uri: str = URL) -> bytes:
    """One gzip'd response record as the capture server writes it."""
    import tempfile
    from pathlib import Path

    ex = Exchange(url=uri, method="GET", started=WHEN, status=200, status_text="OK",
                  resp_headers=[("Content-Type", "text/html"), ("Last-Modified", "Tue, 01 Dec 2026 09:00:00 GMT")],
                  body=body)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "w.warc.gz"
        write_warc(path, task_id="t", url=uri, software="test", exchanges=[ex], denied=[], created=WHEN)
        data = path.read_bytes()
    recs = []
    it = ArchiveIterator(io.BytesIO(data))
    for rec in it:
        recs.append((rec.rec_headers.get_header("WARC-Type"), it.get_record_offset(), it.get_record_length()))
    _, off, length = next(r for r in recs if r[0] == "response")
    return data[off:off + length]


def ledger(record: bytes, status: int = 200, digest: str | None = None) -> httpx.MockTransport:
    def handle(req: httpx.Request) -> httpx.Response:
        if req.method == "POST":
            if status != 200:
                return httpx.Response(status, text="no")
            return httpx.Response(200, json={
                "etag": None, "lastModified": "Tue, 01 Dec 2026 09:00:00 GMT", "digest": digest or payload_digest(BODY),
                "uri": URL, "date": "2026-12-01T10:00:00Z",
                "original": {"url": "http://s3.test/b/k.wacz", "offset": 100, "length": len(record)}})
        assert req.headers["range"] == f"bytes=100-{99 + len(record)}"
        return httpx.Response(206, content=record)
    return httpx.MockTransport(handle)


def paused(url: str = URL, method: str = "GET") -> dict:
    return {"requestId": "r1", "request": {"url": url, "method": method, "headers": {"Accept": "text/html"}}}


def test_the_validators_go_on_the_first_get_of_the_page_only_with_the_original_in_hand():
    c = asyncio.run(prepare(SPEC, URL, transport=ledger(original_record())))
    assert c.lookup == "ok" and c.original.body == BODY
    assert c.request_headers(paused(URL, "POST")) is None
    assert c.request_headers(paused("http://127.0.0.1:9/other.html")) is None
    headers = c.request_headers(paused())
    assert {"name": "If-Modified-Since", "value": "Tue, 01 Dec 2026 09:00:00 GMT"} in headers
    assert {"name": "Accept", "value": "text/html"} in headers
    assert c.request_headers(paused()) is None  # a second request of the URL goes as it is
    assert not c.answers({**paused(), "responseStatusCode": 200}) and c.answers({**paused(), "responseStatusCode": 304})


def test_any_failure_sends_nothing_conditional():
    assert asyncio.run(prepare(None, URL)) is None  # a request without the member
    for transport in (ledger(original_record(), status=500),  # the ledger refused
                      ledger(original_record(), digest=payload_digest(b"other")),  # not the original's bytes
                      ledger(original_record(uri="http://127.0.0.1:9/else.html"))):  # not its record
        c = asyncio.run(prepare(SPEC, URL, transport=transport))
        assert c.original is None and c.lookup.startswith("failed: "), c.lookup
        assert c.request_headers(paused()) is None
    empty = httpx.MockTransport(lambda req: httpx.Response(200, json={}))
    c = asyncio.run(prepare(SPEC, URL, transport=empty))
    assert (c.lookup, c.original, c.request_headers(paused())) == ("none", None, None)


def test_a_304_is_written_as_a_server_not_modified_revisit(tmp_path):
    orig = read_original(original_record(), URL, payload_digest(BODY))
    c = Conditional(url=URL, lookup="ok", last_modified="Tue, 01 Dec 2026 09:00:00 GMT",
                    digest=payload_digest(BODY), uri=URL, date="2026-12-01T10:00:00Z", original=orig)
    c.request_headers(paused())

    class Cdp:
        sent: list = []

        async def send(self, method, params):
            self.sent.append((method, params))

    cdp = Cdp()
    asyncio.run(c.fulfil(cdp, {**paused(), "responseStatusCode": 304, "responseStatusText": "Not Modified",
                               "responseHeaders": [{"name": "Date", "value": "Wed, 02 Dec 2026 04:00:00 GMT"}]}, None))
    method, params = cdp.sent[0]
    assert method == "Fetch.fulfillRequest" and params["responseCode"] == 200
    assert {"name": "Date", "value": "Wed, 02 Dec 2026 04:00:00 GMT"} in params["responseHeaders"]
    ex = Exchange(url=URL, method="GET", started=WHEN, resource_type="document", status=200, body=BODY,
                  req_headers=[("Accept", "text/html")])
    c.mark([ex])
    assert c.validators == {"url": URL, "etag": None, "lastModified": "Tue, 01 Dec 2026 09:00:00 GMT",
                            "digest": payload_digest(BODY)}
    path = tmp_path / "w.warc.gz"
    write_warc(path, task_id="t", url=URL, software="test", exchanges=[ex], denied=[], created=WHEN)
    with open(path, "rb") as fh:
        recs = [(r.rec_headers, r.http_headers, r.content_stream().read()) for r in ArchiveIterator(fh)]
    revisit = next(r for r in recs if r[0].get_header("WARC-Type") == "revisit")
    assert revisit[0].get_header("WARC-Profile") == PROFILE
    assert revisit[0].get_header("WARC-Refers-To-Target-URI") == URL
    assert revisit[0].get_header("WARC-Refers-To-Date") == "2026-12-01T10:00:00Z"
    assert revisit[0].get_header("WARC-Payload-Digest") == payload_digest(BODY) and revisit[2] == b""
    request = next(r for r in recs if r[0].get_header("WARC-Type") == "request")
    assert request[1].get_header("If-Modified-Since") == "Tue, 01 Dec 2026 09:00:00 GMT"
    # the 304's own head, verbatim, in the datapackage's report, not a metadata record (decision 391)
    assert not [r for r in recs if r[0].get_header("WARC-Type") == "metadata"]
    assert c.report()["answer"] == {"status": "304 Not Modified",
                                    "headers": [["Date", "Wed, 02 Dec 2026 04:00:00 GMT"]]}
    assert request[0].get_header("WARC-Payload-Digest") is None  # an empty request body: no payload digest
    assert request[0].get_header("WARC-Block-Digest").startswith("sha256:")
    assert not [r for r in recs if r[0].get_header("WARC-Type") == "response"]  # the body is not stored again

"""Conditional requests for recrawls (waggle extension ``conditional``, docs/capture-server.md;
decision 331, issue 27 item 4).

Before the page is navigated, the ledger named in the request's ``conditional`` member
(``{"url": <lookup URL>, "token": <bearer>}``) is asked once about the page URL
(``POST url {"url": …}``) → ``{"etag", "lastModified", "digest", "uri", "date", "original":
{"url": <signed GET of the earlier WACZ>, "offset", "length"}}`` or ``{}``. With an answer the
earlier ``response`` record is read **first** (one ranged GET, its payload digest checked): only
when the original is in hand is ``If-None-Match`` / ``If-Modified-Since`` added to the first
main-frame request of that URL (:mod:`.files` request-stage pause). A ``304`` is answered to
Chromium with the original (``Fetch.fulfillRequest``: status, headers freshened by the 304 as
RFC 9111 §4.3.4 says, body), so the page renders, its links are found and its screenshot taken;
the WARC gets a ``revisit`` record of profile :data:`PROFILE` (:func:`revisit_record`); the
304's own status line and headers are kept verbatim in the datapackage (``answer``, below; a
``metadata`` record of them cost ~300 B a page: decision 391). A ``200`` is recorded as any
response. Never lose the page: any failure of the lookup or of the read sends the request
unconditionally.

The datapackage's ``browserhive:capture.conditional`` reports ``{lookup, sent, notModified,
validators}`` and, after a 304, ``answer`` (``{"status": "304 Not Modified", "headers": [[name,
value], …]}``, as received); ``validators`` (``{url, etag, lastModified, digest}`` of the main
document, or null) is what the ledger keeps for the next crawl.
"""

from __future__ import annotations

import base64
import io
import logging
import re
from dataclasses import dataclass, field
from typing import Any

import httpx
from warcio.archiveiterator import ArchiveIterator

from waggle_capture import rawbodies
from waggle_capture.recorder import Exchange
from waggle_capture.revisits import payload_digest

log = logging.getLogger("waggle_capture")

PROFILE = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
CONTAINER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}\.wacz")  # a collection member's name, nothing else
LOOKUP_TIMEOUT_S = 5.0  # lookup and original read each; past it the request goes unconditionally
ORIGINAL_MAX_BYTES = 20 * 1024 * 1024  # the compressed record read; larger → unconditional
# Headers of the original that describe its transfer, not its entity: never replayed to Chromium.
TRANSFER = {"content-length", "content-encoding", "transfer-encoding", "connection", "keep-alive"}
# RFC 9111 §3.2: headers a 304 must not update in the stored response.
NOT_UPDATED = TRANSFER | {"content-range", "content-type"}


def _norm(digest: str) -> str:
    algo, _, value = digest.strip().partition(":")
    return f"{algo.lower()}:{value.rstrip('=').upper()}"


def _first(headers: list[tuple[str, str]], name: str) -> str | None:
    return next((v for k, v in headers if k.lower() == name), None)


@dataclass
class Original:
    """The earlier ``response`` record: ``status``, its HTTP ``headers`` and whole ``body``."""

    status: int
    status_text: str
    headers: list[tuple[str, str]]
    body: bytes


@dataclass
class Conditional:
    """One capture's conditional request. ``lookup``: ``"ok"``, ``"none"`` (nothing earlier),
    ``"failed: …"``; ``sent`` once the validators went out; ``not_modified`` after a 304."""

    url: str
    lookup: str = "none"
    etag: str | None = None
    last_modified: str | None = None
    digest: str | None = None
    uri: str | None = None
    date: str | None = None
    container: str | None = None  # the original's collection member name (decision 322), when given
    original: Original | None = None
    sent: bool = False
    not_modified: bool = False
    sent_headers: list[tuple[str, str]] = field(default_factory=list)
    answer_status_text: str = ""
    answer_headers: list[tuple[str, str]] = field(default_factory=list)  # the 304's, verbatim
    served_headers: list[tuple[str, str]] = field(default_factory=list)  # what Chromium was given
    validators: dict[str, Any] | None = None

    # -- the request stage (.files) -----------------------------------------------------------

    def conditional_headers(self) -> list[tuple[str, str]]:
        out = []
        if self.etag:
            out.append(("If-None-Match", self.etag))
        if self.last_modified:
            out.append(("If-Modified-Since", self.last_modified))
        return out

    def request_headers(self, ev: dict) -> list[dict[str, str]] | None:
        """For a paused main-frame request: the full header list with the validators added when
        it is the page's first GET of :attr:`url` and the original is in hand, else None."""
        req = ev.get("request") or {}
        if (self.sent or self.original is None or req.get("url") != self.url
                or (req.get("method") or "GET").upper() != "GET" or not self.conditional_headers()):
            return None
        self.sent = True
        self.sent_headers = self.conditional_headers()
        names = {k.lower() for k, _ in self.sent_headers}
        headers = [{"name": k, "value": str(v)} for k, v in (req.get("headers") or {}).items() if k.lower() not in names]
        return headers + [{"name": k, "value": v} for k, v in self.sent_headers]

    # -- the response stage (.files) ----------------------------------------------------------

    def answers(self, ev: dict) -> bool:
        """Whether a paused main-frame response is the 304 to our conditional request."""
        return (self.sent and not self.not_modified and self.original is not None
                and ev.get("responseStatusCode") == 304 and (ev.get("request") or {}).get("url") == self.url)

    async def fulfil(self, cdp: Any, ev: dict, raw: Any) -> None:
        """Answer Chromium's paused 304 with the original (freshened by the 304's headers); keep
        the body for the recorder (:mod:`.rawbodies`)."""
        assert self.original is not None
        self.not_modified = True
        self.answer_status_text = ev.get("responseStatusText") or "Not Modified"
        self.answer_headers = [(h["name"], h["value"]) for h in ev.get("responseHeaders") or []]
        updated = {k.lower(): (k, v) for k, v in self.answer_headers if k.lower() not in NOT_UPDATED}
        served = [(k, v) for k, v in self.original.headers if k.lower() not in TRANSFER and k.lower() not in updated]
        served += list(updated.values())
        self.served_headers = served + [("Content-Length", str(len(self.original.body)))]
        req = ev.get("request") or {}
        if raw is not None:
            raw.put(rawbodies.key("GET", self.url, req.get("headers") or {}), self.original.body)
        await cdp.send("Fetch.fulfillRequest", {
            "requestId": ev["requestId"], "responseCode": self.original.status,
            "responsePhrase": self.original.status_text or "OK",
            "responseHeaders": [{"name": k, "value": v} for k, v in self.served_headers],
            "body": base64.b64encode(self.original.body).decode()})

    # -- packaging ----------------------------------------------------------------------------

    def mark(self, exchanges: list[Exchange]) -> None:
        """Before the WARC is written: the main document's exchange of a 304 becomes a
        server-not-modified revisit (:attr:`Exchange.not_modified`); :attr:`validators` is set
        from it (or from the 200 the site sent)."""
        main = next((e for e in exchanges if e.url == self.url and e.resource_type == "document"
                     and e.target == "page" and e.status is not None), None)
        if main is None:
            return
        if self.not_modified and self.original is not None:
            main.status, main.status_text = self.original.status, self.original.status_text
            main.resp_headers = list(self.served_headers)
            main.body, main.truncated = self.original.body, None  # the entity Chromium rendered
            main.incomplete = main.failure = None
            main.not_modified = {"digest": self.digest, "uri": self.uri, "date": self.date, "container": self.container}
            names = {k.lower() for k, _ in main.req_headers}
            main.req_headers += [(k, v) for k, v in self.sent_headers if k.lower() not in names]
            etag = _first(self.answer_headers, "etag") or self.etag
            modified = _first(self.answer_headers, "last-modified") or self.last_modified
            digest = self.digest
        elif 200 <= main.status < 300 and main.body is not None and not main.truncated and not main.withheld:
            etag, modified = _first(main.resp_headers, "etag"), _first(main.resp_headers, "last-modified")
            digest = payload_digest(main.body)
        else:
            return
        if etag or modified:
            self.validators = {"url": self.url, "etag": etag, "lastModified": modified, "digest": digest}

    def report(self) -> dict[str, Any]:
        out = {"lookup": self.lookup, "sent": self.sent, "notModified": self.not_modified,
               "validators": self.validators}
        if self.not_modified:  # the 304's own head, verbatim (decision 391: not a metadata record)
            out["answer"] = {"status": f"304 {self.answer_status_text}",
                             "headers": [[k, v] for k, v in self.answer_headers]}
        return out


async def prepare(spec: dict | None, url: str, *, timeout_s: float = LOOKUP_TIMEOUT_S,
                  transport: httpx.AsyncBaseTransport | None = None) -> Conditional | None:
    """Ask the ledger (``spec`` = the request's ``conditional`` member) about ``url`` and read
    the original; None without ``spec``. Never raises: a failure is a :class:`Conditional` whose
    ``original`` is None (nothing will be sent)."""
    if not spec:
        return None
    c = Conditional(url=url)
    try:
        async with httpx.AsyncClient(timeout=timeout_s, transport=transport) as client:
            resp = await client.post(spec["url"], json={"url": url},
                                     headers={"authorization": f"Bearer {spec['token']}"})
            if resp.status_code != 200:
                raise ValueError(f"the ledger answered {resp.status_code}: {resp.text[:200]}")
            ans = resp.json()
            if not isinstance(ans, dict) or not ans.get("original"):
                return c  # nothing earlier (or not readable by this crawl's organization)
            orig = ans["original"]
            c.etag, c.last_modified = ans.get("etag") or None, ans.get("lastModified") or None
            c.digest, c.uri, c.date = str(ans["digest"]), str(ans["uri"]), str(ans["date"])
            c.container = ans.get("container") if isinstance(ans.get("container"), str) else None
            offset, length = int(orig["offset"]), int(orig["length"])
            if not (c.etag or c.last_modified) or not 0 < length <= ORIGINAL_MAX_BYTES or offset < 0:
                raise ValueError("the answer has no validators or no usable record range")
            got = await client.get(orig["url"], headers={"range": f"bytes={offset}-{offset + length - 1}"})
            if got.status_code != 206 or len(got.content) != length:
                raise ValueError(f"the original's ranged GET answered {got.status_code}, {len(got.content)} bytes")
        c.original = read_original(got.content, c.uri, c.digest)
        c.digest = payload_digest(c.original.body)  # as this server writes digests (padded), checked equal
        c.lookup = "ok"
    except Exception as exc:  # noqa: BLE001 - never lose the page: the request goes unconditionally
        c.original = None
        c.lookup = f"failed: {type(exc).__name__}: {str(exc)[:300]}"
        log.warning("conditional lookup for %s failed; asking unconditionally (%s)", url, c.lookup)
    return c


def read_original(record: bytes, uri: str, digest: str) -> Original:
    """The one gzip'd WARC ``response`` record in ``record``: its URI must be ``uri``, its
    status 2xx and its body's digest ``digest`` (else ValueError)."""
    for rec in ArchiveIterator(io.BytesIO(record)):
        if rec.rec_type != "response" or rec.rec_headers.get_header("WARC-Target-URI") != uri:
            raise ValueError("the range does not hold the original's response record")
        status = int(rec.http_headers.get_statuscode())
        body = rec.content_stream().read()
        if _norm(payload_digest(body)) != _norm(digest):
            raise ValueError("the original's payload digest differs from the ledger's")
        if not 200 <= status < 300:
            raise ValueError(f"the original's status is {status}")
        text = rec.http_headers.statusline.partition(" ")[2]
        headers = [(k[len("X-Archive-Orig-"):] if k.startswith("X-Archive-Orig-") else k, v)
                   for k, v in rec.http_headers.headers]
        return Original(status, text, [(k, v) for k, v in headers if k.lower() not in TRANSFER], body)
    raise ValueError("the range holds no WARC record")


def revisit_record(w: Any, ex: Exchange, http_headers: Any, warc_date: str) -> Any:
    """The ``revisit`` record (profile :data:`PROFILE`) of a marked exchange: ``http_headers``
    are the response Chromium was given (the original freshened by the 304), no body."""
    nm = ex.not_modified or {}
    rec = w.create_revisit_record(ex.url, nm["digest"], nm["uri"], nm["date"], http_headers=http_headers,
                                  warc_headers_dict={"WARC-Date": warc_date})
    rec.rec_headers.replace_header("WARC-Profile", PROFILE)
    container = nm.get("container")
    if isinstance(container, str) and CONTAINER.fullmatch(container):  # ReplayWeb.page opens that member
        rec.rec_headers.add_header("WARC-Refers-To-Container", container)
    return rec

# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1", "lxml==6.1.3", "protego==0.7.0"]
# ///
"""Sitemaps for plan_level (issue 29 item 2; docs/decisions/221): read a seed host's sitemaps
politely and return the page URLs they list (library script, no main).

Where they come from: the ``Sitemap:`` lines of the host's robots.txt (RFC 9309 §2.2.4 leaves
them to the sitemaps protocol; :func:`robots_sitemaps`), else ``/sitemap.xml``. A sitemap index
(``<sitemapindex>``) names further sitemaps, read breadth-first up to :data:`MAX_FILES` per host.

Limits (sitemaps.org protocol): at most :data:`MAX_URLS_PER_FILE` (50,000) ``<loc>`` per file and
:data:`MAX_FILE_BYTES` (50 MB) uncompressed; a gzip file (by its magic bytes, whatever its name)
or a gzip ``Content-Encoding`` is inflated with the same cap, chunk by chunk, so a gzip bomb stops
at 50 MB. Parsing is lxml's ``iterparse`` with ``resolve_entities=False``, ``no_network``,
``huge_tree=False`` and no DTD loading; a document that declares a DTD is refused before parsing
(a sitemap never needs one: entity bombs and external entities have nowhere to come from), and
libxml2's amplification limit stands behind that.

Politeness: every fetch is a request to the host. :func:`read_host` waits ``not_before`` for the
first and the host's whole delay after each answer's last byte for the next (the delay the host's
captures keep: setting, Crawl-delay, other crawls), asks robots.txt for each URL (redirects
included), follows redirects only on the same host, and returns when its last request ended, so
that the host's first capture waits the delay after it (plan_level) and the ledger keeps it as the
host's last request. A sitemap on another host is never fetched (that host's gap is not ours to
spend); it is noted.

``lastmod_after``: only ``<url>`` entries whose ``<lastmod>`` (W3C datetime; a date alone is
midnight UTC, no offset = UTC) is after it are kept; entries without a readable lastmod are kept
(nothing says they are old); an index's child whose own lastmod is not after it is not fetched
(its file has not changed since, so neither has any URL it lists).
"""

from __future__ import annotations

import io
import re
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
from lxml import etree

from f.waggle.useragent import USER_AGENT

MAX_URLS_PER_FILE = 50_000  # sitemaps.org: "no more than 50,000 URLs"
MAX_FILE_BYTES = 50 * 1024 * 1024  # sitemaps.org: "no larger than 50MB (52,428,800 bytes)", uncompressed
MAX_FILES = 50  # sitemap files fetched per host and crawl (index children included): 50 requests
MAX_NOTES = 20  # notes (what went wrong) kept per host
FETCH_TIMEOUT_S = 30.0
MAX_REDIRECTS = 5
LOC_MAX_CHARS = 8192  # the ledger's HREF_MAX_CHARS: a longer <loc> is no URL

_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 64 * 1024


class SitemapError(ValueError):
    """A sitemap that could not be read; the message says why in a line a person can act on."""


def robots_sitemaps(text: str | None, robots_url: str) -> list[str]:
    """The ``Sitemap:`` URLs of a robots.txt body in file order, each once, resolved against
    ``robots_url`` (the protocol wants absolute URLs; a relative one is read kindly). The field
    name is case-insensitive and may stand anywhere in the file (it belongs to no group)."""
    out: list[str] = []
    for line in (text or "").splitlines():
        found = re.match(r"\s*sitemap\s*:\s*(\S+)", line, re.IGNORECASE)
        if found:
            url = urljoin(robots_url, found.group(1))
            if urlsplit(url).scheme in ("http", "https") and url not in out:
                out.append(url)
    return out


def parse_w3c_datetime(value: str | None) -> datetime | None:
    """A W3C datetime (``YYYY``, ``YYYY-MM``, ``YYYY-MM-DD``, ``…Thh:mm[:ss[.s]]TZD``) as an aware
    UTC datetime; a date alone is midnight UTC, no offset is UTC. None when unreadable."""
    text = (value or "").strip()
    if not text:
        return None
    for pattern, fill in ((r"\d{4}", "-01-01"), (r"\d{4}-\d{2}", "-01")):
        if re.fullmatch(pattern, text):
            text += fill
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)


def inflate(data: bytes, limit: int = MAX_FILE_BYTES) -> bytes:
    """``data`` gunzipped (every member) when it starts with the gzip magic, else unchanged; never
    more than ``limit`` bytes out (raises :class:`SitemapError` past it, or for broken gzip)."""
    if not data.startswith(_GZIP_MAGIC):
        if len(data) > limit:
            raise SitemapError(f"larger than {limit:,} bytes (the sitemaps protocol's limit)")
        return data
    out = bytearray()
    rest = data
    try:
        while rest.startswith(_GZIP_MAGIC):
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            pending = rest
            while pending:
                out += d.decompress(pending, limit + 1 - len(out))
                if len(out) > limit:
                    raise SitemapError(f"larger than {limit:,} bytes uncompressed (the sitemaps protocol's limit)")
                pending = d.unconsumed_tail
                if d.eof:
                    break
            if not d.eof:
                raise SitemapError("gzip data ends before its end (a cut file?)")
            rest = d.unused_data
    except zlib.error as exc:
        raise SitemapError(f"not readable gzip: {exc}") from None
    return bytes(out)


def _local(tag: object) -> str:
    """An element's name without its namespace (sites use the protocol's, none, or a wrong one)."""
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


_DOCTYPE = re.compile(rb"<!DOCTYPE", re.IGNORECASE)
_ROOT = re.compile(rb"<[A-Za-z_]")


@dataclass
class Parsed:
    """One sitemap file: ``kind`` ``urlset`` or ``sitemapindex``; ``entries`` = ``(loc, lastmod)``
    in file order (lastmod None when absent or unreadable); ``cut`` = entries past the limit."""

    kind: str
    entries: list[tuple[str, datetime | None]] = field(default_factory=list)
    cut: int = 0


def parse_sitemap(data: bytes, max_entries: int = MAX_URLS_PER_FILE) -> Parsed:
    """Parse one (already inflated) sitemap file. Raises :class:`SitemapError` for a DTD, XML
    that is not well-formed (an entity bomb included), or a root that is neither ``urlset`` nor
    ``sitemapindex``. Entries past ``max_entries`` are counted in ``cut``, not kept."""
    root_at = _ROOT.search(data)
    if _DOCTYPE.search(data, 0, root_at.start() if root_at else len(data)):
        raise SitemapError("declares a DTD (<!DOCTYPE>), which a sitemap never needs: not read")
    parsed: Parsed | None = None
    try:
        events = etree.iterparse(io.BytesIO(data), events=("start", "end"), resolve_entities=False,
                                 no_network=True, huge_tree=False, load_dtd=False, remove_comments=True,
                                 remove_pis=True)
        for event, element in events:
            name = _local(element.tag)
            if parsed is None:
                if name not in ("urlset", "sitemapindex"):
                    raise SitemapError(f"the root element is <{name}>, not <urlset> or <sitemapindex>")
                parsed = Parsed(name)
                continue
            if event != "end" or name not in ("url", "sitemap"):
                continue
            loc = lastmod = None
            for child in element:
                child_name = _local(child.tag)
                if child_name == "loc":
                    loc = (child.text or "").strip()
                elif child_name == "lastmod":
                    lastmod = parse_w3c_datetime(child.text)
            element.clear(keep_tail=False)  # memory stays one entry, whatever the file's size
            while element.getprevious() is not None:
                del element.getparent()[0]
            if not loc or len(loc) > LOC_MAX_CHARS:
                continue
            if len(parsed.entries) >= max_entries:
                parsed.cut += 1
                continue
            parsed.entries.append((loc, lastmod))
    except etree.XMLSyntaxError as exc:
        raise SitemapError(f"not well-formed XML: {str(exc)[:200]}") from None
    if parsed is None:
        raise SitemapError("no XML element found")
    return parsed


@dataclass
class Fetched:
    """One sitemap fetch: the body (inflated) or the reason it is unusable, and when the host's
    last request of it ended (epoch s; None when no request was made)."""

    url: str
    body: bytes | None
    error: str | None
    done: float | None


def fetch_sitemap(url: str, *, allowed: Callable[[str], bool], transport: httpx.BaseTransport | None,
                  now: Callable[[], float], timeout_s: float = FETCH_TIMEOUT_S,
                  limit: int = MAX_FILE_BYTES) -> Fetched:
    """GET ``url`` (redirects followed on the same host only, each target asked of robots.txt
    first), reading at most ``limit`` bytes before and after inflation. Never raises."""
    host = urlsplit(url).netloc.lower()
    headers = {"user-agent": USER_AGENT, "accept": "application/xml, text/xml, */*;q=0.1",
               "accept-encoding": "gzip"}
    done: float | None = None
    deadline = time.monotonic() + timeout_s
    try:
        with httpx.Client(transport=_Borrowed(transport) if transport else None, follow_redirects=False,
                          timeout=timeout_s) as client:
            for _hop in range(MAX_REDIRECTS + 1):
                with client.stream("GET", url, headers=headers) as response:
                    raw, over = _read(response, deadline, limit)
                    done = now()
                    status = response.status_code
                    if status in (301, 302, 303, 307, 308) and "location" in response.headers:
                        target = urljoin(url, response.headers["location"])
                        if urlsplit(target).netloc.lower() != host or urlsplit(target).scheme not in ("http", "https"):
                            return Fetched(url, None, f"redirects to another host ({target[:200]}): not followed", done)
                        if not allowed(target):
                            return Fetched(url, None, f"redirects to {target[:200]}, which robots.txt disallows", done)
                        url = target
                        continue
                    if status != 200:
                        return Fetched(url, None, f"HTTP {status}", done)
                    if over:
                        return Fetched(url, None, f"larger than {limit:,} bytes", done)
                    encoding = response.headers.get("content-encoding", "").strip().lower()
                    if encoding in ("gzip", "x-gzip"):  # inflated here under the cap, not by httpx
                        if not raw.startswith(_GZIP_MAGIC):
                            return Fetched(url, None, "Content-Encoding gzip, but the body is not gzip", done)
                        raw = inflate(raw, limit)  # a .xml.gz sent gzip-encoded is inflated once more below
                    elif encoding not in ("", "identity"):
                        return Fetched(url, None, f"Content-Encoding {encoding} (asked for gzip only)", done)
                    return Fetched(url, inflate(raw, limit), None, done)
            return Fetched(url, None, f"more than {MAX_REDIRECTS} redirects", done)
    except SitemapError as exc:
        return Fetched(url, None, str(exc), done or now())
    except _Deadline:
        return Fetched(url, None, f"no complete answer within {timeout_s:g} s", now())
    except (httpx.HTTPError, ValueError, OSError) as exc:  # ValueError: the private-host guard's refusal
        return Fetched(url, None, f"{type(exc).__name__}: {str(exc)[:200]}", now())


class _Deadline(Exception):
    pass


class _Borrowed(httpx.BaseTransport):
    """plan_level's shared transport lent to one client (closing the client leaves it open)."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self.inner.handle_request(request)

    def close(self) -> None:
        pass


def _read(response: httpx.Response, deadline: float, limit: int) -> tuple[bytes, bool]:
    """The body as sent (no decoding: a gzip Content-Encoding is inflated by :func:`inflate`, under
    its cap), at most ``limit`` + 1 bytes; (bytes, over the limit?)."""
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_raw(_CHUNK):
        if time.monotonic() > deadline:
            raise _Deadline()
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks), True
    return b"".join(chunks), False


@dataclass
class HostSitemaps:
    """What one host's sitemaps gave: the plan output's ``sitemaps`` item (:meth:`entry`)."""

    host: str
    urls: list[str] = field(default_factory=list)  # page URLs kept, file order, each once
    files: int = 0  # sitemap files fetched (requests made, redirects not counted)
    found: int = 0  # <url> entries read (before the lastmod filter and the URL cap)
    older: int = 0  # left out by the lastmod filter
    notes: list[str] = field(default_factory=list)
    last_request: float | None = None  # epoch s: when the host's last sitemap request ended

    def note(self, text: str) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append(text[:500])

    def entry(self, iso: Callable[[float], str]) -> dict:
        return {"host": self.host, "urls": self.urls, "files": self.files, "found": self.found,
                "older": self.older, "notes": self.notes,
                "lastRequestAt": iso(self.last_request) if self.last_request is not None else None}


def read_host(
    host: str,
    scheme: str,
    robots_text: str | None,
    *,
    allowed: Callable[[str], bool],
    delay_ms: int,
    not_before: float,
    fetch: Callable[[str], Fetched],
    now: Callable[[], float],
    sleep: Callable[[float], None] = time.sleep,
    lastmod_after: datetime | None = None,
    max_urls: int = MAX_URLS_PER_FILE,
    max_files: int = MAX_FILES,
    log: Callable[[str], None] = print,
) -> HostSitemaps:
    """Read ``host``'s sitemaps one request at a time: the first no earlier than ``not_before``
    (epoch s), each next one ``delay_ms`` after the previous request's end. ``robots_text``: the
    host's robots.txt as served (its ``Sitemap:`` lines; None when there is none); ``allowed(url)``:
    robots.txt's verdict; ``fetch(url)``: :func:`fetch_sitemap` bound to the transport. Keeps at
    most ``max_urls`` page URLs and fetches at most ``max_files`` files."""
    out = HostSitemaps(host)
    base = f"{scheme}://{host}"
    listed = robots_sitemaps(robots_text, f"{base}/robots.txt")
    queue = listed or [f"{base}/sitemap.xml"]
    seen_files: set[str] = set()
    seen_urls: set[str] = set()
    earliest = not_before
    while queue:
        url = queue.pop(0)
        if url in seen_files:
            continue
        seen_files.add(url)
        if urlsplit(url).netloc.lower() != host.lower():
            out.note(f"{url[:200]}: on another host, not fetched (its host's gap is not this host's)")
            continue
        if not allowed(url):
            out.note(f"{url[:200]}: disallowed by robots.txt, not fetched")
            continue
        if out.files >= max_files:
            out.note(f"{len(queue) + 1} more sitemap file(s) not fetched: at most {max_files} per host")
            break
        wait = earliest - now()
        if wait > 0:
            sleep(wait)
        got = fetch(url)
        if got.done is not None:
            out.last_request = got.done
            earliest = got.done + delay_ms / 1000.0
        out.files += 1
        if got.error is not None or got.body is None:
            out.note(f"{url[:200]}: {got.error}")
            continue
        try:
            parsed = parse_sitemap(got.body)
        except SitemapError as exc:
            out.note(f"{url[:200]}: {exc}")
            continue
        if parsed.cut:
            out.note(f"{url[:200]}: {parsed.cut} entries past the protocol's {MAX_URLS_PER_FILE:,} per file left out")
        if parsed.kind == "sitemapindex":
            for loc, lastmod in parsed.entries:
                child = urljoin(url, loc)
                if lastmod_after is not None and lastmod is not None and lastmod <= lastmod_after:
                    out.note(f"{child[:200]}: not fetched, its lastmod is not after {lastmod_after.isoformat()}")
                    continue
                queue.append(child)
            continue
        for loc, lastmod in parsed.entries:
            out.found += 1
            if lastmod_after is not None and lastmod is not None and lastmod <= lastmod_after:
                out.older += 1
                continue
            page = urljoin(url, loc)
            if page in seen_urls:
                continue
            if len(out.urls) >= max_urls:
                continue
            seen_urls.add(page)
            out.urls.append(page)
    log(f"[{host}] sitemaps: {out.files} file(s) read, {out.found} URL(s) found, {out.older} older than the"
        f" lastmod filter, {len(out.urls)} kept" + (f"; {len(out.notes)} note(s)" if out.notes else ""))
    return out


def read_all(jobs: list[dict[str, Any]], read: Callable[..., HostSitemaps], workers: int = 8) -> list[HostSitemaps]:
    """:func:`read_host` for each job's keyword arguments, hosts concurrently (≤ ``workers``),
    each host's requests one after the other; results in ``jobs`` order."""
    if not jobs:
        return []
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(jobs))), thread_name_prefix="sitemaps") as pool:
        futures = [pool.submit(read, **job) for job in jobs]
        return [f.result() for f in futures]


__all__ = ["MAX_FILES", "MAX_FILE_BYTES", "MAX_URLS_PER_FILE", "Fetched", "HostSitemaps", "Parsed", "SitemapError",
           "fetch_sitemap", "inflate", "parse_sitemap", "parse_w3c_datetime", "read_all", "read_host",
           "robots_sitemaps"]

"""A local test site on 127.0.0.1 for capture tests (never anything off this machine).

Routes: ``/start`` 302 → ``/page``; ``/page`` has a ``fetch()`` of ``/api/data.json``, an iframe
``/frame.html``, a lazy image ``/img/lazy.png`` 5000 px below the fold and links; ``/gzip``
answers chunked + gzip'd (case C9); ``/banner`` has a CMP dialog, a consent wall and a fixed header; ``/missing`` 404; ``/big`` a 300 kB body; ``/slow`` waits
``?ms=`` ms; ``/tracker.js`` (policy target); ``/poll`` fetches ``/ping`` every 20 ms for ever; ``/late?ms=`` fetches ``/late-ping`` once, ``ms`` after it ran. ``hits`` counts requests per path, ``arrivals`` logs (path, monotonic time);
``responses`` logs (path, monotonic time) as each answer starts its last write (a lower bound of
when the response ended, on the machine-wide monotonic clock the capture server uses too) —
unless the client had already closed the connection then (the capture proxy cut the request at
the seal: nothing it writes reaches the page, and a site thread late under load would otherwise
log a time after the cut);
``connection_headers`` keeps each request's ``Connection`` header (the capture proxy sends
``close``; Chromium itself would send ``keep-alive``); ``user_agents`` keeps each request's
``User-Agent`` and ``Sec-CH-UA``. ``/tricky-links`` has link texts that JSON must escape;
``/worker`` starts a dedicated worker (``/worker.js``) that fetches ``/from-worker``.
"""

from __future__ import annotations

import gzip
import select
import socket
import struct
import time
import zlib
from collections import Counter
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from tests.fixtures.loopback import LoopbackSite

FETCHED_MESSAGE = "fetched-by-script-42"
GZIP_TEXT = "<html><head><title>gz</title></head><body>" + "compressed and chunked " * 200 + "</body></html>"


def tiny_png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"\x00\xff\x00\x00" * 1  # one red pixel row (filter 0 + RGB)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


PAGE = """<!doctype html><html><head><title>Waggle test page</title>
<script src="/tracker.js"></script></head><body>
<h1>Hello capture</h1>
<a href="/other?x=1">Other page</a> <a href="/other?x=1">dup</a>
<a href="https://example.com/ext" rel="nofollow">External</a> <a href="mailto:a@example.com">mail</a>
<p id="out">waiting</p>
<iframe src="/frame.html" width="200" height="100"></iframe>
<script>
fetch('/api/data.json').then(r => r.json()).then(d => { document.getElementById('out').textContent = d.message; });
</script>
<div style="height:5000px">tall</div>
<img id="lazy" loading="lazy" src="/img/lazy.png" width="10" height="10" alt="lazy">
</body></html>"""


# Link texts whose JSON needs escaping, and one whose 200th UTF-16 unit splits a surrogate pair.
TRICKY_TEXTS = ['say "hi" \\ back', "tab\there", "ctl\x01char", "café ü 日本", "line\u2028sep", "x" * 199 + "😀"]
TRICKY_LINKS = ("<!doctype html><html><head><meta charset=utf-8><title>tricky</title></head><body>"
                + "".join(f'<a href="/t{i}"><pre>{t}</pre></a>' for i, t in enumerate(TRICKY_TEXTS)) + "</body></html>")

WORKER_PAGE = """<!doctype html><html><head><title>worker</title></head><body><p id="out">waiting</p>
<script>new Worker('/worker.js').onmessage = e => { document.getElementById('out').textContent = e.data; };</script>
</body></html>"""

POLL = """<!doctype html><html><head><title>poll</title></head><body><p>polling</p>
<script>setInterval(() => fetch('/ping?' + Date.now()).catch(() => {}), 20);</script></body></html>"""

LATE = """<!doctype html><html><head><title>late</title></head><body><p>one late request</p>
<script>setTimeout(() => fetch('/late-ping?' + Date.now()).catch(() => {}), %d);</script></body></html>"""

BANNER = """<!doctype html><html><head><title>banner</title></head><body>
<header style="position:fixed;top:0;z-index:5000;width:100%;height:100%">site header</header>
<div id="CybotCookiebotDialog">We use cookies</div>
<div id="wall" style="position:fixed;inset:0;z-index:99999;background:#000">consent wall</div>
<p>article text</p></body></html>"""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    site: "TestSite"

    def log_message(self, *args) -> None:  # quiet
        pass

    def handle(self) -> None:
        try:
            super().handle()
        except ConnectionError:  # the browser gave up on a slow answer: not an error here
            pass

    def _note_response(self, path: str) -> None:
        """Log the answer's last write starting now, if it can still reach the client: the time is
        taken first and the connection looked at after it, so a close seen open came after the
        time (the proxy's own bound is later still) and a close seen closed means nothing passes."""
        at = time.monotonic()
        if not self._client_gone():
            self.site.responses.append((path, at))

    def _client_gone(self) -> bool:
        """The client (the capture proxy) already closed this connection: nothing sent now reaches it."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _send(self, status: int, body: bytes, ctype: str, extra: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self._note_response(urlsplit(self.path).path)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        parts = urlsplit(self.path)
        path = parts.path
        self.site.hits[path] += 1
        at = time.monotonic()
        self.site.arrivals.append((path, at))
        if not self._client_gone():  # time first, as in _note_response: a close seen open came after it
            self.site.live_arrivals.append((path, at))
        self.site.connection_headers.append((path, self.headers.get("Connection", "")))
        self.site.user_agents.append((path, self.headers.get("User-Agent", ""), self.headers.get("Sec-CH-UA")))
        if path == "/start":
            self.send_response(302)
            self.send_header("Location", "/page")
            self.send_header("Content-Length", "0")
            self._note_response(path)
            self.end_headers()
        elif path == "/page":
            self._send(200, PAGE.encode(), "text/html; charset=utf-8", {"Set-Cookie": "sid=abc; Path=/"})
        elif path == "/frame.html":
            self._send(200, b"<html><body><p>inside the frame</p></body></html>", "text/html")
        elif path == "/api/data.json":
            self._send(200, ('{"message": "%s"}' % FETCHED_MESSAGE).encode(), "application/json",
                       {"Cache-Control": "no-store"})
        elif path == "/img/lazy.png":
            self._send(200, tiny_png(), "image/png")
        elif path == "/tracker.js":
            self._send(200, b"window.tracked = true;", "application/javascript")
        elif path == "/poll":
            self._send(200, POLL.encode(), "text/html")
        elif path == "/late":
            ms = int(parse_qs(parts.query).get("ms", ["500"])[0])
            self._send(200, (LATE % ms).encode(), "text/html")
        elif path == "/ping" or path == "/late-ping":
            self._send(200, b"pong", "text/plain", {"Cache-Control": "no-store"})
        elif path == "/other":
            self._send(200, b"<html><head><title>other</title></head><body>other</body></html>", "text/html")
        elif path == "/gzip":
            body = gzip.compress(GZIP_TEXT.encode())
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(body), 100):
                piece = body[i:i + 100]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self._note_response(path)
            self.wfile.write(b"0\r\n\r\n")
        elif path == "/banner":
            self._send(200, BANNER.encode(), "text/html")
        elif path == "/big":
            self._send(200, b"<html><body>" + b"x" * 300_000 + b"</body></html>", "text/html")
        elif path == "/tricky-links":
            self._send(200, TRICKY_LINKS.encode("utf-8"), "text/html; charset=utf-8")
        elif path == "/worker":
            self._send(200, WORKER_PAGE.encode(), "text/html")
        elif path == "/worker.js":
            self._send(200, b"fetch('/from-worker').then(r => r.text()).then(t => postMessage(t));",
                       "application/javascript")
        elif path == "/from-worker":
            self._send(200, b"worker-fetched", "text/plain", {"Cache-Control": "no-store"})
        elif path == "/slow":
            time.sleep(int(parse_qs(parts.query).get("ms", ["1000"])[0]) / 1000)
            self._send(200, b"<html><head><title>slow</title></head><body>slow</body></html>", "text/html")
        else:
            self._send(404, b"<html><body>not here</body></html>", "text/html")


class TestSite:
    """Threaded HTTP server on 127.0.0.1 (OS-chosen port). ``url(path)`` builds absolute URLs."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.arrivals: list[tuple[str, float]] = []  # (path, monotonic seconds) per request
        # the same, less requests handled after the proxy had closed their connection (a seal cut a
        # request it had forwarded before: under load the handler thread can run after the seal)
        self.live_arrivals: list[tuple[str, float]] = []
        self.responses: list[tuple[str, float]] = []  # (path, monotonic seconds) as each answer's last write starts
        self.connection_headers: list[tuple[str, str]] = []  # (path, Connection header) per request
        self.user_agents: list[tuple[str, str, str | None]] = []  # (path, User-Agent, Sec-CH-UA) per request
        handler = type("Handler", (_Handler,), {"site": self})
        self._site = LoopbackSite(handler)
        self.port = self._site.port

    def start(self) -> "TestSite":
        """Self: the site serves from construction."""
        return self

    def url(self, path: str) -> str:
        return self._site.url + path

    def stop(self) -> None:
        self._site.stop()

"""A loopback site of real-web cases for capture tests (issue 13 items 3, 4, 7; issue 17 items 2–3).

Routes: ``/`` home page; ``/file.pdf`` a 20 000 000-byte ``application/pdf`` with ``Set-Cookie``;
``/data.csv`` a small ``text/csv``; ``/big.bin`` a 50 MiB ``application/octet-stream``
(Chromium starts a download); ``/chunked.bin`` 8 MiB ``application/octet-stream`` without
``Content-Length``; ``/longpoll`` a page whose script opens ``fetch('/poll')``, which is held
60 s (released by :meth:`HostileSite.stop`); ``/old`` 301 → ``/new``; ``/forbidden`` a 403 page
whose script does ``window.location = '/'``; ``/webrtc?port=N`` a page that opens an
``RTCPeerConnection`` with ``stun:127.0.0.1:N``; ``/loop`` 302 → itself with a new ``Set-Cookie``
each time; ``/to-credentials`` 302 → ``http://bob:s3cret@<this site>/new``; ``/bounce?n=N``
N redirects alternating between ``127.0.0.1`` and ``localhost`` (with ``&same=1``: on this
host), then ``/new``; ``/hangup`` closes the connection without an answer. ``hits`` counts requests per path; ``sent``
the body bytes written per path (a cut transfer writes fewer).
"""

from __future__ import annotations

import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from tests.fixtures.loopback import LoopbackSite

PDF_BYTES = 20_000_000
BIG_BYTES = 50 * 1024 * 1024
CHUNKED_BYTES = 8 * 1024 * 1024
CSV = b"id,name\n" + b"".join(b"%d,row %d\n" % (i, i) for i in range(200))
HOME = b"<!doctype html><html><head><title>home</title></head><body><p>home</p></body></html>"
NEW = b"<!doctype html><html><head><title>new place</title></head><body><p>moved here</p></body></html>"
FORBIDDEN = b"<!doctype html><html><head><title>403</title></head><body>no<script>window.location = '/';</script></body></html>"
LONGPOLL = b"""<!doctype html><html><head><title>longpoll</title></head><body><p>waiting</p>
<script>fetch('/poll').then(r => r.text()).then(t => { document.querySelector('p').textContent = t; });</script>
</body></html>"""
WEBRTC = """<!doctype html><html><head><title>webrtc</title></head><body><script>
const pc = new RTCPeerConnection({iceServers: [{urls: 'stun:127.0.0.1:%d'}]});
pc.createDataChannel('probe');
pc.createOffer().then(o => pc.setLocalDescription(o));
</script></body></html>"""


def _pattern(n: int) -> bytes:
    """``n`` bytes of a fixed pattern (the PDF starts like one)."""
    head = b"%PDF-1.4\n"
    unit = bytes(range(256)) * 256
    body = head + unit * (n // len(unit) + 1)
    return body[:n]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    site: "HostileSite"

    def log_message(self, *args) -> None:
        pass

    def handle(self) -> None:
        try:
            super().handle()
        except (ConnectionError, TimeoutError):  # the browser or proxy hung up: expected here
            pass

    def _head(self, status: int, ctype: str, length: int | None, extra: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        if length is not None:
            self.send_header("Content-Length", str(length))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()

    def _body(self, path: str, data: bytes | memoryview, step: int = 1 << 16) -> None:
        for i in range(0, len(data), step):
            self.wfile.write(data[i:i + step])
            self.site.sent[path] += len(data[i:i + step])

    def _send(self, status: int, body: bytes, ctype: str, extra: dict | None = None) -> None:
        self._head(status, ctype, len(body), extra)
        self._body(urlsplit(self.path).path, body)

    def do_GET(self) -> None:  # noqa: N802
        parts = urlsplit(self.path)
        path = parts.path
        self.site.hits[path] += 1
        if path == "/":
            self._send(200, HOME, "text/html; charset=utf-8")
        elif path == "/file.pdf":
            self._send(200, self.site.pdf, "application/pdf", {"Set-Cookie": "pdfsession=1; Path=/"})
        elif path == "/data.csv":
            self._send(200, CSV, "text/csv")
        elif path == "/big.bin":
            self._head(200, "application/octet-stream", BIG_BYTES)
            self._body(path, memoryview(self.site.big))
        elif path == "/chunked.bin":
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            piece = b"z" * (1 << 16)
            for _ in range(CHUNKED_BYTES // len(piece)):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.site.sent[path] += len(piece)
            self.wfile.write(b"0\r\n\r\n")
        elif path == "/longpoll":
            self._send(200, LONGPOLL, "text/html")
        elif path == "/poll":
            self.site.released.wait(60)
            self._send(200, b"late news", "text/plain", {"Cache-Control": "no-store"})
        elif path == "/old":
            self._head(301, "text/html", 0, {"Location": "/new"})
        elif path == "/new":
            self._send(200, NEW, "text/html")
        elif path == "/forbidden":
            self._send(403, FORBIDDEN, "text/html")
        elif path == "/loop":
            self.site.cookie += 1
            self._head(302, "text/html", 0, {"Location": "/loop", "Set-Cookie": f"n={self.site.cookie}; Path=/"})
        elif path == "/to-credentials":  # a redirect to this site with user:password@
            self._head(302, "text/html", 0, {"Location": f"http://bob:s3cret@{self.headers['Host']}/new"})
        elif path == "/bounce":  # n more redirects, each to the other loopback name, then /new
            q = parse_qs(parts.query)
            n, same = int(q.get("n", ["0"])[0]), "same" in q
            other = "localhost" if self.headers["Host"].startswith("127.") else "127.0.0.1"
            nxt = f"/bounce?n={n - 1}&same=1" if same else f"http://{other}:{self.site.port}/bounce?n={n - 1}"
            target = nxt if n > 0 else "/new"
            self._head(302, "text/html", 0, {"Location": target})
        elif path == "/hangup":
            self.close_connection = True  # no answer at all
        elif path == "/webrtc":
            port = int(parse_qs(parts.query).get("port", ["9"])[0])
            self._send(200, (WEBRTC % port).encode(), "text/html")
        else:
            self._send(404, b"<html><body>not here</body></html>", "text/html")


class HostileSite:
    """Threaded HTTP server on 127.0.0.1 (OS-chosen port); ``url(path)`` builds absolute URLs."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.sent: Counter[str] = Counter()
        self.released = threading.Event()
        self.cookie = 0
        self.pdf = _pattern(PDF_BYTES)
        self.big = bytes(BIG_BYTES)
        handler = type("Handler", (_Handler,), {"site": self})
        self._site = LoopbackSite(handler)
        self.port = self._site.port

    def start(self) -> "HostileSite":
        """Self: the site serves from construction."""
        return self

    def url(self, path: str) -> str:
        return self._site.url + path

    def stop(self) -> None:
        self.released.set()
        self._site.stop()

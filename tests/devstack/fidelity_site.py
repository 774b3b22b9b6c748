"""A loopback site whose responses a web archive must keep byte for byte (issue 24 item 3):
legacy charsets, a UTF-16 page with its byte order mark, gzip and br content codings, chunked
transfer, a 206 range answer of a WAV file played by ``<audio>``, a 204, binary images and an
HTML body with NUL bytes. ``/`` embeds them all (iframes, image, audio, a ``fetch``).

Every response is logged in :attr:`FidelitySite.sent`: ``(path, Content-Range or "")`` → the
headers written and the *entity* (the body before content coding and chunked framing — what a
client has once it has undone both), so a test compares what the archive holds with what the
site sent.
"""

from __future__ import annotations

import gzip
import struct
import threading
import zlib
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler

import brotli  # pywb's dependency (brotlipy)

from tests.fixtures.loopback import LoopbackSite


def _png(width: int = 3, height: int = 2) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + bytes([(x * 80 + y * 40) % 256 for x in range(width * 3)]) for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def _wav(seconds: float = 1.0, rate: int = 8000) -> bytes:
    samples = bytes((i * 7) % 256 for i in range(int(seconds * rate)))
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate, 1, 8)
    data = b"data" + struct.pack("<I", len(samples)) + samples
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


CP1252 = (b'<!doctype html><html><head><title>quotes</title></head><body>'
          b'<p id="q">\x93curly\x94 \x91single\x92 \x96 dash \x85 \x80 euro</p></body></html>')
LATIN1 = '<!doctype html><html><body><p>café – naïve ÿ</p></body></html>'.replace("–", "-").encode("iso-8859-1")
SJIS = ('<!doctype html><html><head><meta charset="shift_jis"></head><body><p>日本語のページ</p></body>'
        '</html>').encode("shift_jis")
UTF16 = b"\xff\xfe" + '<!doctype html><html><body><p>UTF-16 “page”</p></body></html>'.encode("utf-16-le")
NUL_HTML = b"<!doctype html><html><body><p>before\x00after</p>\x00\x00<p>end</p></body></html>"
GZIP_HTML = b"<!doctype html><html><body><p>gzip'd " + b"x" * 2000 + b"</p></body></html>"
BR_HTML = b"<!doctype html><html><body><p>brotli " + b"y" * 2000 + b"</p></body></html>"
CHUNKED_HTML = b"<!doctype html><html><body>" + b"".join(b"<p>chunk %d</p>" % i for i in range(50)) + b"</body></html>"
PNG = _png()
GIF = (b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00"
       b",\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")
WAV = _wav()

INDEX = (b'<!doctype html><html><head><meta charset="utf-8"><title>fidelity</title></head><body>'
         b'<iframe src="/latin1.html"></iframe><iframe src="/sjis.html"></iframe>'
         b'<iframe src="/utf16.html"></iframe><iframe src="/gzip.html"></iframe>'
         b'<iframe src="/br.html"></iframe><iframe src="/chunked.html"></iframe>'
         b'<iframe src="/nul.html"></iframe><img src="/pic.png"><img src="/pic.gif">'
         b'<audio src="/sound.wav" preload="auto" controls></audio>'
         b'<script>fetch("/empty")</script></body></html>')

# path → (content type, entity, coding): coding "gzip"/"br" (Content-Encoding), "chunked"
# (Transfer-Encoding) or "" (Content-Length)
PAGES: dict[str, tuple[str, bytes, str]] = {
    "/": ("text/html; charset=utf-8", INDEX, ""),
    "/cp1252.html": ("text/html; charset=windows-1252", CP1252, ""),
    "/latin1.html": ("text/html; charset=ISO-8859-1", LATIN1, ""),
    "/sjis.html": ("text/html; charset=Shift_JIS", SJIS, ""),
    "/utf16.html": ("text/html; charset=utf-16", UTF16, ""),
    "/gzip.html": ("text/html; charset=utf-8", GZIP_HTML, "gzip"),
    "/br.html": ("text/html; charset=utf-8", BR_HTML, "br"),
    "/chunked.html": ("text/html; charset=utf-8", CHUNKED_HTML, "chunked"),
    "/nul.html": ("text/html", NUL_HTML, ""),
    "/pic.png": ("image/png", PNG, ""),
    "/pic.gif": ("image/gif", GIF, ""),
    "/sound.wav": ("audio/wav", WAV, ""),
}


@dataclass(frozen=True)
class Sent:
    """One response as written: ``status``, ``headers`` (name, value) in order, ``entity``."""

    status: int
    headers: tuple[tuple[str, str], ...]
    entity: bytes


class FidelitySite:
    """On 127.0.0.1 (OS-chosen port) from :meth:`start` until :meth:`stop`."""

    def __init__(self) -> None:
        self.sent: dict[tuple[str, str], Sent] = {}
        self.lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                path = self.path.split("?", 1)[0]
                if path == "/empty":
                    return self._answer(path, 204, [("Cache-Control", "no-store")], b"", "")
                if path not in PAGES:
                    return self._answer(path, 404, [("Content-Type", "text/plain")], b"not found", "")
                ctype, entity, coding = PAGES[path]
                rng = self.headers.get("Range", "")
                if path == "/sound.wav" and rng.startswith("bytes="):
                    first_s, _, last_s = rng[6:].partition("-")
                    first = int(first_s or 0)
                    last = min(int(last_s) if last_s else len(entity) - 1, len(entity) - 1)
                    part = entity[first:last + 1]
                    return self._answer(path, 206, [("Content-Type", ctype), ("Accept-Ranges", "bytes"),
                                                    ("Content-Range", f"bytes {first}-{last}/{len(entity)}")],
                                        part, "")
                extra = [("Accept-Ranges", "bytes")] if path == "/sound.wav" else []
                self._answer(path, 200, [("Content-Type", ctype), ("X-Fidelity", path)] + extra, entity, coding)

            def _answer(self, path: str, status: int, headers: list[tuple[str, str]], entity: bytes,
                        coding: str) -> None:
                wire = entity
                if coding == "gzip":
                    wire = gzip.compress(entity)
                    headers = headers + [("Content-Encoding", "gzip")]
                elif coding == "br":
                    wire = brotli.compress(entity)
                    headers = headers + [("Content-Encoding", "br")]
                if coding == "chunked":
                    headers = headers + [("Transfer-Encoding", "chunked")]
                elif status != 204:
                    headers = headers + [("Content-Length", str(len(wire)))]
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()
                if coding == "chunked":
                    for i in range(0, len(wire), 97):
                        piece = wire[i:i + 97]
                        self.wfile.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                else:
                    self.wfile.write(wire)
                self.wfile.flush()
                rng = next((v for k, v in headers if k == "Content-Range"), "")
                with site.lock:
                    site.sent[(path, rng)] = Sent(status, tuple(headers), entity)

        self._site = LoopbackSite(Handler)
        self.base = self._site.url

    def start(self) -> "FidelitySite":
        """Self: the site serves from construction."""
        return self

    def url(self, path: str) -> str:
        return self.base + path

    def stop(self) -> None:
        self._site.stop()

"""Conditional requests for recrawls (issue 27 item 4, decision 331), through the whole local
stack as ``waggle dev up`` runs it, started with the real client ``waggle crawl``.

Two loopback sites that honour validators, each crawled twice in one organization with one page
changed in between: Python's ``http.server`` (``Last-Modified``, answers ``If-Modified-Since``
with 304) and a handler that sends an ``ETag`` and answers ``If-None-Match`` with 304. The sites'
own logs say what they were asked and what they sent: on the recrawl the unchanged main documents
were asked conditionally and answered 304 with no body, the changed one 200 in full, and no page
never seen before was asked conditionally. The recrawl's WACZs hold ``server-not-modified``
revisit records for the 304s, the changed page a ``response``; ``waggle changes`` still counts
unchanged/changed rightly; and every page of the recrawl replays in full from its crawl collection
(the members the ledger lists, originals included) with pywb's own code.
"""

from __future__ import annotations

import email.utils
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
import zipfile
from dataclasses import dataclass
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from warcio.archiveiterator import ArchiveIterator

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent
HELPER = Path(__file__).resolve().parents[1] / "devstack" / "pywb_replay.py"
PROFILE = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
NAMES = ["a.html", "b.html", "c.html"]


@dataclass(frozen=True)
class Hit:
    path: str
    status: int
    body_bytes: int
    conditional: bool  # If-None-Match or If-Modified-Since was sent


class _Handler(SimpleHTTPRequestHandler):
    site: "ValidatorSite"

    def handle_one_request(self) -> None:
        self._status, self._sent = 0, 0
        super().handle_one_request()
        if getattr(self, "command", None):
            cond = "If-None-Match" in self.headers or "If-Modified-Since" in self.headers
            self.site.record(Hit(self.path, self._status, self._sent, cond))

    def send_response(self, code: int, message: str | None = None) -> None:
        self._status = code
        super().send_response(code, message)

    def copyfile(self, source, outputfile) -> None:  # the body bytes the site sent
        data = source.read()
        self._sent += len(data)
        outputfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/robots.txt":
            body = b"User-agent: *\nAllow: /\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self._sent += len(body)
            return
        super().do_GET()

    def log_message(self, format: str, *args) -> None:
        pass


class _ETagHandler(_Handler):
    """An ETag (the content's hash) and no Last-Modified; ``If-None-Match`` → 304."""

    def send_head(self):
        path = self.translate_path(self.path.split("?", 1)[0])
        if not os.path.isfile(path):
            return super().send_head()
        data = Path(path).read_bytes()
        tag = '"' + hashlib.sha256(data).hexdigest()[:20] + '"'
        if self.headers.get("If-None-Match") == tag:
            self.send_response(304)
            self.send_header("ETag", tag)
            self.end_headers()
            return None
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(path))
        self.send_header("Content-Length", str(len(data)))
        self.send_header("ETag", tag)
        self.end_headers()
        return io.BytesIO(data)


class ValidatorSite:
    def __init__(self, root: Path, etag: bool):
        self.hits: list[Hit] = []
        self._lock = threading.Lock()
        handler = type("H", (_ETagHandler if etag else _Handler,), {"site": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(root)))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def record(self, hit: Hit) -> None:
        with self._lock:
            self.hits.append(hit)

    def take(self) -> list[Hit]:
        with self._lock:
            out, self.hits = self.hits, []
        return out

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def page(title: str, mark: str, links: list[str] = ()) -> str:
    items = "".join(f'<li><a href="{n}">{n}</a></li>' for n in links)
    text = f"<p>{title}: " + "words of this page. " * 120 + "</p>"
    return (f'<!doctype html><html><head><title>{title}</title><link rel="stylesheet" href="style.css"></head>'
            f"<body><h1>{title}</h1>{text}<ul>{items}</ul><!-- {mark} --></body></html>")


def crawl(stack, seed: str) -> str:
    done = subprocess.run([str(BIN / "waggle"), "crawl", seed, "--depth", "2", "--max-pages", "10",
                           "--delay-ms", "100", "--parallelism", "1"],
                          env=stack.client_env(), capture_output=True, text=True, timeout=900)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    return re.search(r"crawl ([0-9a-f-]{36}) started", out).group(1)


def collection(stack, crawl_id: str, timeout_s: float = 120) -> dict:
    """The crawl's collection once every captured page's archive is admitted."""
    headers = {"Authorization": f"Bearer {stack.token()}"}
    deadline = time.monotonic() + timeout_s
    while True:
        body = httpx.get(f"{stack.api_url}/api/crawls/{crawl_id}/collection", headers=headers, timeout=30).json()
        if not [m for m in body["missing"] if m["why"] == "not-admitted-yet"]:
            return body
        assert time.monotonic() < deadline, body["missing"]
        time.sleep(1)


def main_records(wacz: bytes, titles: dict[str, str]) -> dict[str, tuple[str, str | None]]:
    """{URL: (WARC-Type, WARC-Profile)} of the response/revisit records of document URLs; the
    page's title as rendered (pages.jsonl) into ``titles``."""
    out: dict[str, tuple[str, str | None]] = {}
    with zipfile.ZipFile(io.BytesIO(wacz)) as z:
        warc = z.read("archive/data.warc.gz")
        print("conditional:", json.loads(z.read("datapackage.json"))["browserhive:capture"].get("conditional"))
        for line in z.read("pages/pages.jsonl").decode().splitlines()[1:]:
            page_line = json.loads(line)
            titles[page_line["url"].rsplit("/", 1)[1]] = page_line.get("title")
    for rec in ArchiveIterator(io.BytesIO(warc)):
        t, uri = rec.rec_headers.get_header("WARC-Type"), rec.rec_headers.get_header("WARC-Target-URI")
        if t in ("response", "revisit") and uri.endswith(".html") and uri not in out:
            out[uri] = (t, rec.rec_headers.get_header("WARC-Profile"))
    return out


def summary(hits: list[Hit]) -> dict:
    with_body = [h for h in hits if h.body_bytes > 0]
    return {"requests": len(hits), "withBody": len(with_body), "bytes": sum(h.body_bytes for h in hits),
            "304": sorted(h.path for h in hits if h.status == 304),
            "conditional": sorted(h.path for h in hits if h.conditional)}


def member_bytes(stack, member: dict) -> bytes:
    """A collection member's WACZ: its path is a ledger path that answers 302 to a signed URL (decision 371)."""
    r = httpx.get(f"{stack.api_url}{member['path']}", follow_redirects=True, timeout=30,
                  headers={"Authorization": f"Bearer {stack.token()}"})
    r.raise_for_status()
    return r.content


@pytest.mark.parametrize("etag", [False, True], ids=["last-modified", "etag"])
def test_recrawl_asks_conditionally_and_replays_in_full(local_stack, tmp_path, etag) -> None:
    root, mark = tmp_path / "site", uuid.uuid4().hex
    root.mkdir()
    (root / "index.html").write_text(page("index", mark, NAMES), encoding="utf-8")
    for n in NAMES:
        (root / n).write_text(page(n, mark), encoding="utf-8")
    (root / "style.css").write_text(f"body {{ color: #123; }} /* {mark} */ " + "p { margin: 0 } " * 100)
    site = ValidatorSite(root, etag)
    try:
        seed = f"{site.url}/index.html"
        first = crawl(local_stack, seed)
        collection(local_stack, first)
        hits1 = site.take()
        time.sleep(1.1)  # Last-Modified has one-second resolution: the change must be later
        (root / "c.html").write_text(page("c.html", mark + " changed"), encoding="utf-8")
        (root / "d.html").write_text(page("d.html", mark), encoding="utf-8")  # new, linked from b
        (root / "b.html").write_text(page("b.html", mark, ["d.html"]), encoding="utf-8")
        second = crawl(local_stack, seed)
        coll = collection(local_stack, second)
        hits2 = site.take()
        third = crawl(local_stack, seed)  # nothing changed since the recrawl: every page is a 304
        collection(local_stack, third)
        hits3 = site.take()
    finally:
        site.stop()
    s1, s2, s3 = summary(hits1), summary(hits2), summary(hits3)
    for name, s in (("first crawl", s1), ("recrawl, 2 pages changed, 1 new", s2), ("unchanged recrawl", s3)):
        print(f"{'etag' if etag else 'last-modified'}: {name}: {s['requests']} requests, {s['withBody']} with "
              f"bodies, {s['bytes']} body bytes, 304s {s['304']}")
    print(f"load average {os.getloadavg()}")
    # the first crawl asked nothing conditionally; the recrawl asked exactly the main documents seen before
    assert s1["conditional"] == [] and s1["304"] == []
    assert s2["conditional"] == ["/a.html", "/b.html", "/c.html", "/index.html"], s2
    assert s2["304"] == ["/a.html", "/index.html"], s2  # b and c changed (b gained a link)
    assert s3["304"] == s3["conditional"] == ["/a.html", "/b.html", "/c.html", "/d.html", "/index.html"], s3
    assert not [h for h in hits3 if h.body_bytes and h.path.endswith(".html")], hits3  # no page sent again
    assert s3["bytes"] < s1["bytes"], (s1, s3)

    # the archives: server-not-modified revisits for the 304s, the changed pages in full
    kinds: dict[str, tuple[str, str | None]] = {}
    titles: dict[str, str] = {}
    members = {m["archiveId"]: m for m in coll["resources"]}
    own = [m for m in coll["resources"] if m.get("role") != "original"]
    for m in own:
        kinds.update(main_records(member_bytes(local_stack, m), titles))
    short = {u.rsplit("/", 1)[1]: k for u, k in kinds.items() if u.startswith(site.url)}
    assert short["index.html"] == ("revisit", PROFILE) and short["a.html"] == ("revisit", PROFILE), short
    assert short["b.html"][0] == short["c.html"][0] == short["d.html"][0] == "response", short
    assert titles["index.html"] == "index" and titles["a.html"] == "a.html", titles  # the 304 pages rendered
    assert any(m.get("role") == "original" for m in members.values()), "the originals are members of the collection"

    # what changed (decision 211): the 304 pages compare unchanged, c and b changed, d new
    done = subprocess.run([str(BIN / "waggle"), "changes", second, "--since", first, "--json"],
                          env=local_stack.client_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    body = json.loads(done.stdout)
    name = lambda entries: sorted(e["url"].rsplit("/", 1)[1] for e in entries)  # noqa: E731
    assert (name(body["unchanged"]), name(body["changed"]), name(body["new"])) == (
        ["a.html", "index.html"], ["b.html", "c.html"], ["d.html"]), body["counts"]

    # replay from the crawl's collection, pywb's own code: every page in full
    files = []
    for i, m in enumerate(coll["resources"]):
        f = tmp_path / f"m{i}.wacz"
        f.write_bytes(member_bytes(local_stack, m))
        files.append(str(f))
    pywb = tmp_path / "pywb"
    pywb.mkdir()
    urls = [f"{site.url}/{n}" for n in ["index.html", *NAMES, "d.html"]]
    replay = subprocess.run([sys.executable, str(HELPER), str(pywb), "c", ",".join(files), *urls],
                            capture_output=True, text=True, timeout=300)
    lines = [json.loads(x) for x in replay.stdout.splitlines() if x.startswith("{")]
    assert len(lines) == 1 + len(urls), replay.stdout[-2000:] + replay.stderr[-2000:]
    for got in lines[1:]:
        want = (root / got["url"].rsplit("/", 1)[1]).read_text(encoding="utf-8")
        assert got["status"] == 200 and got["body"] == want, (got["url"], got["status"], got["body"][:300])

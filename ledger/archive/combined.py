"""One WACZ 1.1.1 for a whole crawl (issue 25 item 4; docs/decisions/154-crawl-download.md).

:func:`build` merges the crawl's member WACZ files into one: every WARC of every member, copied
byte for byte (``archive/<archive id>-<name>``, stored, so CDXJ offsets stay valid), one CDXJ
index sorted across members (``indexes/index.cdx``, each line's ``filename`` renamed), one
``pages/pages.jsonl`` with the pages of every member of the crawl's own (a ``role: "original"``
member — an earlier crawl's archive holding originals of revisits — adds records, not pages), and ``datapackage.json`` with each file's
``sha256`` and size plus ``datapackage-digest.json``. The datapackage's ``waggle`` member says
what the file holds and what it lacks: ``crawlId``, ``members``, ``incomplete`` (members whose
archive is incomplete, with why) and ``missing`` (pages without a member, with why). A signed
member's ``datapackage.json`` and ``datapackage-digest.json`` are carried unchanged as
``signatures/<archive id>-datapackage.signed`` and ``-datapackage-digest.signed``, named in
``signedMembers`` with the paths its WARCs have here (decision 342): the combined file is not
signed as a whole, its members' signatures still verify.

Memory is flat in the crawl's size: members are read from S3 to temporary files (a window of
:data:`FETCH_AHEAD` in flight, merged in order one at a time),
WARC bytes stream through in 1 MiB blocks, index lines and pages go to temporary files and the
index is sorted on disk (runs of :data:`RUN_LINES` lines, then one k-way merge).
"""

from __future__ import annotations

import gzip
import hashlib
import heapq
import io
import json
import tempfile
import zipfile
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import IO, Any

WACZ_VERSION = "1.1.1"
BLOCK = 1024 * 1024
FETCH_AHEAD = 8  # members fetched from S3 at once while one is merged
RUN_LINES = 100_000  # index lines sorted in memory at once (~30 MB at most)


@dataclass
class Built:
    """What :func:`build` wrote: the datapackage and the bytes it copied from the members' WARCs."""

    datapackage: dict[str, Any]
    warc_bytes: int = 0
    members: int = 0
    skipped: list[dict] = field(default_factory=list)


class _Hashing(io.RawIOBase):
    """A write-only wrapper that hashes and counts what passes to ``inner``."""

    def __init__(self, inner: IO[bytes]):
        self.inner, self.sha, self.size = inner, hashlib.sha256(), 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.sha.update(data)
        self.size += len(data)
        return self.inner.write(data)


def _copy_member(out: zipfile.ZipFile, name: str, src: IO[bytes], *, stored: bool, label: str | None = None) -> dict:
    """Stream ``src`` into ``out`` as ``name`` → its datapackage resource (named ``label``, else
    the file's name: resource names must be unique in a datapackage)."""
    info = zipfile.ZipInfo(name, date_time=datetime.now(timezone.utc).timetuple()[:6])
    info.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    with out.open(info, "w", force_zip64=True) as dst:
        h = _Hashing(dst)
        while block := src.read(BLOCK):
            h.write(block)
    return {"name": label or PurePosixPath(name).name, "path": name, "hash": "sha256:" + h.sha.hexdigest(), "bytes": h.size}


def _carry_signature(out: zipfile.ZipFile, zf: zipfile.ZipFile, archive_id: str) -> list[dict]:
    """A signed member's ``datapackage.json`` and ``datapackage-digest.json``, copied unchanged
    to ``signatures/<archive id>-datapackage.signed`` and ``…-datapackage-digest.signed`` → their two
    resources; ``[]`` for an unsigned member."""
    names = set(zf.namelist())
    if not {"datapackage.json", "datapackage-digest.json"} <= names:
        return []
    try:
        digest = json.loads(zf.read("datapackage-digest.json"))
    except ValueError:
        return []
    if not isinstance(digest, dict) or not digest.get("signedData"):
        return []
    carried = []
    # not *.json: frictionless (py-wacz validate) opens a listed JSON with resources as a package
    for name, here in (("datapackage.json", "datapackage.signed"), ("datapackage-digest.json", "datapackage-digest.signed")):
        with zf.open(name) as src:
            carried.append(_copy_member(out, f"signatures/{archive_id}-{here}", src, stored=False,
                                        label=f"{archive_id}-{here}".lower()))
    return carried


def _index_lines(zf: zipfile.ZipFile) -> Iterator[bytes]:
    """Every CDXJ line of a member: plain ``indexes/*.cdx[j]`` or compressed ``*.cdx.gz``."""
    for name in zf.namelist():
        if not name.startswith("indexes/"):
            continue
        if name.endswith((".cdx", ".cdxj")):
            with zf.open(name) as f:
                yield from (line for line in f if line.strip())
        elif name.endswith(".cdx.gz"):
            with zf.open(name) as raw, gzip.open(raw) as f:
                yield from (line for line in f if line.strip())


def _renamed(line: bytes, names: dict[str, str]) -> bytes:
    """The CDXJ line with its ``filename`` mapped through ``names`` (unknown: kept)."""
    key, _, rest = line.rstrip(b"\r\n").partition(b" ")
    ts, _, js = rest.partition(b" ")
    data = json.loads(js)
    if "filename" in data:
        data["filename"] = names.get(data["filename"], data["filename"])
    return key + b" " + ts + b" " + json.dumps(data, separators=(", ", ": ")).encode() + b"\n"


def _sorted(lines_file: Path, tmp: Path) -> Iterator[bytes]:
    """The lines of ``lines_file`` sorted bytewise, with runs on disk (memory ≤ RUN_LINES lines)."""
    runs: list[Path] = []
    with lines_file.open("rb") as f:
        while True:
            chunk = [line for _, line in zip(range(RUN_LINES), f)]
            if not chunk:
                break
            chunk.sort()
            run = tmp / f"run-{len(runs)}"
            run.write_bytes(b"".join(chunk))
            runs.append(run)
    with ExitStack() as stack:
        files = [stack.enter_context(r.open("rb")) for r in runs]
        yield from heapq.merge(*files)


def _fetched_ahead(members: list[dict], fetch: Callable[[dict, Path], None], tmp: Path) -> Iterator[tuple[dict, Path]]:
    """``(member, local WACZ)`` in ``members``' order, fetched by :data:`FETCH_AHEAD` threads: one
    member's S3 round trip overlaps the others' and the zip work (each is latency-bound; a member
    of a page is a few kB). At most FETCH_AHEAD + 1 files are on disk at once; each is deleted
    once consumed. A fetch's exception is raised in order, as if fetched here."""
    with ThreadPoolExecutor(FETCH_AHEAD, thread_name_prefix="waggle-combine-fetch") as pool:
        window: deque[tuple[dict, Path, Future]] = deque()
        todo = iter(enumerate(members))

        def submit() -> None:
            for i, m in todo:
                path = tmp / f"member-{i}.wacz"
                window.append((m, path, pool.submit(fetch, m, path)))
                return

        try:
            for _ in range(FETCH_AHEAD):
                submit()
            while window:
                m, path, done = window.popleft()
                submit()
                done.result()
                try:
                    yield m, path
                finally:
                    path.unlink(missing_ok=True)
        finally:
            for _, path, pending in window:  # a failed build: stop what was asked ahead
                pending.cancel()
            for _, path, pending in window:
                if not pending.cancelled():
                    pending.exception()
                path.unlink(missing_ok=True)


def build(members: list[dict], fetch: Callable[[dict, Path], None], out_path: Path, *, title: str,
          crawl_id: str, missing: list[dict], main_url: str | None = None) -> Built:
    """Write the combined WACZ of ``members`` (``{archiveId, url, complete, reason, role?}`` in crawl
    order; ``fetch(member, path)`` writes its WACZ to ``path``) to ``out_path``.

    ``missing``: the pages without a member (``{url, why, reason}``), said in the datapackage.
    A member that is not a readable WACZ is skipped and said there too (``skipped``)."""
    built = Built(datapackage={})
    resources: list[dict] = []
    incomplete: list[dict] = []
    signed: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="waggle-combine-") as tmpdir, \
            zipfile.ZipFile(out_path, "w", allowZip64=True) as out:
        tmp = Path(tmpdir)
        index_file, pages_file = tmp / "index.unsorted", tmp / "pages"
        with index_file.open("wb") as index, pages_file.open("wb") as pages:
            for m, local in _fetched_ahead(members, fetch, tmp):
                try:
                    zf = zipfile.ZipFile(local)
                except zipfile.BadZipFile:
                    built.skipped.append({"archiveId": m["archiveId"], "url": m.get("url"), "why": "not a WACZ"})
                    continue
                with zf:
                    names: dict[str, str] = {}
                    paths: dict[str, str] = {}  # member path → path here
                    for name in zf.namelist():
                        if name.startswith("archive/") and not name.endswith("/"):
                            new = f"archive/{m['archiveId']}-{PurePosixPath(name).name}"
                            names[PurePosixPath(name).name] = PurePosixPath(new).name
                            paths[name] = new
                            with zf.open(name) as src:
                                res = _copy_member(out, new, src, stored=True)
                            resources.append(res)
                            built.warc_bytes += res["bytes"]
                    carried = _carry_signature(out, zf, m["archiveId"])
                    if carried:
                        resources += carried
                        signed.append({"archiveId": m["archiveId"], "datapackage": carried[0]["path"],
                                       "digest": carried[1]["path"], "warcs": paths})
                    for line in _index_lines(zf):
                        index.write(_renamed(line, names))
                    # an earlier crawl's archive holding originals of this crawl's revisits: its
                    # records stay (self-contained replay), its pages are not this crawl's
                    if m.get("role") != "original" and "pages/pages.jsonl" in zf.namelist():
                        with zf.open("pages/pages.jsonl") as f:
                            for line in f:
                                if line.strip() and b'"format"' not in line[:40]:  # each member's header line
                                    pages.write(line.rstrip(b"\r\n") + b"\n")
                built.members += 1
                if m.get("complete") is False:
                    incomplete.append({"archiveId": m["archiveId"], "url": m.get("url"), "reason": m.get("reason")})
        with pages_file.open("rb") as body:
            header = json.dumps({"format": "json-pages-1.0", "id": "pages", "title": "All pages"}).encode() + b"\n"
            resources.append(_copy_member(out, "pages/pages.jsonl", _Chain(io.BytesIO(header), body), stored=False))
        resources.append(_copy_member(out, "indexes/index.cdx", _LinesReader(_sorted(index_file, tmp)), stored=False))
        package = {
            "profile": "data-package",
            "wacz_version": WACZ_VERSION,
            "title": title,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
            "software": "waggle (one WACZ per crawl, docs/decisions/154)",
            **({"mainPageUrl": main_url} if main_url else {}),
            "resources": resources,
            "waggle": {"crawlId": crawl_id, "members": built.members, "complete": not incomplete and not missing
                       and not built.skipped, "incomplete": incomplete, "missing": missing, "skipped": built.skipped,
                       # the members' own signatures, carried as signed (decision 342): this file
                       # as a whole is not signed; `waggle verify` checks each and its WARCs here
                       "signedMembers": signed},
        }
        package_bytes = (json.dumps(package, indent=2, ensure_ascii=False) + "\n").encode()
        out.writestr("datapackage.json", package_bytes, compress_type=zipfile.ZIP_DEFLATED)
        digest = {"path": "datapackage.json", "hash": "sha256:" + hashlib.sha256(package_bytes).hexdigest()}
        out.writestr("datapackage-digest.json", json.dumps(digest, indent=2) + "\n", compress_type=zipfile.ZIP_DEFLATED)
    built.datapackage = package
    return built


class _Chain(io.RawIOBase):
    """Read ``parts`` one after another."""

    def __init__(self, *parts: IO[bytes]):
        self.parts = list(parts)

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        while self.parts:
            data = self.parts[0].read(n)
            if data:
                return data
            self.parts.pop(0)
        return b""


class _LinesReader(io.RawIOBase):
    """Read an iterator of byte lines as a stream (``read(n)`` with ``n`` > 0)."""

    def __init__(self, lines: Iterator[bytes]):
        self.lines, self.buf = lines, b""

    def readable(self) -> bool:
        return True

    def read(self, n: int = BLOCK) -> bytes:
        n = n if n and n > 0 else BLOCK
        parts, size = [self.buf], len(self.buf)
        while size < n:
            line = next(self.lines, None)
            if line is None:
                break
            parts.append(line)
            size += len(line)
        data = b"".join(parts)
        data, self.buf = data[:n], data[n:]
        return data

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

Memory is flat in the crawl's size (decision 372): members are read from S3 to temporary files
(a window of :data:`FETCH_AHEAD` in flight, merged in order one at a time), WARC bytes stream
through in 1 MiB blocks, index lines and pages go to temporary files and the index is sorted on
disk (runs of at most :data:`RUN_BYTES`, then one k-way merge); the datapackage's per-member
lists (``resources``, ``incomplete``, ``signedMembers``) are spooled to temporary files and
streamed into ``datapackage.json``, and the zip's central directory is spooled to disk as the
entries are written (:class:`_SpoolingZip`) instead of one ``ZipInfo`` per entry held to the end.
``members`` may be any iterable (a generator: one member's dict alive at a time).
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
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import IO, Any

WACZ_VERSION = "1.1.1"
BLOCK = 1024 * 1024
FETCH_AHEAD = 8  # members fetched from S3 at once while one is merged
RUN_BYTES = 1024 * 1024  # index lines sorted in memory at once (bytes): a run, whatever the crawl's size
SPILL_EVERY = 64  # zip entries whose central directory records are moved to disk at once
# the build's own files (pages, index, spooled records and lists) read back in blocks this size:
# 1 MiB blocks held up to 1 MiB of them, i.e. memory grew with the crawl up to that size
SPOOL_BLOCK = 64 * 1024


@dataclass
class Built:
    """What :func:`build` wrote: the datapackage (its per-member lists as counts —
    ``resources``, ``incomplete``, ``signedMembers`` — the file holds them whole) and the bytes it
    copied from the members' WARCs."""

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


class _Sized:
    """Stands for the zip's entry list at its end record: iterates nothing (the records are
    already written), has the length of every entry."""

    def __init__(self, count: int):
        self.count = count

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __len__(self) -> int:
        return self.count


class _SpoolingZip(zipfile.ZipFile):
    """A ``ZipFile`` for writing that moves the central directory records of written entries to
    a temporary file (:meth:`spill`) and copies them back at close: memory stays flat however
    many entries (``zipfile`` keeps one ``ZipInfo`` per entry until it closes). The records are
    made by ``zipfile``'s own writer, so zip64 fields come out as it makes them."""

    def __init__(self, path: Path, spool: IO[bytes]):
        super().__init__(path, "w", allowZip64=True)
        self._spool, self._spooled = spool, 0

    def spill(self) -> None:
        """Move the records of the entries written so far to the spool."""
        if not self.filelist:
            return
        buf = io.BytesIO()
        view = _RecordsOnly(self.filelist, buf)
        zipfile.ZipFile._write_end_record(view)  # type: ignore[arg-type]  # the records, then a 22-byte end record
        self._spool.write(buf.getvalue()[:-22])
        self._spooled += len(self.filelist)
        self.filelist, self.NameToInfo = [], {}

    def _write_end_record(self) -> None:
        self.spill()
        self._spool.seek(0)
        while block := self._spool.read(SPOOL_BLOCK):
            self.fp.write(block)
        self.filelist = _Sized(self._spooled)  # type: ignore[assignment]
        super()._write_end_record()


class _RecordsOnly:
    """What ``ZipFile._write_end_record`` reads, for writing ``filelist``'s records to ``fp``."""

    def __init__(self, filelist: list, fp: IO[bytes]):
        self.filelist, self.fp, self.start_dir = filelist, fp, 0
        self._allowZip64, self._comment, self.mode = True, b"", "w"


class _JsonList:
    """A JSON array written item by item to a temporary file, read back as its bytes."""

    def __init__(self, tmp: Path, name: str):
        self.path, self.count = tmp / name, 0
        self.f = self.path.open("w+b")

    def add(self, item: Any) -> None:
        self.f.write((b",\n    " if self.count else b"\n    ") + json.dumps(item, ensure_ascii=False).encode())
        self.count += 1

    def chunks(self) -> Iterator[bytes]:
        self.f.flush()
        self.f.seek(0)
        yield b"["
        while block := self.f.read(SPOOL_BLOCK):
            yield block
        yield b"\n  ]" if self.count else b"]"


def _copy_member(out: zipfile.ZipFile, name: str, src: IO[bytes], *, stored: bool, label: str | None = None,
                 block: int = BLOCK) -> dict:
    """Stream ``src`` into ``out`` as ``name`` → its datapackage resource (named ``label``, else
    the file's name: resource names must be unique in a datapackage)."""
    info = zipfile.ZipInfo(name, date_time=datetime.now(timezone.utc).timetuple()[:6])
    info.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    with out.open(info, "w", force_zip64=True) as dst:
        h = _Hashing(dst)
        while data := src.read(block):
            h.write(data)
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
    """The lines of ``lines_file`` sorted bytewise, with runs on disk (memory ≈ :data:`RUN_BYTES`)."""
    runs: list[Path] = []
    run_bytes = RUN_BYTES
    with lines_file.open("rb") as f:
        while True:
            chunk, size = [], 0
            for line in f:
                chunk.append(line)
                size += len(line)
                if size >= run_bytes:
                    break
            if not chunk:
                break
            chunk.sort()
            run = tmp / f"run-{len(runs)}"
            run.write_bytes(b"".join(chunk))
            runs.append(run)
    with ExitStack() as stack:
        files = [stack.enter_context(r.open("rb")) for r in runs]
        yield from heapq.merge(*files)


def _fetched_ahead(members: Iterable[dict], fetch: Callable[[dict, Path], None], tmp: Path) -> Iterator[tuple[dict, Path]]:
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


def build(members: Iterable[dict], fetch: Callable[[dict, Path], None], out_path: Path, *, title: str,
          crawl_id: str, missing: list[dict], main_url: str | None = None) -> Built:
    """Write the combined WACZ of ``members`` (``{archiveId, url, complete, reason, role?}`` in crawl
    order, any iterable; ``fetch(member, path)`` writes its WACZ to ``path``) to ``out_path``.

    ``missing``: the pages without a member (``{url, why, reason}``), said in the datapackage.
    A member that is not a readable WACZ is skipped and said there too (``skipped``)."""
    built = Built(datapackage={})
    with tempfile.TemporaryDirectory(prefix="waggle-combine-") as tmpdir:
        tmp = Path(tmpdir)
        resources, incomplete, signed = (_JsonList(tmp, n) for n in ("resources", "incomplete", "signed"))
        with (tmp / "central-directory").open("w+b") as spool, _SpoolingZip(out_path, spool) as out, \
                resources.f, incomplete.f, signed.f:
            package = _merge(members, fetch, out, tmp, built, resources, incomplete, signed, title=title,
                             crawl_id=crawl_id, missing=missing, main_url=main_url)
    built.datapackage = package
    return built


def _merge(members: Iterable[dict], fetch: Callable[[dict, Path], None], out: _SpoolingZip, tmp: Path, built: Built,
           resources: _JsonList, incomplete: _JsonList, signed: _JsonList, *, title: str, crawl_id: str,
           missing: list[dict], main_url: str | None) -> dict[str, Any]:
    """:func:`build`'s work inside its temporary directory and zip → the datapackage (lists as counts)."""
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
                        resources.add(res)
                        built.warc_bytes += res["bytes"]
                carried = _carry_signature(out, zf, m["archiveId"])
                if carried:
                    for res in carried:
                        resources.add(res)
                    signed.add({"archiveId": m["archiveId"], "datapackage": carried[0]["path"],
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
                incomplete.add({"archiveId": m["archiveId"], "url": m.get("url"), "reason": m.get("reason")})
            if len(out.filelist) >= SPILL_EVERY:
                out.spill()
    with pages_file.open("rb") as body:
        header = json.dumps({"format": "json-pages-1.0", "id": "pages", "title": "All pages"}).encode() + b"\n"
        resources.add(_copy_member(out, "pages/pages.jsonl", _Chain(io.BytesIO(header), body), stored=False,
                                   block=SPOOL_BLOCK))
    resources.add(_copy_member(out, "indexes/index.cdx", _LinesReader(_sorted(index_file, tmp)), stored=False,
                               block=SPOOL_BLOCK))
    complete = not incomplete.count and not missing and not built.skipped
    package = {
        "profile": "data-package",
        "wacz_version": WACZ_VERSION,
        "title": title,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "software": "waggle (one WACZ per crawl, docs/decisions/154)",
        **({"mainPageUrl": main_url} if main_url else {}),
        "resources": _LIST,
        "waggle": {"crawlId": crawl_id, "members": built.members, "complete": complete, "incomplete": _LIST,
                   "missing": missing, "skipped": built.skipped,
                   # the members' own signatures, carried as signed (decision 342): this file
                   # as a whole is not signed; `waggle verify` checks each and its WARCs here
                   "signedMembers": _LIST},
    }
    # datapackage.json streamed: its three per-member lists come from their spools
    text = json.dumps(package, indent=2, ensure_ascii=False)
    pieces = text.encode().split(json.dumps(_LIST).encode())
    assert len(pieces) == 4, "the placeholder must appear exactly three times"
    lists = (resources, incomplete, signed)

    def chunks() -> Iterator[bytes]:
        for i, piece in enumerate(pieces):
            yield piece
            if i < 3:
                yield from lists[i].chunks()
        yield b"\n"

    info = zipfile.ZipInfo("datapackage.json", date_time=datetime.now(timezone.utc).timetuple()[:6])
    info.compress_type = zipfile.ZIP_DEFLATED
    with out.open(info, "w", force_zip64=True) as dst:
        h = _Hashing(dst)
        for chunk in chunks():
            h.write(chunk)
    digest = {"path": "datapackage.json", "hash": "sha256:" + h.sha.hexdigest()}
    out.writestr("datapackage-digest.json", json.dumps(digest, indent=2) + "\n", compress_type=zipfile.ZIP_DEFLATED)
    package["resources"], package["waggle"]["incomplete"], package["waggle"]["signedMembers"] = (
        resources.count, incomplete.count, signed.count)
    return package


_LIST = "\u0000waggle-spooled-list\u0000"  # where a spooled list goes in datapackage.json (never in real data)


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

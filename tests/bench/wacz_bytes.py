"""Where a crawl's WACZ bytes go (issue 27 item 1, decision 321): by zip member (the bytes each
member takes in the file: compressed size + its local header and central-directory entry) and,
inside ``archive/data.warc.gz``, by WARC record kind (gzip member bytes per record).

``python -m tests.bench.wacz_bytes DIR...`` prints one table per directory of ``*.wacz``;
``python -m tests.bench.wacz_bytes --one FILE.wacz`` one WACZ member by member, record by record
(gzip member bytes, each header line's share) and ``datapackage.json`` key by key (what deflating
the document without that key saves).
"""

from __future__ import annotations

import io
import json
import sys
import zipfile
import zlib
from collections import Counter
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

ZIP_LOCAL_HEADER, ZIP_CENTRAL_ENTRY = 30, 46  # fixed parts; the name is in both


def record_kind(rec, main_url: str) -> str:
    """``response``/``revisit`` split into main document / sub-resource (and responses under
    1 KB); other record types as they are."""
    kind = rec.rec_headers.get_header("WARC-Type")
    uri = rec.rec_headers.get_header("WARC-Target-URI") or ""
    if kind in ("response", "revisit", "request"):
        role = "main" if uri == main_url else "sub"
        if kind == "response" and role == "sub":
            length = int(rec.rec_headers.get_header("Content-Length") or 0)
            role += " <1KB" if length < 1500 else ""
        return f"{kind} ({role})"
    return kind


def breakdown(files: list[Path]) -> dict[str, Counter]:
    """``{"members": Counter(path → bytes), "records": Counter(kind → bytes), "counts":
    Counter(kind → records)}`` summed over ``files``; member bytes add up to the files' sizes."""
    import json
    members, records, counts = Counter(), Counter(), Counter()
    for f in files:
        data = f.read_bytes()
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            accounted = 0
            for info in z.infolist():
                n = info.compress_size + ZIP_LOCAL_HEADER + ZIP_CENTRAL_ENTRY + 2 * len(info.filename.encode()) \
                    + len(info.extra)
                members[info.filename] += n
                accounted += n
            members["(zip end record)"] += len(data) - accounted
            main_url = json.loads(z.read("datapackage.json"))["mainPageURL"]
            warc = z.read("archive/data.warc.gz")
        it = ArchiveIterator(io.BytesIO(warc))
        for rec in it:
            kind = record_kind(rec, main_url)
            rec.content_stream().read()
            it.read_to_end()
            records[kind] += it.get_record_length()
            counts[kind] += 1
    return {"members": members, "records": records, "counts": counts}


def table(files: list[Path]) -> str:
    b = breakdown(files)
    total = sum(f.stat().st_size for f in files)
    lines = [f"{len(files)} WACZ files, {total:,} bytes ({total / max(1, len(files)):,.0f} per file)"]
    for title, key in (("zip member", "members"), ("WARC record", "records")):
        lines.append(f"  by {title}:")
        for name, n in b[key].most_common():
            extra = f" ({b['counts'][name]} records, {n / b['counts'][name]:,.0f} each)" if key == "records" else ""
            lines.append(f"    {name:40} {n:>10,} B {100 * n / total:5.1f} %{extra}")
    return "\n".join(lines)


def _deflated(data: bytes) -> int:
    c = zlib.compressobj(6, zlib.DEFLATED, -15)  # raw deflate at zipfile's default level: a member's size
    return len(c.compress(data) + c.flush())


def _gzipped(data: bytes) -> int:
    c = zlib.compressobj(6, zlib.DEFLATED, 31)  # gzip at the WARC writer's level (warc._Gzip6)
    return len(c.compress(data) + c.flush())


def _key_costs(doc: dict, prefix: str = "") -> list[tuple[str, int]]:
    """(key path, deflated bytes the document saves without it) for each key, two levels deep."""
    def size(d: dict) -> int:
        return _deflated(json.dumps(d, separators=(",", ":"), ensure_ascii=False).encode() + b"\n")

    whole, out = size(doc), []
    for k in doc:
        out.append((prefix + k, whole - size({kk: v for kk, v in doc.items() if kk != k})))
        if isinstance(doc[k], dict) and not prefix:
            for kk in doc[k]:
                inner = {**doc, k: {x: v for x, v in doc[k].items() if x != kk}}
                out.append((f"{k}.{kk}", whole - size(inner)))
    return out


def one(path: Path) -> str:
    """One WACZ, member by member, record by record, and its datapackage key by key."""
    data = path.read_bytes()
    lines = [f"{path.name}: {len(data):,} bytes"]
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        accounted = 0
        for info in z.infolist():
            head = ZIP_LOCAL_HEADER + ZIP_CENTRAL_ENTRY + 2 * len(info.filename.encode()) + len(info.extra)
            accounted += info.compress_size + head
            lines.append(f"  member {info.filename:32} {info.compress_size + head:>6,} B"
                         f" (data {info.compress_size:,} of {info.file_size:,}, zip entry {head})")
        lines.append(f"  zip end record {len(data) - accounted} B")
        warc = z.read("archive/data.warc.gz")
        doc = json.loads(z.read("datapackage.json"))
    it = ArchiveIterator(io.BytesIO(warc))
    for rec in it:
        kind = rec.rec_headers.get_header("WARC-Type")
        rest = (rec.http_headers.to_bytes() if rec.http_headers else b"") + rec.content_stream().read()
        it.read_to_end()

        def plain(headers: list) -> bytes:
            return ("WARC/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n").encode() + rest

        whole = plain(rec.rec_headers.headers)
        lines.append(f"  record {kind:10} {it.get_record_length():>6,} B gzip'd ({len(whole):,} B plain,"
                     f" HTTP head + payload {len(rest):,} B)")
        for k, _ in rec.rec_headers.headers:
            without = _gzipped(plain([(kk, vv) for kk, vv in rec.rec_headers.headers if kk != k]))
            lines.append(f"      {k:28} {_gzipped(whole) - without:>4} B")
    lines.append("  datapackage.json keys (deflated bytes without the key):")
    for k, n in sorted(_key_costs(doc), key=lambda kv: -kv[1]):
        lines.append(f"      {k:40} {n:>5} B")
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        for f in sys.argv[2:]:
            print(one(Path(f)))
        sys.exit(0)
    for d in sys.argv[1:]:
        print(d)
        print(table(sorted(Path(d).glob("*.wacz"))))

"""Where a crawl's WACZ bytes go (issue 27 item 1, decision 321): by zip member (the bytes each
member takes in the file: compressed size + its local header and central-directory entry) and,
inside ``archive/data.warc.gz``, by WARC record kind (gzip member bytes per record).

``python -m tests.bench.wacz_bytes DIR...`` prints one table per directory of ``*.wacz``.
"""

from __future__ import annotations

import io
import sys
import zipfile
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


if __name__ == "__main__":
    for d in sys.argv[1:]:
        print(d)
        print(table(sorted(Path(d).glob("*.wacz"))))

"""The combined WACZ's build keeps memory flat in the number of members (issue 25 item 6,
decision 372): a crawl of 3,000 members peaks no higher than one of 1,000 plus a few bytes per
member — the zip's central directory, the datapackage's lists and the index runs are on disk,
the members come from an iterator. Measured with tracemalloc (Python allocations of the build
itself), real zip files; the file still opens, lists every member and carries a datapackage
whose hash matches."""

from __future__ import annotations

import hashlib
import json
import tracemalloc
import zipfile
from pathlib import Path

from ledger.archive import combined
from tests.archive.helpers import wacz_bytes

SMALL, LARGE = 1000, 3000


def _peak_build(n: int, member: bytes, out: Path) -> int:
    """Peak bytes allocated while building ``n`` members (each ``member``'s bytes)."""

    def members():
        for i in range(n):
            yield {"archiveId": f"{i:08d}-0000-4000-8000-000000000000", "url": f"https://example.org/{i}",
                   "complete": i % 2 == 0, "reason": None if i % 2 == 0 else "archive incomplete: test"}

    tracemalloc.start()
    try:
        combined.build(members(), lambda m, path: path.write_bytes(member), out, title="waggle crawl memory",
                       crawl_id="00000000-0000-4000-8000-000000000001", missing=[], main_url="https://example.org/0")
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_builds_peak_memory_does_not_grow_with_its_members(tmp_path, monkeypatch):
    # index runs of 64 kB (1 MiB in use): both crawls here are past every fixed buffer of the build
    # (index runs, 64 kB read-back blocks), as crawls of thousands of pages are with the real bound
    monkeypatch.setattr(combined, "RUN_BYTES", 64 * 1024)
    member = wacz_bytes("https://example.org/")
    small = _peak_build(SMALL, member, tmp_path / "small.wacz")
    large = _peak_build(LARGE, member, tmp_path / "large.wacz")
    per_member = (large - small) / (LARGE - SMALL)
    # before decision 372: ≈ 0.8 kB per member (a ZipInfo and a datapackage resource each, the
    # whole index sorted at once, the incomplete list); now the rest is the per-member dicts'
    # churn, not held
    assert per_member < 100, f"peak {small:,} B for {SMALL} members, {large:,} B for {LARGE}: {per_member:.0f} B/member"
    with zipfile.ZipFile(tmp_path / "large.wacz") as zf:
        names = zf.namelist()
        package_bytes = zf.read("datapackage.json")
        digest = json.loads(zf.read("datapackage-digest.json"))
        index = zf.read("indexes/index.cdx").splitlines()
        assert zf.testzip() is None  # every entry's CRC, through the central directory written from disk
    assert sum(n.startswith("archive/") for n in names) == LARGE
    package = json.loads(package_bytes)
    assert digest["hash"] == "sha256:" + hashlib.sha256(package_bytes).hexdigest()
    assert len(package["resources"]) == LARGE + 2  # each WARC, pages.jsonl, the index
    assert {r["path"] for r in package["resources"]} == {n for n in names if not n.startswith("datapackage")}
    assert package["waggle"]["members"] == LARGE and package["waggle"]["complete"] is False
    assert len(package["waggle"]["incomplete"]) == LARGE // 2 and package["waggle"]["signedMembers"] == []
    assert len(index) == LARGE and index == sorted(index)

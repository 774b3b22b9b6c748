"""The ledger's WACZ check (issue 13 item 6): a WACZ without ``pages/pages.jsonl``, without its
CDXJ index, or whose ``datapackage.json`` does not match a file is never admitted as complete —
on the level report's fast path nor through the reconciler — and the reason reaches
``GET /api/crawls/{id}`` and ``waggle crawls ID``. Real WACZ files (the capture server's
packager, and py-wacz), the S3 stand-in with ranged reads, real Postgres."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path

import pytest

from ledger.archive.admission import admit_level
from ledger.archive.reconciler import reconcile
from ledger.archive.wacz_check import check_wacz, check_zip
from ledger.client.render import summary_view
from tests.archive.helpers import manifest, put_json, put_wacz, wacz_bytes, warc_gz

pytestmark = pytest.mark.anyio
BROKEN = [
    ({"drop": ("pages/pages.jsonl",)}, "lacks pages/pages.jsonl"),
    ({"drop": ("indexes/index.cdx",)}, "lacks its CDXJ index"),
    ({"drop": ("datapackage.json",)}, "lacks datapackage.json"),
    ({"tamper": "archive/data.warc.gz"}, "archive/data.warc.gz: sha256 does not match"),
    ({"tamper": "pages/pages.jsonl"}, "pages/pages.jsonl: sha256 does not match"),
    ({"tamper": "indexes/index.cdx"}, "indexes/index.cdx: sha256 does not match"),
]


def check_bytes(data: bytes, **kw):
    return check_zip(len(data), lambda start, n: data[start:start + n], **kw)


def rezip(data: bytes, change) -> bytes:
    """The WACZ with ``change(name, bytes) -> (name, bytes) | None`` applied to each member."""
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            got = change(info.filename, src.read(info.filename))
            if got is not None:
                dst.writestr(got[0], got[1])
    return out.getvalue()


def edit_datapackage(data: bytes, edit) -> bytes:
    def change(name, body):
        if name == "datapackage.json":
            doc = json.loads(body)
            edit(doc)
            return name, json.dumps(doc).encode()
        return name, body
    return rezip(data, change)


# -- the rules over a ranged source ------------------------------------------------------------

def test_whole_wacz_passes_with_every_hash_compared():
    check = check_bytes(wacz_bytes())
    assert check.problem is None and check.hashed


@pytest.mark.parametrize("broken, needle", BROKEN)
def test_each_kind_of_broken_wacz_is_named(broken, needle):
    check = check_bytes(wacz_bytes(**broken))
    assert check.problem is not None and needle in check.problem


@pytest.mark.parametrize("edit, needle", [
    (lambda d: d["resources"].append({"path": "archive/gone.warc.gz", "hash": "sha256:00", "bytes": 1}),
     "lists 'archive/gone.warc.gz', which the WACZ does not contain"),
    (lambda d: d["resources"][0].update(bytes=d["resources"][0]["bytes"] + 1), "datapackage.json says"),
    (lambda d: d["resources"][1].update(hash="crc:1234"), "no usable hash"),
    (lambda d: d.pop("resources"), "no resources list"),
])
def test_datapackage_faults(edit, needle):
    check = check_bytes(edit_datapackage(wacz_bytes(), edit))
    assert needle in (check.problem or ""), check


@pytest.mark.parametrize("data, needle", [
    (b"", "not a readable zip"), (b"PK\x03\x04 not really", "not a readable zip"),
    (b"x" * 100_000, "not a readable zip"),
])
def test_not_a_zip(data, needle):
    assert needle in (check_bytes(data).problem or "")


def test_datapackage_not_json():
    data = rezip(wacz_bytes(), lambda n, b: (n, b"{nope") if n == "datapackage.json" else (n, b))
    assert check_bytes(data).problem == "datapackage.json is not JSON"


def test_compressed_index_pair_counts_as_the_index():
    data = rezip(wacz_bytes(), lambda n, b: None if n == "indexes/index.cdx" else (n, b))
    assert "lacks its CDXJ index" in check_bytes(data).problem
    with_pair = io.BytesIO(data)
    with zipfile.ZipFile(with_pair, "a") as z:
        z.writestr("indexes/index.cdx.gz", b"x")
        z.writestr("indexes/index.idx", b"!meta 0 {}\n")
    # past the index rule; the datapackage still lists the plain index it no longer has
    assert check_bytes(with_pair.getvalue()).problem == (
        "datapackage.json lists 'indexes/index.cdx', which the WACZ does not contain")


def test_over_the_hash_cap_only_sizes_are_compared():
    big = wacz_bytes(pad_bytes=2_000_000)
    check = check_bytes(big, hash_max_bytes=1_000_000)
    assert check.problem is None and not check.hashed
    assert check.bytes_read < 200_000  # the tail, datapackage.json and the index, not the 2 MB member
    tampered = wacz_bytes(pad_bytes=2_000_000, tamper="pages/pages.jsonl")
    assert check_bytes(tampered, hash_max_bytes=1_000_000).problem is None  # the documented limit
    assert "does not match" in check_bytes(tampered).problem


def test_a_wacz_written_by_py_wacz_passes(tmp_path: Path):
    warc = tmp_path / "data.warc.gz"
    warc.write_bytes(warc_gz("https://example.org/"))
    pages = tmp_path / "pages.jsonl"
    pages.write_text('{"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}\n'
                     '{"id": "p1", "url": "https://example.org/", "ts": "2026-09-24T00:00:00Z"}\n')
    out = tmp_path / "py.wacz"
    subprocess.run([str(Path(sys.executable).parent / "wacz"), "create", "-o", str(out), "-c", "-p", str(pages), str(warc)],
                   check=True, capture_output=True, timeout=120)
    assert {"indexes/index.cdx.gz", "indexes/index.idx"} <= set(zipfile.ZipFile(out).namelist())  # py-wacz's index pair
    data = out.read_bytes()
    check = check_bytes(data)
    assert check.problem is None and check.hashed, check


# -- through S3 (ranged reads) -------------------------------------------------------------------

async def test_ranged_reads_from_s3(s3_server, s3store):
    small, big = f"{uuid.uuid4()}.wacz", f"{uuid.uuid4()}.wacz"
    put_wacz(s3_server, f"s3://{s3_server.bucket}/{small}")
    put_wacz(s3_server, f"s3://{s3_server.bucket}/{big}", wacz_bytes(pad_bytes=3_000_000))
    one = await check_wacz(s3store, f"s3://{s3_server.bucket}/{small}")
    assert (one.problem, one.hashed, one.requests) == (None, True, 2)  # HEAD + one GET of the tail
    capped = await check_wacz(s3store, f"s3://{s3_server.bucket}/{big}", hash_max_bytes=1_000_000)
    # + one small GET of the CDXJ index, which lies before the 3 MB member here (decision 181)
    assert capped.problem is None and not capped.hashed and capped.requests == 3 and capped.bytes_read <= 66 * 1024
    whole = await check_wacz(s3store, f"s3://{s3_server.bucket}/{big}")
    assert whole.hashed and whole.bytes_read >= 3_000_000
    missing = await check_wacz(s3store, f"s3://{s3_server.bucket}/nothing-{uuid.uuid4()}.wacz")
    assert "missing" in missing.problem


# -- admission paths -------------------------------------------------------------------------------

def _stage(s3_server, broken: dict | None, *, status="success"):
    task = str(uuid.uuid4())
    key = f"{task}_crawl-1.result.json"
    m = manifest(task, status=status)
    put_json(s3_server, key, m)
    if status == "success":
        put_wacz(s3_server, m["artifacts"]["wacz"], wacz_bytes(**broken) if broken is not None else None)
    return task, key


@pytest.mark.parametrize("broken, needle", BROKEN[:4])
async def test_level_report_path_never_admits_a_broken_wacz_as_complete(pool, s3_server, s3store, broken, needle):
    good, good_key = _stage(s3_server, None)
    bad, bad_key = _stage(s3_server, broken)
    results = [{"url": "https://example.org/", "status": "captured", "taskId": t,
                "manifestLocation": f"s3://{s3_server.bucket}/{k}"} for t, k in ((good, good_key), (bad, bad_key))]
    results.append({"url": "https://example.org/f", "status": "failed", "taskId": bad,
                    "manifestLocation": f"s3://{s3_server.bucket}/{bad_key}"})
    async with pool.connection() as conn, conn.transaction():
        got = await admit_level(conn, s3store, bucket=s3_server.bucket, org_id="acme", submitted_by="alice",
                                results=results)
    assert got.registered == 2 and got.recovered == set()  # a broken WACZ does not recover a failed page
    rows = await _archives(pool)
    assert rows[good] == (True, None)
    assert rows[bad][0] is False and needle in rows[bad][1]


@pytest.mark.parametrize("broken, needle", BROKEN[:4])
async def test_reconciler_path_never_admits_a_broken_wacz_as_complete(pool, s3_server, s3store, broken, needle):
    bad, bad_key = _stage(s3_server, broken)
    async with pool.connection() as conn:
        await conn.execute("INSERT INTO capture_submissions (task_id, correlation_id, org_id, submitted_by, manifest_key)"
                           " VALUES (%s, 'crawl-1', 'acme', 'alice', %s)", (bad, bad_key))
    got = await reconcile(pool, s3store)
    assert got.registered == 1
    rows = await _archives(pool)
    assert rows[bad][0] is False and needle in rows[bad][1]


async def test_store_down_during_the_check_admits_nothing(pool, s3_server, s3store):
    from ledger.s3 import S3Store

    task, key = _stage(s3_server, None)
    m = await s3store.get_json(key, 1 << 20)
    dead = S3Store("http://127.0.0.1:9", s3_server.bucket, s3_server.region, s3_server.access_key_id,
                   s3_server.secret_access_key, connect_timeout_s=0.5, read_timeout_s=0.5)

    class ManifestsUpWaczDown:  # the manifest read answers; the WACZ's store does not
        client = dead.client

        async def get_json(self, k, max_bytes, bucket=None):
            return m if k == key else None

    async with pool.connection() as conn, conn.transaction():
        got = await admit_level(conn, ManifestsUpWaczDown(), bucket=s3_server.bucket, org_id="acme", submitted_by=None,
                                results=[{"url": "https://example.org/", "status": "captured", "taskId": task,
                                          "manifestLocation": f"s3://{s3_server.bucket}/{key}"}])
    assert (got.registered, got.errors) == (0, 1)
    assert await _archives(pool) == {}


async def _archives(pool) -> dict:
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT task_id, wacz_complete, wacz_problem FROM archives")
        return {str(r["task_id"]): (r["wacz_complete"], r["wacz_problem"]) for r in await cur.fetchall()}


# -- the reason is visible ---------------------------------------------------------------------

def test_summary_view_names_incomplete_archives():
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(summary_view({"crawlId": "c", "state": "succeeded", "archivesIncomplete": 1,
                                "archiveProblems": [{"url": "https://example.org/",
                                                     "reason": "the WACZ lacks pages/pages.jsonl"}]}))
    text = console.export_text()
    assert "archives incomplete" in text and "the WACZ lacks pages/pages.jsonl" in text

"""Signed WACZ (issue 24 item 6), with the real signing parts: authsign (its certificate from
pebble over ACME on loopback, its timestamps from the sigstore timestamp authority) signs a WACZ
packaged by the capture server's packager; the ledger's check (admission and ``waggle verify``)
accepts it, and refuses every tampered neighbour with the reason: a changed WARC, a changed
``datapackage.json`` (with or without a matching digest), a signature over another hash, an
untrusted root. Real S3 stand-in and Postgres for the admission paths."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tempfile
import uuid
import zipfile
from pathlib import Path

import pytest
import yaml

from waggle_capture.signing import SigningFailed, sign_digest
from waggle_capture.wacz import build_wacz, pages_jsonl
from ledger.archive.admission import admit_level
from ledger.archive.offline import EXIT_FAILED, EXIT_UNSIGNED, EXIT_VERIFIED
from ledger.archive.reconciler import reconcile
from ledger.archive.wacz_check import check_zip
from tests.archive.helpers import manifest, put_json, put_wacz, wacz_bytes, warc_gz

pytestmark = pytest.mark.anyio


def signed_wacz(signer, url: str = "https://example.org/") -> bytes:
    """A WACZ packaged as the capture server does, signed by the stack's authsign."""
    from datetime import datetime, timezone

    with tempfile.TemporaryDirectory() as tmp:
        warc = Path(tmp) / "data.warc.gz"
        warc.write_bytes(warc_gz(url))
        cdxj = f'org,example)/ 20260924000000 {{"url": "{url}", "mime": "text/html", "status": "200"}}\n'.encode()
        out = Path(tmp) / "x.wacz"
        created = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        build_wacz(out, warc=warc, cdxj=cdxj, pages=pages_jsonl(str(uuid.uuid4()), url, created, "x"), extra=[],
                   datapackage={"title": "signed test", "created": created},
                   sign=lambda digest, when: sign_digest(signer, digest, when)[0])
        return out.read_bytes()


@pytest.fixture(scope="module")
def good(signing_stack) -> bytes:
    return signed_wacz(signing_stack.signer())


def check(data: bytes, roots) -> object:
    return check_zip(len(data), lambda start, n: data[start:start + n], trusted_roots=str(roots))


def rezip(data: bytes, change) -> bytes:
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            name, body = change(info.filename, src.read(info.filename))
            dst.writestr(name, body)
    return out.getvalue()


def flip_last_byte(member: str):
    return lambda name, body: (name, body[:-1] + bytes([body[-1] ^ 1]) if name == member else body)


def retitled(data: bytes, *, fix_digest: bool) -> bytes:
    """``datapackage.json`` with another title; with ``fix_digest`` the digest's ``hash`` is
    recomputed too (the signature still covers the old one)."""
    import hashlib

    src = zipfile.ZipFile(io.BytesIO(data))
    package = json.loads(src.read("datapackage.json"))
    package["title"] = "not what was signed"
    new_bytes = (json.dumps(package, indent=2) + "\n").encode()
    digest = json.loads(src.read("datapackage-digest.json"))
    if fix_digest:
        digest["hash"] = "sha256:" + hashlib.sha256(new_bytes).hexdigest()

    def change(name, body):
        if name == "datapackage.json":
            return name, new_bytes
        if name == "datapackage-digest.json":
            return name, json.dumps(digest).encode()
        return name, body
    return rezip(data, change)


def test_a_signed_wacz_verifies_with_its_domain_and_timestamp(good, signing_stack):
    digest = json.loads(zipfile.ZipFile(io.BytesIO(good)).read("datapackage-digest.json"))
    signed = digest["signedData"]
    assert signed["hash"] == digest["hash"] and signed["domain"] == "localhost"
    assert "BEGIN CERTIFICATE" in signed["domainCert"] and signed["timeSignature"] and signed["timestampCert"]
    got = check(good, signing_stack.trusted_roots)
    assert (got.problem, got.refusal) == (None, None), got
    assert (got.signature.signed, got.signature.verified, got.signature.domain) == (True, True, "localhost")
    assert got.signature.timestamp and got.hashed


TAMPERED = [
    (lambda d: rezip(d, flip_last_byte("archive/data.warc.gz")), "archive/data.warc.gz: sha256 does not match"),
    (lambda d: rezip(d, flip_last_byte("pages/pages.jsonl")), "pages/pages.jsonl: sha256 does not match"),
    (lambda d: retitled(d, fix_digest=False), "datapackage.json does not match the hash in datapackage-digest.json"),
    (lambda d: retitled(d, fix_digest=True), "the signature is over another datapackage.json hash"),
]


@pytest.mark.parametrize("tamper, reason", TAMPERED)
def test_a_tampered_signed_wacz_is_refused_with_the_reason(good, signing_stack, tamper, reason):
    got = check(tamper(good), signing_stack.trusted_roots)
    assert got.signature.signed and got.refusal is not None and reason in got.refusal, got


def test_a_signature_from_an_untrusted_root_is_refused(good, signing_stack, tmp_path):
    roots = yaml.safe_load(signing_stack.trusted_roots.read_text())
    other = tmp_path / "roots.yaml"
    other.write_text(yaml.safe_dump({"domain_cert_roots": ["00" * 32],
                                     "timestamp_cert_roots": roots["timestamp_cert_roots"]}))
    got = check(good, other)
    assert got.refusal is not None and "Trusted Domain Root Cert" in got.refusal, got
    assert check(good, signing_stack.trusted_roots).refusal is None  # the same file, trusted roots


def test_the_signer_refuses_a_wrong_token(signing_stack):
    with pytest.raises(SigningFailed, match="HTTP 403"):
        sign_digest(signing_stack.signer(token="wrong"), "sha256:" + "0" * 64, "2026-01-01T00:00:00Z")


# -- waggle verify FILE.wacz --------------------------------------------------------------------

def waggle_verify(path: Path, roots: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import sys; sys.argv[0] = 'waggle'; from ledger.cli import main; main()",
                           "verify", str(path), "--trusted-roots", str(roots)],
                          capture_output=True, text=True, timeout=120)


def test_waggle_verify_accepts_the_good_file_and_names_the_fault_of_a_tampered_one(good, signing_stack, tmp_path):
    ok = tmp_path / "good.wacz"
    ok.write_bytes(good)
    done = waggle_verify(ok, signing_stack.trusted_roots)
    assert done.returncode == EXIT_VERIFIED, done.stdout + done.stderr
    assert "signature verified" in done.stdout and "signed by: localhost" in done.stdout
    bad = tmp_path / "tampered.wacz"
    bad.write_bytes(rezip(good, flip_last_byte("archive/data.warc.gz")))
    done = waggle_verify(bad, signing_stack.trusted_roots)
    assert done.returncode == EXIT_FAILED, done.stdout + done.stderr
    assert "does NOT verify" in done.stdout and "archive/data.warc.gz: sha256 does not match" in done.stdout
    unsigned = tmp_path / "unsigned.wacz"
    unsigned.write_bytes(wacz_bytes())
    done = waggle_verify(unsigned, signing_stack.trusted_roots)
    assert done.returncode == EXIT_UNSIGNED and "not signed" in done.stdout, done.stdout + done.stderr


def test_waggle_verify_tells_an_untrusted_root_from_a_tampered_file(good, signing_stack, tmp_path):
    """Against roots that do not hold the signer's (authsign's bundled ones, run outside the
    checkout that signed): the intact file is said to be unverified for its root, hashes
    matching; the tampered one is said to be tampered, whatever the root."""
    roots = yaml.safe_load(signing_stack.trusted_roots.read_text())
    other = tmp_path / "roots.yaml"
    other.write_text(yaml.safe_dump({"domain_cert_roots": ["00" * 32],
                                     "timestamp_cert_roots": roots["timestamp_cert_roots"]}))
    ok = tmp_path / "good.wacz"
    ok.write_bytes(good)
    done = waggle_verify(ok, other)
    assert done.returncode == EXIT_FAILED, done.stdout + done.stderr
    assert "does not chain to a trusted root" in done.stdout and "matches its hash" in done.stdout, done.stdout
    bad = tmp_path / "tampered.wacz"
    bad.write_bytes(rezip(good, flip_last_byte("pages/pages.jsonl")))
    done = waggle_verify(bad, other)
    assert done.returncode == EXIT_FAILED and "pages/pages.jsonl: sha256 does not match" in done.stdout, done.stdout
    assert "trusted root" not in done.stdout.splitlines()[0]


# -- admission: both paths ----------------------------------------------------------------------

def _stage(s3_server, data: bytes) -> tuple[str, str, dict]:
    task = str(uuid.uuid4())
    key = f"{task}_crawl-1.result.json"
    m = manifest(task, signature={"signed": True, "domain": "localhost"})
    put_json(s3_server, key, m)
    put_wacz(s3_server, m["artifacts"]["wacz"], data)
    return task, key, m


async def _rows(pool) -> dict:
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT task_id, signed, signature_domain, signature_verified FROM archives")
        return {str(r["task_id"]): (r["signed"], r["signature_domain"], r["signature_verified"])
                for r in await cur.fetchall()}


async def test_level_report_path_admits_the_signed_wacz_and_not_the_tampered_one(pool, s3_server, s3store, good,
                                                                                 signing_stack):
    ok, ok_key, _ = _stage(s3_server, good)
    bad, bad_key, _ = _stage(s3_server, rezip(good, flip_last_byte("archive/data.warc.gz")))
    results = [{"url": "https://example.org/", "status": "captured", "taskId": t,
                "manifestLocation": f"s3://{s3_server.bucket}/{k}"} for t, k in ((ok, ok_key), (bad, bad_key))]
    async with pool.connection() as conn, conn.transaction():
        got = await admit_level(conn, s3store, bucket=s3_server.bucket, org_id="acme", submitted_by=None,
                                results=results, trusted_roots=str(signing_stack.trusted_roots))
    assert (got.registered, got.skipped) == (1, 1)
    assert await _rows(pool) == {ok: (True, "localhost", True)}


async def test_reconciler_refuses_the_tampered_signed_wacz_and_keeps_the_reason(pool, s3_server, s3store, good,
                                                                                signing_stack):
    ok, ok_key, _ = _stage(s3_server, good)
    bad, bad_key, _ = _stage(s3_server, retitled(good, fix_digest=True))
    async with pool.connection() as conn:
        for task, key in ((ok, ok_key), (bad, bad_key)):
            await conn.execute("INSERT INTO capture_submissions (task_id, correlation_id, org_id, submitted_by,"
                               " manifest_key) VALUES (%s, 'crawl-1', 'acme', 'alice', %s)", (task, key))
    got = await reconcile(pool, s3store, trusted_roots=str(signing_stack.trusted_roots))
    assert (got.registered, got.skipped) == (1, 1)
    assert await _rows(pool) == {ok: (True, "localhost", True)}
    async with pool.connection() as conn:
        reason = (await (await conn.execute("SELECT verify_error FROM capture_submissions WHERE task_id = %s",
                                            (bad,))).fetchone())["verify_error"]
    assert reason.startswith("archive not admitted: the signature is over another datapackage.json hash"), reason
    again = await reconcile(pool, s3store, trusted_roots=str(signing_stack.trusted_roots))
    assert again.pending == 0  # a refusal is final: the reconciler leaves it alone

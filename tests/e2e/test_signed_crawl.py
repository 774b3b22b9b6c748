"""Signed WACZ through the whole local stack (issue 24 item 6): ``waggle dev up`` runs pebble,
the sigstore timestamp authority and authsign; a crawl that asks for ``signing`` gets WACZ files
that the capture servers had signed (wacz-auth ``signedData`` in ``datapackage-digest.json``),
the ledger verified each at admission (archive rows signed / domain / verified, shown by the
API), and the downloaded file passes ``waggle verify`` offline — while a tampered copy of it
does not. A crawl without ``signing`` stays unsigned."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
import zipfile

import httpx
import psycopg
import pytest

from tests.fixtures.logged_site import LoggedSite

pytestmark = pytest.mark.e2e


def crawl(local_stack, seed: str, **extra) -> tuple[str, dict]:
    headers = {"Authorization": f"Bearer {local_stack.token()}"}
    with httpx.Client(base_url=local_stack.api_url, headers=headers, timeout=30) as api:
        r = api.post("/api/crawls", json={"seeds": [seed], "maxDepth": 1, "maxPages": 5, "scripts": [],
                                          "perHostDelayMs": 200, **extra})
        assert r.status_code == 202, r.text
        crawl_id = r.json()["crawlId"]
        deadline = time.monotonic() + 300
        while (view := api.get(f"/api/crawls/{crawl_id}").json())["state"] == "running":
            assert time.monotonic() < deadline, view
            time.sleep(0.5)
        deadline = time.monotonic() + 60  # archives are listed once admitted
        while len(listed := api.get("/api/archives", params={"crawl": crawl_id}).json()["archives"]) \
                < view["pagesCaptured"]:
            assert time.monotonic() < deadline, listed
            time.sleep(0.5)
    return crawl_id, {**view, "archives": listed}


def download(local_stack, archive_id: str) -> bytes:
    headers = {"Authorization": f"Bearer {local_stack.token()}"}
    with httpx.Client(base_url=local_stack.api_url, headers=headers, timeout=30) as api:
        url = api.post(f"/api/archives/{archive_id}/url").json()["url"]
    return httpx.get(url, timeout=30).content


def waggle_verify(local_stack, path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import sys; sys.argv[0] = 'waggle'; from ledger.cli import main; main()",
                           "verify", str(path)], env=local_stack.client_env(), capture_output=True, text=True,
                          timeout=120)


def test_dev_status_shows_the_signing_services_healthy(local_stack):
    from devstack.stack import status

    rows = {r["name"]: r for r in status(local_stack.state_dir)}
    assert {n: (rows[n]["running"], rows[n]["healthy"]) for n in ("pebble", "tsa", "authsign")} \
        == {n: (True, True) for n in ("pebble", "tsa", "authsign")}, rows
    assert rows["pebble"]["url"].startswith("https://127.0.0.1:")


def test_a_signed_crawl_is_signed_verified_at_admission_and_offline(local_stack, tmp_path):
    site = LoggedSite(("/a", "/b"))
    try:
        crawl_id, view = crawl(local_stack, f"{site.url}/", signing=True)
        _, plain = crawl(local_stack, f"{site.url}/?unsigned", signing=False, maxDepth=0)
    finally:
        site.stop()
    assert (view["state"], view["pagesCaptured"], view["signing"]) == ("succeeded", 3, True), view
    assert [(a["signed"], a["signatureDomain"], a["signatureVerified"]) for a in view["archives"]] \
        == [(True, "localhost", True)] * 3, view["archives"]
    with psycopg.connect(local_stack.info["database_url"]) as conn:
        rows = conn.execute("SELECT a.signed, a.signature_domain, a.signature_verified FROM archives a"
                            " JOIN crawl_pages p ON p.task_id = a.task_id::text WHERE p.crawl_id = %s",
                            (crawl_id,)).fetchall()
    assert rows == [(True, "localhost", True)] * 3
    assert [a["signed"] for a in plain["archives"]] == [None]  # no signing asked: no signature, none claimed

    data = download(local_stack, view["archives"][0]["id"])
    digest = json.loads(zipfile.ZipFile(io.BytesIO(data)).read("datapackage-digest.json"))
    assert digest["signedData"]["domain"] == "localhost" and digest["signedData"]["hash"] == digest["hash"]
    good = tmp_path / "good.wacz"
    good.write_bytes(data)
    done = waggle_verify(local_stack, good)  # the stack's trusted roots, found through stack.json
    assert done.returncode == 0 and "signed by: localhost" in done.stdout, done.stdout + done.stderr

    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            body = src.read(info.filename)
            if info.filename == "pages/pages.jsonl":
                body = body.replace(b'"ts"', b'"TS"', 1)  # same length: only the hash tells
            dst.writestr(info.filename, body)
    bad = tmp_path / "tampered.wacz"
    bad.write_bytes(out.getvalue())
    done = waggle_verify(local_stack, bad)
    assert done.returncode == 1 and "pages/pages.jsonl: sha256 does not match" in done.stdout, done.stdout

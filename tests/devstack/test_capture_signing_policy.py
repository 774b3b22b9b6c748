"""The capture server's signing (docs/capture-server.md "Extension signing", contracts.md §A.3,
§A.8), against the real server, real Chromium and the real signing services (authsign with its
pebble certificate and sigstore timestamps): the server policy decides what ``signing`` may say
(400 with the reason otherwise); a signed capture's WACZ carries a ``signedData`` that the
ledger's check verifies and the report says ``signature``; a signature that cannot be had fails
the capture as ``signing`` and writes no WACZ."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile

import pytest

from devstack import signing
from ledger.archive.wacz_check import check_zip
from tests.devstack.helpers import ONLY_WACZ, capture, capture_server_process, s3_get, task_keys

FAST_SETTLE = '{"minMs": 100, "maxMs": 2000, "quietMs": 200, "networkConcurrency": 0}'


def signing_server(s3_server, tmp_path, stack, policy: str, token: str):
    env = {**os.environ, "BROWSERHIVE_SIGNING_TOKEN": token}
    from devstack.serving import start_module

    proc, url = start_module("waggle_capture", "--s3-endpoint", s3_server.endpoint, "--allow-private",
                             "--settle", FAST_SETTLE, "--signing-url", signing.sign_url(stack.config),
                             "--signing-policy", policy, "--signing-trusted-roots", str(stack.trusted_roots),
                             tmp_dir=tmp_path, env=env)
    return proc, url


def test_without_a_signer_signing_true_is_refused_with_the_reason(capture_server, test_site):
    r = capture(capture_server, url=test_site.url("/page"), captureFormats=ONLY_WACZ, signing=True)
    assert r.status_code == 400
    assert r.json()["message"] == "signing: this server has no signer configured (signing policy 'forbidden')"
    r = capture(capture_server, url=test_site.url("/page"), captureFormats={**ONLY_WACZ, "wacz": False, "html": True},
                signing=False)
    assert r.status_code == 400 and "captureFormats.wacz" in r.json()["message"]


def test_policy_required_needs_a_signing_url():
    done = subprocess.run([sys.executable, "-m", "waggle_capture", "--port", "0", "--signing-policy", "required"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--signing-policy required needs --signing-url" in done.stderr


def test_policy_required_signs_every_capture_and_refuses_false(s3_server, test_site, signing_stack, tmp_path):
    proc, server = signing_server(s3_server, tmp_path, signing_stack, "required",
                                  signing_stack.config.secret("signing_token"))
    try:
        r = capture(server, url=test_site.url("/page"), captureFormats=ONLY_WACZ, signing=False)
        assert r.status_code == 400 and "signing policy 'required'" in r.json()["message"], r.text
        r = capture(server, url=test_site.url("/page"), captureFormats=ONLY_WACZ)  # omitted: the policy signs
        assert r.status_code == 200, r.text
    finally:
        proc.terminate()
        proc.wait(30)
    report = r.json()["report"]
    assert report["status"] == "success", report
    assert report["signature"] == {"signed": True, "domain": "localhost", "checks": {
        "signature": "ok", "chain": "ok", "domain": "ok", "timestamp": "ok"}}
    data = s3_get(s3_server, report["artifacts"]["wacz"])
    z = zipfile.ZipFile(io.BytesIO(data))
    package = json.loads(z.read("datapackage.json"))
    signed = json.loads(z.read("datapackage-digest.json"))["signedData"]
    assert package["browserhive:capture"]["settings"]["signature"] == "required"
    assert signed["created"] == package["created"] and signed["domain"] == "localhost"
    got = check_zip(len(data), lambda s, n: data[s:s + n], trusted_roots=str(signing_stack.trusted_roots))
    assert (got.problem, got.refusal, got.signature.verified) == (None, None, True), got


def test_a_signature_that_cannot_be_had_fails_the_capture_and_writes_no_wacz(s3_server, test_site, signing_stack,
                                                                             tmp_path):
    proc, server = signing_server(s3_server, tmp_path, signing_stack, "optional", "not-the-token")
    try:
        unsigned = capture(server, url=test_site.url("/page"), captureFormats=ONLY_WACZ, signing=False)
        r = capture(server, url=test_site.url("/page"), captureFormats=ONLY_WACZ, signing=True)
    finally:
        proc.terminate()
        proc.wait(30)
    assert unsigned.status_code == 200 and "signature" not in unsigned.json()["report"], unsigned.text
    report = r.json()["report"]
    assert (report["status"], report["errorDetails"]["type"], report["artifacts"]) == ("failed", "signing", {})
    assert report["errorDetails"]["message"].startswith(
        "a signature was required and could not be obtained: the signer answered HTTP 403"), report
    assert not [k for k in task_keys(s3_server, report["taskId"]) if k.endswith(".wacz")]

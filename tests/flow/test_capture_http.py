"""crawl_host's HTTP endpoint against real BrowserHive fakes on 127.0.0.1: answers, 429,
unreachable endpoints, the per-call deadline, and TLS verified against the private CA only."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import threading
import time
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from f.waggle.crawl_host import HttpEndpoint, ServerUnavailable, build_client, capture_host
from tests.flow.fakes import HttpFake, capture_reply, hang

FORMATS = {"png": False, "webp": False, "html": False, "links": True, "mhtml": False, "wacz": True}


@pytest.fixture
def hive():
    made: list[HttpFake] = []

    def make(handler):
        fake = HttpFake(handler)
        made.append(fake)
        return fake

    yield make
    for fake in made:
        fake.close()


def ok(req):
    return 200, {}, capture_reply(req.json()["url"], "x")


def crawl(targets, urls, client=None, deadline_s=145.0):
    http = client or httpx.Client()
    endpoints = [HttpEndpoint(t, http, deadline_s=deadline_s) for t in targets]
    return capture_host(endpoints, "h", urls, "c1", formats=FORMATS, signing=False, scripts=[],
                        delay_ms=0, busy_jitter_ms=(1, 2), log=lambda _m: None)


def test_posts_json_and_reads_the_answer(hive):
    bh = hive(ok)
    [r] = crawl([bh.url], ["http://site/a"])
    assert r["status"] == "captured" and r["taskId"] == "task-http://site/a@x"
    req = bh.requests[0]
    assert req.path == "/captures" and req.headers["content-type"] == "application/json"
    assert req.json()["captureFormats"] == FORMATS


def test_inline_links_travel_from_the_answer_into_the_page_result(hive):
    def with_links(req):
        body = capture_reply(req.json()["url"], "x")
        body["links"] = [{"href": f"http://site/{i}", "text": "t", "rel": None} for i in range(1500)]
        return 200, {}, body

    [r] = crawl([hive(with_links).url], ["http://site/a"])
    assert len(r["links"]) == 1000 and r["links"][0] == {"href": "http://site/0", "rel": None}
    assert r["linksOverflow"] == 500 and r["linksLocation"] == "s3://b/x.links.json"


def test_busy_429_goes_to_the_next_endpoint(hive):
    busy = hive(lambda r: (429, {"x-amzn-errortype": "Busy"}, {"message": "busy"}))
    free = hive(ok)
    [r] = crawl([busy.url, free.url], ["http://site/a"])
    assert r["status"] == "captured" and len(busy.requests) == 1 and len(free.requests) == 1


def test_refusal_reads_error_type_header(hive):
    bh = hive(lambda r: (400, {"x-amzn-errortype": "ValidationException"}, {"message": "1 validation error detected"}))
    [r] = crawl([bh.url], ["http://site/a"])
    assert r["skipReason"] == "400 ValidationException: 1 validation error detected"


def test_unreachable_endpoint_skipped_and_all_unreachable_raises(hive):
    bh = hive(ok)
    [r] = crawl(["http://127.0.0.1:1", bh.url], ["http://site/a"])
    assert r["status"] == "captured"
    with pytest.raises(ServerUnavailable, match="127.0.0.1:1, http://127.0.0.1:2"):
        crawl(["http://127.0.0.1:1", "http://127.0.0.1:2"], ["http://site/a"])


def test_deadline_fails_the_page_and_does_not_move_on(hive):
    stuck = hive(lambda r: hang(6.0))
    healthy = hive(ok)
    started = time.monotonic()
    [r] = crawl([stuck.url, healthy.url], ["http://site/a"], deadline_s=0.3)
    # the deadline ended the call, not the silent endpoint (6 s); wide for a loaded 2-core machine
    assert 0.28 <= time.monotonic() - started < 4.0
    assert r["status"] == "failed" and "deadline" in r["skipReason"] and "taskId" not in r
    assert len(stuck.requests) == 1 and healthy.requests == []  # never sent twice


# -- TLS: https endpoints are verified against the configured CA only -------------------------

def _cert(subject: str, issuer_key, issuer_name, key, *, ca: bool, san_ip: str | None = None):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(issuer_name or x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if san_ip:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(san_ip))]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(cert) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


@pytest.fixture
def tls_hive(tmp_path: Path):
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("waggle test CA", ca_key, None, ca_key, ca=True)
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = _cert("127.0.0.1", ca_key, ca.subject, key, ca=False, san_ip="127.0.0.1")
    (tmp_path / "leaf.pem").write_text(_pem(leaf))
    (tmp_path / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                         serialization.NoEncryption()))
    fake = HttpFake(ok)
    fake.server.shutdown()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "leaf.pem", tmp_path / "key.pem")
    fake.server.socket = context.wrap_socket(fake.server.socket, server_side=True)
    threading.Thread(target=fake.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    other_key = ec.generate_private_key(ec.SECP256R1())
    other_ca = _cert("someone else's CA", other_key, None, other_key, ca=True)
    yield fake.url.replace("http://", "https://"), _pem(ca), _pem(other_ca)
    fake.close()


def test_https_endpoint_verified_against_the_private_ca(tls_hive):
    url, ca, other = tls_hive
    [r] = crawl([url], ["http://site/a"], client=build_client([url], ca))
    assert r["status"] == "captured"
    with pytest.raises(ServerUnavailable):  # a certificate from another CA is not trusted
        crawl([url], ["http://site/a"], client=build_client([url], other))


def test_https_endpoint_with_empty_ca_is_refused():
    with pytest.raises(ValueError, match="browserhive_tls_ca"):
        build_client(["https://bh-1:50051"], "")
    build_client(["http://bh-1:50051"], "")  # plaintext endpoints need no CA

"""Challenge pages through the real capture server and real Chromium (extension
``challengeSignature``, decision 231): a loopback site of this file answers with vendor challenge
pages (tests/fixtures/challenge/) and with its own error page."""

from __future__ import annotations

import asyncio
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import httpx
import pytest

from waggle_capture.challenge import MESSAGE, HeldBehindChallenge, refuse_behind_challenge
from tests.devstack.helpers import capture
from tests.fixtures.loopback import LoopbackSite

FORMATS = {"png": False, "webp": False, "html": False, "links": True, "mhtml": False, "wacz": True}
FIXTURES = Path(__file__).parent.parent / "fixtures" / "challenge"
HTML = {"Content-Type": "text/html; charset=utf-8"}

PAGES: dict[str, tuple[int, dict[str, str], bytes]] = {
    "/cf-403": (403, {**HTML, "Server": "cloudflare"}, (FIXTURES / "cloudflare-managed-challenge.html").read_bytes()),
    "/akamai-403": (403, {**HTML, "Server": "AkamaiGHost"}, (FIXTURES / "akamai-access-denied.html").read_bytes()),
    "/dd-429": (429, HTML, (FIXTURES / "datadome-captcha.html").read_bytes()),
    "/own-403": (403, {**HTML, "Server": "Apache"}, (FIXTURES / "own-403.html").read_bytes()),
    "/cf-200": (200, {**HTML, "cf-mitigated": "challenge"}, b"<!doctype html><title>Just a moment...</title>"),
    "/ok": (200, HTML, b"<!doctype html><title>fine</title><a href='/x'>x</a>"),
}


class ChallengeSite(LoopbackSite):
    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                status, headers, body = PAGES.get(self.path, (404, HTML, b"no"))
                self.send_response(status)
                for k, v in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

        super().__init__(Handler)


@pytest.fixture(scope="module")
def site():
    with ChallengeSite() as s:
        yield s


def _capture(server: str, url: str) -> dict:
    r = capture(server, url=url, captureFormats=FORMATS)
    assert r.status_code == 200, r.text
    return r.json()


def test_the_extension_is_advertised(capture_server):
    assert "challengeSignature" in httpx.get(f"{capture_server}/status").json()["extensions"]


@pytest.mark.parametrize("path, vendor, status", [("/cf-403", "Cloudflare", 403), ("/akamai-403", "Akamai", 403),
                                                  ("/dd-429", "DataDome", 429)])
def test_a_challenge_is_named_on_the_http_error(capture_server, site, path, vendor, status):
    report = _capture(capture_server, site.url + path)["report"]
    assert report["status"] == "http_error" and report["httpStatusCode"] == status
    assert report["errorDetails"]["challenge"]["vendor"] == vendor
    assert report["errorDetails"]["challenge"]["status"] == status
    assert not report["artifacts"]  # nothing written


def test_a_sites_own_403_is_no_challenge(capture_server, site):
    report = _capture(capture_server, site.url + "/own-403")["report"]
    assert report["status"] == "http_error" and "challenge" not in report["errorDetails"]


def test_a_2xx_challenge_is_never_archived(capture_server, site):
    report = _capture(capture_server, site.url + "/cf-200")["report"]
    assert report["status"] == "failed" and report["errorDetails"]["type"] == "policy"
    assert report["errorDetails"]["message"] == MESSAGE.format(vendor="Cloudflare", status=200)
    assert report["errorDetails"]["challenge"] == {"vendor": "Cloudflare", "signature": "cloudflare-mitigated-header",
                                                   "status": 200}
    assert not report["artifacts"]


def test_a_plain_page_is_captured(capture_server, site):
    report = _capture(capture_server, site.url + "/ok")["report"]
    assert report["status"] == "success" and "wacz" in report["artifacts"]


# -- a capture held behind a challenge (extension holdAfter), without a browser ------------------------

class _Run:
    def __init__(self, challenge=None, checked=False):
        self.challenge = challenge
        self.main_checked = asyncio.Event()
        if checked:
            self.main_checked.set()


class _Seal:
    def __init__(self, run, sealed=False):
        self.run = run
        self.event = asyncio.Event()
        if sealed:
            self.event.set()


class _Hold:
    def __init__(self, prev):
        self.prev = prev


def test_held_behind_a_challenge_ends_and_passes_it_on():
    found = {"vendor": "Cloudflare", "signature": "cloudflare-challenge", "status": 403}

    async def scenario():
        behind = _Run()
        with pytest.raises(HeldBehindChallenge, match="previous capture answered a challenge page \\(Cloudflare\\)"):
            await refuse_behind_challenge(behind, _Hold(_Seal(_Run(found, checked=True))), 5.0)
        assert behind.challenge == found and behind.main_checked.is_set()  # the next one in the chain stops too
        third = _Run()
        with pytest.raises(HeldBehindChallenge):
            await refuse_behind_challenge(third, _Hold(_Seal(behind)), 5.0)
        # the previous page was no challenge, or ended without a check (sealed), or never started
        await refuse_behind_challenge(_Run(), _Hold(_Seal(_Run(checked=True))), 5.0)
        await refuse_behind_challenge(_Run(), _Hold(_Seal(_Run(), sealed=True)), 5.0)
        await refuse_behind_challenge(_Run(), _Hold(_Seal(None, sealed=True)), 5.0)
        # the wait is bounded: a previous capture that neither checks nor seals does not hold it forever
        t0 = time.monotonic()
        await refuse_behind_challenge(_Run(), _Hold(_Seal(_Run())), 0.2)
        assert 0.19 <= time.monotonic() - t0 < 2.0

    asyncio.run(scenario())

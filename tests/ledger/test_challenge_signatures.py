"""The bot-protection signatures (ledger/challenge/signatures.toml) against representative pages
of each vendor (tests/fixtures/challenge/, written for these tests) and their neighbours: the
same page under another status, a site's own 403/503 page, a page that quotes the markers."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.challenge import signatures
from ledger.challenge.signatures import SignatureFileError, load, match, parse

FIXTURES = Path(__file__).parent.parent / "fixtures" / "challenge"

# fixture, status, headers, expected vendor (each vendor's page as it is served)
VENDOR_PAGES = [
    ("cloudflare-managed-challenge.html", 403, {"server": "cloudflare", "cf-ray": "8f1a2b3c4d5e6f70-AMS"}, "Cloudflare"),
    ("cloudflare-managed-challenge.html", 503, {"server": "cloudflare"}, "Cloudflare"),
    ("cloudflare-block.html", 403, {"server": "cloudflare"}, "Cloudflare"),
    ("akamai-access-denied.html", 403, {"server": "AkamaiGHost", "mime-version": "1.0"}, "Akamai"),
    ("imperva-incapsula.html", 403, {"x-iinfo": "7-12345678-0 0NNN RT(1733100000000 12)", "x-cdn": "Imperva"}, "Imperva"),
    ("datadome-captcha.html", 403, {"x-datadome": "protected", "x-dd-b": "1"}, "DataDome"),
    ("perimeterx-press-and-hold.html", 403, {}, "HUMAN (PerimeterX)"),
    ("aws-waf-challenge.html", 405, {"x-amzn-waf-action": "challenge"}, "AWS WAF"),
    ("aws-waf-challenge.html", 403, {}, "AWS WAF"),
    ("cloudfront-request-blocked.html", 403, {"server": "CloudFront", "x-cache": "Error from cloudfront"}, "AWS WAF"),
    ("sucuri-firewall.html", 403, {"server": "Sucuri/Cloudproxy", "x-sucuri-id": "18015"}, "Sucuri"),
    ("f5-asm-rejected.html", 403, {}, "F5 BIG-IP ASM"),
    ("datadome-captcha.html", 429, {}, "DataDome"),
]


@pytest.mark.parametrize("fixture,status,headers,vendor", VENDOR_PAGES)
def test_each_vendors_page_is_recognised(fixture: str, status: int, headers: dict, vendor: str) -> None:
    found = match(status, headers, (FIXTURES / fixture).read_bytes())
    assert found is not None and found.vendor == vendor
    assert found.as_json() == {"vendor": vendor, "signature": found.name, "status": status}


@pytest.mark.parametrize("fixture", ["own-403.html", "own-503-maintenance.html"])
@pytest.mark.parametrize("status", [403, 429, 503])
def test_a_sites_own_error_pages_are_not_challenges(fixture: str, status: int) -> None:
    """Their words ("Access denied", "Just a moment...") are no vendor's markers."""
    assert match(status, {"server": "Apache/2.4.62 (Debian)"}, (FIXTURES / fixture).read_bytes()) is None


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIXTURES.glob("*.html")))
def test_a_2xx_page_is_never_judged_by_its_body(fixture: str) -> None:
    """A 200 page that quotes every marker (an article about WAFs) is the site's page."""
    assert match(200, {"server": "cloudflare"}, (FIXTURES / fixture).read_bytes()) is None


def test_definitive_headers_decide_whatever_the_body() -> None:
    assert match(200, {"CF-Mitigated": "challenge"}, b"").vendor == "Cloudflare"
    assert match(403, [("X-Sucuri-Block", "BNP005")], None).vendor == "Sucuri"
    assert match(429, {"x-kpsdk-ct": "0a1b"}, b"{}").vendor == "Kasada"
    assert match(202, {"x-amzn-waf-action": "captcha"}, b"").vendor == "AWS WAF"
    # the same header names with other values, or a status the signature does not name
    assert match(200, {"cf-mitigated": "challenged-not"}, b"") is None
    assert match(200, {"x-amzn-waf-action": "allow"}, b"") is None
    assert match(404, {"x-sucuri-block": "x"}, b"") is None


def test_akamai_server_header_needs_both_texts() -> None:
    body = b"<H1>Access Denied</H1>You don't have permission to access this on this server."
    assert match(403, {"server": "AkamaiGHost"}, body).vendor == "Akamai"
    assert match(403, {"server": "Apache"}, body) is None
    assert match(403, {"server": "AkamaiGHost"}, b"<H1>Access Denied</H1>") is None


def test_only_the_first_bytes_are_read() -> None:
    marker = b"<script>window._cf_chl_opt={}</script>"
    assert match(403, {}, b"x" * 1000 + marker).vendor == "Cloudflare"
    assert match(403, {}, b"x" * signatures.BODY_SCAN_BYTES + marker) is None


def test_text_and_undecodable_bodies() -> None:
    assert match(503, {}, "<div id='px-captcha'></div>").vendor == "HUMAN (PerimeterX)"
    assert match(403, {}, b"\xff\xfe\x00 _Incapsula_Resource").vendor == "Imperva"


def test_the_data_file_loads_and_covers_the_vendors() -> None:
    vendors = {s.vendor for s in load()}
    assert {"Cloudflare", "Akamai", "Imperva", "DataDome", "HUMAN (PerimeterX)", "AWS WAF", "Sucuri"} <= vendors
    assert all(s.headers or s.body_min for s in load())


@pytest.mark.parametrize("text,says", [
    ('[[signature]]\nvendor = "X"\nname = "x"\nbody = ["("]\n', "x"),
    ('[[signature]]\nvendor = "X"\nname = "x"\n', "neither a header rule nor a body pattern"),
    ('[[signature]]\nvendor = "X"\nname = "x"\nbody = ["a"]\nbody_min = 2\n', "body_min 2 > 1"),
    ('[[signature]]\nvendor = "X"\nname = "x"\nbody = ["a"]\nstatus = [403]\n', "unknown key(s) status"),
    ('[[signature]]\nvendor = "X"\nname = "x"\nbody = ["a"]\n[[signature]]\nvendor = "Y"\nname = "x"\nbody = ["b"]\n',
     "name used twice"),
    ("", "no [[signature]]"),
    ("[[signature", "not TOML"),
])
def test_a_broken_data_file_names_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(SignatureFileError, match=None) as err:
        parse(text)
    assert says in str(err.value)

"""crawl_host's ``revisit`` member (docs/capture-server.md extension "revisit", decision 181):
the ledger's digest lookup of the crawl with the flow's token goes only to an endpoint that
advertised ``revisit`` and only with a WACZ asked; a real v12 gets the request unchanged.
Real HTTP on loopback (tests/flow/fakes.py)."""

from __future__ import annotations

import httpx
import pytest

from f.waggle.crawl_host import HttpEndpoint, capture_request, revisit_member
from tests.flow.fakes import HttpFake, capture_reply

URL = "https://example.org/"
SPEC = revisit_member("http://127.0.0.1:8300/", "flow-token", "c-1")


@pytest.fixture
def fake():
    f = HttpFake(lambda req: (200, {}, capture_reply(URL, "t")))
    try:
        yield f
    finally:
        f.close()


def sent(fake: HttpFake, extensions: frozenset[str], revisit: dict | None, **formats: bool) -> dict:
    with httpx.Client() as client:
        request = capture_request(URL, "c-1", formats, False, [], None)
        HttpEndpoint(fake.url, client, extensions=extensions, revisit=revisit).capture(request)
    return fake.requests[-1].json()


def test_the_member_names_the_crawls_lookup_and_the_flows_token():
    assert SPEC == {"url": "http://127.0.0.1:8300/api/crawls/c-1/digests", "token": "flow-token"}
    assert revisit_member("", "t", "c") is None and revisit_member("http://l", " ", "c") is None


def test_sent_only_where_advertised_and_with_a_wacz(fake):
    assert sent(fake, frozenset({"revisit"}), SPEC, wacz=True)["revisit"] == SPEC
    assert "revisit" not in sent(fake, frozenset(), SPEC, wacz=True)  # a real v12
    assert "revisit" not in sent(fake, frozenset({"revisit"}), SPEC, png=True)  # no WACZ, nothing to dedup
    assert "revisit" not in sent(fake, frozenset({"revisit"}), None, wacz=True)


def test_the_conditional_member_goes_only_where_advertised(fake):
    """Extension ``conditional`` (decision 331): the previous-capture lookup of the same crawl,
    same token; a real v12 (nothing advertised) and an endpoint without it get no member."""
    want = {"url": "http://127.0.0.1:8300/api/crawls/c-1/previous", "token": "flow-token"}
    both = sent(fake, frozenset({"revisit", "conditional"}), SPEC, wacz=True)
    assert both["conditional"] == want and both["revisit"] == SPEC
    assert "conditional" not in sent(fake, frozenset({"revisit"}), SPEC, wacz=True)
    assert "conditional" not in sent(fake, frozenset(), SPEC, wacz=True)  # a real v12
    assert "conditional" not in sent(fake, frozenset({"conditional"}), SPEC, png=True)  # no WACZ
    assert "conditional" not in sent(fake, frozenset({"conditional"}), None, wacz=True)

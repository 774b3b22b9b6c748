"""Why a page of a crawl has no member in its collection (ledger.crawl.collection._missing): each
page state names its own reason; a blocked page is never said to await admission (a trial found
the combined download calling challenge-blocked pages "captured; not admitted yet")."""

from __future__ import annotations

import pytest

from ledger.crawl.collection import _missing


def _row(state: str, archive_id=None, skip_reason=None, failure_class=None) -> dict:
    return {"url": "http://h.test/p", "depth": 1, "state": state, "archive_id": archive_id,
            "skip_reason": skip_reason, "failure_class": failure_class}


@pytest.mark.parametrize("state, running, why", [
    ("failed", False, "failed"), ("skipped", False, "skipped"), ("blocked", False, "blocked"),
    ("pending", True, "not-captured-yet"), ("pending", False, "not-captured"),
    ("captured", False, "not-admitted-yet"),
])
def test_each_state_names_its_own_reason(state, running, why):
    entry = _missing(_row(state, skip_reason="a bot-protection challenge page answered (Cloudflare, HTTP 403)"
                          if state in ("blocked", "skipped") else None, failure_class="permanent"), running)
    assert entry is not None and entry["why"] == why and entry["reason"]
    if state == "blocked":
        assert "challenge" in entry["reason"]


def test_a_blocked_page_without_a_reason_still_says_blocked():
    assert _missing(_row("blocked"), False)["reason"] == "the host was blocked"


def test_an_admitted_capture_is_not_missing():
    assert _missing(_row("captured", archive_id="a1"), False) is None

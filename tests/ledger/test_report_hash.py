"""The level report's digest (issue 14): written by orjson, it stays the SHA-256 of the bytes
``json.dumps(report, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` gave, so a
report accepted before the change and re-sent after it is still recognised as the same."""

from __future__ import annotations

import hashlib
import json

from hypothesis import given, settings, strategies as st

from ledger.crawl.levels import report_hash

_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
_json = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | _text,
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
                     max_leaves=20)


def _old(report: dict) -> str:
    canonical = json.dumps(report, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_text, _json, max_size=6))
def test_digest_equals_the_json_dumps_digest(report):
    assert report_hash(report) == _old(report)


def test_a_report_with_text_beyond_ascii_and_control_characters():
    report = {"depth": 1, "results": [{"url": "https://é.test/ü?q=\u2028\x1f\"\\/", "links": [{"href": "😀", "rel": None}]}],
              "compiled": {"typescript": "6.0.3", "scripts": []}}
    assert report_hash(report) == _old(report)

"""The capture answer's ``documentMs`` (decision 242): the site's time for the main document."""

from __future__ import annotations

from waggle_capture.documenttime import document_ms


def test_document_time_counts_from_the_release_not_from_a_held_request():
    timing = {"startTime": 1_000_000.0, "requestStart": 5.0, "responseStart": 410.0, "responseEnd": 420.0}
    assert document_ms(timing) == 415  # request start → response end
    assert document_ms(timing, released_s=(1_000_000.0 + 150.0) / 1000.0) == 270  # held 150 ms at the proxy
    assert document_ms({**timing, "responseEnd": -1}) == 405  # no end yet: the first byte
    assert document_ms({**timing, "responseEnd": -1, "responseStart": -1}) is None
    assert document_ms(None) is None and document_ms({"startTime": 0, "responseEnd": 3}) is None

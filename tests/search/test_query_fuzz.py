"""No query text or filter value ever gives a 500 (issue 26 item 6): hypothesis over real HTTP."""

from __future__ import annotations

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ACME = {"X-Waggle-Subject": "alice", "X-Waggle-Organizations": "acme"}
SYNTAX = st.sampled_from(['"', "-", "OR", "or", "|", "&", "!", "(", ")", ":", "*", "<->", "\\", "'", " ", "tide",
                          "lighthouse", "the", "Schiff", "—", "\u00e9", "\U0001f600", "%", "_", ";--", "\t", "\n"])
QUERIES = st.one_of(st.text(max_size=80), st.lists(SYNTAX, max_size=20).map("".join),
                    st.text(min_size=490, max_size=520))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(q=QUERIES, host=st.one_of(st.none(), st.text(max_size=20)), when=st.one_of(st.none(), st.text(max_size=30)),
       page=st.one_of(st.none(), st.text(max_size=4)))
def test_no_query_gives_a_500(indexed_stack, q, host, when, page):
    params = {"q": q}
    for name, value in (("host", host), ("from", when), ("page", page)):
        if value is not None:
            params[name] = value
    r = httpx.get(f"{indexed_stack.url}/api/search", headers=ACME, params=params, timeout=30)
    assert r.status_code in (200, 400), (params, r.status_code, r.text)
    if r.status_code == 400:
        assert r.json()["error"] and "internal" not in r.json()["error"]

"""Capture servers get a read token of the crawl, not the flow's token (decision 405): crawl_host
asks the ledger for one (``f/waggle/read_token.py``) and puts it in the members the servers use —
``revisit``, ``conditional`` and ``holdAfter.admission``; a ledger that gives none leaves the
flow's token there, as before, and the job's log says so. Real HTTP on 127.0.0.1."""

from __future__ import annotations

from f.waggle.capture_request import conditional_member, revisit_member
from f.waggle.host_admission import LedgerReader
from f.waggle.read_token import read_token
from tests.flow.fakes import HttpFake

READ = "wgr_" + "r" * 43


def test_the_members_carry_the_crawls_read_token_not_the_flows():
    ledger = HttpFake(lambda req: (201, {}, {"token": READ, "crawlId": "c-1"}))
    lines: list[str] = []
    try:
        got = read_token(ledger.url, "flow-token", "c-1", log=lines.append)
    finally:
        ledger.close()
    [asked] = ledger.requests
    assert (asked.method, asked.path) == ("POST", "/api/crawls/c-1/read-token")
    assert asked.headers.get("authorization") == "Bearer flow-token"  # asked with the flow's own token
    assert got == READ and lines == []
    revisit = revisit_member(ledger.url, got, "c-1")
    assert revisit["token"] == conditional_member(revisit)["token"] == READ
    reader = LedgerReader(ledger.url, "flow-token", "c-1", server_token=got)
    try:
        assert reader.hold_member("a.test")["token"] == READ
        assert reader._headers["Authorization"] == "Bearer flow-token"  # the flow's own reads keep its token
    finally:
        reader.close()


def test_a_ledger_that_gives_none_leaves_the_flows_token_and_says_so():
    for answer in ((404, {}, {"detail": "Not Found"}), (409, {}, {"error": "the crawl is failed, not running"}),
                   (201, {}, {"token": ""}), (500, {}, {"error": "internal error"})):
        ledger = HttpFake(lambda req, a=answer: a)
        lines: list[str] = []
        try:
            assert read_token(ledger.url, "flow-token", "c-1", log=lines.append) == "flow-token"
        finally:
            ledger.close()
        assert len(lines) == 1 and "capture servers get the flow's token" in lines[0] and str(answer[0]) in lines[0]
    down = []
    assert read_token("http://127.0.0.1:9", "flow-token", "c-1", log=down.append) == "flow-token" and down
    assert read_token("", "flow-token", "c-1", log=down.append) == "flow-token"  # no ledger: nothing asked

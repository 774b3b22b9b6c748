"""``download`` sends the ledger's token only to the ledger: a collection member given as a
ledger path is asked with it, one given as an absolute signed URL (an older ledger's) without."""

from __future__ import annotations

from ledger.client.api import LedgerClient, download
from ledger.client.config import ClientConfig
from tests.flow.fakes import HttpFake


def test_the_token_goes_to_ledger_paths_only(tmp_path):
    store = HttpFake(lambda r: (200, {}, b"wacz bytes of " + r.path.encode()))
    ledger = HttpFake(lambda r: (302, {"location": f"{store.url}/signed?X-Amz-Signature=abc"}, b""))
    try:
        client = LedgerClient(ClientConfig(ledger.url, "secret-token", "environment"))
        try:
            via_ledger = download("/api/crawls/c/members/a.wacz", tmp_path / "a.wacz", via=client)
            signed = download(f"{store.url}/older?X-Amz-Signature=def", tmp_path / "b.wacz", via=client)
        finally:
            client.close()
    finally:
        store.stop()
        ledger.stop()
    assert (tmp_path / "a.wacz").read_bytes() == b"wacz bytes of /signed?X-Amz-Signature=abc" and via_ledger > 0
    assert (tmp_path / "b.wacz").read_bytes() == b"wacz bytes of /older?X-Amz-Signature=def" and signed > 0
    [asked] = ledger.requests
    assert asked.headers.get("authorization") == "Bearer secret-token"
    assert [r.headers.get("authorization") for r in store.requests] == [None, None]  # the redirect's and the absolute URL's

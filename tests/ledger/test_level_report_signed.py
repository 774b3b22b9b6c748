"""A signed WACZ that does not verify is not admitted, on the level report's path the local
stack uses (issue 24 item 6; ``ledger.archive.verify``): the good signed page is admitted
signed / ``localhost`` / verified, the tampered one is not, its reason is kept
(``capture_submissions.verify_error``) and shown on its page (``failed``, class permanent,
``archive not admitted: …``) and in the crawl's failures; ``pagesCaptured`` counts only the
admitted one; the reconciler does not retry it. Real pebble + TSA + authsign, S3 stand-in,
Postgres, OpenFGA stand-in."""

from __future__ import annotations

import pytest

from ledger.archive.reconciler import reconcile
from tests.archive.helpers import put_wacz
from tests.archive.test_signed_wacz import flip_last_byte, rezip, signed_wacz
from tests.ledger.test_level_report_v2 import captured
from tests.ledger.test_level_reports import (  # noqa: F401 - fixture
    WHO, open_ledger, post, report, rows, settings, start, store_of,
)

pytestmark = pytest.mark.anyio


async def test_a_tampered_signed_wacz_is_not_admitted_and_its_page_says_why(settings, s3_server, signing_stack):
    settings = settings.model_copy(update={"signing_trusted_roots": str(signing_stack.trusted_roots)})
    good_wacz = signed_wacz(signing_stack.signer(), "https://a.test/1")
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds=["https://a.test/1", "https://a.test/2"], maxDepth=0)
        good, r1 = captured(s3_server, crawl_id, "https://a.test/1", links=[])
        bad, r2 = captured(s3_server, crawl_id, "https://a.test/2", links=[])
        put_wacz(s3_server, f"s3://{s3_server.bucket}/{good}_crawl-1_smoke.wacz", good_wacz)
        put_wacz(s3_server, f"s3://{s3_server.bucket}/{bad}_crawl-1_smoke.wacz",
                 rezip(good_wacz, flip_last_byte("archive/data.warc.gz")))
        r = await post(h, crawl_id, report(0, [r1, r2]))
        assert r.status_code == 200, r.text
        view = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        again = await reconcile(h.services.pool, store_of(s3_server), trusted_roots=settings.signing_trusted_roots)
    reason = "archive not admitted: signed, but archive/data.warc.gz: sha256 does not match datapackage.json"
    assert rows(settings.database_url, "SELECT task_id::text, signed, signature_domain, signature_verified"
                                       " FROM archives") == [(good, True, "localhost", True)]
    errors = dict(rows(settings.database_url, "SELECT task_id::text, verify_error FROM capture_submissions"))
    assert errors == {good: None, bad: reason}
    pages = {t: (s, c, why) for t, s, c, why in rows(
        settings.database_url, "SELECT task_id, state, failure_class, skip_reason FROM crawl_pages")}
    assert pages == {good: ("captured", None, None), bad: ("failed", "permanent", reason)}
    assert view["pagesCaptured"] == 1
    assert any(f["reason"] == reason for f in view["failures"]), view["failures"]
    assert (again.pending, again.registered) == (0, 0)  # a refusal is final

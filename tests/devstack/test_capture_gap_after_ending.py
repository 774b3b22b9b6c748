"""A held capture (extension ``holdAfter``) reaches the site at least ``gapMs`` after the last
moment the site felt the previous capture, whatever ended it (issue 24 item 2): a download over
the response limit with and without ``Content-Length`` (the site blocked in its write until the
proxy hangs up), a reset, a redirect loop, 404, 500, 429 (its ``Retry-After`` lengthens the gap),
success. The end-to-end property, timeouts and the load deadline included, is
tests/e2e/test_gap_after_any_ending.py; this one is quick and binds the hold tightly."""

from __future__ import annotations

import threading
import time
import uuid

import httpx
import pytest

from tests.devstack.helpers import ONLY_WACZ
from tests.fixtures.endings_site import EndingsSite

GAP_MS = 300
LIMIT = 1 << 20  # the response limit of the previous capture: the 30 MB downloads are over it


@pytest.fixture(scope="module")
def site():
    s = EndingsSite()
    try:
        yield s
    finally:
        s.stop()


def _post(server: str, key: str, out: dict, **body) -> None:
    out["response"] = httpx.post(f"{server}/captures", json=body, headers={"Waggle-Capture-Key": key}, timeout=150)


@pytest.mark.parametrize("ending", ["/refused.bin", "/cut.bin", "/reset", "/loop", "/e404", "/e500", "/e429", "/ok2"])
def test_the_held_capture_waits_the_gap_after_the_sites_last_byte(capture_server, site, ending):
    t0 = time.monotonic()
    prev_key, next_key = f"p-{uuid.uuid4().hex[:12]}", f"n-{uuid.uuid4().hex[:12]}"
    a: dict = {}
    b: dict = {}
    first = threading.Thread(target=_post, args=(capture_server, prev_key, a), daemon=True,
                             kwargs={"url": f"{site.url}{ending}", "captureFormats": ONLY_WACZ, "maxResponseBytes": LIMIT})
    first.start()
    time.sleep(0.2)  # accepted first
    second = threading.Thread(target=_post, args=(capture_server, next_key, b), daemon=True,
                              kwargs={"url": f"{site.url}/ok1", "captureFormats": ONLY_WACZ,
                                      "holdAfter": {"key": prev_key, "gapMs": GAP_MS}})
    second.start()
    for t in (first, second):
        t.join(150)
    assert a["response"].status_code == 200 and b["response"].status_code == 200, (a, b)
    assert b["response"].json()["report"]["status"] == "success", b["response"].json()["report"]
    time.sleep(0.2)  # the site's log of the last request
    caps = [c for c in site.captures() if c[0].start > t0]
    assert [c[0].path for c in caps] == [ending, "/ok1"], caps
    gap = caps[1][0].start - max(h.end for h in caps[0])
    assert gap >= GAP_MS / 1000, (ending, round(gap * 1000), caps)

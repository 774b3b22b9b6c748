"""Extension ``holdAdmission`` of our capture server (decision 302, docs/capture-server.md
extension "hold"): a held capture (``holdAfter``) carries ``admission: {url, token}`` and the server
reads the host's shared delay there right before it releases the hold. A crawl with a longer delay
whose registration commits while the previous page loads — after the held capture was submitted —
holds that capture the longer delay, felt at the loopback site; without the member (decision 301's
window) the same run releases it at the old gap; a read that fails keeps the planned gap. Real
server, real Chromium, real timers; the ledger is an HTTP stand-in whose answer changes at the
registration. Bounds are the contract's lower bounds and ratios of the delays."""

from __future__ import annotations

import threading
import time
import uuid

import httpx
import pytest

from tests.devstack.helpers import ONLY_WACZ
from tests.devstack.test_capture_hold_after import LATE_MS, _first, _post, _seal, _start
from f.waggle.host_admission import LedgerReader
from tests.flow.fakes import HttpFake

GAP_MS, LONG_MS = 400, 4000  # the gap the held capture was submitted with; the registering crawl's delay
# The previous page settles 1–1.5 s after its load event (its late request 0.9 s after it ran): still
# loading when the held capture arrives and the longer crawl registers; sealed ≤ ~0.6 s after its last
# request, so the old gap's release stays well below LONG_MS from it.
SETTLE = {"minMs": 1000, "maxMs": 1500, "quietMs": 200, "networkConcurrency": 0}
TOKEN = "flow-token-7"


class LedgerStandIn:
    """``GET /api/crawls/c-1/politeness?host=`` as the ledger answers it: ``GAP_MS`` until
    :meth:`register` (the longer crawl's registration commits), ``LONG_MS`` from then on; ``broken``:
    every read answers 503. ``reads``: monotonic s of each read."""

    def __init__(self, broken: bool = False) -> None:
        self.registered = threading.Event()
        self.reads: list[float] = []
        self.broken = broken
        self.http = HttpFake(self._answer)

    def _answer(self, req):
        self.reads.append(time.monotonic())
        if self.broken:
            return 503, {}, {"error": "ledger down"}
        host = req.path.partition("host=")[2]
        ms = LONG_MS if self.registered.is_set() else GAP_MS
        return 200, {}, {"hosts": {host: {"hostDelayMs": ms, "lastFinishedAt": None}}}

    def register(self) -> float:
        self.registered.set()
        return time.monotonic()

    def member(self, host: str) -> dict:
        """The member as the flow builds it (its own admission read, f/waggle/host_admission.py)."""
        reader = LedgerReader(self.http.url, TOKEN, "c-1")
        try:
            return reader.hold_member(host)
        finally:
            reader.close()


def _held_run(server: str, site, ledger: LedgerStandIn | None) -> dict:
    """The previous capture loads ``/late`` (a late request ``LATE_MS`` after it ran, then a long
    settle); ``/other`` is submitted held behind it with ``gapMs`` GAP_MS (and ``admission`` when
    ``ledger``); once the held POST is on its way the longer crawl registers. → the felt gap (s)
    and the moments."""
    t0 = time.monotonic()
    prev_key, next_key = f"p-{uuid.uuid4().hex[:12]}", f"n-{uuid.uuid4().hex[:12]}"
    sealer, sealed = _start(_seal, server, prev_key)
    first, a = _start(_post, server, prev_key, url=site.url(f"/late?ms={LATE_MS}"), captureFormats=ONLY_WACZ,
                      loadWait=SETTLE)
    time.sleep(0.3)  # the previous capture is accepted and loading
    hold = {"key": prev_key, "gapMs": GAP_MS}
    if ledger is not None:
        hold["admission"] = ledger.member(site.url("/").split("/")[2])
    second, b = _start(_post, server, next_key, url=site.url("/other"), captureFormats=ONLY_WACZ, holdAfter=hold)
    while "sent" not in b:
        time.sleep(0.01)
    time.sleep(0.2)  # the held POST has reached the server
    registered = ledger.register() if ledger is not None else time.monotonic()
    for t in (first, second, sealer):
        t.join(120)
    assert a["response"].status_code == 200, a["response"].text
    assert b["response"].status_code == 200, b["response"].text
    assert b["response"].json()["report"]["status"] == "success", b["response"].text
    last_prev = max(t for p, t in list(site.responses) if p in ("/late", "/late-ping") and t > t0)
    other = _first(site, "/other", t0)
    # the race as decision 301 left it: the held capture was submitted (and checked) before the
    # registration, which committed while the previous page still loaded
    assert b["sent"] < registered < sealed["at"] and registered < last_prev
    return {"felt": other - last_prev, "other": other, "last_prev": last_prev, "registered": registered,
            "seal": sealed["body"], "arrivals": [(p, round(t - t0, 3)) for p, t in list(site.arrivals) if t > t0],
            "responses": [(p, round(t - t0, 3)) for p, t in list(site.responses) if t > t0]}


def test_status_advertises_hold_admission(capture_server):
    assert "holdAdmission" in httpx.get(f"{capture_server}/status").json()["extensions"]


def test_a_crawl_registered_during_the_previous_load_holds_the_held_capture_its_delay(capture_server, test_site):
    ledger = LedgerStandIn()
    try:
        run = _held_run(capture_server, test_site, ledger)
    finally:
        ledger.http.close()
    assert run["felt"] / (LONG_MS / 1000) >= 1.0, run
    (first, *_), paths = ledger.reads, [r.path for r in ledger.http.requests]
    assert first > run["registered"] and first < run["other"], (ledger.reads, run)  # read before the release
    host = test_site.url("/").split("/")[2]
    assert all(p.partition("?")[0] == "/api/crawls/c-1/politeness" and p.partition("host=")[2].replace("%3A", ":") == host
               for p in paths), paths
    assert all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in ledger.http.requests)
    # the read that lengthened the hold is made again at its new end (a later registration counts too)
    assert len(ledger.reads) >= 2 and ledger.reads[-1] > run["last_prev"] + GAP_MS / 1000, (ledger.reads, run)


def test_without_the_member_the_held_capture_goes_out_at_the_gap_it_was_submitted_with(capture_server, test_site):
    """The window decision 301 left open (what the flow no longer sends to a server with
    ``holdAdmission``): the registration is not seen, the site feels the old gap."""
    run = _held_run(capture_server, test_site, None)
    assert run["felt"] / (GAP_MS / 1000) >= 1.0 and run["felt"] / (LONG_MS / 1000) < 1.0, run


@pytest.mark.parametrize("broken", [True, False], ids=["read-fails", "no-registration"])
def test_a_failed_or_unchanged_read_keeps_the_planned_gap(capture_server, test_site, broken):
    ledger = LedgerStandIn(broken=broken)
    ledger.register = lambda: time.monotonic()  # nobody registers: the ledger keeps saying GAP_MS (or fails)
    try:
        run = _held_run(capture_server, test_site, ledger)
    finally:
        ledger.http.close()
    assert ledger.reads and ledger.reads[0] < run["other"], (ledger.reads, run)
    assert run["felt"] / (GAP_MS / 1000) >= 1.0 and run["felt"] / (LONG_MS / 1000) < 1.0, run


def test_bad_admission_members_are_refused(capture_server, test_site):
    body = {"url": test_site.url("/other"), "captureFormats": ONLY_WACZ}
    for bad in ({"url": "ftp://x/y", "token": "t"}, {"url": "http://127.0.0.1:1/p"}, {"token": "t"},
                {"url": "http://127.0.0.1:1/p", "token": ""}, "http://127.0.0.1:1/p"):
        r = httpx.post(f"{capture_server}/captures", json={**body, "holdAfter": {"key": "k", "gapMs": 1,
                                                                                 "admission": bad}})
        assert r.status_code == 400 and r.json()["fieldList"][0]["path"].startswith("/holdAfter/admission"), r.text

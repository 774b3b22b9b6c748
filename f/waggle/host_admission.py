# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1", "wmill==1.850.0"]
# ///
"""Admission of each capture of a host: the host's shared delay read again right before it (decision 301).

Many crawls share a host's politeness: the longest delay of the crawls active on the host wins
(decision 028). A crawl may register on the host at any moment — between plan_level's read and the
level's first capture, or in the middle of the level — so the delay a level planned with is not
enough: every submission of a capture (first, next, held, retried) is *admitted* by reading the
host's ``hostDelayMs`` now (``GET /api/crawls/{id}/politeness?host=…``, the route plan_level reads)
and setting :meth:`f.waggle.host_gap.HostGap.share` to it before the rest of the gap is waited.
So once a crawl's registration has committed, every capture of the host admitted after it keeps
that crawl's delay from the previous request; and once a crawl has ended (no longer running), its
delay stops applying at the next admission.

Cost: one small ledger read per capture, made :data:`ADMIT_LEAD_S` before the gap ends, so it
overlaps the wait instead of adding to it (a read slower than the lead lengthens that gap only).
A read that fails keeps the gap as it is (logged :data:`MAX_LOGGED` times per host): the level's
planned delay still holds. Busy rounds (every browser 429) are not admitted again: they only
lengthen the gap.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from f.waggle.common import http_client
from f.waggle.host_gap import HostGap

ADMIT_LEAD_S = 0.2  # the read starts this long before the gap ends (a loopback/LAN read takes ~10 ms)
MAX_LOGGED = 3


class Admission:
    """``admit(gap)``: read the host's shared delay now and set it on ``gap``. ``read(host)`` →
    ``hostDelayMs`` (int) or raises; None → admission off (a test, or no ledger variables)."""

    def __init__(self, host: str, read: Callable[[str], int] | None, say: Callable[[str], None]) -> None:
        self.host, self._read, self._say = host, read, say
        self.reads = self.failures = 0

    def __call__(self, gap: HostGap) -> None:
        if self._read is None:
            return
        self.reads += 1
        try:
            shared = self._read(self.host)
        except Exception as exc:  # noqa: BLE001 - the planned gap still holds
            self.failures += 1
            if self.failures <= MAX_LOGGED:
                self._say(f"admission: the host's current delay could not be read ({type(exc).__name__}:"
                          f" {str(exc)[:160]}); the gap stays {gap.ms} ms")
            return
        if isinstance(shared, bool) or not isinstance(shared, (int, float)):
            return
        gap.share(int(shared))

    def hold_member(self) -> dict | None:
        """``holdAfter.admission`` for a held capture of this host (extension ``holdAdmission``,
        decision 302): ``{url, token}`` of the same read, which the capture server makes right
        before it releases the hold; None when admission is off or the reader has no such URL (a test)."""
        member = getattr(self._read, "hold_member", None)
        return member(self.host) if self._read is not None and member is not None else None


READ_TIMEOUT_S = 2.0  # a slow ledger lengthens one gap by at most this, then the gap stays as it was


class LedgerReader:
    """``read(host)`` → the host's ``hostDelayMs`` now: ``GET {api_url}/api/crawls/{crawl_id}/politeness?host=``
    with the flow's token over one kept-open connection (the route plan_level reads, decision 029);
    raises on anything but a 200 with a number. :meth:`close` when the job ends."""

    def __init__(self, api_url: str, token: str, crawl_id: str, client: httpx.Client | None = None,
                 server_token: str | None = None) -> None:
        self._url = f"{api_url.rstrip('/')}/api/crawls/{crawl_id}/politeness"
        self._headers = {"Authorization": f"Bearer {token}"}
        self._server_token = server_token or token  # the crawl's read token (decision 405), else the flow's
        self._client = client or http_client(api_url, READ_TIMEOUT_S)

    def __call__(self, host: str) -> int:
        resp = self._client.get(self._url, params={"host": host}, headers=self._headers)
        if resp.status_code != 200:
            raise RuntimeError(f"HTTP {resp.status_code} {resp.text[:160]}")
        value = resp.json()["hosts"][host]["hostDelayMs"]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"hostDelayMs is not a number: {value!r}")
        return int(value)

    def hold_member(self, host: str) -> dict:
        """``{"url": <this read's URL for host>, "token": <the crawl's read token>}``: the capture
        server makes the same read before it releases a held capture (extension
        ``holdAdmission``), with the read-only token of this crawl (decision 405; the flow's
        token where the ledger gave none)."""
        return {"url": str(httpx.URL(self._url, params={"host": host})), "token": self._server_token}

    def close(self) -> None:
        self._client.close()

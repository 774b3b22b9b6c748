"""The hold rule of extension ``holdAfter`` (waggle_capture/holds.py) on the event loop, with a
previous capture whose proxy's last byte and seal the test moves: the held navigation starts
before the previous seal once its estimate is due, a later byte moves it, and the proxy's release
waits for the seal and the gap from the truly last byte. Real timers; bounds are the rule's own."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from waggle_capture.holds import Hold
from waggle_capture.seals import Seal

GAP, LEAD = 0.3, 0.15


def _prev(last: float | None) -> tuple[Seal, SimpleNamespace]:
    run = SimpleNamespace(proxy=SimpleNamespace(last_traffic=last), last_request_end=None, sealed_at=None,
                          doc_status=None)
    return Seal(run=run), run


def _seal(seal: Seal, run: SimpleNamespace) -> None:
    run.last_request_end = run.proxy.last_traffic
    run.sealed_at = time.monotonic()
    seal.event.set()


def test_navigation_starts_before_the_seal_and_a_late_byte_moves_it():
    async def main():
        seal, run = _prev(time.monotonic())
        hold = Hold(seal, GAP)
        nav = asyncio.ensure_future(hold.until_navigation(LEAD))
        await asyncio.sleep(0.05)
        run.proxy.last_traffic = time.monotonic()  # the sealing page still sends a request
        late = run.proxy.last_traffic
        await asyncio.wait_for(nav, 5)
        navigated = time.monotonic()
        assert not seal.event.is_set()  # before the previous seal
        assert navigated >= late + GAP - LEAD  # re-estimated from the late byte
        released = asyncio.ensure_future(hold.until_released())
        await asyncio.sleep(GAP)
        assert not released.done()  # never before the previous capture sealed
        run.proxy.last_traffic = time.monotonic()  # one more byte, then the seal
        _seal(seal, run)
        await released
        assert time.monotonic() >= run.last_request_end + GAP

    asyncio.run(main())


def test_no_byte_yet_and_the_back_off_gap():
    async def main():
        seal, run = _prev(None)
        hold = Hold(seal, GAP, backoff_gap_s=2 * GAP)
        nav = asyncio.ensure_future(hold.until_navigation(LEAD))
        await asyncio.sleep(2 * GAP)
        assert not nav.done()  # the previous page has not reached the site yet: not before its first byte
        run.proxy.last_traffic = time.monotonic()
        await asyncio.wait_for(nav, 5)
        run.doc_status = 503  # the previous document answered 503: the back-off gap
        assert hold.gap() == 2 * GAP
        run.proxy.last_traffic = None
        _seal(seal, run)  # no request at all: from the seal
        await hold.until_released()
        assert time.monotonic() >= run.sealed_at + 2 * GAP

    asyncio.run(main())


def test_a_slow_previous_page_lengthens_the_held_gap_by_the_delay_factor():
    """Extension "serverpolite" (decision 242): the client submits the held capture before it knows
    how long the previous page's document took; the server keeps ``delayFactor × documentMs``
    (capped at 30 s) from the previous page's last byte, never less than ``gapMs``."""
    async def main():
        seal, run = _prev(time.monotonic())
        run.document_ms = None
        hold = Hold.of(seal, {"gapMs": GAP * 1000, "delayFactor": 2})
        assert hold.gap() == GAP  # the document time is not known yet
        run.document_ms = 400  # the previous page's main document took 400 ms
        assert hold.gap() == 0.8
        run.document_ms = 50  # a fast page: the client's gap stays the floor
        assert hold.gap() == GAP
        run.document_ms = 60_000  # capped like the flow's adapted gap
        assert hold.gap() == 30.0
        run.document_ms = 400
        run.proxy.last_traffic = time.monotonic()
        _seal(seal, run)
        await hold.until_released()
        assert time.monotonic() >= run.last_request_end + 0.8
        assert Hold.of(seal, {"gapMs": GAP * 1000}).gap() == GAP  # no delayFactor: no adaptation

    asyncio.run(main())

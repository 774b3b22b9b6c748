"""The collector pause of the level report (ledger.crawl.report_gc): nested and interleaved
reports keep it off until the last ends; it is on again after a report, also a failed one;
a collector that was off stays off."""

from __future__ import annotations

import asyncio
import gc

import pytest

from ledger.crawl.report_gc import paused_gc


def test_nested_blocks_resume_after_the_last():
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_interleaved_reports_and_a_failure():
    seen = []

    async def report(hold: asyncio.Event, fail: bool) -> None:
        with paused_gc():
            await hold.wait()
            seen.append(gc.isenabled())
            if fail:
                raise RuntimeError("report broke")

    async def main() -> None:
        first, second = asyncio.Event(), asyncio.Event()
        a = asyncio.create_task(report(first, fail=True))
        b = asyncio.create_task(report(second, fail=False))
        await asyncio.sleep(0)
        first.set()
        with pytest.raises(RuntimeError):
            await a
        assert not gc.isenabled()  # b is still in flight
        second.set()
        await b

    asyncio.run(main())
    assert seen == [False, False] and gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()

"""A client that went away (docs/capture-server.md "When the client disconnects", docs/internals.md
"Stop means stop (round 22)"): a ``POST /captures`` whose client closed its connection while the
capture still waits for its turn — nothing of it out to a site, its proxy holding every
connection (``startAfterMs``, extension 9; ``holdAfter``, extension 12) or none reached it yet
(a disconnect seen before the context opened: ended when its proxy opens) — is ended without
sending anything: its proxy sealed at once (a connection whose hold ends later is dropped), the
capture task cancelled (its context closed, its seal signalled, the gate freed by the usual
``finally`` blocks), no report and no manifest. A capture that already reached a site finishes
as before. Why: failing a crawl cancels its Windmill job, which ends crawl_host's process and so
closes its connection here; before this the waiting capture still went out (1.5 s later).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

from starlette.requests import Request

log = logging.getLogger("waggle_capture")

T = TypeVar("T")
POLL_S = 0.1  # how often the client's connection is looked at while its capture runs
MARGIN_S = 0.005  # a hold ending this close is treated as over (a timer may fire a little early)


class ClientGone(Exception):
    """The capture was ended because its client went away before anything reached a site."""


@dataclass
class Watch:
    """One capture's view for the disconnect watcher: ``run`` (a ``state.Run``, :meth:`began`)
    and ``task`` (the capture's) once they exist, ``gone`` once the client went away,
    ``stopped`` once :meth:`end` ended the capture."""

    run: Any = None
    task: asyncio.Future | None = None
    gone: bool = False
    stopped: bool = False

    def began(self, run: Any) -> None:
        """``run_capture``'s ``on_run``: the capture's ``Run`` exists."""
        self.run = run
        run.on_egress = self.egress_opened

    def egress_opened(self) -> None:
        """The capture's proxy just opened (nothing went out yet; called in the capture's task):
        when its client is gone, raise ``CancelledError`` here, before any navigation is sent."""
        if self.gone and self._seal():
            raise asyncio.CancelledError()

    def untouched(self) -> bool:
        """Whether the capture's proxy is open and nothing of it can have reached a site before
        the next await: nothing passed it, and no connection reached it yet or it still holds
        every connection (a ``startAfterMs`` or ``holdAfter`` hold not over)."""
        proxy = getattr(self.run, "proxy", None)
        if proxy is None or proxy.sealed or proxy.last_traffic is not None:
            return False
        if proxy.connections == 0:
            return True
        now = time.monotonic() + MARGIN_S
        if proxy.not_before is not None and now < proxy.not_before:
            return True
        hold = getattr(self.run, "hold", None)
        return hold is not None and proxy.hold is not None and (not hold.sealed() or now < hold.release_at())

    def reached(self) -> bool:
        """Whether something of the capture passed its proxy (or it ended): it finishes as it is."""
        run = self.run
        if run is None:
            return False
        return run.network_sealed or (run.proxy is not None and run.proxy.last_traffic is not None)

    def end(self) -> bool:
        """End an untouched capture from outside its task: its proxy sealed now, its task
        cancelled; False when it is not untouched."""
        if self.task is None or not self._seal():
            return False
        self.task.cancel()
        return True

    def _seal(self) -> bool:
        """Seal an untouched capture's proxy now (synchronously: no connection is let out after
        this); False when it is not untouched."""
        if not self.untouched():
            return False
        self.run.proxy.sealed = True
        self.stopped = True
        log.info("client gone: capture %s ended at step %s, nothing was sent", self.run.task_id, self.run.step)
        return True


async def _watch(request: Request, watch: Watch, poll_s: float) -> None:
    task = watch.task
    while task is not None and not task.done():
        await asyncio.sleep(poll_s)
        if watch.reached():
            return  # its first request went out: it finishes as it is (the ledger salvages a late answer)
        watch.gone = await request.is_disconnected()
        if watch.gone and watch.end():  # else not untouched now (not open yet: egress_opened ends it)
            return


async def unless_client_gone(request: Request, watch: Watch, work: Awaitable[T], poll_s: float = POLL_S) -> T:
    """Run ``work`` (a capture that calls :meth:`Watch.began`) and return its result, unless the
    client of ``request`` went away before anything reached a site: then :class:`ClientGone`."""
    watch.task = task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_watch(request, watch, poll_s))
    try:
        return await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if watch.stopped and (current is None or not current.cancelling()):
            raise ClientGone() from None
        raise
    finally:
        watcher.cancel()

"""A client that went away (docs/capture-server.md "When the client disconnects", docs/internals.md
"Stop means stop (round 22)"): a ``POST /captures`` whose client closed its connection while the
capture still waits for its turn — its proxy holding every connection (``startAfterMs``,
extension 9; ``holdAfter``, extension 12), nothing of it out to a site yet — is ended without
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

log = logging.getLogger("devstack.capture")

T = TypeVar("T")
POLL_S = 0.1  # how often the client's connection is looked at while its capture runs
MARGIN_S = 0.005  # a hold ending this close is treated as over (a timer may fire a little early)


class ClientGone(Exception):
    """The capture was ended because its client went away before anything reached a site."""


@dataclass
class Watch:
    """One capture's view for the disconnect watcher: ``run`` (a ``state.Run``) once it exists,
    ``stopped`` once :meth:`stop` ended it."""

    run: Any = None
    stopped: bool = False

    def held(self) -> bool:
        """Whether the capture's proxy is open, nothing passed it yet and it still holds every
        connection (a ``startAfterMs`` or ``holdAfter`` hold not over), so nothing can reach a
        site before the next await."""
        proxy = getattr(self.run, "proxy", None)
        if proxy is None or proxy.sealed or proxy.last_traffic is not None:
            return False
        now = time.monotonic() + MARGIN_S
        if proxy.not_before is not None and now < proxy.not_before:
            return True
        hold = getattr(self.run, "hold", None)
        return hold is not None and proxy.hold is not None and (not hold.sealed() or now < hold.release_at())

    def reached(self) -> bool:
        """Whether something of the capture passed its proxy (or it ended): it finishes as it is."""
        run = self.run
        return run is not None and (run.network_sealed or (run.proxy is not None and run.proxy.last_traffic is not None))

    def stop(self) -> bool:
        """End a held capture's egress now (synchronously: no connection is let out after this);
        False when it is not held."""
        if not self.held():
            return False
        self.run.proxy.sealed = True
        self.stopped = True
        return True


async def _watch(request: Request, task: asyncio.Future, watch: Watch, poll_s: float) -> None:
    gone = False
    while not task.done():
        await asyncio.sleep(poll_s)
        gone = gone or await request.is_disconnected()
        if not gone:
            continue
        if watch.stop():
            log.info("client gone: capture %s ended at step %s, nothing was sent",
                     getattr(watch.run, "task_id", "?"), getattr(watch.run, "step", "?"))
            task.cancel()
            return
        if watch.reached():
            return  # its first request went out: it finishes (the ledger salvages a late answer)


async def unless_client_gone(request: Request, watch: Watch, work: Awaitable[T], poll_s: float = POLL_S) -> T:
    """Run ``work`` (a capture that sets ``watch.run``) and return its result, unless the client
    of ``request`` went away while it was held: then :class:`ClientGone` (nothing was sent)."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_watch(request, task, watch, poll_s))
    try:
        return await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if watch.stopped and (current is None or not current.cancelling()):
            raise ClientGone() from None
        raise
    finally:
        watcher.cancel()

"""The one Chromium of a capture server: launch, crash relaunch, recycling (contracts.md §D.3, C13).

Chromium is Debian's ``/usr/bin/chromium`` driven by Playwright (never a downloaded browser).
:meth:`BrowserHolder.ensure` returns a connected browser, launching it when there is none, when
the previous one crashed/disconnected, or when it is due for recycling: every ``recycle_every``
captures, or when the resident memory of the browser's processes exceeds ``max_rss_mb``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from playwright.async_api import Browser, Playwright, async_playwright

log = logging.getLogger("devstack.capture.browser")

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic", "--disable-dev-shm-usage",
]


class BrowserUnavailable(RuntimeError):
    """Chromium could not be launched or reached (→ ``errorDetails.type: connection``)."""


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def browser_rss_mb() -> float:
    """Resident memory (MiB) of all Chromium processes descending from this process."""
    total = 0
    for pid in _descendants(os.getpid()):
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            if "chrom" not in comm:
                continue
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


class BrowserHolder:
    """Owns Playwright and the browser. ``launches`` counts launches (relaunches included)."""

    def __init__(self, executable: str = CHROMIUM, recycle_every: int = 100, max_rss_mb: float = 1500.0,
                 launch_timeout_s: float = 30.0):
        self.executable = executable
        self.recycle_every = recycle_every
        self.max_rss_mb = max_rss_mb
        self.launch_timeout_s = launch_timeout_s
        self._pw: Playwright | None = None
        self.browser: Browser | None = None
        self.captures_since_launch = 0
        self.launches = 0
        self.recycles = 0
        self.version: str | None = None
        self._lock = asyncio.Lock()

    @property
    def connected(self) -> bool:
        return self.browser is not None and self.browser.is_connected()

    async def start(self) -> None:
        """Start Playwright and launch the browser (raises BrowserUnavailable)."""
        await self.ensure()

    async def ensure(self) -> Browser:
        async with self._lock:
            if self.browser is not None and not self.browser.is_connected():
                log.warning("browser disconnected; relaunching")
                await self._close_browser()
            if self.browser is not None and self._due_for_recycling():
                self.recycles += 1
                await self._close_browser()
            if self.browser is None:
                await self._launch()
            assert self.browser is not None
            return self.browser

    def _due_for_recycling(self) -> bool:
        if self.captures_since_launch >= self.recycle_every:
            log.info("recycling browser after %d captures", self.captures_since_launch)
            return True
        rss = browser_rss_mb()
        if rss > self.max_rss_mb:
            log.info("recycling browser at %.0f MiB RSS", rss)
            return True
        return False

    async def _launch(self) -> None:
        try:
            if self._pw is None:
                self._pw = await async_playwright().start()
            self.browser = await asyncio.wait_for(
                self._pw.chromium.launch(executable_path=self.executable, args=FLAGS, handle_sigint=False,
                                         handle_sigterm=False, handle_sighup=False),
                self.launch_timeout_s,
            )
        except Exception as e:  # noqa: BLE001 — any launch failure means "no browser"
            self.browser = None
            raise BrowserUnavailable(f"cannot launch {self.executable}: {e}") from e
        self.version = f"Chrome/{self.browser.version}"
        self.captures_since_launch = 0
        self.launches += 1

    async def _close_browser(self) -> None:
        b, self.browser = self.browser, None
        if b is not None:
            try:
                await asyncio.wait_for(b.close(), 10)
            except Exception:  # noqa: BLE001 — a dead browser cannot be closed politely
                pass

    def capture_done(self) -> None:
        self.captures_since_launch += 1

    async def kill_for_test(self) -> None:
        """Kill the browser processes (SIGKILL) as a crash would (fault knob ``crash_browser``)."""
        for pid in _descendants(os.getpid()):
            try:
                if "chrom" in Path(f"/proc/{pid}/comm").read_text():
                    os.kill(pid, 9)
            except OSError:
                pass

    async def close(self) -> None:
        await self._close_browser()
        if self._pw is not None:
            await self._pw.stop()
            self._pw = None

"""The one Chromium of a capture server: launch, crash relaunch, recycling (contracts.md §D.3, C13).

Chromium is Debian's ``/usr/bin/chromium`` driven by Playwright (never a downloaded browser).
:meth:`BrowserHolder.ensure` returns a connected browser, launching it when there is none, when
the previous one crashed/disconnected, or when it is due for recycling: every ``recycle_every``
captures, or when the resident memory of the browser's processes exceeds ``max_rss_mb``. The
memory is measured between captures (:meth:`BrowserHolder.measure_rss`, after a response) and
the last value is compared at the next :meth:`BrowserHolder.ensure`, so no capture waits for it.

Every capture opens a browser context, and Chromium (156) gives each context a window of its
own whose WebUI omnibox popup it builds at once in a renderer of its own (``--top-chrome-webui``):
0.6–1 s of CPU per capture on this machine, ~3/4 of what a context costs, for browser chrome a
headless capture never shows. :data:`QUIET_FEATURES` turns it off (issue 11, "Contexts without
browser chrome" in docs/internals.md). Chromium reads only the last ``--disable-features``
switch and Playwright passes its own list, so the holder learns that list from the first
launch's command line (``/proc``), then launches with the union instead of Playwright's.
"""

from __future__ import annotations

import asyncio
import logging
import os

from playwright.async_api import Browser, Playwright, async_playwright

log = logging.getLogger("waggle_capture.browser")

CHROMIUM = "/usr/bin/chromium"
# WebRTC would reach any address over UDP (STUN/ICE), past the guarded proxy and its private-host
# guard (issue 13 item 7): ``disable_non_proxied_udp`` leaves WebRTC only what goes through the
# proxy, i.e. no UDP at all. Chromium 156 honours ``--webrtc-ip-handling-policy`` (content
# switch); the older ``--force-webrtc-ip-handling-policy`` is silently ignored (tested).
WEBRTC_POLICY = "--webrtc-ip-handling-policy=disable_non_proxied_udp"
FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic", "--disable-dev-shm-usage", WEBRTC_POLICY,
]


# Browser chrome built for every new context's window, unused headless (see the module docstring).
QUIET_FEATURES = ("WebUIOmniboxPopup", "WebUIOmniboxAimPopup", "WebUIOmniboxFullPopup", "PreloadTopChromeWebUI")
DISABLE_FEATURES = "--disable-features="
# Playwright's own --disable-features argument and its union with QUIET_FEATURES, learned at the
# process's first launch ("": could not be read; contexts then keep their browser chrome).
_learned: dict[str, str] = {}


class BrowserUnavailable(RuntimeError):
    """Chromium could not be launched or reached (→ ``errorDetails.type: connection``)."""


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` from ``/proc/<pid>/task/*/children`` (Linux ≥ 3.5)."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
        except OSError:
            continue
    return out


def _descendants(root: int) -> list[int]:
    """Every descendant pid of ``root``. Why not a walk of all of ``/proc``: that costs ~60 ms
    per call on a busy machine, this reads only the tree's own ``children`` files (~1 ms)."""
    out, todo = [], [root]
    while todo:
        for c in _children(todo.pop()):
            out.append(c)
            todo.append(c)
    return out


def launched_disable_features(exclude: set[int] = frozenset()) -> str | None:
    """The ``--disable-features=…`` argument of the newest Chromium *browser* process (no
    ``--type=``) descending from this process and not in ``exclude`` (pids), or None."""
    found: tuple[float, str] | None = None
    for pid in _descendants(os.getpid()):
        if pid in exclude:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0")]
            if not argv or "chrom" not in os.path.basename(argv[0]) or any(a.startswith("--type=") for a in argv):
                continue
            started = os.stat(f"/proc/{pid}").st_mtime
        except OSError:
            continue
        values = [a for a in argv if a.startswith(DISABLE_FEATURES)]
        if values and (found is None or started >= found[0]):
            found = (started, values[-1])
    return None if found is None else found[1]


def merged_disable_features(arg: str, extra: tuple[str, ...] = QUIET_FEATURES) -> str:
    """``arg`` (``--disable-features=A,B``) with the features of ``extra`` it lacks appended."""
    have = [f for f in arg[len(DISABLE_FEATURES):].split(",") if f]
    return DISABLE_FEATURES + ",".join(have + [f for f in extra if f not in have])


def browser_rss_mb() -> float:
    """Resident memory (MiB) of all Chromium processes descending from this process."""
    total = 0
    for pid in _descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if "chrom" not in f.read():
                    continue
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
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
        self.user_agent: str | None = None  # Chromium's own (Browser.getVersion), read at launch
        self.last_rss_mb: float | None = None  # of this browser, measured after its last capture
        self._lock = asyncio.Lock()

    @property
    def connected(self) -> bool:
        return self.browser is not None and self.browser.is_connected()

    async def start(self) -> None:
        """Start Playwright and launch the browser (raises BrowserUnavailable)."""
        await self.ensure()

    async def ensure(self, may_recycle: bool = True) -> Browser:
        """The browser, relaunched when disconnected or (``may_recycle``: no other capture is
        loading on it) due for recycling."""
        async with self._lock:
            if self.browser is not None and not self.browser.is_connected():
                log.warning("browser disconnected; relaunching")
                await self._close_browser()
            if self.browser is not None and may_recycle and self._due_for_recycling():
                self.recycles += 1
                await self._close_browser()
            if self.browser is None:
                await self._launch()
            assert self.browser is not None
            return self.browser

    def measure_rss(self) -> float:
        """Measure and remember the browser's resident memory (MiB); blocking (~1–50 ms of
        ``/proc`` reads), so callers run it in a thread between captures."""
        self.last_rss_mb = browser_rss_mb()
        return self.last_rss_mb

    def due_for_recycling(self, ahead: int = 0) -> bool:
        """Whether the next :meth:`ensure` relaunches: ``recycle_every`` captures done (counting
        ``ahead`` captures not yet counted), or the last measured RSS (measured now when there is
        none yet) above ``max_rss_mb``."""
        if self.captures_since_launch + ahead >= self.recycle_every:
            return True
        rss = self.last_rss_mb if self.last_rss_mb is not None else self.measure_rss()
        return rss > self.max_rss_mb

    def _due_for_recycling(self) -> bool:
        due = self.due_for_recycling()
        if due:
            log.info("recycling browser after %d captures at %.0f MiB RSS", self.captures_since_launch,
                     self.last_rss_mb or 0)
        return due

    async def _launch(self) -> None:
        try:
            if self._pw is None:
                self._pw = await async_playwright().start()
            self.browser = await self._launch_once()
            if not _learned:  # the process's first launch: learn Playwright's list, relaunch with the union
                learned = await asyncio.to_thread(launched_disable_features)
                _learned["playwright"] = learned or ""
                _learned["merged"] = merged_disable_features(learned) if learned else ""
                if not learned:
                    log.warning("could not read Chromium's --disable-features; contexts keep their browser chrome")
                elif _learned["merged"] != learned:
                    await self._close_browser()
                    self.browser = await self._launch_once()
        except Exception as e:  # noqa: BLE001 — any launch failure means "no browser"
            self.browser = None
            raise BrowserUnavailable(f"cannot launch {self.executable}: {e}") from e
        self.version = f"Chrome/{self.browser.version}"
        self.user_agent = await self._user_agent(self.browser)
        self.last_rss_mb = None
        self.captures_since_launch = 0
        self.launches += 1

    async def _launch_once(self) -> Browser:
        assert self._pw is not None
        args, ignore = list(FLAGS), None
        if _learned.get("merged"):  # replaces Playwright's own list (Chromium reads the last one only)
            args, ignore = [*FLAGS, _learned["merged"]], [_learned["playwright"]]
        return await asyncio.wait_for(
            self._pw.chromium.launch(executable_path=self.executable, args=args, ignore_default_args=ignore,
                                     handle_sigint=False, handle_sigterm=False, handle_sighup=False),
            self.launch_timeout_s,
        )

    async def _user_agent(self, browser: Browser) -> str | None:
        """Chromium's own user agent string, or None when the browser does not say (its own is
        used then: a capture never fails for want of the suffix)."""
        try:
            cdp = await asyncio.wait_for(browser.new_browser_cdp_session(), self.launch_timeout_s)
            try:
                return (await asyncio.wait_for(cdp.send("Browser.getVersion"), self.launch_timeout_s))["userAgent"]
            finally:
                await cdp.detach()
        except Exception:  # noqa: BLE001
            log.warning("could not read Chromium's user agent; pages get Chromium's own", exc_info=True)
            return None

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
                with open(f"/proc/{pid}/comm") as f:
                    comm = f.read()
                if "chrom" in comm:
                    os.kill(pid, 9)
            except OSError:
                pass

    async def close(self) -> None:
        await self._close_browser()
        if self._pw is not None:
            await self._pw.stop()
            self._pw = None

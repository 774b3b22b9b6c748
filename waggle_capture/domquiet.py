"""Wait for the page's DOM to be quiet before its links are read (issue 24 item 7).

Links a page adds by JavaScript after its load event (a timer, a fetch, a framework's late
render) were missed: the settle wait watches the network only, and a ``setTimeout(…, 2000)``
makes no request. :data:`INIT_JS` runs in every frame before the page's own scripts (a context
init script) and keeps, in the non-enumerable global ``__waggleDom``:

* ``last`` — ``performance.now()`` of the latest DOM mutation (nodes added or removed anywhere
  in the document, or an ``href`` changed: a ``MutationObserver`` on the document);
* the page's pending ``setTimeout`` callbacks and when each is due (one-shot timers only: an
  interval repeats forever, and its mutations, if any, are seen as mutations).

:func:`wait_dom_quiet` then waits until no mutation for :data:`QUIET_MS` (none since the load
event counts as quiet: what changed before it was covered by the network settle, so a static page
waits nothing) and no one-shot timer is due before the bound — or until :data:`MAX_MS` after the page's load event (the page's own clock),
whichever comes first — and returns what it saw for the report's ``settle.dom``:
``{quietMs, maxMs, endedBy: "quiet" | "limit", waitedMs, lastMutationAtMs?}`` (ms; ``lastMutationAtMs``
from the load event, negative when before it). The wait never touches the network.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from playwright.async_api import BrowserContext, Page

QUIET_MS = 500
MAX_MS = 5000

INIT_JS = r"""(() => {
  if (Object.prototype.hasOwnProperty.call(window, "__waggleDom")) return;
  const nativeSet = window.setTimeout, nativeClear = window.clearTimeout;
  const due = new Map();
  const state = {
    last: performance.now(),
    sleep: (ms) => new Promise((r) => nativeSet.call(window, r, ms)),
    nextDue: () => { let m = null; for (const d of due.values()) if (m === null || d < m) m = d; return m; },
  };
  Object.defineProperty(window, "__waggleDom", { value: state, enumerable: false });
  window.setTimeout = function (fn, ms, ...args) {
    if (typeof fn !== "function") return nativeSet.call(window, fn, ms, ...args);
    let id;
    const run = function () { due.delete(id); return fn.apply(this, arguments); };
    id = nativeSet.call(window, run, ms, ...args);
    due.set(id, performance.now() + Math.max(0, Number(ms) || 0));
    return id;
  };
  window.clearTimeout = function (id) { due.delete(id); return nativeClear.call(window, id); };
  const watch = () => new MutationObserver(() => { state.last = performance.now(); })
    .observe(document, { subtree: true, childList: true, attributes: true, attributeFilter: ["href"] });
  watch();
})();"""

WAIT_JS = r"""async ([quietMs, maxMs]) => {
  const w = window.__waggleDom;
  const nav = performance.getEntriesByType("navigation")[0];
  const loadAt = nav && nav.loadEventEnd > 0 ? nav.loadEventEnd : performance.now();
  const limit = loadAt + maxMs, t0 = performance.now();
  if (!w) return { endedBy: "unwatched", waitedMs: 0 };
  for (;;) {
    const now = performance.now();
    const next = w.nextDue();
    const timerDue = next !== null && next <= limit;
    const quiet = w.last <= loadAt || now - w.last >= quietMs;  // before the load: the network settle's
    if (quiet && !timerDue) return { endedBy: "quiet", waitedMs: now - t0, last: w.last - loadAt };
    if (now >= limit) return { endedBy: "limit", waitedMs: now - t0, last: w.last - loadAt };
    await w.sleep(Math.max(5, Math.min(50, limit - now)));
  }
}"""


async def install(context: BrowserContext, timeout_s: float) -> None:
    """Add :data:`INIT_JS` to ``context`` (every page and frame, every later navigation)."""
    await asyncio.wait_for(context.add_init_script(script=INIT_JS), timeout_s)


async def wait_dom_quiet(page: Page, timeout_s: float, quiet_ms: int = QUIET_MS, max_ms: int = MAX_MS) -> dict[str, Any]:
    """Wait in ``page`` as the module doc says, at most ``timeout_s`` (the capture's budget);
    returns the ``settle.dom`` object. A page that cannot be asked (navigating away, closed, the
    budget) ends the wait with ``endedBy: "unavailable"`` — the links are then read as before."""
    t0 = time.monotonic()
    out: dict[str, Any] = {"quietMs": quiet_ms, "maxMs": max_ms}
    try:
        got = await asyncio.wait_for(page.evaluate(WAIT_JS, [quiet_ms, max_ms]), timeout_s)
    except Exception:  # noqa: BLE001 - the links are read as they are
        got = None
    if not isinstance(got, dict):
        return {**out, "endedBy": "unavailable", "waitedMs": int((time.monotonic() - t0) * 1000)}
    out.update(endedBy=got.get("endedBy"), waitedMs=int(got.get("waitedMs") or 0))
    if isinstance(got.get("last"), (int, float)):
        out["lastMutationAtMs"] = int(got["last"])
    return out

"""Behaviors (contracts.md §A.4 ``behaviors``): the ``__bh`` host object and running them."""

from __future__ import annotations

import asyncio
import time

from playwright.async_api import Page

from devstack.capture.state import Run

# The behavior host object, evaluated before behaviors and archived byte-for-byte as
# behaviors/runtime.js. Called with [opts, budgetMs].
RUNTIME_JS = """([opts, budgetMs]) => {
  const started = Date.now();
  const reports = [];
  Object.defineProperty(globalThis, "__bhReports", { value: reports, configurable: true });
  globalThis.__bh = {
    opts,
    get remainingMs() { return Math.max(0, budgetMs - (Date.now() - started)); },
    report(id, data) { reports.push({ id: String(id), elapsedMs: Date.now() - started, data }); },
  };
}
"""


async def run_behaviors(run: Run, page: Page, cdp, behaviors: list[dict], budget_ms: int) -> list[dict]:
    """Run ``behaviors`` in order within ``budget_ms`` (milliseconds, shared); returns the
    reports they made plus one ``{id, error}`` per behavior that threw or ran out of time."""
    opts = {b["id"]: b.get("options") for b in behaviors}
    await asyncio.wait_for(page.evaluate(RUNTIME_JS, [opts, budget_ms]), run.op_timeout(10_000))
    end = time.monotonic() + budget_ms / 1000
    errors: list[dict] = []
    for b in behaviors:
        left = min(end - time.monotonic(), run.remaining_s() - 1)
        if left <= 0:
            errors.append({"id": b["id"], "error": "behavior budget exhausted before it ran"})
            continue
        try:
            res = await asyncio.wait_for(cdp.send("Runtime.evaluate", {
                "expression": b["source"], "awaitPromise": True, "returnByValue": False}), left)
            if res.get("exceptionDetails"):
                desc = res["exceptionDetails"].get("exception", {}).get("description") or res["exceptionDetails"].get("text")
                errors.append({"id": b["id"], "error": str(desc)[:500]})
        except asyncio.TimeoutError:
            errors.append({"id": b["id"], "error": "behavior did not finish within its budget"})
    reports = await asyncio.wait_for(page.evaluate("() => globalThis.__bhReports || []"), run.op_timeout(5000))
    return reports + errors

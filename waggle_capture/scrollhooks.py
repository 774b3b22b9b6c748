"""Extension ``scrollHooks`` (docs/capture-server.md): what on a page could react to scrolling.

Scrolling a static document reveals nothing; it only holds the capture (and the host's next
page) back — the default ``autoscroll`` stepped through the Python docs' 314,000 px
``contents.html`` for ~29 s (issue 11 item 4). So, for captures that run behaviors, the server
adds :data:`HOOKS_JS` to the browser context, to run in every frame before any page or preload
script. It counts, per frame, in the
non-enumerable global ``__waggleScrollHooks``:

* ``scrollListeners`` — ``scroll``/``scrollend``/``wheel``/``mousewheel``/``touchmove`` listeners
  added to the window, the document, ``<html>`` or ``<body>`` (the targets a viewport scroll
  reaches; listeners of inner scroll containers never fire when the window scrolls);
* ``observed`` — ``IntersectionObserver.observe`` calls (lazy loaders, infinite scroll);
* ``pending`` — the page's ``fetch``/``XMLHttpRequest`` requests in flight (so a behavior can tell
  a step that started a request from one that did not).

Behaviors read the rest from the DOM when they run (``onscroll`` handlers, ``loading=lazy``).
The wrappers are ``Proxy`` objects over the page's own functions: they call them unchanged,
``toString`` still says ``[native code]``, and a page sees no new enumerable global. A real
BrowserHive v12 has no such global; the ``autoscroll`` behavior then scrolls as before.
"""

from __future__ import annotations

import asyncio

from playwright.async_api import BrowserContext

# Idempotent (a frame navigated twice, a script added twice). Every wrapper calls the original
# through Reflect with the same receiver and arguments, so the page's results and errors are
# its own.
HOOKS_JS = r"""(() => {
  if (Object.getOwnPropertyDescriptor(globalThis, "__waggleScrollHooks")) return;
  const hooks = { version: 1, scrollListeners: 0, observed: 0, pending: 0 };
  Object.defineProperty(globalThis, "__waggleScrollHooks", { value: hooks, configurable: true });
  const types = new Set(["scroll", "scrollend", "wheel", "mousewheel", "touchmove"]);
  // A bare addEventListener(...) call has no receiver: the global object is meant.
  const viewportTarget = (t) =>
    t === undefined || t === null || t === globalThis || (typeof document !== "undefined" &&
      (t === document || t === document.documentElement || t === document.body));
  const wrap = (owner, name, handler) => {
    const original = owner && owner[name];
    if (typeof original !== "function") return;
    Object.defineProperty(owner, name, { ...Object.getOwnPropertyDescriptor(owner, name),
                                         value: new Proxy(original, handler) });
  };
  if (typeof EventTarget !== "undefined") {
    wrap(EventTarget.prototype, "addEventListener", { apply(f, self, args) {
      const out = Reflect.apply(f, self, args);
      if (types.has(String(args[0])) && args[1] && viewportTarget(self)) hooks.scrollListeners += 1;
      return out;
    } });
  }
  if (typeof IntersectionObserver !== "undefined") {
    wrap(IntersectionObserver.prototype, "observe", { apply(f, self, args) {
      const out = Reflect.apply(f, self, args);
      hooks.observed += 1;
      return out;
    } });
  }
  const done = () => { hooks.pending = Math.max(0, hooks.pending - 1); };
  wrap(globalThis, "fetch", { apply(f, self, args) {
    const out = Reflect.apply(f, self, args);
    hooks.pending += 1;
    out.then(done, done);
    return out;
  } });
  if (typeof XMLHttpRequest !== "undefined") {
    // Counted before the call: a synchronous request ends (loadend) inside send().
    wrap(XMLHttpRequest.prototype, "send", { apply(f, self, args) {
      if (!(self instanceof XMLHttpRequest)) return Reflect.apply(f, self, args);
      hooks.pending += 1;
      self.addEventListener("loadend", done, { once: true });
      try {
        return Reflect.apply(f, self, args);
      } catch (e) {
        self.removeEventListener("loadend", done);
        done();
        throw e;
      }
    } });
  }
})();"""


async def install(context: BrowserContext, timeout_s: float) -> None:
    """Add :data:`HOOKS_JS` to ``context`` (its every page and frame, every later navigation,
    before the page's scripts and before preload scripts added after this call); once per
    context (a shared session's context keeps it). Bounded by ``timeout_s`` seconds; raises what
    Playwright raises."""
    if getattr(context, "_waggle_scroll_hooks", False):
        return
    await asyncio.wait_for(context.add_init_script(script=HOOKS_JS), timeout_s)
    context._waggle_scroll_hooks = True  # type: ignore[attr-defined]

// autoscroll (behavior): scroll to the bottom in steps so lazy content loads before capture.
// Stops when the page height has not grown for `settleRounds` steps at the bottom with no page request in flight
// and no image in view still loading, when
// `maxSteps` is reached, or when the host's cooperative budget (`__bh.remainingMs`) runs below
// `reserveMs`. A page that fits its viewport is not scrolled at all (`stoppedBy: "fits"`):
// scrolling it fires no scroll event and reveals nothing, and its idle rounds would only hold
// the capture (and the host's next page) back by `settleRounds × delayMs`.
//
// With our capture server's `scrollHooks` extension (the page-side counters
// `__waggleScrollHooks`, docs/capture-server.md) it also knows whether anything on the page can
// react to scrolling: scroll/wheel listeners on the window, document, <html> or <body>, an
// `onscroll` handler, IntersectionObserver targets, `loading=lazy` images and iframes not loaded
// yet. A long page with none of them (a static document: the Python docs' 314,000 px
// contents.html took ~29 s of steps) gets one probe — a jump to the bottom, `probeMs`, and back —
// and, when that changed nothing, `stoppedBy: "static"`. A page with hooks is scrolled
// network-aware: after each step it waits `quickMs`, and the full `delayMs` only when the step
// grew the page, started or finished a request, or reached the bottom. And when its only hooks
// are scroll listeners (no IntersectionObserver target, no lazy element, no element that looks
// like a script's lazy image: `data-src`, `data-original`, `.lazyload`, an <img> without src…)
// and `idleSteps` steps in a row did nothing, it jumps to the bottom (where infinite scroll
// loads) and spends its `settleRounds` there: a sticky header's listener loads nothing, and
// stepping a long page for it cost up to `maxSteps` × `quickMs`. Without the extension (a real
// BrowserHive v12) it scrolls exactly as before: `delayMs` after every step.
//
// Reports {steps, scrolledPx, finalHeight, stoppedBy} through `__bh.report`, plus
// `reacts` (the hooks found, e.g. ["scrollListeners"]) and `skippedPx` (jumped over) when the
// extension is there.
// Options (all optional, from `__bh.opts.autoscroll`): stepPx, delayMs, maxSteps,
// settleRounds, reserveMs, quickMs (default 50), probeMs (default 100), idleSteps (default 8;
// 0: never jump), scrollStatic (true: step through a page without hooks too, never jumping). Everything lives inside one expression: capture
// scripts share a global scope, and the completion value (a promise) lets the host await it.
(async (): Promise<void> => {
  const id = "autoscroll";
  const opts = __bh.opts[id] ?? {};
  const num = (name: string, fallback: number, min: number): number => {
    const value = opts[name];
    return typeof value === "number" && Number.isFinite(value) && value >= min ? value : fallback;
  };
  const stepPx = num("stepPx", Math.max(200, Math.floor(window.innerHeight * 0.8)), 1);
  const delayMs = num("delayMs", 250, 0);
  const maxSteps = num("maxSteps", 200, 1);
  const settleRounds = num("settleRounds", 3, 1);
  const reserveMs = num("reserveMs", 1500, 0);
  const quickMs = Math.min(num("quickMs", 50, 0), delayMs);
  const probeMs = num("probeMs", 100, 0);
  const idleSteps = num("idleSteps", 8, 0);
  const scrollStatic = opts.scrollStatic === true;
  const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
  const height = (): number =>
    Math.max(document.documentElement.scrollHeight, document.body ? document.body.scrollHeight : 0);

  type Hooks = { scrollListeners: number; observed: number; pending: number };
  const hooks = (globalThis as unknown as { __waggleScrollHooks?: Hooks }).__waggleScrollHooks;
  const reacts = (h: Hooks): string[] => {
    const found: string[] = [];
    if (h.scrollListeners > 0) found.push("scrollListeners");
    if (window.onscroll !== null || document.onscroll !== null) found.push("onscroll");
    if (h.observed > 0) found.push("intersectionObserver");
    const lazy = document.querySelectorAll('img[loading="lazy" i], iframe[loading="lazy" i]');
    if (Array.from(lazy).some((el) => !(el instanceof HTMLImageElement) || !el.complete)) found.push("lazyElements");
    return found;
  };
  // Requests the page finished since the behavior began (Resource Timing; the observer sees
  // every entry, the performance buffer stops at 250).
  let finished = 0;
  // The browser's own icon fetch (`/favicon.ico` or a `rel=icon` link) lands at a random moment
  // after load and is no reaction to scrolling: counting it made a static page look busy.
  const isIcon = (name: string): boolean => {
    try {
      if (new URL(name).pathname.endsWith("/favicon.ico")) {
        return true;
      }
    } catch {
      return false;
    }
    return Array.from(document.querySelectorAll<HTMLLinkElement>('link[rel~="icon"]')).some((l) => l.href === name);
  };
  const observer = typeof PerformanceObserver === "function" ? new PerformanceObserver((list) => {
    finished += list.getEntries().filter((e) => !isIcon(e.name)).length;
  }) : undefined;
  try {
    observer?.observe({ type: "resource" });
  } catch {
    // an engine without resource entries: steps then count only height and pending requests
  }
  // Elements a scroll listener's lazy loader would fill in (its own markup, not `loading=lazy`).
  const lazyMarkup = (): boolean =>
    document.querySelector("img:not([src]):not([srcset]), [data-src], [data-srcset], [data-original], " +
      "[data-lazy], [data-lazy-src], [data-bg], .lazyload, .lazy") !== null;
  // Only scroll listeners (none at all: a static page stepped through for `scrollStatic`, no jump).
  const listenersOnly = (found: string[]): boolean =>
    found.length > 0 && found.every((r) => r === "scrollListeners" || r === "onscroll");
  // An image in view still loading (a scroll listener just set its src): the page's own hooks
  // count fetch and XHR only, and a capture sealed now would lack it.
  const imagesLoading = (): boolean => Array.from(document.images).some((img) => {
    if (img.complete || !(img.currentSrc || img.getAttribute("src"))) return false;
    const r = img.getBoundingClientRect();
    return r.top < window.innerHeight && r.bottom > 0;
  });
  const busy = (beforeHeight: number, beforeFinished: number): boolean =>
    height() > beforeHeight || finished > beforeFinished || (hooks !== undefined && hooks.pending > 0);

  let steps = 0;
  let scrolledPx = 0;
  let unchanged = 0;
  let idle = 0;
  let skippedPx = 0;
  let lastHeight = height();
  let stoppedBy = lastHeight <= window.innerHeight ? "fits" : "bottom";
  let found: string[] | undefined = hooks ? reacts(hooks) : undefined;
  if (stoppedBy !== "fits" && found !== undefined && found.length === 0 && !scrollStatic) {
    const [x, y, seen] = [window.scrollX, window.scrollY, finished];
    window.scrollTo(x, lastHeight);
    await sleep(probeMs);
    found = reacts(hooks as Hooks);
    if (found.length === 0 && !busy(lastHeight, seen)) {
      stoppedBy = "static";
    }
    window.scrollTo(x, y);
  }
  while (stoppedBy !== "fits" && stoppedBy !== "static") {
    if (steps >= maxSteps) {
      stoppedBy = "maxSteps";
      break;
    }
    if (__bh.remainingMs < reserveMs + delayMs) {
      stoppedBy = "budget";
      break;
    }
    const [before, seen] = [window.scrollY, finished];
    const jump = idleSteps > 0 && idle >= idleSteps && hooks !== undefined && listenersOnly(reacts(hooks)) &&
      !lazyMarkup();
    if (jump) {
      window.scrollTo(window.scrollX, height());
      skippedPx += Math.max(0, window.scrollY - before - stepPx);
    } else {
      window.scrollBy(0, stepPx);
    }
    steps += 1;
    await sleep(quickMs);
    const bottom = window.scrollY + window.innerHeight >= height() - 1;
    const active = busy(lastHeight, seen);
    idle = active || bottom ? 0 : idle + 1;
    if (hooks === undefined || bottom || active) {
      await sleep(delayMs - quickMs);
    }
    scrolledPx += Math.max(0, window.scrollY - before);
    const now = height();
    const atBottom = window.scrollY + window.innerHeight >= now - 1;
    if (now > lastHeight) {
      unchanged = 0;
      lastHeight = now;
    } else if (atBottom && !(hooks !== undefined && hooks.pending > 0) && !imagesLoading()) {
      // a fetch still in flight may yet grow the page (a loaded machine answers late), an image
      // in view may still be loading: such a round is no settle round; maxSteps and the budget
      // still bound the wait
      unchanged += 1;
      if (unchanged >= settleRounds) {
        break;
      }
    }
  }
  observer?.disconnect();
  const report: Record<string, unknown> = { steps, scrolledPx, finalHeight: lastHeight, stoppedBy };
  if (hooks !== undefined) {
    report.reacts = found ?? reacts(hooks);
    report.skippedPx = skippedPx;
  }
  __bh.report(id, report);
})();

// autoscroll (behavior): scroll to the bottom in steps so lazy content loads before capture.
// Stops when the page height has not grown for `settleRounds` steps, when `maxSteps` is
// reached, or when the host's cooperative budget (`__bh.remainingMs`) runs below `reserveMs`.
// A page that fits its viewport is not scrolled at all (`stoppedBy: "fits"`): scrolling it
// fires no scroll event and reveals nothing, and its idle rounds would only hold the capture
// (and the host's next page) back by `settleRounds × delayMs`.
// Reports {steps, scrolledPx, finalHeight, stoppedBy} through `__bh.report`.
// Options (all optional, from `__bh.opts.autoscroll`): stepPx, delayMs, maxSteps,
// settleRounds, reserveMs. Everything lives inside one expression: capture scripts share a
// global scope, and the completion value (a promise) lets the host await the scroll.
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
  const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
  const height = (): number =>
    Math.max(document.documentElement.scrollHeight, document.body ? document.body.scrollHeight : 0);

  let steps = 0;
  let scrolledPx = 0;
  let unchanged = 0;
  let lastHeight = height();
  let stoppedBy = lastHeight <= window.innerHeight ? "fits" : "bottom";
  while (stoppedBy !== "fits") {
    if (steps >= maxSteps) {
      stoppedBy = "maxSteps";
      break;
    }
    if (__bh.remainingMs < reserveMs + delayMs) {
      stoppedBy = "budget";
      break;
    }
    const before = window.scrollY;
    window.scrollBy(0, stepPx);
    steps += 1;
    await sleep(delayMs);
    scrolledPx += Math.max(0, window.scrollY - before);
    const now = height();
    const atBottom = window.scrollY + window.innerHeight >= now - 1;
    if (now > lastHeight) {
      unchanged = 0;
      lastHeight = now;
    } else if (atBottom) {
      unchanged += 1;
      if (unchanged >= settleRounds) {
        break;
      }
    }
  }
  __bh.report(id, { steps, scrolledPx, finalHeight: lastHeight, stoppedBy });
})();

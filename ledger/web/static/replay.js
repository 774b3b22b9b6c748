// Replays one archived page with ReplayWeb.page (its service worker under /replay/, served by
// the ledger from the pinned npm package): the WACZ is read through its signed S3 URL.
const params = new URLSearchParams(location.search);
const source = params.get("source");
const url = params.get("url");
const what = document.getElementById("what");
// The worker ReplayWeb.page registers itself (same script URL and scope: registering it first
// makes its own registration a no-op).
const WORKER = "/replay/sw.js?serveIndex=1";
const SCOPE = "/replay/";

// Resolves once the replay service worker is active. The player's iframe must load under an
// active worker: it reloads an uncontrolled frame only 3 times, 100 ms apart, then gives up
// and shows nothing — and a first install (1.2 MB script, IndexedDB) takes longer than that on
// a loaded machine.
async function workerActive() {
  const registration = await navigator.serviceWorker.register(WORKER, { scope: SCOPE });
  const worker = registration.active || registration.waiting || registration.installing;
  if (worker && worker.state !== "activated") {
    await new Promise((resolve) => {
      worker.addEventListener("statechange", () => worker.state === "activated" && resolve());
      if (registration.active) resolve();  // activated between the read and the listener
    });
  }
}

async function start() {
  what.textContent = url + (params.get("captured") ? " — captured " + params.get("captured") : "");
  if (!("serviceWorker" in navigator)) {
    what.textContent = "This browser cannot replay here: it offers no service workers (a private window?).";
    return;
  }
  try {
    await workerActive();
  } catch (e) {
    what.textContent = "Replay could not start its service worker: " + e.message;
    return;
  }
  const player = document.createElement("replay-web-page");
  player.setAttribute("source", source);
  player.setAttribute("url", url);
  player.setAttribute("replayBase", SCOPE);
  player.setAttribute("embed", "replayonly");
  document.body.append(player);
}

if (!source || !url) {
  what.textContent = "Nothing to replay: open a page from the archives list.";
} else {
  start();
}

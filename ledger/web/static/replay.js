// Replays with ReplayWeb.page (its service worker under /replay/, served by the ledger from the
// pinned npm package) either one archived page (?source=<signed S3 URL of its WACZ>) or a whole
// crawl (?collection=<the collection's path with its ticket>, docs/decisions/151): the player
// loads the crawl's multi-WACZ JSON from this origin and reads each member through its ledger
// path, which redirects to a URL signed at that read (decision 371): a session outlives 300 s.
const params = new URLSearchParams(location.search);
const collection = params.get("collection");
// only a path of this ledger's collection route: the page never loads an address it was handed
const COLLECTION = /^\/api\/crawls\/[0-9a-f-]{36}\/collection\.json\?ticket=[\w-]+$/;
const source = collection && COLLECTION.test(collection) ? location.origin + collection : params.get("source");
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
  what.textContent = (collection ? "crawl " + (params.get("title") || "") + " — " : "") + url
    + (params.get("captured") ? " — captured " + params.get("captured") : "");
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
  // the capture of that time (20261130100000), not whichever capture of the URL the collection holds
  const ts = (params.get("captured") || "").replace(/\D/g, "").slice(0, 14);
  if (collection && ts.length === 14) player.setAttribute("ts", ts);
  player.setAttribute("replayBase", SCOPE);
  // a crawl: the player's bar with its page list; one page: the page alone
  player.setAttribute("embed", collection ? "default" : "replayonly");
  document.body.append(player);
}

if (!source || !url) {
  what.textContent = collection && !COLLECTION.test(collection)
    ? "This replay link is not a waggle crawl's collection: open the crawl and choose Replay this crawl."
    : "Nothing to replay: open a page from the archives list.";
} else {
  start();
}

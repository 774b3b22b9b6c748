// Replays one archived page with ReplayWeb.page (its service worker under /replay/, served by
// the ledger from the pinned npm package): the WACZ is read through its signed S3 URL.
const params = new URLSearchParams(location.search);
const source = params.get("source");
const url = params.get("url");
const what = document.getElementById("what");
if (!source || !url) {
  what.textContent = "Nothing to replay: open a page from the archives list.";
} else {
  what.textContent = url + (params.get("captured") ? " — captured " + params.get("captured") : "");
  const player = document.createElement("replay-web-page");
  player.setAttribute("source", source);
  player.setAttribute("url", url);
  player.setAttribute("replayBase", "/replay/");
  player.setAttribute("embed", "replayonly");
  document.body.append(player);
}

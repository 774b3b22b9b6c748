// What changed since the crawl before (GET /api/crawls/{id}/changes, issue 27 item 3): counts of
// pages new, changed, unchanged and gone, and the lists; each changed page replays both captures,
// each inside its own crawl's collection (the #/replay links search hits open).
import { api, isMissingRoute } from "./api.js";
import { el, fill, table } from "./dom.js";

const SHOWN = 100;

// One side's replay link, or why it cannot be replayed (a revisit whose original is not
// viewable is said, never replayed from elsewhere).
function replayCell(side, label) {
  if (!side) return el("span", { className: "muted" }, "—");
  if (side.replay) return el("a", { href: side.replay, className: "replay", dataset: { side: label } }, "replay " + label);
  if (side.missing) return el("span", { className: "muted missing", dataset: { why: side.missing.why } }, label + ": " + side.missing.reason);
  return el("span", { className: "muted" }, label + ": " + side.state + (side.reason ? " (" + side.reason + ")" : ""));
}

function rows(entries, kind) {
  return entries.slice(0, SHOWN).map((e) => el("tr", { className: "change", dataset: { kind } },
    el("td", { className: "url" }, e.url, e.why ? el("div", { className: "muted" }, e.why + ": " + e.reason) : null),
    el("td", {}, replayCell(e.before, "before")),
    el("td", {}, replayCell(e.now, "now"))));
}

function list(title, entries, kind, count, open) {
  if (!count) return null;
  const more = count > Math.min(entries.length, SHOWN) ? el("p", { className: "muted" }, (count - Math.min(entries.length, SHOWN)) + " more not shown (waggle changes --json)") : null;
  return el("details", { className: "changes-list", dataset: { kind }, open: open || undefined },
    el("summary", {}, title + " (" + count + ")"),
    table(["URL", "Before", "Now"], rows(entries, kind)), more);
}

export async function changesSection(crawl, box) {
  box.replaceChildren(el("p", { className: "muted" }, "Comparing with the crawl before…"));
  let c;
  try {
    // Ask first which crawl is the one before: "none" is a 200 with its reason, not an error the
    // browser logs (decision 354); then compare with exactly that crawl.
    const base = "/api/crawls/" + encodeURIComponent(crawl.crawlId) + "/changes";
    const before = await api("GET", base + "/since");
    if (!before.since) {
      box.replaceChildren(el("p", { className: "muted", id: "changes-none" }, before.reason.charAt(0).toUpperCase() + before.reason.slice(1) + "."));
      return;
    }
    c = await api("GET", base + "?since=" + encodeURIComponent(before.since));
  } catch (e) {
    // an older ledger has no such route: say nothing
    box.replaceChildren(el("p", { className: isMissingRoute(e) ? "muted" : "error", id: "changes-none" },
      isMissingRoute(e) ? "" : e.message));
    return;
  }
  const n = c.counts;
  fill(box,  // an empty list is null: left out
    el("p", { id: "changes-summary" },
      "Since crawl ", el("a", { href: "#/crawls/" + c.since.crawlId }, c.since.crawlId.slice(0, 8)), ": ",
      el("span", { dataset: { count: "new" } }, n.new + " new"), ", ",
      el("span", { dataset: { count: "changed" } }, n.changed + " changed"), ", ",
      el("span", { dataset: { count: "unchanged" } }, n.unchanged + " unchanged"), ", ",
      el("span", { dataset: { count: "gone" } }, n.gone + " gone"),
      n.notCompared ? ", " + n.notCompared + " not compared" : ""),
    c.goneNote && n.gone ? el("p", { id: "changes-gone-note", className: "muted" }, "Note: " + c.goneNote + ".") : null,
    list("Changed", c.changed, "changed", n.changed, true),
    list("New", c.new, "new", n.new, false),
    list("Gone", c.gone, "gone", n.gone, false),
    list("Not compared", c.notCompared, "notCompared", n.notCompared, false),
    list("Unchanged", c.unchanged, "unchanged", n.unchanged, false));
}

// Search what was archived (GET /api/search): the results page with snippets, filters and
// paging, and the replay of one hit (#/replay?archive=…, the link the API builds).
import { api, ApiError } from "./api.js";
import { replayCrawl } from "./crawls.js";
import { el, when } from "./dom.js";

// The API's snippet is escaped HTML whose only tags are <mark>: rebuild it as text nodes and
// <mark> elements (text never goes through innerHTML on this page).
export function snippetNodes(html) {
  const text = (s) => s.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
  return (html || "").split(/<\/?mark>/).map((part, i) => (i % 2 ? el("mark", {}, text(part)) : text(part)));
}

export async function searchPage(view, ctx, query) {
  const q = query.get("q") || "";
  const page = Math.max(1, parseInt(query.get("page") || "1", 10) || 1);
  const input = (name, attrs) => el("input", { id: "search-" + name, name, value: query.get(name) || "", ...attrs });
  const fields = {
    // no maxlength: a long paste reaches the ledger whole and its 400 says the limit (#search-status)
    q: input("q", { type: "search", placeholder: 'words, "a phrase", -excluded, a OR b', size: 40, "aria-describedby": "search-status" }),
    crawl: input("crawl", { type: "text", placeholder: "crawl id", size: 36 }),
    host: input("host", { type: "text", placeholder: "docs.python.org" }),
    from: input("from", { type: "date" }),
    to: input("to", { type: "date" }),
  };
  const form = el("form", { className: "filters", id: "search-filters" },
    el("label", {}, "Search", fields.q), el("label", {}, "Crawl", fields.crawl), el("label", {}, "Host", fields.host),
    el("label", {}, "Captured from", fields.from), el("label", {}, "to", fields.to),
    el("button", { type: "submit", id: "search-apply" }, "Search"));
  const status = el("p", { id: "search-status", className: "muted" }, q ? "Searching…" : "Type what the page said.");
  const list = el("ol", { id: "search-hits", className: "hits" });
  const pager = el("p", { className: "pager" });
  view.replaceChildren(el("h1", {}, "Search"), form, status, list, pager);

  const go = (n) => {
    const p = new URLSearchParams();
    for (const [name, field] of Object.entries(fields)) if (field.value.trim()) p.set(name, field.value.trim());
    if (n > 1) p.set("page", String(n));
    location.hash = "#/search?" + p;
  };
  form.addEventListener("submit", (ev) => { ev.preventDefault(); go(1); });
  if (!q) return;

  const params = new URLSearchParams({ q, page: String(page) });
  for (const name of ["crawl", "host", "from", "to"]) if (query.get(name)) params.set(name, query.get(name));
  try {
    const body = await api("GET", "/api/search?" + params);
    list.start = (page - 1) * body.size + 1;
    for (const hit of body.hits) list.append(hitItem(hit));
    status.textContent = body.hits.length ? `Page ${page}` : (page > 1 ? "No more pages found." : "No pages you may view said that.");
    if (body.rankedNewest) status.textContent += " — many pages match: the newest 1,000 of those you may see were ranked; filter by date, crawl or host to reach older ones.";
    if (body.incomplete) status.textContent += ` — only the best 1,000 matches were checked for your access; narrow the search to see further.`;
    if (page > 1) pager.append(el("button", { type: "button", id: "search-prev", onclick: () => go(page - 1) }, "Previous"), " ");
    if (body.more) pager.append(el("button", { type: "button", id: "search-next", onclick: () => go(page + 1) }, "Next"));
  } catch (e) {
    status.className = "error";
    status.textContent = e.message;
  }
}

function hitItem(hit) {
  return el("li", { className: "hit", dataset: { id: hit.archiveId } },
    el("a", { className: "hit-title", href: hit.replay }, hit.title || hit.url),
    el("div", { className: "hit-url muted" }, hit.url, " · ", el("span", { className: "nowrap" }, "captured " + when(hit.capturedAt)),
      hit.crawlId ? el("span", {}, " · crawl ", el("a", { href: "#/crawls/" + hit.crawlId }, hit.crawlId.slice(0, 8))) : null),
    el("p", { className: "snippet" }, snippetNodes(hit.snippetHtml)));
}

// #/replay?archive=<id>&url=<page>&captured=<time>[&crawl=<id>]: inside the crawl's collection
// when it has one the caller may open (as the archives list's Replay button does), else sign the
// archive's URL (the Check happens there) and open ReplayWeb.page on the replay origin with it alone.
export async function replayArchive(view, ctx, query) {
  const id = query.get("archive") || "";
  const status = el("p", { id: "replay-status", className: "muted" }, "Opening the archive…");
  view.replaceChildren(el("h1", {}, "Replay"), status);
  if (!ctx.session.replayUrl) { status.className = "error"; status.textContent = "Replay is off on this deployment."; return; }
  try {
    const crawl = query.get("crawl");
    if (crawl) {
      try { await replayCrawl(ctx, crawl, query.get("url") || "", crawl.slice(0, 8), query.get("captured")); return; }
      catch (e) { if (!(e instanceof ApiError && e.status === 404)) throw e; }
    }
    const s = await api("POST", "/api/archives/" + encodeURIComponent(id) + "/url");
    const q = new URLSearchParams({ source: s.url, url: query.get("url") || "", captured: query.get("captured") || "" });
    window.location.replace(ctx.session.replayUrl + "?" + q);
  } catch (e) {
    status.className = "error";
    status.textContent = e.message;
  }
}

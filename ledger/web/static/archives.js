// Archives the user may view (the API filters each page with OpenFGA): filter by crawl and URL,
// download through the 300 s signed URL, replay a page with ReplayWeb.page (/replay.html).
import { api, ApiError } from "./api.js";
import { counted, el, label, size, table, when } from "./dom.js";
import { replayCrawl } from "./crawls.js";

async function signed(archive) {
  return api("POST", "/api/archives/" + encodeURIComponent(archive.id) + "/url");
}

// The badge's tooltip: why the archive is incomplete (docs/capture-server.md extensions 4 and 14).
export function incompleteWhy(a) {
  const why = [];
  if (a.incompleteReason === "page-load-deadline") why.push("captured at the page-load deadline: the page was still loading");
  else if (a.incompleteReason) why.push(a.incompleteReason);
  if (a.missingBodyCount) why.push(`${a.missingBodyCount} without a body` + (a.missingBodyUrls && a.missingBodyUrls.length ? ` (${a.missingBodyUrls[0]})` : ""));
  if (a.truncatedUrls && a.truncatedUrls.length) why.push(`${a.truncatedUrls.length} cut by the size limit`);
  return why.length ? why.join("; ") : "some responses were recorded without their body";
}

export async function archiveList(view, ctx, query) {
  const crawl = el("select", { id: "filter-crawl", name: "crawl" }, el("option", { value: "" }, "all crawls"));
  const url = el("input", { id: "filter-url", name: "url", type: "search", placeholder: "part of a URL", value: query.get("url") || "" });
  const status = el("p", { id: "archives-status", className: "muted" }, "Loading…");
  const tbody = el("tbody");
  const more = el("button", { type: "button", id: "more", hidden: true }, "More");
  const filters = el("form", { className: "filters", id: "archive-filters" },
    el("label", {}, "Crawl", crawl), el("label", {}, "URL contains", url),
    el("button", { type: "submit", id: "apply" }, "Filter"));
  const listed = table(["Page", "Captured", ""], [], { id: "archives" });
  view.replaceChildren(el("h1", {}, "Archives"), filters, status, listed, more);
  listed.replaceChild(tbody, listed.tBodies[0]);

  try {  // the crawls this user may see name the filter's choices (none for a non-submitter)
    const data = await api("GET", "/api/crawls?limit=100");
    for (const c of data.crawls) {
      crawl.append(el("option", { value: c.crawlId }, when(c.startedAt) + " — " + (c.seeds[0] || c.crawlId)));
    }
  } catch (e) { /* 404: not a submitter; the filter offers "all crawls" only */ }
  const wanted = query.get("crawl") || "";
  if (wanted && !crawl.querySelector(`option[value="${CSS.escape(wanted)}"]`)) {
    crawl.append(el("option", { value: wanted }, wanted));
  }
  crawl.value = wanted;

  filters.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    if (crawl.value) q.set("crawl", crawl.value);
    if (url.value.trim()) q.set("url", url.value.trim());
    location.hash = "#/archives" + (q.toString() ? "?" + q : "");
  });

  // how many the same filters hold for this user (GET /api/archives/count): "50 of 1,234"
  let total = null;
  const filtered = new URLSearchParams();
  if (wanted) filtered.set("crawl", wanted);
  if (query.get("url")) filtered.set("url", query.get("url"));
  const counting = api("GET", "/api/archives/count" + (filtered.toString() ? "?" + filtered : ""))
    .then((c) => { total = c.count; say(); }, () => { /* an older ledger: the shown count only */ });
  function say() {
    const shown = tbody.children.length;
    listed.hidden = !shown;  // no empty table header
    if (total === 0) more.hidden = true;  // the count says there is nothing further to page to
    status.className = "muted";
    if (!shown) status.textContent = total ? "None of " + counted(total, "archive") + " on this page: press More." : "No archives you may view.";
    else status.textContent = total !== null && total >= shown
      ? shown.toLocaleString("en-US") + " of " + counted(total, "archive")
      : counted(shown, "archive") + (more.hidden ? "" : " (more below)");
  }

  let before = null;
  async function load() {
    const q = new URLSearchParams();
    if (wanted) q.set("crawl", wanted);
    if (query.get("url")) q.set("url", query.get("url"));
    if (before) q.set("before", before);
    try {
      const page = await api("GET", "/api/archives?" + q);
      tbody.append(...label(listed, page.archives.map(row)));
      // nextBefore: null once no older rows exist (a short page after the permission filter
      // may still have more behind it; a ledger without the field: the last row's time)
      before = "nextBefore" in page ? page.nextBefore
        : (page.archives.length ? page.archives[page.archives.length - 1].capturedAt : null);
      more.hidden = !before;
      say();
    } catch (e) {
      status.className = "error";
      status.textContent = e.message;
    }
  }
  more.addEventListener("click", load);

  function row(a) {
    const download = el("button", { type: "button", className: "download", onclick: async () => {
      try {
        const s = await signed(a);
        status.textContent = "Download link valid for " + s.expiresIn + " s.";
        window.location.assign(s.url);
      } catch (e) { status.className = "error"; status.textContent = e.message; }
    } }, "Download");
    const replay = !ctx.session.replayUrl ? null : el("button", { type: "button", className: "replay", onclick: async () => {
      try {
        // inside its crawl's collection (links to the crawl's other pages replay too); a caller
        // who may not open the crawl (not a submitter of its organization) replays the page alone
        if (a.crawlId) {
          try { await replayCrawl(ctx, a.crawlId, a.sourceUrl, a.crawlId.slice(0, 8)); return; }
          catch (e) { if (!(e instanceof ApiError && e.status === 404)) throw e; }
        }
        const s = await signed(a);
        const q = new URLSearchParams({ source: s.url, url: a.sourceUrl, captured: a.capturedAt });
        // on its own origin: archived pages run their scripts there, away from this session
        window.location.assign(ctx.session.replayUrl + "?" + q);
      } catch (e) { status.className = "error"; status.textContent = e.message; }
    } }, "Replay");
    return el("tr", { className: "archive", dataset: { id: a.id } },
      el("td", { className: "url" }, a.sourceUrl,
        a.waczComplete === false ? el("span", { className: "badge", title: incompleteWhy(a) }, "incomplete") : null,
        a.revisits && a.revisits.count ? el("span", { className: "badge revisits",  // decision 181
          title: `${a.revisits.bytesSaved} bytes not stored again: their originals are in earlier archives of this organization` },
          `${a.revisits.count} revisit${a.revisits.count === 1 ? "" : "s"}`) : null,
        a.signed ? el("span", { className: "badge signed", title: a.signatureVerified
          ? "signed by " + a.signatureDomain + "; the signature verified when the ledger admitted it"
          : "signed; not verified by the ledger" }, a.signatureVerified ? "signed · " + a.signatureDomain : "signed?") : null,
        "title" in a ? el("div", { className: "contents muted" }, (a.title ? "“" + a.title + "”" : "title unknown")
          + " · " + size(a.bytes)) : null),
      el("td", {}, when(a.capturedAt)),
      el("td", { className: "buttons" }, download, " ", replay));
  }
  await load();
  await counting;
}

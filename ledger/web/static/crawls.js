// Crawls: the list (newest first, live while one runs) and one crawl's page (facts, hosts in
// flight, its pages with state and reason, fail with confirmation).
import { api, ApiError, isMissingRoute } from "./api.js";
import { changesSection } from "./changes.js";
import { counted, el, elapsed, fill, label, size, stateBadge, table, when } from "./dom.js";
import { blockedHosts } from "./blocked.js";
import { linksText } from "./links.js";

const LIST_POLL_MS = 2000;  // while one of the listed crawls runs
const LIST_IDLE_POLL_MS = 10000;  // else still, modestly: a crawl started elsewhere appears
const CRAWL_POLL_MS = 1000;  // the crawl's facts (one GET /api/crawls/{id}: ~5 ms of ledger CPU, docs/internals.md)
const PAGES_EVERY = 5;  // the pages table every 5th refresh (it may be long)
const PAGES_LIMIT = 50;

function level(c) {
  return c.currentDepth === null || c.currentDepth === undefined ? "—"
    : c.currentDepth + (c.maxDepth !== null && c.maxDepth !== undefined ? " / " + c.maxDepth : "");
}

// While a crawl runs, stopReason is the limit it already reached (it ends after the level in
// flight): say "will stop at max pages", not a reason for a stop that has not happened.
function stopText(c, none) {
  if (!c.stopReason) return none;
  return c.state === "running" ? "will stop at " + c.stopReason.replace(/_/g, " ") : c.stopReason;
}

function seedsText(seeds) {
  if (!seeds || !seeds.length) return "—";
  return seeds[0] + (seeds.length > 1 ? " +" + (seeds.length - 1) : "");
}

// Opens the crawl's collection in the player at ``url`` (on the replay origin, with a ticket:
// no session is honoured there). Throws the API's error (404 for a non-member).
// ``captured`` (ISO 8601, optional): open the capture of that time (a crawl's collection may
// also hold an earlier crawl's capture of the same URL, among the originals of its revisits).
export async function replayCrawl(ctx, crawlId, url, title, captured) {
  const t = await api("POST", "/api/crawls/" + encodeURIComponent(crawlId) + "/collection/ticket");
  const q = new URLSearchParams({ collection: t.path, url });
  if (title) q.set("title", title);
  if (captured) q.set("captured", captured);
  window.location.assign(ctx.session.replayUrl + "?" + q);
}

export async function crawlList(view, ctx) {
  view.replaceChildren(el("h1", {}, "Crawls"), el("p", { id: "crawls-status", className: "muted" }, "Loading…"));
  const status = view.querySelector("#crawls-status");
  let tableNode = null;
  async function refresh() {
    let data;
    try {
      data = await api("GET", "/api/crawls?limit=50");
    } catch (e) {
      // 404 = not a submitter of any organization: there is nothing this user may see.
      status.textContent = e instanceof ApiError && e.status === 404 ? "No crawls you may see." : e.message;
      status.className = e.status === 404 ? "muted" : "error";
      if (e.status !== 401) ctx.later(refresh, LIST_IDLE_POLL_MS);
      return;
    }
    const rows = data.crawls.map((c) => el("tr", { className: "crawl", dataset: { id: c.crawlId, state: c.state } },
      el("td", {}, el("a", { href: "#/crawls/" + c.crawlId }, when(c.startedAt))),
      el("td", { className: "url" }, seedsText(c.seeds)),
      el("td", {}, stateBadge(c.state)),
      el("td", { className: "stop" }, stopText(c, "")),
      el("td", { className: "num level" }, level(c)),
      el("td", { className: "num captured" }, c.pagesCaptured),
      el("td", { className: "num failed" }, c.pagesFailed ?? "—"),
      el("td", { className: "num skipped" }, c.pagesSkipped ?? "—"),
      el("td", { className: "num blocked" }, blockedText(c)),
      el("td", { className: "num" }, elapsed(c.startedAt, c.finishedAt))));
    const fresh = table(["Started", "Seeds", "State", "Stop reason", { label: "Level", num: true },
      { label: "Captured", num: true }, { label: "Failed", num: true }, { label: "Skipped", num: true },
      { label: "Blocked", num: true }, { label: "Elapsed", num: true }], rows, { id: "crawls" });
    if (tableNode) tableNode.replaceWith(fresh); else view.append(fresh);
    tableNode = fresh;
    const running = data.crawls.filter((c) => c.state === "running").length;
    status.className = "muted";
    status.textContent = data.crawls.length
      ? counted(data.crawls.length, "crawl") + (running ? ", " + running + " running — updating live" : "")
      : "No crawls yet." + (ctx.session.canSubmit ? " Start one." : "");
    ctx.later(refresh, running ? LIST_POLL_MS : LIST_IDLE_POLL_MS);
  }
  await refresh();
}

// Pages recorded blocked, and the hosts paused for blocking the crawler (decision 231): "4 (1 host)".
function blockedText(c) {
  const pages = c.pagesBlocked ?? 0, hosts = c.hostsBlocked ?? 0;
  return hosts ? pages + " (" + hosts + (hosts === 1 ? " host)" : " hosts)") : String(pages);
}

// "prefix, include /a/, exclude \.pdf$, extra hops 1": what the crawl takes (issue 29).
function scopeText(c) {
  const parts = [c.scope];
  for (const p of c.include || []) parts.push("include " + p);
  for (const p of c.exclude || []) parts.push("exclude " + p);
  if (c.extraHops) parts.push("extra hops " + c.extraHops);
  return parts.join(", ");
}

function sitemapText(c) {
  // what the seed hosts' sitemaps gave (ledger.crawl.sitemaps); "—" when not asked for
  if (!c.useSitemap) return "—";
  const after = c.sitemapLastmodAfter ? "lastmod after " + c.sitemapLastmodAfter + "; " : "";
  const s = c.sitemap;
  if (!s) return after + "not read yet";
  return after + `${s.files} files, ${s.found} URLs found, ${s.older} older, ${s.queued} queued, ` +
    `${s.outOfScope} out of scope, ${s.notQueued} not queued` + (s.notes && s.notes.length ? "; " + s.notes.join("; ") : "");
}

// pagesCaptured moves when a level reports; the level in flight's captures (its progress line)
// are added, so Captured never says less than the line below it (issue 30 item 4).
function inFlight(c) {
  return c.state === "running" ? c.levelProgress : null;
}

export function capturedCount(c) {
  const p = inFlight(c);
  return c.pagesCaptured + (p ? p.captured : 0);
}

function capturedText(c) {
  const p = inFlight(c);
  return String(capturedCount(c)) + (p && p.captured ? " (" + p.captured + " in the level in flight)" : "");
}

// Failed and Pending agree with the progress line the same way: a page the level in flight has
// ended is failed (or no longer pending) before its level reports
function failedText(c) {
  const p = inFlight(c);
  const failed = p && p.failed ? p.failed : 0;
  return String(c.pagesFailed + failed) + (failed ? " (" + failed + " in the level in flight)" : "");
}

function pendingText(c) {
  const p = inFlight(c);
  return String(Math.max(0, c.pagesPending - (p && p.done ? p.done : 0)));
}

// Hosts that are one server share one gap and one lease (decision 241); a slow one waits longer (242).
function serversText(c) {
  const groups = (c.servers || []).map((s) => s.server + ": " + s.hosts.join(", "));
  const by = c.groupHosts === "domain" ? "grouped by address and registered domain" : "grouped by address";
  return (groups.length ? groups.join("; ") : "each host its own") + " (" + by + "; slow-host factor "
    + (c.delayFactor === undefined ? 5 : c.delayFactor) + ")";
}

function facts(c) {
  const pairs = [
    ["State", stateBadge(c.state)], [c.state === "running" && c.stopReason ? "Stopping" : "Stop reason", stopText(c, "—")], ["Level", level(c)],
    ["Captured", capturedText(c)], ["Failed", failedText(c)], ["Skipped", String(c.pagesSkipped)],
    ["Pending", pendingText(c)], ["Blocked", String(c.pagesBlocked ?? 0)], ["Discovered", String(c.pagesDiscovered)],
    ["Max pages", String(c.maxPages)], ["Scope", scopeText(c)], ["Delay per host", c.perHostDelayMs + " ms"],
    ["Servers", serversText(c)],
    ["Formats", c.formats ? c.formats.join(", ") : "the deployment's default"],
    ["Robots meta", c.ignoreRobotsMeta ? "ignored (noarchive pages archived, a page's nofollow meta or header not applied; links marked rel=nofollow are still not followed)"
      : "honoured (noarchive pages not archived, nofollow links not followed)"],
    ["Signing", c.signing === true ? "signed WACZ" : c.signing === false ? "unsigned WACZ" : "the deployment's default"],
    ["Limits", [c.timeLimitS ? c.timeLimitS + " s" : null, c.maxBytes ? c.maxBytes + " bytes" : null,
      c.maxPagesPerHost ? c.maxPagesPerHost + " pages per host" : null].filter(Boolean).join(", ") || "—"],
    ["Sitemaps", sitemapText(c)],
    ["Started", when(c.startedAt)], ["Elapsed", elapsed(c.startedAt, c.finishedAt)],
    ["Archive bytes", c.totalBytes === undefined ? "—"
      : size(c.totalBytes) + (c.bytesUnknown ? " (+ " + c.bytesUnknown + " not measured yet)" : "")],
    ["Organization", c.organization], ["Requested by", c.requestedBy], ["Seeds", (c.seeds || []).join(" ")],
  ];
  if (c.workflow) pairs.push(["Workflow", el("a", { href: "#/workflows/" + c.workflow.workflowId }, c.workflow.name)]);
  if (c.error) pairs.push(["Error", c.error]);
  return el("dl", { className: "facts", id: "crawl-facts" },
    pairs.flatMap(([k, v]) => [el("dt", { dataset: { fact: k.toLowerCase() } }, k), el("dd", { dataset: { fact: k.toLowerCase() } }, v)]));
}

// The level in flight from the flow's capture events (the counts above move at level reports).
// Loading, sealed and held captures are told apart (decision 401): a host's site gets one page at
// a time, so only one of its pages is ever "capturing".
const PROGRESS_STATES = [
  ["capturing", "capturing", "since "],
  ["finishing", "finishing: sealed, writing its archive", "since "],
  ["queued", "queued: held behind its host's previous page, not sent yet", "since "],
];

function levelProgress(p) {
  if (!p) return null;
  const summary = "Level " + p.depth + " in flight: " + p.done + " of " + p.planned + " done ("
    + p.captured + " captured, " + p.failed + " failed)";
  const items = PROGRESS_STATES.flatMap(([key, label, since]) => (p[key] || []).map((c) =>
    el("li", { dataset: { state: key } }, el("code", {}, c.host), " ", c.url, " ",
      el("span", { className: "muted" }, label + " · " + since + when(c.since)))));
  return el("div", { className: "progress", id: "level-progress" },
    el("strong", {}, summary),
    items.length ? el("ul", {}, items) : null);
}

// Why hosts are not being captured now (GET /api/crawls/{id} "waiting": another crawl's turn,
// robots.txt first, the host's gap and what sets it).
function waitingList(items) {
  if (!items || !items.length) return null;
  return el("div", { className: "waiting", id: "waiting" }, el("strong", {}, "Waiting: "),
    el("ul", {}, items.map((w) => el("li", { dataset: { kind: w.kind, host: w.host } }, w.reason,
      w.crawlId ? [" ", el("a", { href: "#/crawls/" + w.crawlId }, "open crawl " + w.crawlId.slice(0, 8))] : null))));
}

// What a captured page's archive holds (issue 25 item 5); unknown is said, never left blank.
function contents(p) {
  if (!p.archiveId || !("title" in p)) return null;
  const unknown = (v, what) => (v === null || v === undefined ? what + " unknown" : v);
  return el("div", { className: "contents muted" },
    p.thumbnailUrl ? el("img", { className: "thumb", src: p.thumbnailUrl, alt: "screenshot", loading: "lazy" }) : null,
    el("span", { className: "title" }, p.title ? "“" + p.title + "”" : "title unknown"),
    " · ", el("span", { className: "http" }, p.httpStatus ? "HTTP " + p.httpStatus : "status unknown"),
    " · ", el("span", { className: "type" }, unknown(p.contentType, "type")),
    // a revisit's bytes are its record's, its type the original's: say so, as the CLI does
    p.revisit ? [" · ", el("span", { className: "revisit", title: "stored as a revisit: the body is in an earlier archive" }, "revisit")] : null,
    " · ", el("span", { className: "bytes" }, size(p.bytes)));
}

function pageRow(p, crawlId) {
  return el("tr", { className: "page", dataset: { state: p.state } },
    el("td", { className: "url" }, p.url, p.finalUrl && p.finalUrl !== p.url ? el("div", { className: "muted" }, "→ " + p.finalUrl) : null,
      contents(p)),
    el("td", { className: "num" }, p.depth),
    el("td", {}, stateBadge(p.state)),
    el("td", { className: "reason" }, [p.failureClass ? "[" + p.failureClass + "] " : "", p.reason || ""].join("")),
    el("td", { className: "num" }, p.captureMs !== null && p.captureMs !== undefined ? p.captureMs + " ms" : ""),
    el("td", { className: "num" }, p.waitMs ? p.waitMs + " ms" : ""),
    el("td", { className: "links" }, linksText(p.links)),
    el("td", {}, p.archiveId ? el("a", { href: "#/archives?crawl=" + encodeURIComponent(crawlId) + "&url=" + encodeURIComponent(p.url) }, "archive") : ""));
}

const PAGE_HEADERS = ["URL", { label: "Depth", num: true }, "State", "Reason", { label: "Capture", num: true },
  { label: "Waited", num: true }, "Links", ""];  // waited: behind the previous page of its host (held), not in Capture

async function pagesSection(crawl, box, filter) {
  const params = new URLSearchParams({ limit: String(PAGES_LIMIT) });
  if (filter) params.set("state", filter);
  const path = "/api/crawls/" + crawl.crawlId + "/pages?";
  try {
    const data = await api("GET", path + params);
    const rows = table(PAGE_HEADERS, data.pages.map((p) => pageRow(p, crawl.crawlId)), { id: "pages" });
    const more = el("button", { type: "button", id: "more-pages", hidden: !data.nextCursor }, "More pages");
    let cursor = data.nextCursor;
    more.addEventListener("click", async () => {  // oldest first: the next pages by keyset cursor
      params.set("cursor", cursor);
      const next = await api("GET", path + params);
      rows.tBodies[0].append(...label(rows, next.pages.map((p) => pageRow(p, crawl.crawlId))));
      cursor = next.nextCursor;
      more.hidden = !cursor;
    });
    box.replaceChildren(rows, more, el("p", { className: "muted" }, data.pages.length ? "" : "No pages in this state."));
  } catch (e) {
    if (!isMissingRoute(e)) {
      box.replaceChildren(el("p", { className: "error" }, e.message));
      return;
    }
    // An older ledger without GET /api/crawls/{id}/pages: the crawl view's 5 newest failures.
    const rows = (crawl.failures || []).map((f) => pageRow({ url: f.url, depth: f.depth, state: "failed", reason: f.reason }, crawl.crawlId));
    box.replaceChildren(
      el("p", { className: "notice", id: "pages-fallback" },
        "This ledger does not list a crawl's pages yet (GET /api/crawls/{id}/pages); its newest failures:"),
      table(PAGE_HEADERS, rows, { id: "pages" }));
  }
}

const FULL_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ID_PREFIX = /^[0-9a-f][0-9a-f-]{3,35}$/i;

export async function crawlPage(view, ctx, crawlId) {
  view.replaceChildren(el("p", { className: "muted" }, "Loading…"));
  if (!FULL_ID.test(crawlId) && ID_PREFIX.test(crawlId)) {
    // a short id, as the page titles and the CLI show it (#/crawls/7092de95): the one crawl it starts
    try {
      const found = (await api("GET", "/api/crawls?limit=2&idPrefix=" + encodeURIComponent(crawlId.toLowerCase()))).crawls;
      if (found.length === 1) {
        history.replaceState(null, "", "#/crawls/" + found[0].crawlId);
        crawlId = found[0].crawlId;
      }
    } catch (e) { /* not a submitter: said below, as for any id */ }
  }
  let filter = "";
  let tick = 0;
  let took = 0;  // ms the last GET of the crawl took
  const pagesBox = el("div", { id: "pages-box" });
  const changesBox = el("div", { id: "changes-box" });  // what changed since the crawl before (issue 27)
  let compared = false;
  const filterSelect = el("select", { id: "page-state", "aria-label": "Pages in state", onchange: () => { filter = filterSelect.value; refresh(true); } },
    ["", "captured", "failed", "skipped", "blocked", "pending"].map((s) => el("option", { value: s }, s || "all states")));
  async function refresh(pagesOnly) {
    let crawl;
    const asked = performance.now();
    try {
      crawl = await api("GET", "/api/crawls/" + encodeURIComponent(crawlId));
      took = performance.now() - asked;
    } catch (e) {
      view.replaceChildren(el("h1", {}, "Crawl"),
        el("p", { className: e.status === 404 ? "muted" : "error", id: "crawl-missing" },
          e.status === 404 || e.status === 400 ? "No such crawl, or not one you may see." : e.message));
      return;
    }
    if (!pagesOnly) {
      const fail = crawl.state === "running" && ctx.session.canSubmit
        ? el("button", { className: "danger", id: "fail-crawl", type: "button", onclick: () => failCrawl(crawl) }, "Fail this crawl")
        : null;
      // stop / pause / resume (issue 29): stop ends it succeeded, pause keeps its frontier
      const live = ctx.session.canSubmit && (crawl.state === "running" || crawl.state === "paused");
      const control = (id, label, action, ask) => el("button", { id, type: "button",
        onclick: () => controlCrawl(crawl, action, ask) }, label);
      const stop = live ? control("stop-crawl", "Stop", "stop",
        "Stop crawl " + crawl.crawlId.slice(0, 8) + "? No new page is captured; captures already under way finish and are kept. It ends succeeded (stop reason: stopped).") : null;
      const pause = ctx.session.canSubmit && crawl.state === "running" && !crawl.pauseRequested
        ? control("pause-crawl", "Pause", "pause", null) : null;
      const resume = ctx.session.canSubmit && (crawl.state === "paused" || crawl.pauseRequested)
        ? control("resume-crawl", crawl.state === "paused" ? "Resume" : "Keep running", "resume", null) : null;
      const replay = ctx.session.replayUrl && crawl.pagesCaptured > 0
        ? el("button", { type: "button", id: "replay-crawl", onclick: async (ev) => {
            ev.target.disabled = true;
            try {
              await replayCrawl(ctx, crawl.crawlId, crawl.seeds[0], crawl.crawlId.slice(0, 8));
            } catch (e) { ev.target.disabled = false; window.alert(e.message); }
          } }, "Replay this crawl")
        : null;
      fill(view,
        el("h1", {}, "Crawl ", el("code", {}, crawl.crawlId.slice(0, 8))),
        el("div", { className: "actions" },
          el("a", { className: "button", href: "#/archives?crawl=" + crawl.crawlId, id: "crawl-archives" }, "Archives of this crawl"),
          replay, pause, resume, stop, fail),
        crawl.pauseRequested ? el("p", { className: "muted", id: "pausing" }, "Pausing: the crawl pauses when its level in flight has reported.") : null,
        facts(crawl),
        blockedHosts(crawl),
        crawl.state === "running"
          ? el("div", { className: "hosts", id: "hosts" }, el("strong", {}, "Hosts in flight: "),
              crawl.hostsInFlight.length ? crawl.hostsInFlight.map((h) => el("span", {}, h)) : "—")
          : null,
        crawl.state === "running" ? levelProgress(crawl.levelProgress) : null,
        crawl.state === "running" ? waitingList(crawl.waiting) : null,
        crawl.state !== "running" ? el("h2", {}, "Changes") : null,
        crawl.state !== "running" ? changesBox : null,
        el("h2", {}, "Pages ", filterSelect),
        pagesBox);
    }
    if (!compared && crawl.state !== "running" && crawl.pagesCaptured > 0) {  // once, when its pages are in
      compared = true;
      changesSection(crawl, changesBox);
    }
    // the facts every second; the pages table on a filter change, every PAGES_EVERY-th tick and at the end
    if (pagesOnly || tick % PAGES_EVERY === 0 || crawl.state !== "running") await pagesSection(crawl, pagesBox, filter);
    tick += 1;
    // a huge crawl's view takes longer: then poll at most a third of the time (the ledger's cost bounded)
    if (crawl.state === "running" && !pagesOnly) ctx.later(() => refresh(false), Math.max(CRAWL_POLL_MS, 2 * took));
  }

  async function controlCrawl(crawl, action, ask) {
    if (ask && !window.confirm(ask)) return;
    try {
      await api("POST", "/api/crawls/" + crawl.crawlId + "/" + action);
    } catch (e) {
      window.alert(e.message);
    }
    ctx.refresh();
  }

  async function failCrawl(crawl) {
    if (!window.confirm("Fail crawl " + crawl.crawlId.slice(0, 8) + "? It stops at once: the level in flight is cancelled; pages already captured are kept with their archives, the others are marked skipped. This cannot be undone.")) return;
    try {
      await api("POST", "/api/crawls/" + crawl.crawlId + "/failed",
        { reason: "failed from the web page by " + ctx.session.subject });
    } catch (e) {
      window.alert(e.message);
    }
    ctx.refresh();
  }
  await refresh(false);
}

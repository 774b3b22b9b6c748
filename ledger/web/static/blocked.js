// Blocked hosts (decision 231): hosts paused for the rest of the crawl after answering with a
// bot-protection challenge or block pages; GET /api/crawls/{id} "blockedHosts".
import { el, when } from "./dom.js";

export function blockedHosts(c) {
  const hosts = c.blockedHosts || [];
  if (!hosts.length) return null;
  return el("div", { className: "blocked-hosts", id: "blocked-hosts" },
    el("strong", {}, "Blocked hosts (paused for the rest of the crawl): "),
    el("ul", {}, hosts.map((b) => el("li", { dataset: { host: b.host } },
      el("code", {}, b.host), " — " + b.reason + " (level " + b.depth + ", " + b.pages + " page(s) not captured, ",
      when(b.blockedAt), ")"))));
}

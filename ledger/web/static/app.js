// The web page: sign-in state, the header and a hash router over the views.
import { api, ApiError, setCsrf } from "./api.js";
import { archiveList } from "./archives.js";
import { crawlList, crawlPage } from "./crawls.js";
import { replayArchive, searchPage } from "./search.js";
import { el } from "./dom.js";
import { startForm } from "./start.js";
import { workflowForm, workflowList, workflowPage } from "./workflows.js";

const view = document.getElementById("view");
let timers = [];
let session = null;
let shown = 0;  // the route shown now (each hash change makes a new one)

function clearTimers() { for (const t of timers) clearTimeout(t); timers = []; }

function signIn(reason) {
  document.getElementById("nav").hidden = true;
  document.getElementById("signout").hidden = true;
  document.getElementById("who").textContent = "";
  view.replaceChildren(el("div", { className: "signin" },
    el("h1", {}, "waggle"),
    el("p", { className: "muted" }, reason || "Archive websites politely: start crawls, watch them, open what they captured."),
    el("p", {}, el("button", { className: "primary", id: "signin", type: "button",
      onclick: () => { location.href = "/auth/login"; } }, "Sign in")),
    el("p", {}, el("a", { href: "/auth/login?prompt=login", id: "signin-other" }, "Sign in as someone else"))));
}

async function route() {
  clearTimers();
  if (!session) return;
  // Each route renders into a box of its own and may schedule refreshes only while it is shown:
  // a request of the route before, still in flight when the hash changed, then renders into a
  // detached box and ends its polling (else crawl A's facts could show on crawl B's page).
  const mine = ++shown;
  const box = el("div", { className: "route" });
  view.replaceChildren(box);
  const hash = location.hash || "#/crawls";
  const [path, qs] = hash.slice(1).split("?");
  const query = new URLSearchParams(qs || "");
  const parts = path.split("/").filter(Boolean);
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("current", link.dataset.view === (parts[0] || "crawls"));
  }
  const ctx = {
    session,
    later: (fn, ms) => { if (mine === shown) timers.push(setTimeout(() => { if (mine === shown) fn(); }, ms)); },
    refresh: () => route(),
  };
  try {
    if (parts[0] === "crawls" && parts[1]) await crawlPage(box, ctx, parts[1]);
    else if (parts[0] === "start") startForm(box, ctx);
    else if (parts[0] === "workflows" && parts[1] === "new") await workflowForm(box, ctx);
    else if (parts[0] === "workflows" && parts[1] && parts[2] === "edit") await workflowForm(box, ctx, parts[1]);
    else if (parts[0] === "workflows" && parts[1]) await workflowPage(box, ctx, parts[1]);
    else if (parts[0] === "workflows") await workflowList(box, ctx);
    else if (parts[0] === "archives") await archiveList(box, ctx, query);
    else if (parts[0] === "search") await searchPage(box, ctx, query);
    else if (parts[0] === "replay") await replayArchive(box, ctx, query);
    else await crawlList(box, ctx);
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) box.append(el("p", { className: "error" }, e.message));
  }
}

async function boot() {
  try {
    session = await api("GET", "/auth/session");
  } catch (e) {
    session = null;
    signIn();
    return;
  }
  setCsrf(session.csrfToken);
  document.getElementById("nav").hidden = false;
  document.getElementById("nav-start").hidden = !session.canSubmit;
  const box = document.getElementById("search-box");  // on every view: the header's search
  box.hidden = false;
  box.onsubmit = (ev) => {
    ev.preventDefault();
    const q = box.elements.q.value.trim();
    location.hash = "#/search" + (q ? "?" + new URLSearchParams({ q }) : "");
  };
  document.getElementById("who").textContent = session.subject +
    (session.organizations.length ? " (" + session.organizations.join(", ") + ")" : "");
  const out = document.getElementById("signout");
  out.hidden = false;
  out.onclick = async () => { await api("POST", "/auth/logout"); location.hash = ""; location.reload(); };
  await route();
}

window.addEventListener("hashchange", route);
// A link to the view already shown fires no hashchange: show it afresh (a new form, a new list).
document.getElementById("nav").addEventListener("click", (ev) => {
  const link = ev.target.closest("a");
  if (link && link.getAttribute("href") === location.hash) route();
});
window.addEventListener("waggle:signed-out", () => {
  if (session) { session = null; clearTimers(); signIn("Your session ended (the sign-in expires with its token): sign in again."); }
});
boot();

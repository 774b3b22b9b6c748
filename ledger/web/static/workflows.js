// Saved crawl workflows (issue 27, decision 201): the list, one workflow with its runs, and the
// create / edit form — the crawl form of start.js with a name, notes and an optional schedule.
import { api, ApiError } from "./api.js";
import { el, fill, stateBadge, table, when } from "./dom.js";
import { field, showErrors, startForm } from "./start.js";

function scheduleText(wf) {
  return wf.schedule ? wf.schedule.cron + " (" + wf.schedule.timeZone + ")" : "—";
}

async function runNow(wf, note) {
  note.textContent = "";
  try {
    const started = await api("POST", "/api/workflows/" + wf.workflowId + "/run", { trigger: "manual" });
    try {  // a runner of another organization may start its crawls but not see them (decision 351)
      await api("GET", "/api/crawls/" + started.crawlId);
    } catch (e) {
      note.className = "muted";
      note.textContent = "Started crawl " + started.crawlId.slice(0, 8) + ". Its crawls belong to the workflow's"
        + " organization: you may run it, but only its members see what it captures.";
      return;
    }
    location.hash = "#/crawls/" + started.crawlId;
  } catch (e) {
    note.className = "error";
    note.replaceChildren(e instanceof ApiError && e.body.runningCrawl
      ? el("span", {}, "Skipped: ", el("a", { href: "#/crawls/" + e.body.runningCrawl }, "a crawl of it"),
          " is still running; a workflow never runs twice at once.")
      : e.message);
  }
}

export async function workflowList(view, ctx) {
  const { workflows } = await api("GET", "/api/workflows");
  const note = el("p", { className: "error", id: "run-note", role: "alert" });
  const rows = workflows.map((wf) => {
    const last = wf.lastCrawl;
    return el("tr", { dataset: { workflow: wf.workflowId } },
      el("td", {}, el("a", { href: "#/workflows/" + wf.workflowId }, wf.name)),
      el("td", {}, scheduleText(wf)),
      // a runner of another organization cannot open its crawls (decision 351): the date, no link
      el("td", {}, !last ? "never run" : wf.organization === undefined || (ctx.session.organizations || []).includes(wf.organization)
        ? el("a", { href: "#/crawls/" + last.crawlId }, when(last.startedAt)) : when(last.startedAt)),
      el("td", {}, last ? stateBadge(last.state) : "—"),
      el("td", {}, el("button", { type: "button", className: "run", onclick: () => runNow(wf, note) }, "Run now")));
  });
  fill(view, el("h1", {}, "Workflows"),
    ctx.session.canSubmit ? el("p", {}, el("a", { href: "#/workflows/new", id: "new-workflow" }, "New workflow")) : null,
    note,
    workflows.length
      ? table(["Name", "Schedule", "Last crawl", "State", ""], rows, { id: "workflows" })
      : el("p", { className: "muted" }, "No saved workflows yet."));
}

// Who was granted what (decision 351); changed with `waggle workflows grant/revoke` or the API.
function grantsLine(wf) {
  const grants = wf.grants || [];
  return el("p", { className: "muted", id: "grants" }, "Granted: ",
    grants.length ? grants.map((g) => g.user + " (" + g.role + ")").join(", ") : "no one by name",
    " · the organization's members view it, submitters run it, admins edit it");
}

export async function workflowPage(view, ctx, id) {
  const wf = await api("GET", "/api/workflows/" + id);
  const { runs } = await api("GET", "/api/workflows/" + id + "/history");
  const note = el("p", { className: "error", id: "run-note", role: "alert" });
  const actions = el("p", {},
    wf.canRun ? el("button", { className: "primary", type: "button", id: "run", onclick: () => runNow(wf, note) }, "Run now") : null, " ",
    wf.canEdit ? el("a", { href: "#/workflows/" + id + "/edit", id: "edit" }, "Edit") : null, " ",
    wf.canEdit ? el("button", { type: "button", id: "delete", onclick: async () => {
      if (!confirm("Delete the workflow \u201c" + wf.name + "\u201d? Its crawls and archives are kept.")) return;
      await api("DELETE", "/api/workflows/" + id);
      location.hash = "#/workflows";
    } }, "Delete") : null);
  const next = wf.schedule ? el("ul", { id: "next-runs" }, wf.schedule.nextRuns.map((t) => el("li", {}, t))) : null;
  const history = runs.map((r) => el("tr", {},
    el("td", {}, when(r.at)), el("td", {}, r.trigger), el("td", {}, r.requestedBy), el("td", {}, r.outcome),
    el("td", {}, r.crawl ? el("a", { href: "#/crawls/" + r.crawl.crawlId }, r.crawl.crawlId.slice(0, 8)) : "—"),
    el("td", {}, r.crawl ? stateBadge(r.crawl.state) : "—"),
    el("td", { className: "num" }, r.crawl ? String(r.crawl.pagesCaptured) : "—"),
    el("td", {}, r.reason || "")));
  fill(view, el("h1", {}, wf.name),
    wf.notes ? el("p", { id: "notes" }, wf.notes) : null,
    el("p", { className: "muted" }, wf.organization + " · by " + wf.createdBy + " · schedule: " + scheduleText(wf)),
    // saved as given, but more often than hourly (decision 403): the ledger's sentence
    wf.schedule && wf.schedule.warning
      ? el("p", { className: "warning", id: "schedule-warning", role: "status" }, "Warning: " + wf.schedule.warning) : null,
    next, actions, note,
    grantsLine(wf),
    el("details", {}, el("summary", {}, "Crawl options"), el("pre", { id: "options" }, JSON.stringify(wf.options, null, 2))),
    el("h2", {}, "Runs"),
    runs.length ? table(["At", "Trigger", "By", "Outcome", "Crawl", "State", { label: "Pages", num: true }, "Reason"],
      history, { id: "runs" }) : el("p", { className: "muted" }, "Not run yet."));
}

export async function workflowForm(view, ctx, id) {
  const wf = id ? await api("GET", "/api/workflows/" + id) : null;
  const name = el("input", { id: "name", name: "name", type: "text", value: wf ? wf.name : "" });
  const notes = el("textarea", { id: "notes", name: "notes" });
  notes.value = wf ? wf.notes : "";
  const cron = el("input", { id: "schedule", name: "schedule", type: "text", placeholder: "0 4 * * *",
    value: wf && wf.schedule ? wf.schedule.cron : "" });
  const zone = el("input", { id: "timeZone", name: "timeZone", type: "text", placeholder: "UTC",
    value: wf && wf.schedule ? wf.schedule.timeZone : Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC" });
  startForm(view, ctx, {
    title: wf ? "Edit " + wf.name : "New workflow",
    submitLabel: wf ? "Save" : "Save workflow",
    initial: wf ? wf.options : undefined,
    head: [
      field("name", "Name", name, "Unique in the organization."),
      field("notes", "Notes", notes),
      field("schedule", "Schedule", cron, "Cron: minute hour day-of-month month day-of-week (empty: run by hand only)."
        + " More often than hourly is saved with a warning: a run due while the previous crawl still runs is skipped."),
      field("timeZone", "Time zone", zone, "IANA name, e.g. Europe/Paris; used only with a schedule."),
    ],
    save: async (options, form) => {
      const body = { name: name.value, notes: notes.value, options };
      body.schedule = cron.value.trim() ? { cron: cron.value.trim(), timeZone: zone.value.trim() || "UTC" } : null;
      if (!wf && body.schedule === null) delete body.schedule;
      try {
        const saved = await api(wf ? "PATCH" : "POST", wf ? "/api/workflows/" + wf.workflowId : "/api/workflows", body);
        location.hash = "#/workflows/" + saved.workflowId;
      } catch (e) {
        showErrors(form, form.querySelector("#form-error"), e);
        if (e instanceof ApiError && e.body.fields && e.body.fields.options) {
          form.querySelector("#form-error").textContent = e.body.fields.options;
        }
      }
    },
  });
}

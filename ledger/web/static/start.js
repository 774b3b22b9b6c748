// Start a crawl: seeds or the organization's saved targets, depth, max pages, delay, scope, formats.
// The API validates; its 400 body's "fields" put each problem next to its field.
import { api, ApiError } from "./api.js";
import { el } from "./dom.js";

function field(name, label, input, hint) {
  return [
    el("label", { for: name }, label),
    el("div", { className: "field" }, input, hint ? el("span", { className: "hint" }, hint) : null,
      el("span", { className: "field-error", id: name + "-error", role: "alert" })),
  ];
}

function number(name, placeholder, value) {
  return el("input", { id: name, name, type: "text", inputmode: "numeric", placeholder, value });
}

// "" → absent (the API's default); digits → a number; anything else is sent as typed for the API to refuse.
function numeric(value) {
  const v = value.trim();
  if (!v) return undefined;
  return /^-?\d+$/.test(v) ? Number(v) : v;
}

export function startForm(view, ctx) {
  if (!ctx.session.canSubmit) {
    view.replaceChildren(el("h1", {}, "Start a crawl"),
      el("p", { className: "muted", id: "start-refused" }, "You may not start crawls (you are not a submitter of any organization)."));
    return;
  }
  const seeds = el("textarea", { id: "seeds", name: "seeds", placeholder: "https://example.org/\nhttps://example.org/about" });
  const fromTargets = el("input", { id: "fromTargets", name: "fromTargets", type: "checkbox",
    onchange: () => { seeds.disabled = fromTargets.checked; } });
  const scope = el("select", { id: "scope", name: "scope" },
    el("option", { value: "same-origin" }, "same origin (scheme, host and port of a seed)"),
    el("option", { value: "same-host" }, "same host (any scheme or port)"));
  // Capture formats besides the WACZ (always captured); none ticked: the deployment's default.
  const extras = [["png", "PNG screenshot"], ["webp", "WebP screenshot"], ["html", "HTML"], ["mhtml", "MHTML"]]
    .map(([value, label]) => [value, el("input", { type: "checkbox", name: "formats", value, id: "format-" + value }), label]);
  const formats = el("span", { id: "formats" }, ...extras.flatMap(([, box, label]) => [box, " " + label + " "]));
  const ignoreRobotsMeta = el("input", { id: "ignoreRobotsMeta", name: "ignoreRobotsMeta", type: "checkbox" });
  // Signed WACZ (wacz-auth); unticked: the deployment's default.
  const signing = el("input", { id: "signing", name: "signing", type: "checkbox" });
  const formError = el("p", { className: "error", id: "form-error", role: "alert" });
  const submit = el("button", { className: "primary", type: "submit", id: "start" }, "Start crawl");
  const form = el("form", { className: "grid", id: "start-form", novalidate: true },
    field("seeds", "Seeds", seeds, "One URL a line."),
    field("fromTargets", "Saved targets",
      el("span", {}, fromTargets, " use the organization's saved capture targets instead of seeds")),
    field("maxDepth", "Depth", number("maxDepth", "2", ""), "Levels below the seeds (0–10; empty: 2, or 0 for saved targets)."),
    field("maxPages", "Max pages", number("maxPages", "30", ""), "Page budget of the crawl (empty: 30)."),
    field("perHostDelayMs", "Delay per host", number("perHostDelayMs", "2000", "2000"),
      "Milliseconds between two pages of one host (robots.txt Crawl-delay wins when longer)."),
    field("scope", "Scope", scope),
    field("formats", "Also capture", formats,
      "Besides the WACZ; screenshots are stored inside the WACZ where the capture server can (none ticked: the deployment's default)."),
    field("ignoreRobotsMeta", "Robots meta",
      el("span", {}, ignoreRobotsMeta, " ignore the pages' noarchive and nofollow (robots meta, X-Robots-Tag)")),
    field("signing", "Sign",
      el("span", {}, signing, " signed WACZ: the capture server's signer signs each archive, the ledger verifies it"),
      "Unticked: the deployment's default."),
    el("span"), el("div", {}, submit, formError));
  view.replaceChildren(el("h1", {}, "Start a crawl"), form);

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    for (const node of form.querySelectorAll(".field-error")) node.textContent = "";
    for (const node of form.querySelectorAll("[aria-invalid]")) node.removeAttribute("aria-invalid");
    formError.textContent = "";
    const body = { scope: scope.value };
    if (fromTargets.checked) body.fromTargets = {};
    else body.seeds = seeds.value.split("\n").map((s) => s.trim()).filter(Boolean);
    for (const name of ["maxDepth", "maxPages", "perHostDelayMs"]) {
      const value = numeric(form.elements[name].value);
      if (value !== undefined) body[name] = value;
    }
    const ticked = extras.filter(([, box]) => box.checked).map(([value]) => value);
    if (ticked.length) body.formats = ["wacz", ...ticked];
    if (ignoreRobotsMeta.checked) body.ignoreRobotsMeta = true;
    if (signing.checked) body.signing = true;
    submit.disabled = true;
    try {
      const started = await api("POST", "/api/crawls", body);
      location.hash = "#/crawls/" + started.crawlId;
    } catch (e) {
      showErrors(form, formError, e);
    } finally {
      submit.disabled = false;
    }
  });
}

function showErrors(form, formError, e) {
  if (!(e instanceof ApiError)) { formError.textContent = e.message; return; }
  if (e.status === 409 && e.body.crawlId) {
    formError.replaceChildren("A crawl is already running: ",
      el("a", { href: "#/crawls/" + e.body.crawlId }, "see it"), " (one crawl at a time).");
    return;
  }
  const fields = e.body.fields || {};
  let placed = false;
  for (const [name, message] of Object.entries(fields)) {
    const slot = form.querySelector("#" + CSS.escape(name) + "-error");
    if (!slot) continue;
    slot.textContent = message;
    const input = form.elements[name];
    if (input) input.setAttribute("aria-invalid", "true");
    placed = true;
  }
  if (!placed) formError.textContent = e.message;
}

// Start a crawl: seeds or the organization's saved targets, depth, max pages, delay, scope, formats;
// an "Advanced" section for include / exclude patterns and extra hops (issue 29).
// The API validates; its 400 body's "fields" put each problem next to its field.
import { api, ApiError } from "./api.js";
import { el } from "./dom.js";
import { plainField } from "./plain.js";

export function field(name, label, input, hint) {
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

// opts (a saved workflow's form, workflows.js): title, head (rows before the crawl's),
// initial (options to show), submitLabel, save(body) instead of POST /api/crawls.
export function startForm(view, ctx, opts = {}) {
  if (!ctx.session.canSubmit && !opts.save) {
    view.replaceChildren(el("h1", {}, "Start a crawl"),
      el("p", { className: "muted", id: "start-refused" }, "You may not start crawls (you are not a submitter of any organization)."));
    return;
  }
  const seeds = el("textarea", { id: "seeds", name: "seeds", placeholder: "https://example.org/\nhttps://example.org/about" });
  const fromTargets = el("input", { id: "fromTargets", name: "fromTargets", type: "checkbox",
    onchange: () => { seeds.disabled = fromTargets.checked; } });
  const scope = el("select", { id: "scope", name: "scope" },
    el("option", { value: "origin" }, "origin (scheme, host and port of a seed)"),
    el("option", { value: "host" }, "host (any scheme)"),
    el("option", { value: "domain" }, "domain (the seed's registered domain and its subdomains)"),
    el("option", { value: "prefix" }, "prefix (under each seed's path)"),
    el("option", { value: "page" }, "page (the seeds only)"));
  const include = el("textarea", { id: "include", name: "include", placeholder: "^https://cdn\\.example\\.org/img/" });
  const exclude = el("textarea", { id: "exclude", name: "exclude", placeholder: "/logout\n\\?sort=" });
  const groupHosts = el("select", { id: "groupHosts", name: "groupHosts" },
    el("option", { value: "address" }, "hosts that resolve to one address"),
    el("option", { value: "domain" }, "… and every host of one registered domain"));
  // Capture formats besides the WACZ (always captured); none ticked: the deployment's default.
  const extras = [["png", "PNG screenshot"], ["webp", "WebP screenshot"], ["html", "HTML"], ["mhtml", "MHTML"]]
    .map(([value, label]) => [value, el("input", { type: "checkbox", name: "formats", value, id: "format-" + value }), label]);
  const formats = el("span", { id: "formats", className: "choices" },
    ...extras.map(([, box, label]) => el("label", {}, box, " " + label)));  // each box named by its label
  const ignoreRobotsMeta = el("input", { id: "ignoreRobotsMeta", name: "ignoreRobotsMeta", type: "checkbox" });
  // Signed WACZ (wacz-auth); unticked: the deployment's default.
  const signing = el("input", { id: "signing", name: "signing", type: "checkbox" });
  // Sitemaps of the seed hosts (issue 29 item 2): their URLs in scope, after the seeds.
  const useSitemap = el("input", { id: "useSitemap", name: "useSitemap", type: "checkbox" });
  const sitemapLastmodAfter = el("input", { id: "sitemapLastmodAfter", name: "sitemapLastmodAfter", type: "date" });
  const formError = el("p", { className: "error", id: "form-error", role: "alert" });
  const submitLabel = opts.submitLabel || "Start crawl";
  const submit = el("button", { className: "primary", type: "submit", id: "start" }, submitLabel);
  const form = el("form", { className: "grid", id: "start-form", novalidate: true }, ...(opts.head || []),
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
    el("span"), el("details", { id: "advanced" }, el("summary", {}, "Advanced"),
      el("div", { className: "grid" },
        field("include", "Include", include,
          "Regular expressions (RE2), one a line, over the normalized URL: matching URLs are in scope too."),
        field("exclude", "Exclude", exclude,
          "Regular expressions (RE2), one a line: matching URLs are never taken (an exclude always wins)."),
        field("extraHops", "Extra hops", number("extraHops", "0", ""),
          "Also capture pages up to this many links outside the scope (0–10; their links are not followed further)."),
        field("timeLimitS", "Time limit", number("timeLimitS", "none", ""),
          "Seconds; the crawl then ends (stop reason time_limit), captures under way are kept."),
        field("maxBytes", "Size limit", number("maxBytes", "none", ""),
          "Bytes of archives; the crawl then ends (stop reason size_limit)."),
        field("maxPagesPerHost", "Pages per host", number("maxPagesPerHost", "none", ""),
          "At most this many pages of one host."),
        field("useSitemap", "Sitemaps",
          el("span", {}, useSitemap, " also queue the URLs in scope that the seed hosts' sitemaps list (robots.txt Sitemap: lines, else /sitemap.xml)")),
        field("sitemapLastmodAfter", "Sitemap lastmod after", sitemapLastmodAfter,
          "Only sitemap URLs changed after this date (URLs without a lastmod are kept)."),
        field("groupHosts", "One server", groupHosts,
          "Hosts that are one server share one gap and one lease (the larger delay)."),
        field("delayFactor", "Slow-host factor", number("delayFactor", "5", ""),
          "A host's gap is at least this times its last page's document time, never below the delay (0–60; 0: off)."))),
    el("span"), el("div", {}, submit, formError));
  view.replaceChildren(el("h1", {}, opts.title || "Start a crawl"), form);
  if (opts.initial) fill(form, opts.initial, seeds, fromTargets, extras);

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    for (const node of form.querySelectorAll(".field-error")) node.textContent = "";
    for (const node of form.querySelectorAll("[aria-invalid]")) node.removeAttribute("aria-invalid");
    formError.textContent = "";
    const body = { scope: scope.value };
    if (fromTargets.checked) body.fromTargets = {};
    else body.seeds = seeds.value.split("\n").map((s) => s.trim()).filter(Boolean);
    for (const [name, box] of [["include", include], ["exclude", exclude]]) {
      const lines = box.value.split("\n").map((s) => s.trim()).filter(Boolean);
      if (lines.length) body[name] = lines;
    }
    for (const name of ["maxDepth", "maxPages", "perHostDelayMs", "extraHops", "timeLimitS", "maxBytes", "maxPagesPerHost"]) {
      const value = numeric(form.elements[name].value);
      if (value !== undefined) body[name] = value;
    }
    const ticked = extras.filter(([, box]) => box.checked).map(([value]) => value);
    if (ticked.length) body.formats = ["wacz", ...ticked];
    if (ignoreRobotsMeta.checked) body.ignoreRobotsMeta = true;
    if (signing.checked) body.signing = true;
    if (useSitemap.checked) body.useSitemap = true;
    if (sitemapLastmodAfter.value) body.sitemapLastmodAfter = sitemapLastmodAfter.value;
    if (groupHosts.value !== "address") body.groupHosts = groupHosts.value;
    const factor = form.elements.delayFactor.value.trim();
    if (factor !== "") body.delayFactor = /^\d+(\.\d+)?$/.test(factor) ? Number(factor) : factor;  // else the API's 400
    submit.disabled = true;
    submit.textContent = opts.save ? "Saving…" : "Starting…";  // the ledger plans the first level before it answers (0.2–2 s)
    submit.setAttribute("aria-busy", "true");
    try {
      if (opts.save) {  // options the form has no field for (e.g. scripts) stay as saved
        const kept = Object.entries(opts.initial || {}).filter(([k]) => !form.elements[k] && !["seeds", "fromTargets", "formats"].includes(k));
        await opts.save({ ...Object.fromEntries(kept), ...body }, form);
        return;
      }
      const started = await api("POST", "/api/crawls", body);
      location.hash = "#/crawls/" + started.crawlId;
    } catch (e) {
      showErrors(form, formError, e);
    } finally {
      submit.disabled = false;
      submit.textContent = submitLabel;  // a refused save stays a save button
      submit.removeAttribute("aria-busy");
    }
  });
}

// Show saved options in the form: by field name, so a field added to the form is filled too.
function fill(form, options, seeds, fromTargets, extras) {
  for (const [name, value] of Object.entries(options)) {
    if (name === "seeds") seeds.value = value.join("\n");
    else if (name === "fromTargets") { fromTargets.checked = true; seeds.disabled = true; }
    else if (name === "formats") for (const [v, box] of extras) box.checked = value.includes(v);
    else {
      const input = form.elements[name];
      if (!input || input instanceof RadioNodeList) continue;
      if (input.type === "checkbox") input.checked = value === true;
      else input.value = Array.isArray(value) ? value.join("\n") : String(value);
    }
  }
}

export function showErrors(form, formError, e) {
  if (!(e instanceof ApiError)) { formError.textContent = e.message; return; }
  if (e.status === 409 && e.body.crawlId) {
    formError.replaceChildren("A crawl is already running: ",
      el("a", { href: "#/crawls/" + e.body.crawlId }, "see it"), " (one crawl at a time).");
    return;
  }
  const fields = e.body.fields || {};
  const labels = Object.fromEntries([...form.querySelectorAll("label[for]")].map((l) => [l.htmlFor, l.textContent]));
  let placed = false;
  for (const [name, message] of Object.entries(fields)) {
    const slot = form.querySelector("#" + CSS.escape(name) + "-error");
    if (!slot) {
      if (name === "body") { formError.textContent = plainField(name, message, labels); placed = true; }
      continue;
    }
    const fold = slot.closest("details");
    if (fold) fold.open = true;  // a problem in the advanced section is shown, not hidden
    slot.textContent = plainField(name, message, labels);
    const input = form.elements[name];
    if (input && input.setAttribute) {
      input.setAttribute("aria-invalid", "true");
      input.setAttribute("aria-describedby", slot.id);
    }
    placed = true;
  }
  if (!placed) formError.textContent = e.message;
}

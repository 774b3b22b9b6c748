// The archive picker: lists the caller's archives (GET /api/archives, newest first, 50 a page)
// and downloads one through a 300 s signed URL (POST /api/archives/{id}/url). No tokens are
// minted here; names are kept in localStorage. (In JWT mode GET / is the web page of ledger/web.)
(function () {
  "use strict";
  const $ = (id) => document.getElementById(id);
  const tbody = document.querySelector("#archives tbody");
  const status = $("status");
  let lastCapturedAt = null;

  function say(text, isError) {
    status.textContent = text;
    status.className = isError ? "error" : "";
  }

  function headers() {
    const subject = $("subject").value;
    const orgs = $("orgs").value;
    localStorage.setItem("waggle.subject", subject);
    localStorage.setItem("waggle.orgs", orgs);
    return { "X-Waggle-Subject": subject, "X-Waggle-Organizations": orgs };
  }

  async function call(method, path) {
    const response = await fetch(path, { method, headers: headers() });
    let body = null;
    try { body = await response.json(); } catch (e) { body = null; }
    if (response.status === 401) throw new Error(UNAUTHENTICATED);
    if (!response.ok) throw new Error((body && body.error) || ("HTTP " + response.status));
    return body;
  }

  function cell(row, text, cls) {
    const td = document.createElement("td");
    if (cls) td.className = cls;
    if (text !== undefined) td.textContent = text;
    row.appendChild(td);
    return td;
  }

  function render(archive) {
    const tr = document.createElement("tr");
    tr.className = "archive";
    tr.dataset.id = archive.id;
    const source = cell(tr, undefined, "source");
    source.textContent = archive.sourceUrl;
    if (archive.waczComplete === false) {
      const badge = document.createElement("span");
      badge.className = "badge incomplete";
      badge.title = "some responses of this page were recorded without their body";
      badge.textContent = "incomplete";
      source.appendChild(badge);
    }
    cell(tr, new Date(archive.capturedAt).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC"), "captured");
    const labels = cell(tr, undefined, "labels");
    for (const l of archive.labels || []) {
      const span = document.createElement("span");
      span.className = "label";
      span.textContent = l;
      labels.appendChild(span);
    }
    const actions = cell(tr);
    const button = document.createElement("button");
    button.type = "button";
    button.className = "download";
    button.textContent = "Download";
    button.addEventListener("click", () => download(archive, button));
    actions.appendChild(button);
    tbody.appendChild(tr);
  }

  async function download(archive, button) {
    button.disabled = true;
    try {
      const signed = await call("POST", "/api/archives/" + encodeURIComponent(archive.id) + "/url");
      say("Download link valid for " + signed.expiresIn + " s: " + archive.objectKey);
      window.location.assign(signed.url);
    } catch (e) {
      say(e.message, true);
    } finally {
      button.disabled = false;
    }
  }

  async function load(more) {
    if (!more) { tbody.textContent = ""; lastCapturedAt = null; }
    say("Loading…");
    try {
      const query = more && lastCapturedAt ? "?before=" + encodeURIComponent(lastCapturedAt) : "";
      const page = await call("GET", "/api/archives" + query);
      for (const a of page.archives) render(a);
      if (page.archives.length) lastCapturedAt = page.archives[page.archives.length - 1].capturedAt;
      $("archives").hidden = tbody.children.length === 0;
      $("more").hidden = page.archives.length === 0;
      say(tbody.children.length ? tbody.children.length + " archive(s)" : "No archives you may view.");
    } catch (e) {
      say(e.message, true);
    }
  }

  $("subject").value = localStorage.getItem("waggle.subject") || "";
  $("orgs").value = localStorage.getItem("waggle.orgs") || "";
  $("identity").addEventListener("submit", (ev) => { ev.preventDefault(); load(false); });
  $("more").addEventListener("click", () => load(true));
})();

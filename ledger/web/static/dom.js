// Tiny DOM helpers: text always goes through textContent (no HTML from data).
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "className") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

export function stateBadge(state) {
  return el("span", { className: "state " + (state || "") }, state || "—");
}

export function when(iso) {
  if (!iso) return "—";
  return new Date(iso).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

// Elapsed time from start to finish (or now, while running): "42 s", "3 min 5 s", "2 h 4 min".
export function elapsed(startedAt, finishedAt) {
  if (!startedAt) return "—";
  const end = finishedAt ? new Date(finishedAt) : new Date();
  const s = Math.max(0, Math.round((end - new Date(startedAt)) / 1000));
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
  return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
}

export function table(headers, rows, attrs) {
  return el("table", attrs || {},
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { className: h.num ? "num" : "" }, h.label || h)))),
    el("tbody", {}, rows));
}

// A size in SI units ("12.3 kB"), or "unknown" when the ledger does not know it.
export function size(bytes) {
  if (bytes === null || bytes === undefined) return "unknown";
  for (const [unit, scale] of [["GB", 1e9], ["MB", 1e6], ["kB", 1e3]]) {
    if (bytes >= scale) return (bytes / scale).toFixed(1) + " " + unit;
  }
  return bytes + " B";
}

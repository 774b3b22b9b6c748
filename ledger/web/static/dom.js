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

// node.replaceChildren(...children) leaving out null / undefined / false parts as el() does
// (replaceChildren itself writes them as the text "null").
export function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== undefined && c !== null && c !== false));
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

// A table whose cells carry their column's name (data-label): on a phone each row shows as a
// card, a cell's name before its value (style.css). Rows appended later go through label().
export function table(headers, rows, attrs) {
  const labels = headers.map((h) => h.label ?? h);
  const node = el("table", attrs || {},
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { className: h.num ? "num" : "" }, h.label ?? h)))),
    el("tbody", {}, label(labels, rows)));
  node.dataset.labels = JSON.stringify(labels);
  return node;
}

// Sets each row's cells' data-label from ``labels`` (an array, or a table made by table()).
export function label(labels, rows) {
  const names = Array.isArray(labels) ? labels : JSON.parse(labels.dataset.labels || "[]");
  for (const row of rows) [...row.children].forEach((cell, i) => { cell.dataset.label = names[i] || ""; });
  return rows;
}

// A size in SI units ("12.3 kB"), or "unknown" when the ledger does not know it.
export function size(bytes) {
  if (bytes === null || bytes === undefined) return "unknown";
  for (const [unit, scale] of [["GB", 1e9], ["MB", 1e6], ["kB", 1e3]]) {
    if (bytes >= scale) return (bytes / scale).toFixed(1) + " " + unit;
  }
  return bytes + " B";
}

// "1 crawl", "1,234 archives": a count with its noun (English plural by -s).
export function counted(n, noun) {
  return n.toLocaleString("en-US") + " " + noun + (n === 1 ? "" : "s");
}

// A page's links (decision 232): "4 kept of 1000 — not taken: max_pages 593, links_overflow 400".
export function linksText(links) {
  if (!links || !links.discovered) return "";
  const dropped = Object.entries(links.dropped || {}).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  return links.kept + " kept of " + links.discovered
    + (dropped.length ? " — not taken: " + dropped.map(([k, n]) => k + " " + n).join(", ") : "");
}

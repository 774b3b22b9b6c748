"""A page's links as the CLI shows them (decision 232): ``links 4 kept of 1,000 (not taken:
max_pages 593, links_overflow 400, …)``."""

from __future__ import annotations


def links_text(page: dict) -> str | None:
    """One line for a page row's ``links`` (``{discovered, kept, dropped}``), drops largest first;
    None when the page gave no links (or the ledger does not say)."""
    links = page.get("links")
    if not isinstance(links, dict) or not links.get("discovered"):
        return None
    dropped = links.get("dropped") or {}
    text = f"links {links.get('kept', 0):,} kept of {links['discovered']:,}"
    if dropped:
        parts = sorted(dropped.items(), key=lambda kv: (-kv[1], kv[0]))
        text += " (not taken: " + ", ".join(f"{k} {v:,}" for k, v in parts) + ")"
    return text

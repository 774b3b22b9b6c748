"""Cookie/consent overlay removal for ``dismissBanners`` (contracts.md §A.3 ``DismissSpec``).

``{"enabled": true}`` = defaults (bundled CMP selectors + heuristic, never fails the capture);
``{"spec": {...}}`` = ``useDefaults`` (default true), ``extraSelectors`` (first match each,
framework ``custom``; unparsable ones listed in ``unusableSelectors``), ``excludeFrameworks``,
``heuristic {enabled=true, minViewportCoverageRatio=0.3, minZIndex=1000}`` (fixed/sticky
elements with z-index ≥ min covering ≥ ratio of the viewport, never inside
header/footer/nav/main/aside), ``failOnError`` (default false). Runs in the main frame with a
5 s in-page deadline. The result is the archive's ``dismissal`` object.
"""

from __future__ import annotations

import asyncio
from typing import Any

DEFAULT_SELECTORS = [
    ("OneTrust", "#onetrust-consent-sdk"),
    ("Cookiebot", "#CybotCookiebotDialog"),
    ("Quantcast", ".qc-cmp2-container"),
    ("Didomi", "#didomi-host"),
    ("TrustArc", "#truste-consent-track"),
    ("Sourcepoint", "div[id^='sp_message_container']"),
    ("Osano", ".osano-cm-window"),
    ("CookieLawInfo", "#cookie-law-info-bar"),
    ("InsitesCookieConsent", ".cc-window"),
    ("Klaro", ".klaro"),
    ("Usercentrics", "#usercentrics-root"),
]

DISMISS_JS = """([selectors, heuristic]) => {
  const removedSelectors = [], unusableSelectors = [];
  for (const s of selectors) {
    let el;
    try { el = document.querySelector(s.selector); } catch (e) { unusableSelectors.push(s.selector); continue; }
    if (el) { el.remove(); removedSelectors.push(s); }
  }
  let removedOverlays = 0;
  if (heuristic.enabled && document.body) {
    const vw = innerWidth, vh = innerHeight;
    for (const el of Array.from(document.body.querySelectorAll("*"))) {
      if (!el.isConnected || el.closest("header,footer,nav,main,aside")) continue;
      const cs = getComputedStyle(el);
      if (cs.position !== "fixed" && cs.position !== "sticky") continue;
      const z = parseInt(cs.zIndex, 10);
      if (!(z >= heuristic.minZIndex)) continue;
      const r = el.getBoundingClientRect();
      const w = Math.max(0, Math.min(r.right, vw) - Math.max(r.left, 0));
      const h = Math.max(0, Math.min(r.bottom, vh) - Math.max(r.top, 0));
      if (w * h >= heuristic.minViewportCoverageRatio * vw * vh) { el.remove(); removedOverlays++; }
    }
  }
  return { removedSelectors, unusableSelectors, removedOverlays };
}"""


class DismissFailed(RuntimeError):
    """Removal failed and ``failOnError`` was set; ``timeout`` tells whether the 5 s ran out."""

    def __init__(self, message: str, timeout: bool):
        super().__init__(message)
        self.timeout = timeout


def plan(option: dict[str, Any]) -> tuple[list[dict[str, str]], dict[str, Any], bool]:
    """(selectors, heuristic, failOnError) for a ``dismissBanners`` union value."""
    spec = option.get("spec") if "spec" in option else {}
    if "enabled" in option and not option["enabled"]:
        return [], {"enabled": False}, False
    exclude = set(spec.get("excludeFrameworks") or [])
    selectors = [{"framework": f, "selector": s} for f, s in DEFAULT_SELECTORS
                 if spec.get("useDefaults", True) and f not in exclude]
    selectors += [{"framework": "custom", "selector": s} for s in spec.get("extraSelectors") or []]
    h = spec.get("heuristic") or {}
    heuristic = {"enabled": h.get("enabled", True), "minViewportCoverageRatio": h.get("minViewportCoverageRatio", 0.3),
                 "minZIndex": h.get("minZIndex", 1000)}
    return selectors, heuristic, bool(spec.get("failOnError", False))


async def dismiss(page, option: dict[str, Any], dpr: int) -> dict[str, Any] | None:
    """Remove overlays; returns the ``dismissal`` object (None when not attempted)."""
    selectors, heuristic, fail = plan(option)
    if not selectors and not heuristic["enabled"]:
        return None
    try:
        res = await asyncio.wait_for(page.evaluate(DISMISS_JS, [selectors, heuristic]), 5)
    except asyncio.TimeoutError as e:
        if fail:
            raise DismissFailed("banner removal did not finish within 5000 ms", True) from e
        return {"unreadable": True}
    except Exception as e:  # noqa: BLE001 — page-side failure
        if fail:
            raise DismissFailed(f"banner removal failed: {e}", False) from e
        return {"unreadable": True}
    frameworks = sorted({s["framework"] for s in res["removedSelectors"]})
    out: dict[str, Any] = {"selectors": selectors, "heuristic": heuristic, "removedSelectors": res["removedSelectors"],
                           "unusableSelectors": res["unusableSelectors"], "removedOverlays": res["removedOverlays"],
                           "devicePixelRatio": dpr}
    if frameworks:
        out["framework"] = frameworks[0] if len(frameworks) == 1 else frameworks
    return out

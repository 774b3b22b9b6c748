"""URL and content-type policies (contracts.md §A.5).

``UrlPolicy.pattern`` is a glob over the whole URL where only ``*`` is special (any run, incl.
empty); case-sensitive; first match wins. ``ContentTypePolicy.prefix`` is a case-sensitive prefix
of the response media type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


@lru_cache(maxsize=1024)
def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if p == "*" else re.escape(p) for p in re.split(r"(\*)", pattern)), re.S)


@dataclass(frozen=True)
class Match:
    """A URL policy that matched: ``action`` (deny|no-archive|no-body), ``pattern`` as given."""

    action: str
    pattern: str


class Policies:
    """The policies in force for one capture (request values replace server defaults)."""

    def __init__(self, url_policies: list[dict], content_type_policies: list[dict]):
        self.url_policies = list(url_policies)
        self.content_type_policies = list(content_type_policies)

    def match_url(self, url: str) -> Match | None:
        """First URL policy whose glob matches the whole ``url``, or None."""
        for p in self.url_policies:
            if _glob(p["pattern"]).fullmatch(url):
                return Match(p["action"], p["pattern"])
        return None

    def body_withheld_by_type(self, media_type: str | None) -> str | None:
        """The matching content-type prefix (body not stored), or None."""
        mt = (media_type or "").split(";")[0].strip()
        for p in self.content_type_policies:
            if mt.startswith(p["prefix"]):
                return p["prefix"]
        return None

    def has_deny(self) -> bool:
        return any(p["action"] == "deny" for p in self.url_policies)

"""Validation of ``POST /captures`` bodies (contracts.md §A.3, §A.7, §D.3.3).

:func:`validate_request` returns the body unchanged when it is valid and raises
:class:`ValidationError` otherwise: ``message`` plus ``field_list`` ``[{"path", "message"}]``
(JSON-pointer paths) for every per-field violation (unknown field, wrong type, range, pattern,
required, script hash). Cross-field rules (signing needs wacz, loadWait order, artifact name
length) raise with a message only, as the real server does.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from waggle_capture.navrules import validate_patterns

FORMATS = ("png", "webp", "html", "links", "mhtml", "wacz")
URL_ACTIONS = ("deny", "no-archive", "no-body")
CT_ACTIONS = ("no-body",)
KEY_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # a Waggle-Capture-Key (seals.KEY_RE)
SHA_RE = re.compile(r"^[0-9a-fA-F]{64}$")
PRINTABLE_RE = re.compile(r"^[\x20-\x7e]*$")
_SNAKE_HINTS = {
    "capture_formats": "captureFormats", "correlation_id": "correlationId",
    "accept_language": "acceptLanguage", "dismiss_banners": "dismissBanners",
    "full_page": "fullPage", "device_pixel_ratios": "devicePixelRatios",
    "max_response_bytes": "maxResponseBytes", "url_policies": "urlPolicies",
    "artifact_sink": "artifactSink", "load_wait": "loadWait", "start_after_ms": "startAfterMs",
    "seal_before_formats": "sealBeforeFormats", "dismissbanners": "dismissBanners", "hold_after": "holdAfter",
}


class ValidationError(ValueError):
    """400 ``ValidationException``: ``message`` and optional ``field_list``."""

    def __init__(self, message: str, field_list: list[dict[str, str]] | None = None):
        super().__init__(message)
        self.message = message
        self.field_list = field_list or []

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"message": self.message}
        if self.field_list:
            out["fieldList"] = self.field_list
        return out


# --- a tiny schema language: each node validates a value at a JSON-pointer path ---------------


@dataclass
class Node:
    required: bool = False

    def check(self, value: Any, path: str, errs: list[dict[str, str]]) -> None:
        raise NotImplementedError


@dataclass
class Str(Node):
    min_len: int = 0
    max_len: int | None = None
    pattern: re.Pattern[str] | None = None
    enum: tuple[str, ...] | None = None

    def check(self, value, path, errs):
        if not isinstance(value, str):
            errs.append({"path": path, "message": "Member must be a string"})
            return
        if len(value) < self.min_len:
            errs.append({"path": path, "message": f"Member must have length greater than or equal to {self.min_len}"})
        if self.max_len is not None and len(value) > self.max_len:
            errs.append({"path": path, "message": f"Member must have length less than or equal to {self.max_len}"})
        if self.pattern is not None and not self.pattern.match(value):
            errs.append({"path": path, "message": f"Member must satisfy regular expression pattern: {self.pattern.pattern}"})
        if self.enum is not None and value not in self.enum:
            errs.append({"path": path, "message": f"Member must satisfy enum value set: [{', '.join(self.enum)}]"})


@dataclass
class Bool(Node):
    def check(self, value, path, errs):
        if not isinstance(value, bool):
            errs.append({"path": path, "message": "Member must be a boolean"})


@dataclass
class Num(Node):
    lo: float | None = None
    hi: float | None = None
    integer: bool = True

    def check(self, value, path, errs):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok and self.integer and isinstance(value, float) and not value.is_integer():
            ok = False
        if not ok:
            errs.append({"path": path, "message": "Member must be an integer" if self.integer else "Member must be a number"})
            return
        if self.lo is not None and value < self.lo:
            errs.append({"path": path, "message": f"Member must be greater than or equal to {self.lo:g}"})
        if self.hi is not None and value > self.hi:
            errs.append({"path": path, "message": f"Member must be less than or equal to {self.hi:g}"})


@dataclass
class Any_(Node):
    def check(self, value, path, errs):
        return


@dataclass
class List(Node):
    item: Node = field(default_factory=Any_)
    max_items: int | None = None
    unique: bool = False

    def check(self, value, path, errs):
        if not isinstance(value, list):
            errs.append({"path": path, "message": "Member must be a list"})
            return
        if self.max_items is not None and len(value) > self.max_items:
            errs.append({"path": path, "message": f"Member must have length less than or equal to {self.max_items}"})
        if self.unique and len({repr(v) for v in value}) != len(value):
            errs.append({"path": path, "message": "Member must have unique items"})
        for i, v in enumerate(value):
            self.item.check(v, f"{path}/{i}", errs)


@dataclass
class Obj(Node):
    fields: dict[str, Node] = field(default_factory=dict)
    union: bool = False  # Smithy union: exactly one member set

    def check(self, value, path, errs):
        if not isinstance(value, dict):
            errs.append({"path": path, "message": "Member must be an object"})
            return
        for key in value:
            if key not in self.fields:
                hint = _SNAKE_HINTS.get(key)
                msg = "Unknown field" + (f"; did you mean '{hint}'?" if hint else "")
                errs.append({"path": f"{path}/{_escape(key)}", "message": msg})
        if self.union and len(value) != 1:
            errs.append({"path": path, "message": f"Union must have exactly one member of: {', '.join(self.fields)}"})
        for key, node in self.fields.items():
            if key not in value or value[key] is None:
                if node.required:
                    errs.append({"path": f"{path}/{key}", "message": "Member must not be null"})
                continue
            node.check(value[key], f"{path}/{key}", errs)


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


@dataclass
class Script(Obj):
    """A Script: sha256 must equal the SHA-256 hex of the UTF-8 source (case-insensitive)."""

    def check(self, value, path, errs):
        before = len(errs)
        super().check(value, path, errs)
        if len(errs) == before:
            actual = hashlib.sha256(value["source"].encode("utf-8")).hexdigest()
            if actual != value["sha256"].lower():
                errs.append({"path": f"{path}/sha256", "message": "sha256 does not match the SHA-256 of source (hex of its UTF-8 bytes)"})


def _script() -> Script:
    return Script(fields={
        "id": Str(required=True, min_len=1),
        "source": Str(required=True, min_len=1),
        "sha256": Str(required=True, pattern=SHA_RE),
        "options": Any_(),
    })


_DISMISS_SPEC = Obj(fields={
    "useDefaults": Bool(),
    "extraSelectors": List(item=Str()),
    "excludeFrameworks": List(item=Str()),
    "heuristic": Obj(fields={
        "enabled": Bool(), "minViewportCoverageRatio": Num(lo=0, hi=1, integer=False),
        "minZIndex": Num(),
    }),
    "failOnError": Bool(),
})

REQUEST = Obj(fields={
    "url": Str(required=True, min_len=1),
    "labels": List(item=Str()),
    "correlationId": Str(),
    "captureFormats": Obj(required=True, fields={f: Bool(required=True) for f in FORMATS}),
    "acceptLanguage": Str(max_len=200, pattern=PRINTABLE_RE),
    "signing": Bool(),
    "dismissBanners": Obj(union=True, fields={"enabled": Bool(), "spec": _DISMISS_SPEC}),
    "viewport": Obj(fields={"width": Num(required=True, lo=1, hi=7680), "height": Num(required=True, lo=1, hi=4320)}),
    "operationDelayMs": Num(lo=0, hi=5000),
    "trace": Bool(),
    "devicePixelRatios": List(item=Num(lo=1, hi=3), unique=True),
    "fullPage": Bool(),
    "behaviors": List(item=_script()),
    "preload": List(item=_script()),
    "session": Str(enum=("isolated", "shared")),
    "maxResponseBytes": Num(lo=1),
    "urlPolicies": List(max_items=100, item=Obj(fields={
        "pattern": Str(required=True, min_len=1), "action": Str(required=True, enum=URL_ACTIONS)})),
    "contentTypePolicies": List(max_items=50, item=Obj(fields={
        "prefix": Str(required=True, min_len=1), "action": Str(required=True, enum=CT_ACTIONS)})),
    "storageValues": Bool(),
    "artifactSink": Obj(fields={"url": Str(required=True, min_len=1), "token": Str(required=True, min_len=1)}),
    "startAfterMs": Num(lo=0, hi=60000),  # waggle extension (docs/capture-server.md extension 9)
    "sealBeforeFormats": Bool(),  # waggle extension (docs/capture-server.md extension 10)
    "holdAfter": Obj(fields={  # waggle extension (docs/capture-server.md extension 12)
        "key": Str(required=True, min_len=1, max_len=64, pattern=KEY_RE),
        "gapMs": Num(required=True, lo=0, hi=60000), "backoffGapMs": Num(lo=0, hi=120000),
        "delayFactor": Num(lo=0, hi=60),  # extension "serverpolite": a slow previous page's longer gap
        "admission": Obj(fields={  # extension holdAdmission (docs/capture-server.md extension "hold")
            "url": Str(required=True, min_len=1, max_len=2000, pattern=re.compile(r"^https?://")),
            "token": Str(required=True, min_len=1, max_len=8000)})}),
    "captureAtDeadline": Bool(),  # waggle extension (docs/capture-server.md extension 14)
    "screenshotsInWacz": Bool(),  # waggle extension (docs/capture-server.md extension 15)
    "honourNoarchive": Bool(),  # waggle extension robotsMeta (docs/capture-server.md "wishes")
    "revisit": Obj(fields={  # waggle extension (docs/capture-server.md extension "revisit")
        "url": Str(required=True, min_len=1, max_len=2000, pattern=re.compile(r"^https?://")),
        "token": Str(required=True, min_len=1, max_len=8000)}),
    "conditional": Obj(fields={  # waggle extension (docs/capture-server.md extension "conditional")
        "url": Str(required=True, min_len=1, max_len=2000, pattern=re.compile(r"^https?://")),
        "token": Str(required=True, min_len=1, max_len=8000)}),
    "navigationRules": Obj(fields={  # waggle extension navigationRules (docs/capture-server.md "redirects")
        "robotsTxt": Str(max_len=4_000_000), "exclude": List(max_items=100, item=Str(min_len=1, max_len=1000))}),
    "loadWait": Obj(fields={
        "minMs": Num(lo=0, hi=60000), "maxMs": Num(lo=0, hi=60000), "quietMs": Num(lo=0, hi=60000),
        "networkConcurrency": Num(lo=0, hi=100)}),
})


def validate_request(body: Any) -> dict[str, Any]:
    """The request if valid; raises :class:`ValidationError` (see module docstring)."""
    if not isinstance(body, dict):
        raise ValidationError("request body must be a JSON object", [{"path": "", "message": "Member must be an object"}])
    errs: list[dict[str, str]] = []
    REQUEST.check(body, "", errs)
    if errs:
        n = len(errs)
        raise ValidationError(
            f"{n} validation error{'s' if n > 1 else ''} detected. Value at '{errs[0]['path']}' "
            f"failed to satisfy constraint: {errs[0]['message']}",
            errs,
        )
    fmts = body["captureFormats"]
    if not any(fmts[f] for f in FORMATS):
        raise ValidationError("captureFormats: at least one format must be true",
                              [{"path": "/captureFormats", "message": "at least one format must be true"}])
    if body.get("signing") is not None and not fmts["wacz"]:
        raise ValidationError("signing is only allowed when captureFormats.wacz is true")
    lw = body.get("loadWait") or {}
    if "maxMs" in lw and lw.get("minMs", 0) > lw["maxMs"]:
        raise ValidationError("loadWait: minMs must not exceed maxMs")
    if "maxMs" in lw and lw.get("quietMs", 0) > lw["maxMs"]:
        raise ValidationError("loadWait: quietMs must not exceed maxMs")
    if body.get("holdAfter") is not None and body.get("session") == "shared":
        raise ValidationError("holdAfter: a held capture runs beside the previous one, so it cannot use session: shared",
                              [{"path": "/holdAfter", "message": "not allowed with session: shared"}])
    bad = validate_patterns((body.get("navigationRules") or {}).get("exclude") or [])
    if bad:
        raise ValidationError(bad, [{"path": "/navigationRules/exclude", "message": bad}])
    if not body["url"].strip():
        raise ValidationError("url must not be blank", [{"path": "/url", "message": "Member must not be blank"}])
    return body

"""Checks of ``POST /compile`` bodies in the order of contracts.md §C.2.

:func:`parse_request` raises :class:`SerializationError` (→ 400 ``SerializationException``, body
``{}``) for a body that is not a JSON object or has members of the wrong JSON type, and
:class:`ValidationError` (→ 400 ``ValidationException`` with ``fieldList`` of JSON-pointer paths)
for every constraint violation at once (required, 0–100 scripts, id pattern/length, phase enum,
lowercase hex sha256).
"""

from __future__ import annotations

import json
import re
from typing import Any

ID_RE = re.compile(r"^[a-z][a-z0-9-]*$")
SHA_RE = re.compile(r"^[0-9a-f]{64}$")
PHASES = ("preload", "behavior")
MAX_SCRIPTS = 100


class SerializationError(ValueError):
    """Body is not a JSON object or a member has the wrong JSON type."""


class ValidationError(ValueError):
    """Constraint violations; ``field_list`` = ``[{"path", "message"}]``."""

    def __init__(self, field_list: list[dict[str, str]]) -> None:
        self.field_list = field_list
        n = len(field_list)
        first = field_list[0]
        super().__init__(
            f"{n} validation error{'s' if n > 1 else ''} detected. "
            f"Value at '{first['path']}' failed to satisfy constraint: {first['message']}"
        )


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -(2**31) <= v < 2**31


def parse_request(body: bytes) -> list[dict[str, Any]]:
    """Validated ``scripts`` list of a compile request (each a dict with the §C.2 members)."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise SerializationError("body is not JSON") from e
    if not isinstance(doc, dict):
        raise SerializationError("body is not a JSON object")
    errors: list[dict[str, str]] = []
    scripts = doc.get("scripts")
    if scripts is None:
        raise ValidationError([{"path": "/scripts", "message": "Member must not be null"}])
    if not isinstance(scripts, list):
        raise SerializationError("scripts must be a list")
    if len(scripts) > MAX_SCRIPTS:
        errors.append({
            "path": "/scripts",
            "message": f"Member must have length between 0 and {MAX_SCRIPTS}, inclusive",
        })
    for i, s in enumerate(scripts):
        p = f"/scripts/{i}"
        if not isinstance(s, dict):
            raise SerializationError(f"{p} must be an object")
        for name, kind in (("id", str), ("phase", str), ("source", str), ("sha256", str)):
            v = s.get(name)
            if v is None:
                errors.append({"path": f"{p}/{name}", "message": "Member must not be null"})
            elif not isinstance(v, kind):
                raise SerializationError(f"{p}/{name} must be a string")
        if s.get("version") is None:
            errors.append({"path": f"{p}/version", "message": "Member must not be null"})
        elif not _is_int(s["version"]):
            raise SerializationError(f"{p}/version must be an integer")
        sid = s.get("id")
        if isinstance(sid, str):
            if not 1 <= len(sid) <= 64:
                errors.append({
                    "path": f"{p}/id",
                    "message": "Member must have length between 1 and 64, inclusive",
                })
            elif not ID_RE.match(sid):
                errors.append({
                    "path": f"{p}/id",
                    "message": f"Member must satisfy regular expression pattern: {ID_RE.pattern}",
                })
        if isinstance(s.get("phase"), str) and s["phase"] not in PHASES:
            errors.append({
                "path": f"{p}/phase",
                "message": f"Member must satisfy enum value set: [{', '.join(PHASES)}]",
            })
        if isinstance(s.get("sha256"), str) and not SHA_RE.match(s["sha256"]):
            errors.append({
                "path": f"{p}/sha256",
                "message": f"Member must satisfy regular expression pattern: {SHA_RE.pattern}",
            })
    if errors:
        raise ValidationError(errors)
    return scripts

"""Windmill's own signature inference (npm windmill-parser-wasm-py, run with node) → JSON Schema.

The conversion mirrors the CLI's ``argSigToJsonSchemaType`` for the types our ``main``s use
(windmill.md §1.5); anything else is reported as an unsupported type so a test fails loudly.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = ROOT / "devstack" / "node_modules"
PARSE_SIG = Path(__file__).with_name("parse_sig.mjs")


def infer(files: list[Path]) -> dict[str, dict]:
    """{relative path: signature} as Windmill's parser reports it."""
    out = subprocess.run(
        ["node", str(PARSE_SIG), str(NODE_MODULES), *[str(f.relative_to(ROOT)) for f in files]],
        cwd=ROOT, capture_output=True, text=True, check=True, timeout=60,
    )
    return json.loads(out.stdout)


def type_schema(typ: object) -> dict:
    """JSON Schema fragment for one parser type."""
    simple = {"int": "integer", "float": "number", "bool": "boolean"}
    if isinstance(typ, str):
        if typ in simple:
            return {"type": simple[typ]}
        if typ == "datetime":
            return {"type": "string", "format": "date-time"}
        raise ValueError(f"unsupported parameter type {typ!r} (give main plain types)")
    if isinstance(typ, dict) and "str" in typ:
        return {"type": "string", **({"enum": typ["str"]} if typ["str"] else {})}
    if isinstance(typ, dict) and "object" in typ:
        return {"type": "object", "properties": {}}
    if isinstance(typ, dict) and "list" in typ:
        inner = type_schema(typ["list"])
        item = {"type": inner["type"]} if inner["type"] != "object" else {"type": "object"}
        return {"type": "array", "items": item}
    raise ValueError(f"unsupported parameter type {typ!r} (give main plain types)")


def schema_from_sig(sig: dict) -> dict:
    """The script schema the CLI would write for this signature (description fields empty)."""
    properties: dict[str, dict] = {}
    required: list[str] = []
    for arg in sig["args"]:
        prop = {**type_schema(arg["typ"]), "description": ""}
        if arg["has_default"]:
            prop["default"] = arg["default"]
        else:
            required.append(arg["name"])
        properties[arg["name"]] = prop
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "order": [a["name"] for a in sig["args"]],
        "properties": properties,
        "required": required,
    }

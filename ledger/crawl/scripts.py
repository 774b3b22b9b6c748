"""Page-script catalogue: resolution, pinning and the compiled-hash merge (ledger.md §8).

Pinned item (stored in ``crawls.scripts``, sent in every webhook):
``{id, version, phase, source, sha256, options}`` + after the first level report
``jsSha256`` and ``compiledWith {typescript, hostTypes}``. ``sha256`` is hex SHA-256 over the
UTF-8 bytes of the TypeScript ``source``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from psycopg import AsyncConnection

ID_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,63}$")
_REF = re.compile(r"^(?P<id>[a-z][a-z0-9-]{0,63})(?:@(?P<version>[1-9][0-9]{0,8}))?$")
INLINE_PREFIX = "inline-"
PHASES = ("behavior", "preload")


def sha256_hex(text: str) -> str:
    """Lowercase hex SHA-256 over the UTF-8 bytes of ``text`` (contracts.md §A.4)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def identity(script: dict) -> dict:
    """What callers may see of a pinned script: id, version, phase, sha256 (+ compiled hashes)."""
    out = {k: script[k] for k in ("id", "version", "phase", "sha256")}
    if "jsSha256" in script:
        out["jsSha256"] = script["jsSha256"]
        out["compiledWith"] = script.get("compiledWith")
    return out


def webhook_item(script: dict) -> dict:
    """The six catalogue fields sent to the flow: id, version, phase, source, sha256, options."""
    return {k: script[k] for k in ("id", "version", "phase", "source", "sha256", "options")}


def inline_script(name: str, phase: str, source: str, options: dict | None) -> dict:
    """A caller-supplied script pinned as ``inline-<name>`` version 1.

    Raises ``ValueError`` saying what to change for a bad name, phase or empty source.
    """
    script_id = INLINE_PREFIX + name
    if not ID_PATTERN.match(script_id):
        raise ValueError(
            f"inline script name {name!r} must be lowercase letters, digits and '-' "
            f"(at most {64 - len(INLINE_PREFIX)} characters)"
        )
    if phase not in PHASES:
        raise ValueError(f"inline script {name!r}: phase must be behavior or preload")
    if not source.strip():
        raise ValueError(f"inline script {name!r}: source must not be empty")
    return {
        "id": script_id,
        "version": 1,
        "phase": phase,
        "source": source,
        "sha256": sha256_hex(source),
        "options": options or {},
    }


def parse_ref(ref: str) -> tuple[str, int | None]:
    """``"autoscroll"`` → ``("autoscroll", None)``; ``"autoscroll@2"`` → ``("autoscroll", 2)``.

    Raises ``ValueError`` for anything else.
    """
    match = _REF.match(ref)
    if not match:
        raise ValueError(f"{ref!r} is not a script id (id or id@version)")
    version = match.group("version")
    return match.group("id"), int(version) if version else None


_COLUMNS = "id, version, phase, source, sha256, options"


async def default_set(conn: AsyncConnection) -> list[dict]:
    """The highest *enabled* version of each id, ordered by id (ledger.md §8.2)."""
    cur = await conn.execute(
        f"SELECT DISTINCT ON (id) {_COLUMNS} FROM scripts WHERE enabled ORDER BY id, version DESC"
    )
    return [dict(r) for r in await cur.fetchall()]


async def resolve(conn: AsyncConnection, refs: list[str]) -> tuple[list[dict], list[str]]:
    """Resolve registered script references in the caller's order (order = execution order).

    ``id`` → its newest version, ``id@n`` → exactly that version (``enabled`` is ignored when a
    script is named). Returns ``(scripts, missing)``; ``missing`` lists unknown references
    (unique, in request order). Raises ``ValueError`` for a malformed reference.
    """
    scripts: list[dict] = []
    missing: list[str] = []
    for ref in refs:
        script_id, version = parse_ref(ref)
        if version is None:
            cur = await conn.execute(
                f"SELECT {_COLUMNS} FROM scripts WHERE id = %s ORDER BY version DESC LIMIT 1", (script_id,)
            )
        else:
            cur = await conn.execute(
                f"SELECT {_COLUMNS} FROM scripts WHERE id = %s AND version = %s", (script_id, version)
            )
        row = await cur.fetchone()
        if row is None:
            if ref not in missing:
                missing.append(ref)
        else:
            scripts.append(dict(row))
    return scripts, missing


class CompiledMismatch(Exception):
    """The level report's ``compiled`` block does not fit the pinned scripts.

    ``status`` 400 (a pinned script lacks a hash / an unpinned one is reported) or 409 (the
    JavaScript hash changed since an earlier level); ``script_id`` is ``id@version``.
    """

    def __init__(self, status: int, message: str, script_id: str):
        self.status, self.message, self.script_id = status, message, script_id
        super().__init__(message)


@dataclass(frozen=True)
class MergeResult:
    scripts: list[dict]
    changed: bool


def merge_compiled(pinned: list[dict], compiled: dict) -> MergeResult:
    """Record the reported JavaScript hashes on the pinned scripts (ledger.md §8.3).

    ``compiled`` = ``{typescript, hostTypes, scripts: [{id, version, sha256}]}``. Does not
    mutate ``pinned``. Raises :class:`CompiledMismatch`.
    """
    reported = {f"{s['id']}@{s['version']}": s["sha256"] for s in compiled.get("scripts", [])}
    keys = {f"{s['id']}@{s['version']}" for s in pinned}
    for key in reported:
        if key not in keys:
            raise CompiledMismatch(400, f"{key} is not among the scripts this crawl pinned", key)
    with_ = {"typescript": compiled["typescript"], "hostTypes": compiled["hostTypes"]}
    out: list[dict] = []
    changed = False
    for script in pinned:
        key = f"{script['id']}@{script['version']}"
        js = reported.get(key)
        if js is None:
            raise CompiledMismatch(400, f"the report has no JavaScript sha256 for {key}", key)
        old = script.get("jsSha256")
        if old is not None and old != js:
            raise CompiledMismatch(
                409, f"the JavaScript of {key} changed mid-crawl ({old[:12]}\u2026 \u2192 {js[:12]}\u2026)", key
            )
        item = copy.deepcopy(script)
        if old is None or script.get("compiledWith") != with_:
            changed = True
        item["jsSha256"] = js
        item["compiledWith"] = dict(with_)
        out.append(item)
    return MergeResult(out, changed)


# -- catalogue writes (CLI) ------------------------------------------------------------------


async def add_script(
    conn: AsyncConnection, script_id: str, source: str, *, phase: str = "behavior", options: dict | None = None
) -> tuple[int, bool]:
    """Append ``source`` as the next version of ``script_id``; returns ``(version, created)``.

    Re-adding the newest version's source (with the same options when ``options`` is given)
    reuses that version (``created`` False). Raises ``ValueError`` for a bad id, phase or source.
    """
    if not ID_PATTERN.match(script_id) or script_id.startswith(INLINE_PREFIX):
        raise ValueError(
            f"script id {script_id!r} must match {ID_PATTERN.pattern} and not start with {INLINE_PREFIX!r}"
        )
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {', '.join(PHASES)}, not {phase!r}")
    if not source.strip():
        raise ValueError(f"script {script_id}: the source is empty")
    cur = await conn.execute(
        "SELECT version, sha256, options, phase FROM scripts WHERE id = %s ORDER BY version DESC LIMIT 1 FOR UPDATE",
        (script_id,),
    )
    newest = await cur.fetchone()
    if newest is not None and newest["sha256"] == sha256_hex(source) and newest["phase"] == phase:
        if options is None or newest["options"] == options:
            return newest["version"], False
    version = (newest["version"] + 1) if newest else 1
    await conn.execute(
        "INSERT INTO scripts (id, version, phase, source, options) VALUES (%s, %s, %s, %s, %s::jsonb)",
        (script_id, version, phase, source, json.dumps(options or {})),
    )
    return version, True


def default_catalogue() -> list[dict[str, Any]]:
    """The scripts the project ships (``ledger/crawl/catalogue/catalogue.json``), sources read.

    Each item: ``{id, phase, source, options}``.
    """
    base = resources.files("ledger.crawl.catalogue")
    manifest = json.loads(base.joinpath("catalogue.json").read_text(encoding="utf-8"))
    if manifest.get("profile") != "capture-scripts/1":
        raise ValueError("catalogue.json: profile must be capture-scripts/1")
    items = []
    for entry in manifest["scripts"]:
        source = base.joinpath(entry["file"]).read_text(encoding="utf-8")
        items.append({"id": entry["id"], "phase": entry["phase"], "source": source, "options": entry.get("options", {})})
    return items


async def load_defaults(conn: AsyncConnection) -> list[tuple[str, int, bool]]:
    """Add every shipped script (idempotent); returns ``[(id, version, created)]``."""
    out = []
    for item in default_catalogue():
        version, created = await add_script(
            conn, item["id"], item["source"], phase=item["phase"], options=item["options"]
        )
        out.append((item["id"], version, created))
    return out

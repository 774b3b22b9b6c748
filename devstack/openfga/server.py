"""OpenFGA HTTP API stand-in: the subset openfga-sdk 0.10.5 and ``fga`` use.

Routes (OpenFGA HTTP API v1): ``GET/POST /stores``, ``GET/DELETE /stores/{id}``,
``GET/POST /stores/{id}/authorization-models``, ``GET /stores/{id}/authorization-models/{mid}``,
``POST /stores/{id}/write|read|check|batch-check``, ``GET /healthz``.
Errors use the real server's body ``{"code": "...", "message": "..."}`` and status (400 for
validation codes, 404 ``store_id_not_found``/``undefined_endpoint``, 401 without the preshared
key when one is configured). Duplicate writes / absent deletes answer 400
``write_failed_due_to_invalid_input`` with OpenFGA's message text.

State lives in memory; with ``data_file`` it survives restarts: store and model changes
rewrite that JSON file (atomically); a tuple Write appends one line to ``<data_file>.log``
(a journal, replayed at start), and every ``compact_every`` lines the whole state is written
to ``data_file`` and the journal emptied — so a Write costs O(its tuples), not O(store).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from devstack.openfga.engine import ApiError, CheckError, Evaluator, Model, TupleIndex, tuple_string

MAX_TUPLES_PER_WRITE = 100
MAX_CHECKS_PER_BATCH = 50
CONSISTENCY = {"UNSPECIFIED", "MINIMIZE_LATENCY", "HIGHER_CONSISTENCY"}
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_ulid() -> str:
    """A ULID (48-bit ms time + 80 random bits, Crockford base32), as OpenFGA ids are."""
    value = (int(time.time() * 1000) << 80) | secrets.randbits(80)
    return "".join(_CROCKFORD[(value >> (5 * i)) & 31] for i in reversed(range(26)))


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _err(exc: ApiError) -> JSONResponse:
    return JSONResponse({"code": exc.code, "message": exc.message}, status_code=exc.status)


class FgaState:
    """Stores, models and tuples; thread-safe; optionally persisted to ``data_file``."""

    def __init__(self, data_file: str | Path | None = None, *, compact_every: int = 1000):
        self.lock = threading.RLock()
        self.data_file = Path(data_file) if data_file else None
        self.journal = self.data_file.with_name(self.data_file.name + ".log") if self.data_file else None
        self.compact_every, self._journaled = compact_every, 0
        self.stores: dict[str, dict] = {}
        self.models: dict[str, dict[str, Model]] = {}  # store -> model id -> parsed
        self.tuples: dict[str, dict[tuple[str, str, str], dict]] = {}
        self.indexes: dict[str, TupleIndex] = {}
        if self.data_file and self.data_file.exists():
            self._load()

    # -- persistence -----------------------------------------------------------------------
    def _load(self) -> None:
        data = json.loads(self.data_file.read_text())  # type: ignore[union-attr]
        for sid, s in data.get("stores", {}).items():
            self.stores[sid] = {k: s[k] for k in ("id", "name", "created_at", "updated_at")}
            self.models[sid] = {}
            for m in s.get("models", []):
                self.models[sid][m["id"]] = Model.parse(m)
            self.tuples[sid] = {(t["key"]["object"], t["key"]["relation"], t["key"]["user"]): t for t in s.get("tuples", [])}
        if self._replay():
            self._save()  # start from a clean snapshot: nothing is ever appended after a torn line
        for sid in self.stores:
            self.indexes[sid] = TupleIndex({k: v["key"] for k, v in self.tuples[sid].items()})

    def _replay(self) -> bool:
        """Apply the journal's Writes on top of the snapshot, in order. Each entry sets or
        removes keys, so replaying entries the snapshot already holds changes nothing; a torn
        last line (crash mid-append) is ignored. Returns True when there was a journal."""
        if not self.journal or not self.journal.exists():
            return False
        for line in self.journal.read_text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                break
            store = self.tuples.get(entry["store"])
            if store is None:
                continue
            for key in entry.get("deletes", []):
                store.pop(tuple(key), None)
            for t in entry.get("writes", []):
                k = t["key"]
                store[(k["object"], k["relation"], k["user"])] = t
        return True

    def _append(self, sid: str, written: list[dict], deleted: list[tuple[str, str, str]]) -> None:
        if not self.journal:
            return
        if self._journaled + 1 >= self.compact_every:
            self._save()
            return
        with open(self.journal, "a") as f:
            f.write(json.dumps({"store": sid, "writes": written, "deletes": deleted}) + "\n")
        self._journaled += 1

    def _save(self) -> None:
        """Write the whole state to ``data_file`` (atomically), then empty the journal."""
        if not self.data_file:
            return
        data = {
            "stores": {
                sid: {
                    **s,
                    "models": [m.raw for m in self.models[sid].values()],
                    "tuples": list(self.tuples[sid].values()),
                }
                for sid, s in self.stores.items()
            }
        }
        tmp = self.data_file.with_suffix(self.data_file.suffix + ".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.data_file)
        if self.journal and self.journal.exists():
            self.journal.unlink()  # its entries are in the snapshot now (replaying them is harmless)
        self._journaled = 0

    # -- helpers ---------------------------------------------------------------------------
    def store(self, sid: str) -> dict:
        s = self.stores.get(sid)
        if s is None:
            raise ApiError("store_id_not_found", "Store ID not found", 404)
        return s

    def model(self, sid: str, mid: str | None) -> Model:
        self.store(sid)
        models = self.models[sid]
        if mid:
            if mid not in models:
                raise ApiError("authorization_model_not_found", f"Authorization Model '{mid}' not found")
            return models[mid]
        if not models:
            raise ApiError("latest_authorization_model_not_found", f"No authorization models found for store '{sid}'")
        return models[max(models)]  # ULIDs sort by time

    # -- operations ------------------------------------------------------------------------
    def create_store(self, name: str) -> dict:
        with self.lock:
            sid, now = new_ulid(), _now()
            self.stores[sid] = {"id": sid, "name": name, "created_at": now, "updated_at": now}
            self.models[sid], self.tuples[sid], self.indexes[sid] = {}, {}, TupleIndex()
            self._save()
            return self.stores[sid]

    def delete_store(self, sid: str) -> None:
        with self.lock:
            self.store(sid)
            for d in (self.stores, self.models, self.tuples, self.indexes):
                d.pop(sid, None)
            self._save()

    def write_model(self, sid: str, body: dict) -> str:
        with self.lock:
            self.store(sid)
            mid = new_ulid()
            raw = {
                "id": mid,
                "schema_version": body.get("schema_version"),
                "type_definitions": body.get("type_definitions") or [],
                "conditions": body.get("conditions") or {},
            }
            self.models[sid][mid] = Model.parse(raw)
            self._save()
            return mid

    def write(self, sid: str, body: dict) -> None:
        with self.lock:
            model = self.model(sid, body.get("authorization_model_id") or None)
            writes_block = body.get("writes") or {}
            deletes_block = body.get("deletes") or {}
            writes = list(writes_block.get("tuple_keys") or [])
            deletes = list(deletes_block.get("tuple_keys") or [])
            on_duplicate = writes_block.get("on_duplicate") or "error"
            on_missing = deletes_block.get("on_missing") or "error"
            if not writes and not deletes:
                raise ApiError("invalid_write_input", "Invalid input. Make sure you provide at least one write, or at least one delete")
            if len(writes) + len(deletes) > MAX_TUPLES_PER_WRITE:
                raise ApiError(
                    "exceeded_entity_limit",
                    f"The number of write operations exceeds the allowed limit of {MAX_TUPLES_PER_WRITE}",
                )
            seen: set[tuple[str, str, str]] = set()
            for t in writes + deletes:
                key = (t.get("object", ""), t.get("relation", ""), t.get("user", ""))
                if key in seen:
                    raise ApiError(
                        "cannot_allow_duplicate_tuples_in_one_request",
                        f"duplicate tuple in write: user: '{key[2]}', relation: '{key[1]}', object: '{key[0]}'",
                    )
                seen.add(key)
            for t in writes:
                model.validate_tuple(t)
            for t in deletes:
                if not t.get("object") or not t.get("relation") or not t.get("user"):
                    raise ApiError("invalid_tuple", f"Invalid tuple '{tuple_string(t)}'. Reason: missing fields")
            store = self.tuples[sid]
            tail = "tuple to be written already existed or the tuple to be deleted did not exist"
            for t in deletes:
                key = (t["object"], t["relation"], t["user"])
                if key not in store and on_missing != "ignore":
                    raise ApiError(
                        "write_failed_due_to_invalid_input",
                        f"cannot delete a tuple which does not exist: user: '{key[2]}', relation: '{key[1]}',"
                        f" object: '{key[0]}': {tail}",
                    )
            for t in writes:
                key = (t["object"], t["relation"], t["user"])
                if key in store and on_duplicate != "ignore":
                    raise ApiError(
                        "write_failed_due_to_invalid_input",
                        f"cannot write a tuple which already exists: user: '{key[2]}', relation: '{key[1]}',"
                        f" object: '{key[0]}': {tail}",
                    )
            # all checks passed: apply atomically; the index follows incrementally (rebuilding
            # it from every stored tuple made each Write O(store size))
            index = self.indexes[sid]
            deleted: list[tuple[str, str, str]] = []
            written: list[dict] = []
            for t in deletes:
                key = (t["object"], t["relation"], t["user"])
                if store.pop(key, None) is not None:
                    deleted.append(key)
                index.remove(key)
            now = _now()
            for t in writes:
                key = (t["object"], t["relation"], t["user"])
                if key in store:
                    continue
                clean = {"user": t["user"], "relation": t["relation"], "object": t["object"]}
                if t.get("condition") and t["condition"].get("name"):
                    clean["condition"] = {"name": t["condition"]["name"], "context": t["condition"].get("context") or {}}
                store[key] = {"key": clean, "timestamp": now}
                written.append(store[key])
                index.add(clean)
            if written or deleted:
                self._append(sid, written, deleted)

    def read(self, sid: str, body: dict) -> dict:
        with self.lock:
            self.store(sid)
            tk = body.get("tuple_key") or {}
            obj, rel, user = tk.get("object") or "", tk.get("relation") or "", tk.get("user") or ""
            if tk and (user or rel) and not obj:
                raise ApiError("validation_error", "the 'object' field is required when 'user' or 'relation' is set")
            page_size = int(body.get("page_size") or 50)
            if not 1 <= page_size <= 100:
                raise ApiError("page_size_invalid", "page_size must be between 1 and 100")
            offset = 0
            token = body.get("continuation_token") or ""
            if token:
                try:
                    offset = int(base64.urlsafe_b64decode(token.encode()).decode())
                except Exception as exc:  # noqa: BLE001
                    raise ApiError("invalid_continuation_token", "Invalid continuation token") from exc

            def match(t: dict) -> bool:
                k = t["key"]
                if obj:
                    if obj.endswith(":"):
                        if not k["object"].startswith(obj):
                            return False
                    elif k["object"] != obj:
                        return False
                return (not rel or k["relation"] == rel) and (not user or k["user"] == user)

            rows = [t for t in self.tuples[sid].values() if match(t)]
            page = rows[offset : offset + page_size]
            nxt = offset + page_size
            cont = base64.urlsafe_b64encode(str(nxt).encode()).decode() if nxt < len(rows) else ""
            return {"tuples": page, "continuation_token": cont}

    def _evaluator(self, sid: str, model: Model, contextual: list[dict], context: dict | None) -> Evaluator:
        for t in contextual:
            model.validate_tuple(t)
        return Evaluator(model, self.indexes[sid], contextual, context)

    def check(self, sid: str, body: dict) -> dict:
        with self.lock:
            model = self.model(sid, body.get("authorization_model_id") or None)
            _consistency(body)
            tk = body.get("tuple_key") or {}
            _require_key(tk)
            contextual = ((body.get("contextual_tuples") or {}).get("tuple_keys")) or []
            ev = self._evaluator(sid, model, contextual, body.get("context"))
            return {"allowed": ev.check(tk["object"], tk["relation"], tk["user"]), "resolution": ""}

    def batch_check(self, sid: str, body: dict) -> dict:
        with self.lock:
            model = self.model(sid, body.get("authorization_model_id") or None)
            _consistency(body)
            checks = body.get("checks") or []
            if not checks:
                raise ApiError("validation_error", "invalid BatchCheckRequest.Checks: value must contain at least 1 item(s)")
            if len(checks) > MAX_CHECKS_PER_BATCH:
                raise ApiError(
                    "validation_error",
                    f"batchCheck received {len(checks)} checks, the maximum allowed is {MAX_CHECKS_PER_BATCH}",
                )
            ids: set[str] = set()
            for c in checks:
                cid = c.get("correlation_id") or ""
                if not cid:
                    raise ApiError("validation_error", "invalid BatchCheckItem.CorrelationId: value length must be at least 1 runes")
                if cid in ids:
                    raise ApiError("validation_error", f"duplicate correlation_id provided: {cid}")
                ids.add(cid)
            result: dict[str, Any] = {}
            for c in checks:
                try:
                    tk = c.get("tuple_key") or {}
                    _require_key(tk)
                    contextual = ((c.get("contextual_tuples") or {}).get("tuple_keys")) or []
                    ev = self._evaluator(sid, model, contextual, c.get("context"))
                    result[c["correlation_id"]] = {"allowed": ev.check(tk["object"], tk["relation"], tk["user"])}
                except ApiError as exc:
                    result[c["correlation_id"]] = {"allowed": False, "error": {"input_error": exc.code, "message": exc.message}}
            return {"result": result}


def _consistency(body: dict) -> None:
    value = body.get("consistency")
    if value is not None and value not in CONSISTENCY:
        raise ApiError("validation_error", f"invalid consistency value: {value}")


def _require_key(tk: dict) -> None:
    for f in ("user", "relation", "object"):
        if not tk.get(f):
            raise ApiError("validation_error", f"invalid CheckRequestTupleKey.{f.capitalize()}: value is required")


def create_app(state: FgaState, preshared_key: str | None = None) -> Starlette:
    """The ASGI app serving ``state``; with ``preshared_key`` every API call needs
    ``Authorization: Bearer <key>`` (``/healthz`` excepted), as OpenFGA's preshared authn."""

    async def body_of(request: Request) -> dict:
        try:
            data = await request.json() if await request.body() else {}
        except ValueError as exc:
            raise ApiError("validation_error", "malformed JSON") from exc
        if not isinstance(data, dict):
            raise ApiError("validation_error", "request body must be a JSON object")
        return data

    def endpoint(fn):
        async def handler(request: Request):
            if preshared_key is not None and request.headers.get("authorization") != f"Bearer {preshared_key}":
                return JSONResponse({"code": "unauthenticated", "message": "unauthenticated"}, status_code=401)
            try:
                return await fn(request)
            except ApiError as exc:
                return _err(exc)
        return handler

    async def healthz(request: Request):
        return JSONResponse({"status": "SERVING"})

    async def list_stores(request: Request):
        with state.lock:
            return JSONResponse({"stores": list(state.stores.values()), "continuation_token": ""})

    async def create_store(request: Request):
        body = await body_of(request)
        name = body.get("name")
        if not isinstance(name, str) or not name:
            raise ApiError("validation_error", "invalid CreateStoreRequest.Name: value does not match regex pattern")
        return JSONResponse(state.create_store(name), status_code=201)

    async def get_store(request: Request):
        with state.lock:
            return JSONResponse(state.store(request.path_params["store_id"]))

    async def delete_store(request: Request):
        state.delete_store(request.path_params["store_id"])
        return Response(status_code=204)

    async def list_models(request: Request):
        sid = request.path_params["store_id"]
        with state.lock:
            state.store(sid)
            models = [m.raw for _, m in sorted(state.models[sid].items(), reverse=True)]
        return JSONResponse({"authorization_models": models, "continuation_token": ""})

    async def write_model(request: Request):
        mid = state.write_model(request.path_params["store_id"], await body_of(request))
        return JSONResponse({"authorization_model_id": mid}, status_code=201)

    async def get_model(request: Request):
        with state.lock:
            m = state.model(request.path_params["store_id"], request.path_params["model_id"])
        return JSONResponse({"authorization_model": m.raw})

    async def write(request: Request):
        state.write(request.path_params["store_id"], await body_of(request))
        return JSONResponse({})

    async def read(request: Request):
        return JSONResponse(state.read(request.path_params["store_id"], await body_of(request)))

    async def check(request: Request):
        return JSONResponse(state.check(request.path_params["store_id"], await body_of(request)))

    async def batch_check(request: Request):
        return JSONResponse(state.batch_check(request.path_params["store_id"], await body_of(request)))

    async def not_found(request: Request, exc: Exception):
        return JSONResponse({"code": "undefined_endpoint", "message": "Not Found"}, status_code=404)

    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/stores", endpoint(list_stores), methods=["GET"]),
        Route("/stores", endpoint(create_store), methods=["POST"]),
        Route("/stores/{store_id}", endpoint(get_store), methods=["GET"]),
        Route("/stores/{store_id}", endpoint(delete_store), methods=["DELETE"]),
        Route("/stores/{store_id}/authorization-models", endpoint(list_models), methods=["GET"]),
        Route("/stores/{store_id}/authorization-models", endpoint(write_model), methods=["POST"]),
        Route("/stores/{store_id}/authorization-models/{model_id}", endpoint(get_model), methods=["GET"]),
        Route("/stores/{store_id}/write", endpoint(write), methods=["POST"]),
        Route("/stores/{store_id}/read", endpoint(read), methods=["POST"]),
        Route("/stores/{store_id}/check", endpoint(check), methods=["POST"]),
        Route("/stores/{store_id}/batch-check", endpoint(batch_check), methods=["POST"]),
    ]
    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})


__all__ = ["FgaState", "create_app", "new_ulid", "CheckError"]

"""HTTP routes of the ts-compile stand-in (contracts.md §C.1–§C.4, §C.7).

``POST /compile``: validation (400) → per-script hash check in order (first mismatch → 409
``SourceHashMismatch``, before the cache and before compiling) → LRU cache keyed by the TS hashes
joined with ``+`` → one TypeScript program for all scripts (422 ``CompileFailed`` with every
diagnostic and no JavaScript) → 200 with each script's ``source`` replaced by its JavaScript and
``sha256`` by the hex SHA-256 of that JavaScript's UTF-8 bytes. ``GET /healthz``.

restJson1 framing: ``content-type`` must be exactly ``application/json`` on POST (415), absent on
GET; ``Accept`` must admit ``application/json`` (406); unknown path or method → 404
``UnknownOperationException``; every error carries ``x-amzn-errortype``.

Deliberate difference from the real service (§C.7): a cache hit answers with *this* request's
``id``/``version``/``phase``/``options`` (the real one echoes the first request's); the emitted
JavaScript, hashes and ``cached`` flag are the same. And TypeScript's own lib files are not
re-checked per request (``skipDefaultLibCheck``, see compiler.js): same bytes, same 200/422, only
diagnostics located inside lib.dom.d.ts are not listed. The lib check runs once in the background
at startup (warm-up) so the first request does not pay for parsing the libs.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import anyio
from fastapi import FastAPI, Request

from waggle_capture.restjson import accepts_json as _accepts_json
from waggle_capture.restjson import error_response as _error
from devstack.tscompile.child import CompilerError, NodeCompiler
from devstack.tscompile.validate import SerializationError, ValidationError, parse_request

HOST_TYPES = (Path(__file__).resolve().parent / "host-types.pin").read_text().strip()


def sha256_hex(text: str) -> str:
    """Hex SHA-256 of ``text`` encoded as UTF-8 (the hash both TS and JS are stamped with)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class LruCache:
    """``max_entries`` ≥ 1 most recent successful compiles: key → list of JS (request order)."""

    def __init__(self, max_entries: int = 256) -> None:
        if max_entries < 1:
            raise ValueError("cache size must be at least 1")
        self.max_entries = max_entries
        self._data: OrderedDict[str, list[str]] = OrderedDict()

    def get(self, key: str) -> list[str] | None:
        if key in self._data:
            self._data.move_to_end(key)
            return self._data[key]
        return None

    def put(self, key: str, value: list[str]) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.max_entries:
            self._data.popitem(last=False)


def create_app(compiler: NodeCompiler | None = None, cache_max: int = 256) -> FastAPI:
    """The stand-in's ASGI app; ``compiler`` defaults to a new :class:`NodeCompiler`."""
    comp = compiler or NodeCompiler()
    cache = LruCache(cache_max)
    app = FastAPI(title="ts-compile stand-in", openapi_url=None, docs_url=None, redoc_url=None)
    app.state.compiler = comp
    app.state.cache = cache

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception):  # never a stack trace on the wire
        return _error(500, "InternalFailure")

    @app.on_event("startup")
    def _warm() -> None:
        # Parsing and checking lib.dom dominates the first compile; do it before anyone asks.
        threading.Thread(target=comp.warm_up, name="tsc-warm-up", daemon=True).start()

    @app.on_event("shutdown")
    def _close() -> None:
        comp.close()

    @app.get("/healthz")
    async def healthz(request: Request):
        if "content-type" in request.headers:
            return _error(415, "UnsupportedMediaTypeException")
        if not _accepts_json(request):
            return _error(406, "NotAcceptableException")
        if not comp.typescript:
            await anyio.to_thread.run_sync(comp.start)
        return {"ok": True, "typescript": comp.typescript, "hostTypes": HOST_TYPES}

    @app.post("/compile")
    async def compile_route(request: Request):
        if request.headers.get("content-type") != "application/json":
            return _error(415, "UnsupportedMediaTypeException")
        if not _accepts_json(request):
            return _error(406, "NotAcceptableException")
        try:
            scripts = parse_request(await request.body())
        except SerializationError:
            return _error(400, "SerializationException")
        except ValidationError as e:
            return _error(400, "ValidationException", {"message": str(e), "fieldList": e.field_list})
        for s in scripts:
            if sha256_hex(s["source"]) != s["sha256"]:
                return _error(409, "SourceHashMismatch", {
                    "message": f"{s['id']}: sha256 of the source differs from the one it was stamped with",
                    "id": s["id"],
                })
        key = "+".join(s["sha256"] for s in scripts)
        js_list = cache.get(key)
        cached = js_list is not None
        if js_list is None:
            if scripts:
                try:
                    result = await anyio.to_thread.run_sync(
                        comp.compile, [{"id": s["id"], "source": s["source"]} for s in scripts]
                    )
                except CompilerError:
                    return _error(500, "InternalFailure")
                if "diagnostics" in result:
                    diags = result["diagnostics"]
                    return _error(422, "CompileFailed", {
                        "message": f"{len(diags)} type error{'s' if len(diags) != 1 else ''}",
                        "typescript": comp.typescript,
                        "diagnostics": diags,
                    })
                js_list = [result["outputs"][s["id"]] for s in scripts]
            else:
                js_list = []
                if not comp.typescript:
                    await anyio.to_thread.run_sync(comp.start)
            cache.put(key, js_list)
        out = []
        for s, js in zip(scripts, js_list):
            item = {k: s[k] for k in ("id", "version", "phase") }
            item["source"] = js
            item["sha256"] = sha256_hex(js)
            if "options" in s:
                item["options"] = s["options"]
            out.append(item)
        return {"typescript": comp.typescript, "hostTypes": HOST_TYPES, "cached": cached, "scripts": out}

    @app.api_route("/{path:path}", methods=["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD"])
    async def unknown(path: str):
        return _error(404, "UnknownOperationException")

    return app

"""Input transforms evaluated as JavaScript with an embedded V8 (mini-racer), as Windmill does.

Names in scope: ``flow_input`` (with ``iter: {value, index}`` inside a for-loop),
``results`` (earlier module results by id), ``previous_result`` and, in the failure
module, ``error``. ``undefined`` becomes ``None`` (JSON null), like Windmill's hand-off.
"""

from __future__ import annotations

import atexit
import json
import re
import threading

from py_mini_racer import MiniRacer

_lock = threading.Lock()
_engine_box: list[MiniRacer] = []


class ExpressionError(RuntimeError):
    """A transform expression could not be evaluated; the message names it."""


def _engine() -> MiniRacer:
    if not _engine_box:
        _engine_box.append(MiniRacer())
    return _engine_box[0]


@atexit.register
def close_engine() -> None:
    """Dispose of V8 (an open engine keeps the interpreter from exiting)."""
    with _lock:
        while _engine_box:
            _engine_box.pop().close()


def evaluate(expr: str, context: dict) -> object:
    """Value of the JavaScript expression ``expr`` with ``context`` names bound (JSON round-trip)."""
    names = ", ".join(context)
    payload = json.dumps(json.dumps(list(context.values())))
    source = (
        f"(function({names}) {{ const __v = ({expr}); return __v === undefined ? 'null' : JSON.stringify(__v); }})"
        f"(...JSON.parse({payload}))"
    )
    try:
        with _lock:  # one isolate, one evaluation at a time; each call is a fresh function scope
            text = _engine().eval(source)
    except Exception as exc:  # noqa: BLE001 - mini-racer raises its own JS error types
        raise ExpressionError(f"expression {expr!r} failed: {exc}") from exc
    if text is None or not isinstance(text, str):
        return None
    return json.loads(text)


# ``name.key.key…`` with plain identifiers: most transforms (``flow_input.crawl_id``,
# ``flow_input.iter.value.host``, ``results.plan.groups``) are property paths.
_PATH = re.compile(r"^\s*([A-Za-z_$][\w$]*)((?:\s*\.\s*[A-Za-z_$][\w$]*)*)\s*$")
_MISSING = object()


def _property_path(expr: str, context: dict) -> object:
    """Value of a property-path expression read from ``context`` in Python, or ``_MISSING``
    when only V8 can answer exactly: a name not in scope, a step through anything but a JSON
    object (arrays, strings, null, undefined — their properties and errors are JavaScript's),
    or an inherited property (``__proto__`` and friends are never read here). A key absent from
    the last object is ``undefined`` → ``None``, as in :func:`evaluate`. Saves a V8 round trip
    and a JSON copy of the whole context per transform."""
    match = _PATH.match(expr)
    if not match or match.group(1) not in context:
        return _MISSING
    value = context[match.group(1)]
    for key in [k.strip() for k in match.group(2).split(".")[1:]]:
        if not isinstance(value, dict) or key == "__proto__" or (key not in value and key in _OBJECT_PROTOTYPE):
            return _MISSING
        value = value.get(key)
    try:
        return _as_js_json(value)
    except _NeedsV8:
        return _MISSING


class _NeedsV8(Exception):
    """A number JavaScript would not hand back unchanged."""


def _as_js_json(value: object) -> object:
    """A fresh copy of ``value`` as ``JSON.parse(JSON.stringify(value))`` in V8 gives it: integral
    floats become ints (``1.0`` → ``1``); integers beyond 2**53 and NaN/±inf raise :class:`_NeedsV8`."""
    if isinstance(value, dict):
        return {k: _as_js_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_js_json(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        if abs(value) > 2**53:
            raise _NeedsV8()
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")) or (value.is_integer() and abs(value) > 2**53):
            raise _NeedsV8()  # NaN/±inf become null; big integral floats print differently in JS
        return int(value) if value.is_integer() else value
    raise _NeedsV8()


# Properties every JS object inherits from Object.prototype: reading one on a JSON object gives
# a function (→ undefined after JSON) or an object, so those go to V8.
_OBJECT_PROTOTYPE = frozenset({
    "constructor", "hasOwnProperty", "isPrototypeOf", "propertyIsEnumerable", "toLocaleString", "toString",
    "valueOf", "__defineGetter__", "__defineSetter__", "__lookupGetter__", "__lookupSetter__", "__proto__",
})


def transform(spec: dict, context: dict) -> object:
    """One input transform: ``{type: static, value}`` or ``{type: javascript, expr}``."""
    kind = spec.get("type")
    if kind == "static":
        return spec.get("value")
    if kind == "javascript":
        value = _property_path(spec["expr"], context)
        return evaluate(spec["expr"], context) if value is _MISSING else value
    raise ExpressionError(f"unknown input transform type {kind!r}")

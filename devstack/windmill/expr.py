"""Input transforms evaluated as JavaScript with an embedded V8 (mini-racer), as Windmill does.

Names in scope: ``flow_input`` (with ``iter: {value, index}`` inside a for-loop),
``results`` (earlier module results by id), ``previous_result`` and, in the failure
module, ``error``. ``undefined`` becomes ``None`` (JSON null), like Windmill's hand-off.
"""

from __future__ import annotations

import atexit
import json
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


def transform(spec: dict, context: dict) -> object:
    """One input transform: ``{type: static, value}`` or ``{type: javascript, expr}``."""
    kind = spec.get("type")
    if kind == "static":
        return spec.get("value")
    if kind == "javascript":
        return evaluate(spec["expr"], context)
    raise ExpressionError(f"unknown input transform type {kind!r}")

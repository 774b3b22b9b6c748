"""Run one step script the way Windmill's Python wrapper does (windmill.md §7.3, §7.6).

``python -m devstack.windmill.wrapper <script path> <args.json> <result.json>``:
imports ``f.waggle.<name>`` (repository root on PYTHONPATH), calls ``main`` with the
JSON arguments — a parameter without a default gets ``None`` when missing; one with a
default gets its default when the value is missing or null — and writes the result as
JSON. An exception becomes ``{"error": {message, name, stack, extra?, step_id}}`` and exit 1.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
import time
import traceback


def build_kwargs(main, args: dict) -> dict:
    """Keyword arguments for ``main`` from ``args`` under Windmill's null/default rules."""
    kwargs = {}
    for name, param in inspect.signature(main).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        value = args.get(name)
        if param.default is inspect.Parameter.empty:
            kwargs[name] = value
        elif value is not None:
            kwargs[name] = value
    return kwargs


def run(script_path: str, args_file: str, result_file: str, marks: dict | None = None) -> int:
    """Import ``script_path``, call ``main``, write the result; 0 or 1 (Windmill's exit codes).

    ``marks`` (optional) receives ``imported``/``returned`` wall-clock times (epoch s).
    """
    marks = {} if marks is None else marks
    with open(args_file, encoding="utf-8") as fh:
        args = json.load(fh)
    try:
        module = importlib.import_module(script_path.replace("/", "."))
        marks["imported"] = time.time()
        result = module.main(**build_kwargs(module.main, args))
        marks["returned"] = time.time()
        text = json.dumps(result, separators=(",", ":"), default=str)
        code = 0
    except BaseException as exc:  # noqa: BLE001 - Windmill catches everything, SystemExit included
        error = {
            "message": str(exc),
            "name": type(exc).__name__,
            "stack": traceback.format_exc(),
        }
        extra = {k: v for k, v in getattr(exc, "__dict__", {}).items() if not k.startswith("_")}
        if extra:
            error["extra"] = json.loads(json.dumps(extra, default=str))
        step = os.environ.get("WM_FLOW_STEP_ID")
        if step:
            error["step_id"] = step
        text = json.dumps({"error": error}, default=str)
        traceback.print_exc()
        code = 1
    with open(result_file, "w", encoding="utf-8") as fh:
        fh.write(text)
    return code


def step_child(script_path: str, args_file: str, result_file: str, log_file: str, env: dict, root: str,
               pycache: str | None = None) -> None:
    """Body of one step process: own session, own environment, output to ``log_file``.

    ``pycache``: a bytecode cache directory (``sys.pycache_prefix``) kept by the runner, so a
    step's script is compiled once per source version (size + mtime, Python's own check), not
    in every job — even with ``PYTHONDONTWRITEBYTECODE``, and without writing into ``f/``.

    Also writes ``<result_file>.timing`` = ``{"running", "imported", "returned"}`` (epoch s) for the
    runner's step log line.
    """
    marks = {"running": time.time()}
    try:
        os.setsid()
    except PermissionError:  # a spare (devstack.windmill.spares) leads its own session already
        pass
    fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(root)
    if pycache:
        sys.pycache_prefix = pycache
        sys.dont_write_bytecode = False
    for entry in reversed(env.get("PYTHONPATH", "").split(os.pathsep)):
        if entry and entry not in sys.path:
            sys.path.insert(0, entry)
    code = run(script_path, args_file, result_file, marks)
    try:
        with open(result_file + ".timing", "w", encoding="utf-8") as fh:
            json.dump(marks, fh)
    except OSError:
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def spare_child(reader) -> None:
    """A step process forked ahead of time: own session now, then one job's ``step_child``
    arguments from the pipe ``reader``; EOF (the runner closed it or stopped) → exit."""
    os.setsid()
    try:
        spec = reader.recv()
    except (EOFError, OSError):
        os._exit(0)
    reader.close()
    step_child(*spec)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1], sys.argv[2], sys.argv[3]))

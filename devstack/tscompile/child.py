"""The Node compiler child: ``compiler.js`` with ``typescript`` 6.0.3 from ``devstack/node_modules``.

One child per :class:`NodeCompiler`, spoken to over stdin/stdout JSON lines (see compiler.js).
Calls are serialised by a lock; a child that dies or stops answering within ``timeout_s`` is
killed and started again on the next call.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import threading
from pathlib import Path
from typing import Any

from devstack.nodedeps import ensure_node_modules, node_binary

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "compiler.js"


class CompilerError(RuntimeError):
    """The Node child crashed, timed out or reported an internal error (not a type error)."""


class NodeCompiler:
    """Type-check and emit a list of scripts as one program.

    ``compile([{"id", "source"}, ...])`` → ``{"outputs": {id: js}}`` or
    ``{"diagnostics": [{file?, line?, col?, code, message}, ...]}``; raises
    :class:`CompilerError` when the child fails. ``typescript`` is ``ts.version`` of the child.
    """

    def __init__(self, timeout_s: float = 60.0) -> None:
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None
        self._n = itertools.count(1)
        self.typescript: str = ""

    def start(self) -> None:
        """Start the child now (otherwise the first call starts it); idempotent."""
        with self._lock:
            self._ensure()

    def warm_up(self) -> None:
        """Type-check the lib files once (an empty program) so the first real compile is fast;
        errors are ignored (the next call restarts the child)."""
        try:
            self.compile([])
        except (CompilerError, OSError, ValueError):
            pass

    def _ensure(self) -> subprocess.Popen[str]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        ensure_node_modules("typescript")
        self._proc = subprocess.Popen(
            [node_binary(), str(SCRIPT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            cwd=HERE,
        )
        hello = self._read_line(self._proc)
        self.typescript = hello["typescript"]
        return self._proc

    def _read_line(self, proc: subprocess.Popen[str]) -> dict[str, Any]:
        # A reader thread gives readline() a deadline; on expiry the child is killed.
        box: list[str] = []
        t = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)
        t.start()
        t.join(self.timeout_s)
        if t.is_alive() or not box or not box[0]:
            self._kill()
            raise CompilerError("TypeScript child did not answer")
        return json.loads(box[0])

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(5)
            self._proc = None

    def compile(self, scripts: list[dict[str, str]]) -> dict[str, Any]:
        with self._lock:
            proc = self._ensure()
            n = next(self._n)
            try:
                proc.stdin.write(json.dumps({"n": n, "scripts": scripts}) + "\n")
                proc.stdin.flush()
            except (BrokenPipeError, OSError) as e:
                self._kill()
                raise CompilerError(f"TypeScript child is gone: {e}") from e
            answer = self._read_line(proc)
            if answer.get("n") != n or "error" in answer:
                self._kill()
                raise CompilerError(answer.get("error", "answer out of order"))
            return answer

    def close(self) -> None:
        """Stop the child (closing stdin lets it exit; killed if it lingers)."""
        with self._lock:
            if self._proc is None:
                return
            try:
                self._proc.stdin.close()
                self._proc.wait(5)
            except (subprocess.TimeoutExpired, OSError):
                self._proc.kill()
                self._proc.wait(5)
            self._proc = None

"""Step processes forked ahead of time, each waiting for exactly one job.

A step process normally comes from the forkserver when the step is due (fork, then
unpickling its arguments): 10–100 ms on a busy machine, on the path of every step. Here a
few processes are forked from the same forkserver in advance; each one starts its own
session, then blocks on a pipe until the runner sends it one step's arguments, runs
:func:`devstack.windmill.wrapper.step_child` and exits. A spare serves one job only, so
per-job isolation is exactly that of a fresh fork (windmill.md §7): nothing of one job is
ever seen by another. When no spare is ready, a process is forked on the spot as before.
"""

from __future__ import annotations

import threading
from collections import deque

from devstack.windmill.wrapper import spare_child


# Serializes Process.start() (whose _cleanup() polls every child) with the final join of a
# step: a forkserver child's exit status is read once from its sentinel, and two threads
# reading it at once leave one with EOF, which multiprocessing turns into exit code 255 — a
# step that succeeded then reads as failed (seen with several flows at once, issue 12).
PROCESS_LOCK = threading.Lock()


class Spares:
    """Up to ``size`` idle step processes of the multiprocessing context ``ctx``."""

    def __init__(self, ctx, size: int = 2) -> None:
        self._ctx = ctx
        self._size = size
        self._ready: deque = deque()  # (process, writer connection)
        self._lock = threading.Lock()
        self._filling = False
        self._closed = False

    def _fork(self):
        reader, writer = self._ctx.Pipe(duplex=False)
        proc = self._ctx.Process(target=spare_child, args=(reader,), name="step-spare", daemon=False)
        with PROCESS_LOCK:
            proc.start()
        reader.close()  # the child has its own copy
        return proc, writer

    def fill(self) -> None:
        """Fork spares until ``size`` are ready (runs in a background thread)."""
        try:
            while True:
                with self._lock:
                    if self._closed or len(self._ready) >= self._size:
                        return
                spare = self._fork()
                with self._lock:
                    if self._closed:
                        spare[1].close()  # EOF: the spare exits
                        return
                    self._ready.append(spare)
        finally:
            with self._lock:
                self._filling = False

    def refill(self) -> None:
        with self._lock:
            if self._filling or self._closed:
                return
            self._filling = True
        threading.Thread(target=self.fill, daemon=True, name="step-spares").start()

    def launch(self, spec: tuple, name: str):
        """A started process running ``step_child(*spec)``: a ready spare, else a new fork."""
        with self._lock:
            spare = self._ready.popleft() if self._ready else None
        if spare is not None:
            proc, writer = spare
            try:
                writer.send(spec)
            except OSError:  # the spare died while idle: fork one on the spot
                spare = None
            finally:
                writer.close()
        if spare is None:
            proc, writer = self._fork()
            try:
                writer.send(spec)
            finally:
                writer.close()
        proc.name = name
        self.refill()
        return proc

    def close(self) -> None:
        """Let every idle spare exit (EOF on its pipe)."""
        with self._lock:
            self._closed = True
            ready, self._ready = list(self._ready), deque()
        for proc, writer in ready:
            writer.close()
            proc.join(timeout=2)

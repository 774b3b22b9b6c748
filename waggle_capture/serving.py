"""Serve an ASGI app with uvicorn on a socket bound here, so ``--port 0`` works.

:func:`serve` binds ``host:port`` (0 = OS-chosen), writes ``{"url": "http://host:port"}`` to
``ready_file`` (if given) once the socket listens, then runs uvicorn on that socket until
SIGTERM/SIGINT. The local stack's other servers use the same two functions
(:mod:`devstack.serving` re-exports them with its parent side, ``wait_ready``/``start_module``).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import uvicorn


def listen_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (0 = OS-chosen) for uvicorn's ``sockets=``.

    The protocol is named (``IPPROTO_TCP``) because asyncio sets TCP_NODELAY on accepted
    connections only then; with protocol 0 every small response waits ~40 ms for Nagle and
    delayed ACK.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


def serve(app, host: str, port: int, ready_file: str | None = None, log_level: str = "warning") -> None:
    """Run ``app`` on ``host:port`` (blocking); ``ready_file`` receives the bound URL as JSON."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = listen_socket(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    config = uvicorn.Config(app, log_level=log_level, timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    if ready_file:
        original_startup = server.startup

        async def startup(sockets=None):
            await original_startup(sockets=sockets)
            tmp = Path(ready_file + ".tmp")
            tmp.write_text(json.dumps({"url": f"http://{shown}:{bound}"}))
            tmp.replace(ready_file)

        server.startup = startup  # type: ignore[method-assign]
    server.run(sockets=[sock])

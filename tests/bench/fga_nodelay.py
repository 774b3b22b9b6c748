"""What-if launcher: the OpenFGA stand-in exactly as ``python -m devstack.openfga`` runs it, but
on a listening socket created with ``IPPROTO_TCP`` so asyncio turns Nagle off (TCP_NODELAY)
on accepted connections.

Why: ``devstack/openfga/__main__.py`` (like ``devstack/serving.py``) binds
``socket.socket(AF_INET, SOCK_STREAM)`` — protocol 0 — and hands it to uvicorn; asyncio's
``_set_nodelay`` only sets TCP_NODELAY when ``sock.proto == IPPROTO_TCP``, so every response
written as two segments (headers, then body) waits for the client's delayed ACK (~40 ms on
Linux loopback). The benchmarks use this launcher only to measure the difference.
"""

from __future__ import annotations

import argparse
import socket
import sys

import uvicorn

from devstack.openfga.server import FgaState, create_app


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tests.bench.fga_nodelay")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--data", default=None)
    args = ap.parse_args(argv)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    host, port = sock.getsockname()[:2]
    print(f"openfga stand-in listening on http://{host}:{port}", flush=True)
    config = uvicorn.Config(create_app(FgaState(args.data), None), log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())

"""Run the OpenFGA stand-in: ``python -m devstack.openfga --host 127.0.0.1 --port 8090 [--data FILE]``.

``--port 0`` lets the OS choose; the first stdout line is always
``openfga stand-in listening on http://HOST:PORT`` (tests read the port from it).
``--data FILE`` persists stores, models and tuples across restarts; ``--preshared-key KEY``
requires ``Authorization: Bearer KEY`` like OpenFGA's preshared authentication.
Health: ``GET /healthz`` → ``{"status": "SERVING"}``.
"""

from __future__ import annotations

import argparse
import sys

import uvicorn

from devstack.openfga.server import FgaState, create_app
from devstack.serving import listen_socket


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m devstack.openfga", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090, help="0 = let the OS choose")
    parser.add_argument("--data", default=None, help="JSON file that keeps the state across restarts")
    parser.add_argument("--preshared-key", default=None)
    args = parser.parse_args(argv)
    app = create_app(FgaState(args.data), args.preshared_key)
    sock = listen_socket(args.host, args.port)
    host, port = sock.getsockname()[:2]
    print(f"openfga stand-in listening on http://{host}:{port}", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())

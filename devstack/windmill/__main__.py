"""``python -m devstack.windmill --host 127.0.0.1 --port 8000 --state DIR [--token T]``.

Prints one line ``windmill runner listening on http://HOST:PORT`` once it accepts
connections (``--port 0`` lets the OS choose) and writes ``STATE/runner.json``
(``{"url", "workspace", "token_file"}``). The API token is ``--token`` (or
``WAGGLE_WINDMILL_TOKEN``), else the one saved in ``STATE/token`` (created on first start).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import uvicorn

from devstack.serving import listen_socket
from devstack.windmill.app import create_app
from devstack.windmill.engine import Engine
from devstack.windmill.store import Store

REPO_ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devstack.windmill", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--state", required=True, help="directory for variables, job records and the token")
    parser.add_argument("--workspace", default="waggle")
    parser.add_argument("--token", default=os.environ.get("WAGGLE_WINDMILL_TOKEN"))
    parser.add_argument("--root", default=str(REPO_ROOT), help="repository root holding f/ (default: this checkout)")
    parser.add_argument("--python", default=sys.executable, help="interpreter for step processes")
    parser.add_argument("--retry-scale", type=float, default=float(os.environ.get("WAGGLE_WINDMILL_RETRY_SCALE", "1")),
                        help="multiply module retry delays (tests use e.g. 0.01; default 1 = as in flow.yaml)")
    args = parser.parse_args(argv)

    store = Store(args.state)
    token = store.token(args.token)
    sock = listen_socket(args.host, args.port)
    port = sock.getsockname()[1]
    host = "127.0.0.1" if args.host in ("0.0.0.0", "") else args.host
    url = f"http://{host}:{port}"
    engine = Engine(store, Path(args.root), base_url=url, token=token, workspace=args.workspace,
                    python=args.python, retry_scale=args.retry_scale)
    app = create_app(engine, store, token=token, workspace=args.workspace)
    (Path(args.state) / "runner.json").write_text(json.dumps(
        {"url": url, "workspace": args.workspace, "token_file": str(Path(args.state) / "token") if not args.token else None}))
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    print(f"windmill runner listening on {url} (workspace {args.workspace})", flush=True)
    server.run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())

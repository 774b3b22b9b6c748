"""``python -m devstack.tscompile --host 127.0.0.1 --port 8085 [--cache-max 256]``."""

from __future__ import annotations

import argparse
import os

from devstack.serving import serve
from devstack.tscompile.app import create_app
from devstack.tscompile.child import NodeCompiler


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m devstack.tscompile")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8085)
    ap.add_argument("--cache-max", type=int, default=int(os.environ.get("TS_COMPILE_CACHE_MAX", "256")))
    ap.add_argument("--ready-file", help="write {\"url\"} here once listening (for --port 0)")
    args = ap.parse_args(argv)
    compiler = NodeCompiler()
    compiler.start()  # fail fast when node/typescript is missing
    serve(create_app(compiler, args.cache_max), args.host, args.port, args.ready_file)


if __name__ == "__main__":
    main()

"""Import a WACZ into pywb and replay URLs with pywb's own code (run as a subprocess).

``python tests/devstack/pywb_replay.py ROOT COLL WACZ[,WACZ…] URL...`` runs ``wb-manager init COLL`` and
``wb-manager add --unpack-wacz COLL WACZ`` (each, for a collection of several) (pywb's CLI entry point, in-process) under ROOT, then
prints ``{"warnings": [...], "indexed": [urls in the collection index]}`` and one JSON line per
URL: ``{"url", "mode", "status", "body"}`` (with ``PYWB_REPLAY_SHA256`` set: ``sha256`` of the
body instead of ``body``) — ``id_`` (unrewritten) replay, or ``mp_`` (rewritten
page) for URLs prefixed with ``mp:``.

Why a subprocess and a shim: pywb's FrontEndApp monkey-patches the process with gevent, and it
imports ``wsgiprox`` (HTTPS proxy mode only) whose ``certauth`` needs pyOpenSSL — pywb 2.10 caps
pyOpenSSL below 26.2, and those versions cannot load against the project's pinned cryptography
50. Proxy mode is not used here, so ``wsgiprox.wsgiprox`` is replaced by a module whose
middleware refuses to be constructed; everything that replays (WarcServer, index lookup, WARC
loading, RewriterApp) is pywb's real code.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import types


def _shim_wsgiprox() -> None:
    mod = types.ModuleType("wsgiprox.wsgiprox")

    class WSGIProxMiddleware:  # noqa: D401 — only proxy mode would construct it
        def __init__(self, *a, **k):
            raise RuntimeError("pywb proxy mode is not available in this environment")

    mod.WSGIProxMiddleware = WSGIProxMiddleware
    pkg = types.ModuleType("wsgiprox")
    pkg.wsgiprox = mod
    sys.modules["wsgiprox"] = pkg
    sys.modules["wsgiprox.wsgiprox"] = mod


def main() -> None:
    root, coll, wacz, *urls = sys.argv[1:]
    os.chdir(root)
    import logging

    from pywb.manager.manager import main as wb_manager

    warnings: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                warnings.append(record.getMessage())

    wb_manager(["init", coll])
    logging.getLogger().addHandler(Keep())
    for one in wacz.split(","):
        wb_manager(["add", "--unpack-wacz", coll, one])
    indexed = []
    for idx in sorted(os.listdir(f"collections/{coll}/indexes")):
        with open(f"collections/{coll}/indexes/{idx}", encoding="utf-8") as fh:
            indexed += [json.loads(line.split(" ", 2)[2])["url"] for line in fh if line.strip()]
    print(json.dumps({"warnings": warnings, "indexed": indexed}), flush=True)
    _shim_wsgiprox()
    from pywb.apps.frontendapp import FrontEndApp

    app = FrontEndApp(custom_config={"framed_replay": False})
    for url in urls:
        mode = "id_"
        if url.startswith("mp:"):
            mode, url = "mp_", url[3:]
        path = f"/{coll}/{mode}/{url}"
        env = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": "", "SERVER_NAME": "localhost",
               "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1", "wsgi.input": io.BytesIO(),
               "wsgi.url_scheme": "http", "HTTP_HOST": "localhost", "SCRIPT_NAME": "", "wsgi.errors": sys.stderr,
               "REQUEST_URI": path}
        got: dict = {}

        def start_response(status, headers, exc_info=None):
            got["status"] = int(status.split()[0])

        body = b"".join(app(env, start_response))
        out = {"url": url, "mode": mode, "status": got.get("status"), "body": body.decode("utf-8", "replace")}
        if os.environ.get("PYWB_REPLAY_SHA256"):  # binary bodies (images): their hash instead
            out["sha256"] = hashlib.sha256(body).hexdigest()
            del out["body"]
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()

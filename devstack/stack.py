"""``waggle dev up/down/status``: start, stop and inspect the whole local stack, in order.

Steps of ``up`` (each service waits for health with a deadline; when a piece is not installed
yet, ``up`` stops before starting anything and names it — :mod:`devstack.preflight`):

1. side by side: Postgres → migrate → default page scripts (:mod:`devstack.seed_postgres`);
   Postgres → OpenFGA's own database → ``openfga migrate`` → ``openfga run`` (the real server,
   :mod:`devstack.openfga_server`); pebble + timestamp authority → trusted roots → authsign
   (:mod:`devstack.signing`); and the services that need only their port
   (:func:`devstack.services.standins`)
2. OpenFGA store/model and the ``submitter`` grants of the local user and the flow's subject
   (:mod:`devstack.seed_fga`); ts-compile warmed with the default page scripts
3. the Windmill runner and the ledger (``waggle serve``) (:mod:`devstack.services`)
4. the flow's JWT and the ``u/admin/*`` Windmill variables (:mod:`devstack.seed_windmill`)
5. ``state_dir/stack.json`` written (:func:`devstack.layout.stack_info`), read by the client CLI
   and by ``status``/``down``.

Addresses, state files and secrets: :mod:`devstack.layout`. Running ``up`` again reuses every
service that still runs with the same command line and settings; data survives ``down``/``up``.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from devstack import postgres, seed_fga, seed_postgres, seed_windmill, signing
from devstack.layout import (  # noqa: F401 - re-exported: callers import the stack's names from here
    DEFAULT_PORTS, FLOW_SUBJECT, WORKSPACE, StackConfig, config_from_state, read_stack, stack_file, stack_info,
)
from devstack.preflight import missing_pieces
from devstack.services import ledger_env, ledger_service, openfga_service, standins, windmill_service
from devstack.supervisor import Service, StackError, Supervisor, healthy  # noqa: F401 - StackError re-exported

STOP_ORDER = ["ledger", "windmill", "tscompile", "issuer", "openfga", "s3",
              "authsign", "tsa", "pebble"]  # captures first, pg last


class Stack:
    """One local stack, identified by its state directory."""

    def __init__(self, config: StackConfig, echo=lambda msg: None):
        config.state_dir = config.state_dir.resolve()
        self.config = config
        self.state_dir = config.state_dir
        self.sup = Supervisor(self.state_dir)
        self.echo = echo

    def services(self) -> list[Service]:
        return standins(self.config)

    def windmill_service(self) -> Service:
        return windmill_service(self.config)

    def ledger_service(self, database_url: str) -> Service:
        return ledger_service(self.config, database_url)

    def _timed(self, what: str, fn):
        t0 = time.monotonic()
        result = fn()
        self.echo(f"{what}: done ({time.monotonic() - t0:.1f} s)")
        return result

    def _start(self, svc: Service) -> bool:
        t0 = time.monotonic()
        started = self.sup.start(svc)
        took = f" ({time.monotonic() - t0:.1f} s)" if started else ""
        self.echo(f"{svc.name}: {'started' if started else 'running'} {svc.url}{took}")
        return started

    def _signing(self) -> None:
        """pebble and the timestamp authority, then the trusted roots file, then authsign (which
        takes its certificate from pebble at start): devstack/signing.py."""
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(self._start, [signing.pebble_service(self.config), signing.tsa_service(self.config)]))
        self._timed("signing trusted roots", lambda: signing.refresh_trusted_roots(self.config))
        self._start(signing.authsign_service(self.config))

    def _database(self, database_url: str) -> str:
        """Migrate the ledger's database and load the default page scripts; returns its URL."""
        self._timed("migrations", lambda: seed_postgres.migrate(self.config, database_url))
        self._timed("default page scripts", lambda: seed_postgres.load_default_scripts(self.config, database_url))
        return database_url

    def _openfga(self, database_url: str) -> None:
        """The real OpenFGA server on its own database ``openfga`` of the stack's Postgres:
        created once, ``openfga migrate`` (a no-op when current), then ``openfga run``."""
        fga_db = self._timed("openfga database", lambda: seed_postgres.openfga_database(database_url))
        self._start(openfga_service(self.config, fga_db))

    def _warm_compiler(self, database_url: str) -> None:
        """Compile the default page scripts once, so the first crawl level finds them cached.

        A cold TypeScript compile takes seconds (tens on a busy machine) and the flow gives
        ts-compile 30 s. A failure here is only reported: the flow reports its own errors.
        """
        t0 = time.monotonic()
        try:
            items = seed_postgres.default_scripts(database_url)
            resp = httpx.post(f"{self.config.url('tscompile')}/compile", json={"scripts": items}, timeout=300.0)
            note = f"{len(items)} default script(s), HTTP {resp.status_code}"
        except Exception as exc:  # noqa: BLE001 - a warning, never fatal
            note = f"skipped ({exc.__class__.__name__}: {exc})"
        self.echo(f"ts-compile warm-up: {note} ({time.monotonic() - t0:.1f} s)")

    def _authz(self, database_url: str) -> None:
        """Deploy the FGA store/model, then grants and the compiler warm-up side by side."""
        self._timed("openfga store and model", lambda: seed_fga.deploy(self.config, ledger_env(self.config, database_url)))
        env = ledger_env(self.config, database_url)  # now with the FGA ids
        todo = seed_fga.ungranted(self.config, [self.config.subject, FLOW_SUBJECT])
        with ThreadPoolExecutor(max_workers=3) as pool:  # tuples persist in OpenFGA's database
            warm = pool.submit(self._warm_compiler, database_url)
            list(pool.map(lambda s: self._timed(f"grant submitter to {s}", lambda: seed_fga.grant(self.config, env, s)),
                          todo))
            warm.result()
        seed_fga.remember_granted(self.config, todo)

    def up(self) -> dict:
        """Start everything (idempotent) and write stack.json; returns its content."""
        missing = missing_pieces(self.config.captures) + signing.missing_tools()
        if missing:
            raise StackError("the local stack cannot start, these pieces are missing:\n  " + "\n  ".join(missing))
        self.config.data.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        for name in self.sup.names():  # captures left over from an earlier, larger --captures
            if name.startswith("capture-") and name not in self.config.capture_names():
                self.sup.stop(name)
        # Independent work runs side by side (2 cores, several slow starts): Postgres, then the
        # ledger's database and OpenFGA on its own; and every service that needs only its port.
        with ThreadPoolExecutor(max_workers=8) as pool:
            pg = pool.submit(self._timed, "postgres", lambda: seed_postgres.start(self.config))
            db = pool.submit(lambda: self._database(pg.result()))
            fga = pool.submit(lambda: self._openfga(pg.result()))
            signer = pool.submit(self._signing)
            list(pool.map(self._start, self.services()))
            database_url = db.result()
            fga.result()
            signer.result()
        self._authz(database_url)
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(self._start, [self.windmill_service(), self.ledger_service(database_url)]))
        seed_windmill.seed(self.config)
        info = stack_info(self.config, database_url)
        stack_file(self.state_dir).write_text(json.dumps(info, indent=2) + "\n")
        self.echo(f"stack ready in {time.monotonic() - t0:.1f} s; state in {self.state_dir}")
        return info


def up(config: StackConfig, echo=lambda msg: None) -> dict:
    """Start the stack described by ``config``; see :meth:`Stack.up`."""
    return Stack(config, echo).up()


def down(state_dir: Path, echo=lambda msg: None) -> list[str]:
    """Stop every service of ``state_dir`` (data kept); returns the names that were running."""
    state_dir = state_dir.resolve()
    sup = Supervisor(state_dir)
    names = sup.names()
    order = [n for n in names if n.startswith("capture-")] + [n for n in STOP_ORDER if n in names]
    order += [n for n in names if n not in order]
    stopped = []
    for name in order:
        if sup.stop(name):
            stopped.append(name)
            echo(f"{name}: stopped")
    if postgres.stop(state_dir / "pg"):
        stopped.append("postgres")
        echo("postgres: stopped")
    return stopped


def status(state_dir: Path) -> list[dict]:
    """One row per service: ``{"name", "url", "pid", "running", "healthy", "restarts"}`` (``restarts``:
    how often its keeper started it again since ``up``; None for a service that is not kept)."""
    state_dir = state_dir.resolve()
    sup = Supervisor(state_dir)
    uri = postgres.running_uri(state_dir / "pg")
    rows = [{"name": "postgres", "url": uri or "", "pid": None, "running": uri is not None, "healthy": uri is not None,
             "restarts": None}]
    saved = read_stack(state_dir)
    for name in dict.fromkeys([*saved.get("services", {}), *sup.names()]):
        rec = sup.record(name)
        url = (rec or {}).get("url") or saved.get("services", {}).get(name, "")
        ok = rec is not None and healthy(url + rec.get("health", "/"), any_status=rec.get("ok_any_status", False))
        rows.append({"name": name, "url": url, "pid": (rec or {}).get("pid"), "running": rec is not None, "healthy": ok,
                     "restarts": sup.restarts(name) if rec is not None else None})
    return rows

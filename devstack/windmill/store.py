"""State of the local Windmill runner under ``--state DIR``: variables and job records.

``variables.json`` holds ``{path: {value, is_secret, description}}``; each job is
``jobs/<uuid>.json`` (its logs in ``jobs/<uuid>.log``); ``token`` holds the API token when
none was given. Writes go to a temporary file and are renamed, so a crash never leaves
half a file.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from pathlib import Path


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


class Store:
    """Variables and job records, persisted as JSON files (thread-safe)."""

    def __init__(self, state_dir: str | Path) -> None:
        self.dir = Path(state_dir)
        (self.dir / "jobs").mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._vars_file = self.dir / "variables.json"
        self._variables: dict[str, dict] = (
            json.loads(self._vars_file.read_text()) if self._vars_file.exists() else {}
        )

    # -- token -----------------------------------------------------------------
    def token(self, given: str | None) -> str:
        """The API token: ``given``, else the one saved in ``token``, else a new one (saved)."""
        path = self.dir / "token"
        if given:
            return given
        if path.exists():
            return path.read_text().strip()
        value = secrets.token_urlsafe(24)
        _write_atomic(path, value + "\n")
        return value

    # -- variables -------------------------------------------------------------
    def get_variable(self, path: str) -> dict | None:
        with self._lock:
            found = self._variables.get(path)
            return dict(found, path=path) if found else None

    def list_variables(self) -> list[dict]:
        with self._lock:
            return [dict(v, path=p) for p, v in sorted(self._variables.items())]

    def put_variable(self, path: str, value: str, is_secret: bool = False, description: str = "") -> None:
        with self._lock:
            self._variables[path] = {"value": value, "is_secret": bool(is_secret), "description": description}
            _write_atomic(self._vars_file, json.dumps(self._variables, indent=2))

    def delete_variable(self, path: str) -> bool:
        with self._lock:
            gone = self._variables.pop(path, None) is not None
            _write_atomic(self._vars_file, json.dumps(self._variables, indent=2))
            return gone

    # -- jobs ------------------------------------------------------------------
    def save_job(self, job: dict) -> None:
        self.save_job_text(job["id"], json.dumps(job, default=str))

    def save_job_text(self, job_id: str, text: str) -> None:
        """Persist one job record already serialized as JSON ``text``."""
        with self._lock:
            _write_atomic(self.dir / "jobs" / f"{job_id}.json", text)

    def load_job(self, job_id: str) -> dict | None:
        path = self.dir / "jobs" / f"{job_id}.json"
        if not path.is_file() or "/" in job_id:
            return None
        with self._lock:
            return json.loads(path.read_text())

    def all_jobs(self) -> list[dict]:
        with self._lock:
            return [json.loads(p.read_text()) for p in (self.dir / "jobs").glob("*.json")]

    def append_log(self, job_id: str, text: str) -> None:
        with self._lock, open(self.dir / "jobs" / f"{job_id}.log", "a", encoding="utf-8") as fh:
            fh.write(text)

    def read_log(self, job_id: str) -> str:
        path = self.dir / "jobs" / f"{job_id}.log"
        return path.read_text(encoding="utf-8") if path.is_file() else ""

"""The flow engine of the local Windmill runner (OpenFlow subset: script, forloopflow, failure module).

Semantics kept from Windmill (windmill.md §2, scheduler.md §2.4/§2.6):

* every input transform is evaluated as JavaScript (or static); ``undefined`` → null;
* each step runs as its own Python process (forked from a forkserver that has httpx/wmill
  imported and a few TLS contexts preloaded, ``devstack.windmill.warm``; usually forked ahead
  and waiting for one job, ``devstack.windmill.spares``; body in ``devstack.windmill.wrapper``)
  with its own session and environment, so module state never outlives a job, as on a
  Windmill worker (windmill.md §7) —
  ``WM_TOKEN``/``BASE_INTERNAL_URL``/``WM_WORKSPACE``/``WM_FLOW_STEP_ID`` set, so the real
  ``wmill`` client reads variables from this runner — and JSON-round-tripped arguments;
* ``forloopflow``: iterations in iterator order, ``parallel`` with at most ``parallelism``
  at once; one failed iteration fails the loop (``skip_failures: false``) — no new
  iteration starts, running ones finish; the result is the list of iteration results;
* ``retry.constant`` / ``retry.exponential`` per module (delays multiplied by
  ``retry_scale``, a test knob; 1.0 = as written);
* on a failure the failure module runs with ``error = {message, name, stack, step_id}``
  (``step_id`` = the innermost failing module, e.g. ``cap``), and its result becomes the
  flow's result; the job stays failed;
* a cancelled job kills its step processes and runs no failure module.

Each step ends with a log line ``--- step <id> (<path>) exit <code> after <s>s {timing}``;
``timing`` splits the wall time in seconds: ``start_s`` (fork requested → step process
running), ``import_s`` (the script's import), ``main_s``, ``exit_s`` (``main`` returned → the
runner has the result) — a local-runner extra for the orchestration benchmark.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
import uuid
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from multiprocessing.connection import wait as wait_exited
from datetime import datetime, timezone
from pathlib import Path

import yaml

from devstack.windmill.expr import ExpressionError, transform
from devstack.windmill.store import Store
from devstack.windmill.spares import PROCESS_LOCK, Spares


class Canceled(Exception):
    """The job was cancelled; nothing more runs."""


class StepFailed(Exception):
    """A step (or an expression) failed; ``error`` is Windmill's error object."""

    def __init__(self, error: dict) -> None:
        super().__init__(error.get("message", ""))
        self.error = error


class NotFound(LookupError):
    """No flow or script at that path."""


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


class Job:
    """One running job: its public record, cancel flag and live step processes."""

    def __init__(self, record: dict) -> None:
        self.record = record
        self.cancel = threading.Event()
        self.procs: set = set()  # live multiprocessing.Process step processes
        self.lock = threading.Lock()


class Engine:
    """Runs flows and scripts found under ``root`` (``f/...``) and keeps their job records."""

    def __init__(
        self,
        store: Store,
        root: Path,
        *,
        base_url: str,
        token: str,
        workspace: str,
        python: str = sys.executable,  # interpreter of the step forkserver
        retry_scale: float = 1.0,
        spares: int = 2,  # step processes forked ahead of time
    ) -> None:
        self.store = store
        self.root = Path(root)
        self.base_url = base_url
        self.token = token
        self.workspace = workspace
        self.python = python
        _STEPS.set_executable(python)
        self.retry_scale = retry_scale
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self._tmp = Path(tempfile.mkdtemp(prefix="steps-", dir=store.dir))
        self._mark_lost_jobs()
        # Start the step forkserver now (it imports httpx & co. once) and fork a few step
        # processes ahead (devstack.windmill.spares), so the first step is quick.
        self._spares = Spares(_STEPS, spares)
        threading.Thread(target=_warm_steps, args=(self._spares,), daemon=True, name="step-forkserver").start()

    # -- lookups -----------------------------------------------------------------
    def flow_file(self, path: str) -> Path:
        """``f/waggle/crawl_level`` → ``<root>/f/waggle/crawl_level.flow/flow.yaml``; NotFound otherwise."""
        candidate = (self.root / f"{path}.flow" / "flow.yaml").resolve()
        if ".." in path or not candidate.is_file() or self.root.resolve() not in candidate.parents:
            raise NotFound(f"flow not found at {path}")
        return candidate

    def script_file(self, path: str) -> Path:
        candidate = (self.root / f"{path}.py").resolve()
        if ".." in path or not candidate.is_file() or self.root.resolve() not in candidate.parents:
            raise NotFound(f"script not found at {path}")
        return candidate

    # -- jobs --------------------------------------------------------------------
    def _mark_lost_jobs(self) -> None:
        """Jobs left running by a previous runner process ended with it: record them as failed."""
        for record in self.store.all_jobs():
            if record.get("type") == "QueuedJob":
                record.update(
                    type="CompletedJob", running=False, success=False,
                    result={"error": {"name": "RunnerRestarted", "message": "the runner stopped while this job ran"}},
                )
                self.store.save_job(record)

    def _new_job(self, kind: str, path: str, args: dict) -> Job:
        record = {
            "id": str(uuid.uuid4()),
            "type": "QueuedJob",
            "running": False,
            "success": None,
            "canceled": False,
            "canceled_by": None,
            "canceled_reason": None,
            "job_kind": kind,
            "script_path": path,
            "args": args,
            "created_at": _now_iso(),
            "started_at": None,
            "duration_ms": None,
            "result": None,
            "flow_status": None,
        }
        job = Job(record)
        with self._lock:
            self._jobs[record["id"]] = job
        self.store.save_job(record)
        return job

    def start_flow(self, path: str, args: dict) -> str:
        """Queue the flow at ``path`` with ``args``; returns the job id. Raises NotFound."""
        flow = yaml.safe_load(self.flow_file(path).read_text())
        job = self._new_job("flow", path, args)
        value = flow.get("value", {})
        job.record["flow_status"] = {
            "modules": [{"id": m["id"], "type": "WaitingForPriorSteps"} for m in value.get("modules", [])],
            "failure_module": {"id": "failure", "type": "WaitingForPriorSteps"},
        }
        threading.Thread(target=self._run_flow, args=(job, flow, args), daemon=True, name=f"flow-{job.record['id'][:8]}").start()
        return job.record["id"]

    def start_script(self, path: str, args: dict) -> str:
        """Queue the script at ``path`` with ``args``; returns the job id. Raises NotFound."""
        self.script_file(path)
        job = self._new_job("script", path, args)
        threading.Thread(target=self._run_script, args=(job, path, args), daemon=True).start()
        return job.record["id"]

    def get(self, job_id: str) -> dict | None:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is not None:
            with job.lock:
                record = json.loads(json.dumps(job.record, default=str))
            return {k: v for k, v in record.items() if not k.startswith("_")}
        return self.store.load_job(job_id)

    def cancel(self, job_id: str, reason: str | None, canceler: str = "admin") -> bool:
        """Cancel a queued/running job and kill its step processes; False when it already ended."""
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None or job.record["type"] == "CompletedJob":
            return False
        with job.lock:
            job.record["canceled_reason"] = reason
            job.record["canceled_by"] = canceler
            job.cancel.set()
            procs = list(job.procs)
        for proc in procs:
            _kill(proc)
        return True

    def shutdown(self) -> None:
        """Cancel every running job (used when the runner stops)."""
        with self._lock:
            ids = [i for i, j in self._jobs.items() if j.record["type"] == "QueuedJob"]
        for job_id in ids:
            self.cancel(job_id, "runner shutting down", "runner")
        self._spares.close()

    def _save(self, job: Job) -> None:
        with job.lock:  # one serialization, taken under the lock (a consistent snapshot)
            text = json.dumps({k: v for k, v in job.record.items() if not k.startswith("_")}, default=str)
        self.store.save_job_text(job.record["id"], text)

    def _finish(self, job: Job, *, success: bool, result: object) -> None:
        with job.lock:
            started = job.record.get("_t0", time.monotonic())
            job.record.pop("_t0", None)
            job.record.update(type="CompletedJob", running=False, success=success, result=result,
                              duration_ms=int((time.monotonic() - started) * 1000))
            if job.cancel.is_set():
                job.record["canceled"] = True
                job.record["success"] = False
                job.record["result"] = {"error": {
                    "name": "Canceled",
                    "message": f"Job canceled: {job.record.get('canceled_reason') or 'no reason'} by {job.record.get('canceled_by')}",
                    "canceler": job.record.get("canceled_by"),
                }}
        self._save(job)
        self.store.append_log(job.record["id"], f"--- job ended: success={job.record['success']}\n")

    def _begin(self, job: Job) -> None:
        with job.lock:
            job.record.update(running=True, started_at=_now_iso(), _t0=time.monotonic())
        self._save(job)

    def _module_status(self, job: Job, module_id: str, status: str, failure: bool = False,
                       result: object = None) -> None:
        """Record a module's state (and, once it succeeded, its result: a local-runner extra)."""
        with job.lock:
            fs = job.record.get("flow_status") or {}
            entries = [fs["failure_module"]] if failure else [m for m in fs.get("modules", []) if m["id"] == module_id]
            for m in entries:
                m["type"] = status
                if status == "Success":
                    m["result"] = result
        self._save(job)

    # -- running -------------------------------------------------------------------
    def _run_script(self, job: Job, path: str, args: dict) -> None:
        self._begin(job)
        try:
            result = self.run_step(job, None, path, args)
            self._finish(job, success=True, result=result)
        except Canceled:
            self._finish(job, success=False, result=None)
        except StepFailed as failed:
            self._finish(job, success=False, result={"error": failed.error})
        except Exception as exc:  # noqa: BLE001 - never lose a job record
            self._finish(job, success=False, result={"error": {"name": type(exc).__name__, "message": str(exc)}})

    def _run_flow(self, job: Job, flow: dict, args: dict) -> None:
        self._begin(job)
        value = flow.get("value", {})
        results: dict[str, object] = {}
        last: object = None
        failed_module = None
        try:
            for module in value.get("modules", []):
                failed_module = module["id"]
                self._module_status(job, module["id"], "InProgress")
                last = self._run_module(job, module, args, results, None)
                results[module["id"]] = last
                self._module_status(job, module["id"], "Success", result=last)
            self._finish(job, success=True, result=last)
        except Canceled:
            if failed_module:
                self._module_status(job, failed_module, "Failure")
            self._finish(job, success=False, result=None)
        except StepFailed as failed:
            self._module_status(job, failed_module, "Failure")
            outcome: object = {"error": failed.error}
            failure = value.get("failure_module")
            if failure and not job.cancel.is_set():
                self._module_status(job, "failure", "InProgress", failure=True)
                try:
                    outcome = self._run_step_module(job, failure, args, results, None, error=failed.error)
                    self._module_status(job, "failure", "Success", failure=True, result=outcome)
                except Canceled:
                    pass
                except StepFailed as also:
                    self._module_status(job, "failure", "Failure", failure=True)
                    outcome = {"error": also.error}
            self._finish(job, success=False, result=outcome)
        except Exception as exc:  # noqa: BLE001 - a runner bug must still end the job
            self.store.append_log(job.record["id"], traceback.format_exc())
            self._finish(job, success=False, result={"error": {"name": type(exc).__name__, "message": str(exc)}})

    def _context(self, flow_input: dict, results: dict, iteration: dict | None, error: dict | None = None) -> dict:
        visible = dict(flow_input)
        if iteration is not None:
            visible["iter"] = iteration
        context = {"flow_input": visible, "results": results,
                   "previous_result": list(results.values())[-1] if results else None}
        if error is not None:
            context["error"] = error
        return context

    def _run_module(self, job: Job, module: dict, flow_input: dict, results: dict, iteration: dict | None) -> object:
        kind = module["value"]["type"]
        if kind == "script":
            return self._with_retry(job, module, lambda: self._run_step_module(job, module, flow_input, results, iteration))
        if kind == "forloopflow":
            return self._run_loop(job, module, flow_input, results, iteration)
        if kind == "identity":
            return list(results.values())[-1] if results else None
        raise StepFailed({"name": "UnsupportedModule", "message": f"module type {kind!r} is not supported by the local runner", "step_id": module["id"]})

    def _eval(self, module_id: str, spec: dict, context: dict) -> object:
        try:
            return transform(spec, context)
        except ExpressionError as exc:
            raise StepFailed({"name": "ExpressionError", "message": str(exc), "step_id": module_id}) from exc

    def _run_step_module(self, job: Job, module: dict, flow_input: dict, results: dict,
                         iteration: dict | None, error: dict | None = None) -> object:
        value = module["value"]
        context = self._context(flow_input, results, iteration, error)
        args = {name: self._eval(module["id"], spec, context) for name, spec in (value.get("input_transforms") or {}).items()}
        return self.run_step(job, module["id"], value["path"], args)

    def _with_retry(self, job: Job, module: dict, attempt):
        retry = module.get("retry") or {}
        delays: list[float] = []
        constant = retry.get("constant") or {}
        delays += [float(constant.get("seconds", 0))] * int(constant.get("attempts", 0) or 0)
        exponential = retry.get("exponential") or {}
        for n in range(1, int(exponential.get("attempts", 0) or 0) + 1):
            delays.append(float(exponential.get("multiplier", 1)) * float(exponential.get("seconds", 1)) ** n)
        for k in range(len(delays) + 1):
            try:
                return attempt()
            except StepFailed as failed:
                if k >= len(delays) or job.cancel.is_set():
                    raise
                wait_s = delays[k] * self.retry_scale
                self.store.append_log(job.record["id"], f"[{module['id']}] failed ({failed.error.get('message')}); retry {k + 1}/{len(delays)} in {wait_s:.2f}s\n")
                if job.cancel.wait(wait_s):
                    raise Canceled() from failed
        raise AssertionError("unreachable")  # pragma: no cover

    def _run_loop(self, job: Job, module: dict, flow_input: dict, results: dict, iteration: dict | None) -> list:
        value = module["value"]
        context = self._context(flow_input, results, iteration)
        items = self._eval(module["id"], value["iterator"], context)
        if items is None:
            items = []
        if not isinstance(items, list):
            raise StepFailed({"name": "IteratorError", "message": f"iterator of {module['id']} is not an array", "step_id": module["id"]})
        parallel = bool(value.get("parallel"))
        width = 1
        if parallel:
            spec = value.get("parallelism")
            width = int(self._eval(module["id"], spec, context) or len(items) or 1) if spec else max(1, len(items))
        inner = value.get("modules", [])
        skip_failures = bool(value.get("skip_failures"))
        out: list[object] = [None] * len(items)
        stop = threading.Event()

        def one(index: int, item: object) -> None:
            if stop.is_set() or job.cancel.is_set():
                return
            scope = dict(results)
            last = None
            try:
                for m in inner:
                    last = self._run_module(job, m, flow_input, scope, {"value": item, "index": index})
                    scope[m["id"]] = last
            except StepFailed:
                if skip_failures:
                    out[index] = None
                    return
                stop.set()
                raise
            out[index] = last

        if len(items) == 0:
            return []
        with ThreadPoolExecutor(max_workers=max(1, min(width, len(items)))) as pool:
            futures = [pool.submit(one, i, item) for i, item in enumerate(items)]
            wait(futures, return_when=FIRST_EXCEPTION)
            stop_error = None
            for f in futures:
                try:
                    f.result()
                except (StepFailed, Canceled) as exc:
                    stop_error = stop_error or exc
        if job.cancel.is_set():
            raise Canceled()
        if stop_error is not None:
            raise stop_error
        return out

    # -- one step process ----------------------------------------------------------
    def run_step(self, job: Job, step_id: str | None, script_path: str, args: dict) -> object:
        """Run ``script_path``'s ``main`` in its own Python process; its result or StepFailed/Canceled."""
        if job.cancel.is_set():
            raise Canceled()
        self.script_file(script_path)
        work = Path(tempfile.mkdtemp(dir=self._tmp))
        args_file, result_file = work / "args.json", work / "result.json"
        args_file.write_text(json.dumps(args, default=str))
        sub_id = str(uuid.uuid4())
        env = {k: v for k, v in os.environ.items() if k != "WM_MOCKED_API_FILE"}
        env.update(
            WM_TOKEN=self.token,
            BASE_INTERNAL_URL=self.base_url,
            BASE_URL=self.base_url,
            WM_WORKSPACE=self.workspace,
            WM_JOB_ID=sub_id,
            WM_JOB_PATH=script_path,
            WM_FLOW_JOB_ID=job.record["id"],
            WM_ROOT_FLOW_JOB_ID=job.record["id"],
            PYTHONPATH=str(self.root) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""),
            PYTHONUNBUFFERED="1",
        )
        if step_id:
            env["WM_FLOW_STEP_ID"] = step_id
        else:
            env.pop("WM_FLOW_STEP_ID", None)
        label = step_id or script_path
        log_file = work / "output.log"
        spec = (script_path, str(args_file), str(result_file), str(log_file), env, str(self.root),
                str(self.store.dir / "pycache"))
        t0, wall0 = time.monotonic(), time.time()
        proc = self._spares.launch(spec, f"step-{label}")
        with job.lock:
            job.procs.add(proc)
            job.record.setdefault("running_steps", {})[sub_id] = {"step_id": label, "pid": proc.pid}
            canceled = job.cancel.is_set()
        if canceled:
            _kill(proc)
        try:
            wait_exited([proc.sentinel])  # readable once the step exited; its status is read under the lock
            with PROCESS_LOCK:
                proc.join()
                code = proc.exitcode
        finally:
            with job.lock:
                job.procs.discard(proc)
                job.record.get("running_steps", {}).pop(sub_id, None)
            try:
                output = log_file.read_text(encoding="utf-8", errors="replace")
            except OSError:
                output = ""
            if output:
                self.store.append_log(job.record["id"], "".join(f"[{label}] {line}\n" for line in output.splitlines()))
            self.store.append_log(job.record["id"], f"--- step {label} ({script_path}) exit {proc.exitcode} after "
                                  f"{time.monotonic() - t0:.2f}s {_step_timing(result_file, wall0, time.time())}\n")
        if job.cancel.is_set():
            shutil.rmtree(work, ignore_errors=True)
            raise Canceled()
        try:
            text = result_file.read_text()
            payload = json.loads(text) if text else None
        except (OSError, ValueError):
            payload = None
        shutil.rmtree(work, ignore_errors=True)  # args, result and output are in the job record/log now
        if code == 0:
            return payload
        error = payload.get("error") if isinstance(payload, dict) and isinstance(payload.get("error"), dict) else None
        if error is None:
            error = {"name": "ExecutionErr", "message": f"step {label} exited with code {code}"}
        if step_id:
            error.setdefault("step_id", step_id)
        raise StepFailed(error)


# Step processes are forked from a forkserver that has the heavy third-party modules imported
# already (a fresh interpreter importing httpx alone takes 1–2 s on a busy machine). Each step
# is still its own process with its own environment, as on a Windmill worker; the step's
# own code (f/…) is imported fresh in every child, so edits apply without a restart.
_STEPS = multiprocessing.get_context("forkserver")
_STEPS.set_forkserver_preload(["devstack.windmill.wrapper", "httpx", "httpcore", "wmill", "protego", "ada_url", "ssl",
                               "anyio.to_thread", "devstack.windmill.warm"])


def _step_timing(result_file: Path, requested: float, joined: float) -> str:
    """JSON split of one step's wall time in s: ``start_s`` (fork requested → child running),
    ``import_s`` (script import), ``main_s``, ``exit_s`` (main returned → runner saw the exit)."""
    try:
        marks = json.loads(Path(str(result_file) + ".timing").read_text())
    except (OSError, ValueError):
        return "{}"
    out = {"start_s": marks["running"] - requested}
    if "imported" in marks:
        out["import_s"] = marks["imported"] - marks["running"]
        if "returned" in marks:
            out["main_s"] = marks["returned"] - marks["imported"]
    out["exit_s"] = joined - max(marks.values())
    return json.dumps({k: round(v, 3) for k, v in out.items()})


def _warm_steps(spares: Spares) -> None:
    from multiprocessing import forkserver

    try:
        forkserver.ensure_running()
    except Exception:  # noqa: BLE001 - the first step starts it otherwise
        return
    spares.fill()


def _kill(proc) -> None:
    """Kill a step process and everything it started (its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # not its own session yet: the process alone
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

"""A crawl workflow's schedule: checked here, executed by a Windmill schedule (decision 201).

The caller gives a 5-field cron expression (minute hour day-of-month month day-of-week, as in
crontab) and an IANA time zone. Windmill's schedules take 6 fields, seconds first
(``NewSchedule.schedule``), so the ledger sends ``"0 " + cron``. The schedule runs the script
:data:`SCRIPT_PATH` with the workflow's id; that script asks ``POST /api/workflows/{id}/run``,
where the ledger keeps two runs of one workflow from overlapping.

Windmill routes used (``{base}/api/w/{ws}/…``, base and workspace from
``WAGGLE_CRAWL_WEBHOOK_URL``, bearer ``WAGGLE_CRAWL_WEBHOOK_TOKEN``): ``GET
schedules/exists/{path}``, ``POST schedules/create``, ``POST schedules/update/{path}``,
``DELETE schedules/delete/{path}``, ``GET schedules/list`` (the reconciler, decision 352).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import httpx
from cronsim import CronSim, CronSimError

from ledger.crawl.errors import Refused
from ledger.crawl.watchdog import windmill_base

SCRIPT_PATH = "f/waggle/run_workflow"
# Windmill resolves $var: arguments when the job starts: the token and URL stay in its variables
SCRIPT_ARGS = {"waggle_url": "$var:u/admin/waggle_api_url", "token": "$var:u/admin/waggle_token"}
CRON_EXAMPLE = "'0 4 * * *' (04:00 every day) or '0 */6 * * 1-5' (every 6 hours on weekdays)"
# A schedule that may start crawls closer together than this is saved with a warning (decision 403)
FREQUENT_BELOW_S = 3600
FREQUENCY_HORIZON = timedelta(days=8)  # a week of fires (and a day): weekly patterns show their closest pair
FREQUENCY_FIRES_MAX = 2000  # fires looked at, at most (every minute stops at the second)


def _refuse(field: str, message: str) -> Refused:
    return Refused(400, message, fields={field: message})


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name``; :class:`Refused` 400 (field ``timeZone``) when unknown."""
    try:
        if not name or name != name.strip() or name.startswith("/") or ".." in name:
            raise ValueError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise _refuse("timeZone", f"timeZone {name!r} is not an IANA time zone; name one such as"
                                  " 'UTC', 'Europe/Paris' or 'America/New_York'") from None


def check(cron: str, tz: str) -> str:
    """``cron`` with its fields single-spaced, after checking it and ``tz``.

    Raises :class:`Refused` 400 naming the expression (field ``schedule``): not 5 fields, or a
    field cronsim refuses (out of range, unknown name, bad step); or naming the zone (field
    ``timeZone``)."""
    fields = cron.split()
    if len(fields) != 5:
        raise _refuse("schedule", f"schedule {cron!r} is not a cron expression of 5 fields (minute hour"
                                  f" day-of-month month day-of-week; {len(fields)} given), e.g. {CRON_EXAMPLE}")
    where = zone(tz)
    text = " ".join(fields)
    try:
        next(iter(CronSim(text, datetime.now(where))))
    except CronSimError as exc:
        raise _refuse("schedule", f"schedule {cron!r} is not a valid cron expression ({exc}), e.g. {CRON_EXAMPLE}") from None
    except StopIteration:  # e.g. "0 0 30 2 *": February 30th never comes
        raise _refuse("schedule", f"schedule {cron!r} never fires (no such date)") from None
    return text


def _spoken(seconds: float) -> str:
    minutes = max(1, round(seconds / 60))
    return "1 minute" if minutes == 1 else f"{minutes} minutes"


def frequency_warning(cron: str, tz: str, now: datetime | None = None) -> str | None:
    """A sentence when a checked schedule may start two crawls less than :data:`FREQUENT_BELOW_S`
    apart (the closest pair of fires over the next :data:`FREQUENCY_HORIZON`), else None.

    Such a schedule is saved (decision 403: the caller may mean it), but a run that comes while
    the workflow's previous crawl still runs is skipped, and the site is archived more often
    than an archive is usually worth."""
    start = (now or datetime.now(timezone.utc)).astimezone(ZoneInfo(tz))
    closest: float | None = None
    previous: datetime | None = None
    for count, fire in enumerate(CronSim(cron, start)):
        if fire - start > FREQUENCY_HORIZON or count >= FREQUENCY_FIRES_MAX:
            break
        if previous is not None:
            gap = (fire - previous).total_seconds()
            closest = gap if closest is None else min(closest, gap)
            if closest < FREQUENT_BELOW_S:
                break
        previous = fire
    if closest is None or closest >= FREQUENT_BELOW_S:
        return None
    return (f"schedule {cron!r} starts a crawl every {_spoken(closest)} at its closest, more often than once an"
            " hour: a run due while the workflow's previous crawl still runs is skipped (a polite crawl of"
            " a few hundred pages takes longer than that), and a site archived more often than hourly seldom"
            " holds anything new; it is saved as given — consider '0 * * * *' (hourly) or '0 4 * * *' (daily)")


def next_runs(cron: str, tz: str, count: int = 3, now: datetime | None = None) -> list[str]:
    """The next ``count`` fire times of a checked schedule, ISO 8601 with the zone's offset."""
    start = (now or datetime.now(timezone.utc)).astimezone(ZoneInfo(tz))
    out = []
    for fire in CronSim(cron, start):
        out.append(fire.isoformat())
        if len(out) == count:
            break
    return out


def windmill_cron(cron: str) -> str:
    """Windmill's 6-field form (seconds first) of a checked 5-field expression."""
    return "0 " + cron


PATH_PREFIX = "f/waggle/workflow_"
LIST_PAGE = 100


def path_of(workflow_id: uuid.UUID | str) -> str:
    """The Windmill schedule path of a workflow: ``f/waggle/workflow_<32 hex digits>``."""
    return f"{PATH_PREFIX}{uuid.UUID(str(workflow_id)).hex}"


def workflow_of(path: str) -> uuid.UUID | None:
    """The workflow id a schedule path names (:func:`path_of`'s inverse), or None for another path."""
    if not path.startswith(PATH_PREFIX):
        return None
    try:
        return uuid.UUID(hex=path[len(PATH_PREFIX):])
    except ValueError:
        return None


class ScheduleUnavailable(Refused):
    """Windmill did not take a schedule change (503: nothing was saved)."""


def _where(settings: Any) -> tuple[str, str, dict]:
    found = windmill_base(settings.crawl_webhook_url)
    if found is None:
        raise ScheduleUnavailable(503, "schedules need Windmill: WAGGLE_CRAWL_WEBHOOK_URL is not a Windmill job URL")
    base, ws = found
    headers = {"authorization": f"Bearer {settings.crawl_webhook_token}"} if settings.crawl_webhook_token else {}
    return f"{base}/api/w/{ws}/schedules", ws, headers


async def _send(http: httpx.AsyncClient, method: str, url: str, headers: dict, body: Any = None) -> httpx.Response:
    try:
        return await http.request(method, url, headers=headers, json=body, timeout=10.0)
    except httpx.HTTPError as exc:
        raise ScheduleUnavailable(503, f"Windmill did not answer about the workflow's schedule ({url}:"
                                       f" {type(exc).__name__}); nothing was changed, try again") from None


def _refused(resp: httpx.Response, what: str) -> ScheduleUnavailable:
    return ScheduleUnavailable(503, f"Windmill refused to {what} the workflow's schedule: {resp.status_code}"
                                    f" {resp.text[:300]}; nothing was changed")


async def put(http: httpx.AsyncClient, settings: Any, workflow_id: uuid.UUID, name: str, cron: str, tz: str) -> str:
    """Create or update the workflow's Windmill schedule (enabled); returns its path.
    Raises :class:`ScheduleUnavailable` (503) when Windmill does not take it."""
    base, _, headers = _where(settings)
    path = path_of(workflow_id)
    args = {"workflow_id": str(workflow_id), **SCRIPT_ARGS}
    exists = await _send(http, "GET", f"{base}/exists/{path}", headers)
    if exists.status_code != 200:
        raise _refused(exists, "look up")
    if exists.json() is True:
        resp = await _send(http, "POST", f"{base}/update/{path}", headers,
                           {"schedule": windmill_cron(cron), "timezone": tz, "args": args})
        if not resp.is_success:
            raise _refused(resp, "update")
        return path
    resp = await _send(http, "POST", f"{base}/create", headers, {
        "path": path, "schedule": windmill_cron(cron), "timezone": tz, "script_path": SCRIPT_PATH,
        "is_flow": False, "args": args, "enabled": True, "summary": f"waggle workflow: {name}"[:200],
    })
    if not resp.is_success:
        raise _refused(resp, "create")
    return path


async def remove(http: httpx.AsyncClient, settings: Any, path: str) -> None:
    """Delete the Windmill schedule at ``path``; one already gone (404) is fine.
    Raises :class:`ScheduleUnavailable` (503) otherwise."""
    base, _, headers = _where(settings)
    resp = await _send(http, "DELETE", f"{base}/delete/{path}", headers)
    if not (resp.is_success or resp.status_code == 404):
        raise _refused(resp, "delete")


def configured(settings: Any) -> bool:
    """Whether the ledger has a Windmill to keep schedules in (a Windmill job URL)."""
    return windmill_base(settings.crawl_webhook_url) is not None


async def held(http: httpx.AsyncClient, settings: Any) -> dict[str, dict]:
    """Windmill's workflow schedules, path → schedule (``schedule``, ``timezone``, ``args``, …).

    ``GET schedules/list?path_start=…&per_page=100&page=N`` until a page brings nothing new; only
    paths under :data:`PATH_PREFIX` are kept (a server that ignores ``path_start`` is fine).
    Raises :class:`ScheduleUnavailable` (503) when Windmill does not answer or refuses."""
    base, _, headers = _where(settings)
    out: dict[str, dict] = {}
    seen: set[str] = set()  # every path listed, ours or not: a page with none new is the end
    page = 1
    while True:
        url = f"{base}/list?path_start={PATH_PREFIX}&per_page={LIST_PAGE}&page={page}"
        resp = await _send(http, "GET", url, headers)
        if resp.status_code != 200:
            raise _refused(resp, "list")
        items = [i for i in resp.json() if isinstance(i, dict) and isinstance(i.get("path"), str)]
        new = {i["path"] for i in items} - seen
        seen |= new
        out.update({i["path"]: i for i in items if i["path"].startswith(PATH_PREFIX)})
        if len(items) < LIST_PAGE or not new:
            return out
        page += 1

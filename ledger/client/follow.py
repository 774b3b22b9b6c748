"""Following a crawl: live polling display, the Ctrl-C decision, and the crawl's archives.

The rule: a crawl this command started is never left stuck. Ctrl-C asks whether to leave it
running (it goes on and can be followed later) or to fail it (``POST /api/crawls/{id}/failed``);
when nobody can answer (stdin is not a terminal, or a second Ctrl-C / EOF at the question) it
is failed and the output says so.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.live import Live

from ledger.client import render
from ledger.client.api import ApiError, LedgerClient, download

POLL_INTERVAL_S = 1.0
MAX_POLL_ERRORS = 30  # consecutive failed polls (≈ 30 s) before giving up on the API


def follow(
    client: LedgerClient,
    crawl_id: str,
    console: Console,
    poll_s: float = POLL_INTERVAL_S,
    sleep: Callable[[float], None] = time.sleep,
) -> dict:
    """Poll ``GET /api/crawls/{id}`` until the crawl is no longer running; returns the final status.

    On a terminal the status is a live panel; otherwise one line per change is printed.
    KeyboardInterrupt propagates to the caller (see :func:`on_interrupt`). Raises ApiError after
    ``MAX_POLL_ERRORS`` consecutive failed polls.
    """
    crawl = client.get_crawl(crawl_id)
    if not console.is_terminal:
        last = None
        errors = 0
        while True:
            line = render.status_line(crawl)
            key = line.rsplit(" · elapsed", 1)[0]
            if key != last:
                console.print(line, soft_wrap=True)
                last = key
            if crawl.get("state") != "running":
                return crawl
            sleep(poll_s)
            crawl, errors = _poll(client, crawl_id, crawl, errors)
    with Live(render.progress_view(crawl), console=console, refresh_per_second=4) as live:
        errors = 0
        while crawl.get("state") == "running":
            sleep(poll_s)
            crawl, errors = _poll(client, crawl_id, crawl, errors)
            note = f"the ledger does not answer ({errors} tries); retrying" if errors else None
            live.update(render.progress_view(crawl, note))
    return crawl


def _poll(client: LedgerClient, crawl_id: str, previous: dict, errors: int) -> tuple[dict, int]:
    try:
        return client.get_crawl(crawl_id), 0
    except ApiError as exc:
        if exc.status not in (0, 502, 503, 504) or errors + 1 >= MAX_POLL_ERRORS:
            raise
        return previous, errors + 1


def stdin_is_interactive(stdin: TextIO | None = None) -> bool:
    stdin = stdin or sys.stdin
    try:
        return stdin.isatty()
    except (AttributeError, ValueError):
        return False


def ask_leave_or_fail(console: Console, crawl_id: str, stdin: TextIO | None = None) -> str:
    """Ask "leave running or fail?"; returns ``"leave"`` or ``"fail"``. Fail when there is no answer."""
    stdin = stdin or sys.stdin
    if not stdin_is_interactive(stdin):
        console.print(
            f"Interrupted. stdin is not a terminal, so nobody can choose: failing crawl {crawl_id} "
            "rather than leaving it running unattended."
        )
        return "fail"
    console.print(f"\nInterrupted. Crawl {crawl_id} is still running.")
    console.print("  [bold]l[/bold] = leave it running (follow it later with `waggle crawls ID --follow`)")
    console.print("  [bold]f[/bold] = fail it now (its pages so far stay recorded)")
    try:
        while True:
            console.print("Leave running or fail? [l/f] (f): ", end="", markup=False)
            answer = stdin.readline()
            if answer == "":  # EOF
                console.print("\nno answer (end of input): failing it.")
                return "fail"
            answer = answer.strip().lower()
            if answer in ("", "f", "fail"):
                return "fail"
            if answer in ("l", "leave"):
                return "leave"
            console.print("please answer l or f")
    except KeyboardInterrupt:
        console.print("\nsecond Ctrl-C: failing it.")
        return "fail"


def on_interrupt(client: LedgerClient, crawl_id: str, console: Console, stdin: TextIO | None = None) -> str:
    """Handle Ctrl-C while following: ``"left"``, ``"failed"``, ``"ended"`` (it ended meanwhile).

    Raises ApiError when the fail call does not get through (the message says how to retry).
    """
    try:
        crawl = client.get_crawl(crawl_id)
        if crawl.get("state") != "running":
            console.print(f"Crawl {crawl_id} already ended ({crawl.get('state')}).")
            return "ended"
    except ApiError:
        pass  # cannot tell; ask anyway, failing is safe (it only closes a running crawl)
    choice = ask_leave_or_fail(console, crawl_id, stdin)
    if choice == "leave":
        console.print(f"Left crawl {crawl_id} running. Follow it: `waggle crawls {crawl_id} --follow`; "
                      f"fail it: `waggle crawls {crawl_id} --fail`.")
        return "left"
    try:
        closed = client.fail_crawl(crawl_id, "stopped by the user (Ctrl-C in `waggle crawl`)")
    except ApiError as exc:
        raise ApiError(exc.status, f"could not fail crawl {crawl_id}: {exc}. Retry with `waggle crawls {crawl_id} --fail`.") from exc
    if closed:
        console.print(f"Crawl {crawl_id} failed (stopped by the user).")
        return "failed"
    console.print(f"Crawl {crawl_id} had already ended; nothing to fail.")
    return "ended"


def crawl_archives(
    client: LedgerClient,
    crawl: dict,
    wait_s: float = 30.0,
    poll_s: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> list[dict]:
    """The archives captured by ``crawl`` (``GET /api/archives?crawl=``), oldest first.

    Several crawls run at once, so only the ledger's crawl filter tells whose captures they are
    (a time window would take a neighbour's). The listing lags the crawl by the outbox delay (tuples reach OpenFGA every few seconds), so
    this polls until as many archives as ``pagesCaptured`` are visible or ``wait_s`` passes.
    """
    start = crawl.get("startedAt")
    end = render.parse_time(crawl.get("finishedAt"))
    want = render.captured_count(crawl) or 0
    deadline = time.monotonic() + wait_s
    while True:
        rows = []
        for row in client.iter_archives(since=start, crawl=crawl.get("crawlId")):
            captured = render.parse_time(row.get("capturedAt"))
            if end is not None and captured is not None and (captured - end).total_seconds() > 5:
                continue
            rows.append(row)
        if len(rows) >= want or time.monotonic() >= deadline:
            return list(reversed(rows))
        sleep(poll_s)


def archive_filename(archive: dict) -> str:
    """Local file name of an archive: its id as the tables show it (8 characters), then the
    object key's last segment (``56c87af6-<key>.wacz``), so a file is matched to the listed
    archive at a glance and still to its object in the bucket; ``{id}.wacz`` without a key."""
    key = str(archive.get("objectKey") or "")
    name = key.rsplit("/", 1)[-1]
    return f"{render.short_id(archive.get('id'))}-{name}" if name.endswith(".wacz") else f"{archive.get('id')}.wacz"


def download_archives(client: LedgerClient, archives: list[dict], dest_dir: Path, console: Console) -> list[Path]:
    """Sign and download each archive into ``dest_dir``; returns the written paths."""
    written = []
    for archive in archives:
        signed = client.sign_url(str(archive["id"]))
        path = dest_dir / archive_filename(archive)
        size = download(signed["url"], path)
        console.print(f"saved {path} ({size} bytes)", soft_wrap=True)
        written.append(path)
    return written

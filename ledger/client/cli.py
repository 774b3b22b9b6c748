"""``waggle crawl / crawls / archives / url``: the ledger API from the command line.

Mounted on the root app by :mod:`ledger.cli`. API URL and token: see :mod:`ledger.client.config`.
Exit codes: 0 done (crawl succeeded, or paused), 1 crawl failed or an error, 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import json
import signal
import tempfile
import threading

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console


from ledger.client import ids, render
from ledger.client.api import REASON_MAX_CHARS, ApiError, CrawlInProgress, LedgerClient
from ledger.client.config import ClientConfigError, resolve_config
from ledger.client.crawl_flags import (  # noqa: F401 — Scope, build_crawl_body, parse_script: their old home
    CrawlFlags, Scope, build_crawl_body, crawl_flags, parse_script)
from ledger.client.follow import (
    POLL_INTERVAL_S,
    crawl_archives,
    download_archives,
    follow,
    on_interrupt,
)

EXIT_INTERRUPTED = 130

ARCHIVES_PAGE = 50  # rows per page of GET /api/archives (ledger.api.archives.PAGE_SIZE)
Wide = Annotated[bool, typer.Option("--wide", help="Full ids, whole URLs (else cut with … to fit the terminal) and every column (the object key of archives).")]
AsJson = Annotated[bool, typer.Option("--json", help="The ledger's JSON, one document on stdout (for scripts).")]


def _print_json(value: object) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


class PageState(str, Enum):
    captured = "captured"
    failed = "failed"
    skipped = "skipped"
    blocked = "blocked"  # decision 231
    pending = "pending"


def _console() -> Console:
    return Console(highlight=False)


def _client() -> LedgerClient:
    return LedgerClient(resolve_config())


def _fail(console: Console, message: str, code: int = 1) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}", soft_wrap=True)
    return typer.Exit(code)


def download_dir(value: Path | None) -> Path | None:
    """``--download DIR`` made ready before anything starts: created if missing and written to
    once, so a directory that cannot hold the archives is a usage error (exit 2) before a crawl
    runs, not a traceback after it. Raises typer.BadParameter naming the directory and why."""
    if value is None:
        return None
    if value.exists() and not value.is_dir():
        raise typer.BadParameter(f"{value} is a file, not a directory")
    try:
        value.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=value):
            pass
    except OSError as exc:
        raise typer.BadParameter(f"cannot save archives in {value}: {exc.strerror or exc}") from None
    return value


def show_archives_with_urls(client: LedgerClient, archives: list[dict], console: Console,
                            show_urls: bool = False) -> None:
    """The archives table, then with ``show_urls`` one signed URL per archive (printed unwrapped,
    for copying), else one line saying how to get them (a crawl of 36 pages is 36 long URLs)."""
    console.print(render.archives_table(archives, title=f"archives ({len(archives)})"))
    if not archives:
        return
    if not show_urls:
        console.print("signed download URLs: `waggle url ARCHIVE_ID` for one, --urls for all of them", markup=False)
        return
    console.print("signed download URLs:")
    for archive in archives:
        signed = client.sign_url(str(archive["id"]))
        console.print(f"  {render.short_id(archive['id'])}  {archive.get('sourceUrl')} (valid {signed.get('expiresIn')} s)",
                      soft_wrap=True)
        console.print(f"    {signed['url']}", soft_wrap=True, markup=False)


def finish(client: LedgerClient, crawl: dict, console: Console, download: Path | None, archive_wait_s: float,
           poll_s: float = POLL_INTERVAL_S, show_urls: bool = False) -> int:
    """Summary, (downloads,) then the archives (with ``show_urls`` their signed URLs) last, where
    a reader looks; returns the exit code (0 iff succeeded). The summary is read again once the
    archives are listed: a crawl's last archives are admitted after it ends, and its totals
    (pages, archive bytes) are final only then."""
    wanted = (render.captured_count(crawl) or 0) > 0
    archives = crawl_archives(client, crawl, wait_s=archive_wait_s, poll_s=poll_s) if wanted else []
    if wanted and crawl.get("crawlId"):
        crawl = _reread(client, crawl)
    console.print(render.summary_view(crawl))
    if download is not None and archives:
        download_archives(client, archives, download, console)
    show_archives_with_urls(client, archives, console, show_urls)
    if crawl.get("state") == "paused":  # not an end: say how to go on (exit 0: nothing went wrong)
        console.print(f"crawl {crawl.get('crawlId')} is paused; go on with: waggle crawls {crawl.get('crawlId')} --resume",
                      soft_wrap=True)
        return 0
    return 0 if crawl.get("state") == "succeeded" else 1


def _reread(client: LedgerClient, crawl: dict) -> dict:
    """``crawl`` as the ledger has it now (its final totals), or as given when it cannot say."""
    try:
        return client.get_crawl(str(crawl["crawlId"]))
    except ApiError:
        return crawl


def follow_to_end(
    client: LedgerClient,
    crawl_id: str,
    console: Console,
    download: Path | None,
    archive_wait_s: float,
    poll_s: float,
    show_urls: bool = False,
) -> int:
    """Follow a crawl live until it ends, with the Ctrl-C decision; then :func:`finish`."""
    # A process started in the background by a non-interactive shell inherits SIGINT as
    # ignored; Ctrl-C (or kill -INT) must still reach the leave-or-fail decision.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        crawl = follow(client, crawl_id, console, poll_s=poll_s)
    except KeyboardInterrupt:
        outcome = on_interrupt(client, crawl_id, console)
        if outcome == "left":
            return EXIT_INTERRUPTED
        crawl = client.get_crawl(crawl_id)
        # captures in flight at Ctrl-C are still recorded after the crawl is failed: these are
        # the counts so far, and the summary says where the final ones are
        console.print(render.summary_view(crawl, so_far=True))
        return EXIT_INTERRUPTED
    return finish(client, crawl, console, download, archive_wait_s, poll_s, show_urls)


@crawl_flags
def crawl_command(
    urls: Annotated[list[str], typer.Argument(help="Seed URLs (http or https).", show_default=False)],
    crawl: CrawlFlags,
    download: Annotated[Optional[Path], typer.Option("--download", help="Save the crawl's WACZ files into this directory.", file_okay=False, callback=download_dir)] = None,
    show_urls: Annotated[bool, typer.Option("--urls", help="Also print a signed download URL (valid 300 s) for every archive.")] = False,
    detach: Annotated[bool, typer.Option("--detach", help="Submit, print the crawl id and return.")] = False,
    archive_wait_s: Annotated[float, typer.Option("--archive-wait", help="Seconds to wait for the archives to be listed after the crawl.")] = 30.0,
    poll_s: Annotated[float, typer.Option("--poll-interval", hidden=True)] = POLL_INTERVAL_S,
) -> None:
    """Crawl URLs into WACZ archives and follow the crawl live until it ends."""
    console = _console()
    if why := crawl.conflict():
        raise _fail(console, why)
    body = crawl.body(urls)
    try:
        with _client() as client:
            crawl_id = client.submit_crawl(body)
            console.print(f"crawl {crawl_id} started ({', '.join(urls)})", soft_wrap=True)
            if detach:
                return
            code = follow_to_end(client, crawl_id, console, download, archive_wait_s, poll_s, show_urls)
    except CrawlInProgress as exc:
        raise _fail(console, str(exc)) from None
    except (ApiError, ClientConfigError) as exc:
        raise _fail(console, str(exc)) from None
    raise typer.Exit(code)


def crawls_command(
    crawl_id: Annotated[Optional[str], typer.Argument(help="A crawl id: show it (default: list recent crawls).")] = None,
    follow_it: Annotated[bool, typer.Option("--follow", help="Follow the crawl live until it ends.")] = False,
    fail_it: Annotated[bool, typer.Option("--fail", help="Fail (close) the crawl if it is running.")] = False,
    stop_it: Annotated[bool, typer.Option("--stop", help="Stop the crawl gracefully: no new capture starts, those in flight are kept; it ends succeeded (stop reason stopped).")] = False,
    pause_it: Annotated[bool, typer.Option("--pause", help="Pause the crawl after its level in flight; its frontier is kept.")] = False,
    resume_it: Annotated[bool, typer.Option("--resume", help="Resume a paused crawl (every host's gap kept).")] = False,
    reason: Annotated[str, typer.Option("--reason", help="Reason recorded with --fail (≤ 2,000 chars).")] = "failed by the operator (`waggle crawls --fail`)",
    download: Annotated[Optional[Path], typer.Option("--download", help="With an id: save the crawl here as one WACZ file (<host>-<date>-<short id>.wacz).", file_okay=False, callback=download_dir)] = None,
    show_urls: Annotated[bool, typer.Option("--urls", help="With an id: also print a signed download URL (valid 300 s) for every archive.")] = False,
    archive_wait_s: Annotated[float, typer.Option("--archive-wait", help="Seconds to wait for the archives to be listed.")] = 5.0,
    poll_s: Annotated[float, typer.Option("--poll-interval", hidden=True)] = POLL_INTERVAL_S,
    pages: Annotated[bool, typer.Option("--pages", help="With an id: list every page (URL, level, state, failure class, capture ms, reason, archive).")] = False,
    state: Annotated[Optional[PageState], typer.Option("--state", help="With --pages: only pages in this state.")] = None,
    wide: Wide = False,
    as_json: Annotated[bool, typer.Option("--json", help="The ledger's JSON on stdout (for scripts): the recent crawls, one crawl, or with --pages its pages.")] = False,
) -> None:
    """List recent crawls, or show / follow / fail one (an id or a unique prefix of it), or list its pages.

    Exit code when showing or following one crawl: 0 it succeeded or still runs, 1 it failed (or
    the ledger refused); --stop and --fail on a crawl that has already ended say so and exit 0."""
    console = _console()
    actions = [name for name, on in (("stop", stop_it), ("pause", pause_it), ("resume", resume_it), ("fail", fail_it)) if on]
    if len(actions) > 1:
        raise _fail(console, "--" + " and --".join(actions) + " exclude each other: give one")
    if actions and not crawl_id:
        raise _fail(console, f"--{actions[0]} needs a crawl id")
    if (follow_it or fail_it or download or pages or show_urls) and not crawl_id:
        raise _fail(console, "--follow, --fail, --download, --urls and --pages need a crawl id")
    if state and not pages:
        raise _fail(console, "--state goes with --pages")
    if fail_it and len(reason) > REASON_MAX_CHARS:
        raise _fail(console, f"--reason is {len(reason):,} characters; the ledger keeps at most {REASON_MAX_CHARS:,}:"
                             " shorten it (nothing was changed)", 2)
    if as_json and (follow_it or fail_it or download or show_urls):
        raise _fail(console, "--json lists crawls, shows one or its --pages; it does not go with --follow, --fail,"
                             " --download or --urls")
    try:
        with _client() as client:
            if crawl_id is not None:
                crawl_id = resolve_crawl_id(client, crawl_id)
            if pages:
                show_pages(client, crawl_id, state.value if state else None, as_json, console, wide)
                return
            if crawl_id is None:
                crawls = client.list_crawls()
                if as_json:
                    _print_json(crawls)
                else:
                    console.print(render.crawls_table(crawls, wide=wide))
                return
            if as_json:
                _print_json(client.get_crawl(crawl_id))
                return
            if actions and actions[0] != "fail":
                try:
                    answer = client.control_crawl(crawl_id, actions[0])
                except ApiError as exc:
                    # a crawl that has ended is stopped already: said as --fail says it, exit 0
                    if exc.status == 409 and actions[0] == "stop":
                        console.print(f"crawl {crawl_id} had already ended; nothing to stop. ({exc})")
                        return
                    raise
                said = {"stop": "stopped (succeeded, stop reason stopped).", "pausing": "pausing: it pauses when its"
                        " level in flight has reported.", "paused": "paused.", "resume": "running."}
                console.print(f"crawl {crawl_id} " + said.get(answer.get("state") if actions[0] == "pause" else actions[0], ""))
                return
            if fail_it:
                closed = client.fail_crawl(crawl_id, reason)
                console.print(f"crawl {crawl_id} " + ("failed." if closed else "was not running; nothing to fail."))
                return
            if follow_it:
                code = follow_to_end(client, crawl_id, console, download, archive_wait_s, poll_s, show_urls)
            else:
                whole = download is not None and save_crawl(client, crawl_id, download, console)
                code = finish(client, client.get_crawl(crawl_id), console, None if whole else download,
                              archive_wait_s, poll_s, show_urls)
    except (ApiError, ClientConfigError) as exc:
        raise _fail(console, str(exc)) from None
    raise typer.Exit(code)


def save_crawl(client: LedgerClient, crawl_id: str, dest_dir: Path, console: Console) -> bool:
    """The crawl as one WACZ in ``dest_dir`` (``POST /api/crawls/{id}/download``, built by the
    ledger, downloaded through its signed URL) → True; False when the ledger does not offer it
    (an older ledger: the caller saves one file per archive instead)."""
    from ledger.client.api import download as fetch

    try:
        got = client.crawl_download(crawl_id)
    except ApiError as exc:
        if "does not serve" in str(exc):
            console.print("this ledger has no one-file download: saving one file per archive")
            return False
        raise
    path = dest_dir / got["name"]
    size = fetch(got["url"], path)
    lacks = f"; {got['missingCount']} page(s) not in it (see its datapackage.json)" if got.get("missingCount") else ""
    originals = got.get("originals") or 0  # an older ledger does not say
    held = (f": {got['members'] - originals} of this crawl, {originals} of earlier crawls holding the originals"
            " of its revisits (the file stands alone)") if originals else ""
    console.print(f"saved {path} ({size} bytes, {got['members']} archive(s){held}{lacks})", soft_wrap=True)
    return True


def show_pages(client: LedgerClient, crawl_id: str, state: str | None, as_json: bool, console: Console,
               wide: bool = False) -> None:
    """Print every page of ``crawl_id`` (optionally one state): a table, or JSON rows on stdout."""
    rows = list(client.iter_pages(crawl_id, state))
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    title = f"pages of crawl {crawl_id}" + (f" ({state})" if state else "") + f": {len(rows)}"
    console.print(render.pages_table(rows, title=title, wide=wide))




def archives_command(
    before: Annotated[Optional[str], typer.Option("--before", help="Only archives captured before this ISO 8601 time.")] = None,
    crawl: Annotated[Optional[str], typer.Option("--crawl", help="Only the archives of this crawl (its id or a unique prefix).")] = None,
    wide: Wide = False,
    as_json: AsJson = False,
    missing: Annotated[bool, typer.Option("--missing", help="Also list, per incomplete archive, the URLs without a body in it.")] = False,
) -> None:
    """List the archives you may view, newest first (one page of up to 50, with the command for
    the next page when there may be more); incomplete ones say how many URLs lack a body."""
    console = _console()
    try:
        with _client() as client:
            crawl_id = resolve_crawl_id(client, crawl) if crawl else None
            body = client.archives_page(before, crawl=crawl_id)
            rows = body.get("archives", [])
    except (ApiError, ClientConfigError) as exc:
        raise _fail(console, str(exc)) from None
    if as_json:
        _print_json(rows)
        return
    console.print(render.archives_table(rows, title=f"archives ({len(rows)})", wide=wide))
    # the ledger's nextBefore (null at the end); an older ledger: a full page may have more behind it
    older = body.get("nextBefore") if "nextBefore" in body else (
        rows[-1].get("capturedAt") if len(rows) >= ARCHIVES_PAGE else None)
    if older:
        more = f"waggle archives --before {older}" + (f" --crawl {crawl_id}" if crawl_id else "")
        console.print(f"older archives may exist: {more}")
    if missing:
        console.print(render.missing_view(rows))


def resolve_archive_id(client: LedgerClient, given: str) -> str:
    """``given`` as a full archive id: a full UUID as is, else the one visible archive it prefixes."""
    return ids.resolve(given, (row.get("id") for row in client.iter_archives()), "archive", "waggle archives")


def resolve_crawl_id(client: LedgerClient, given: str) -> str:
    """``given`` as a full crawl id: a full UUID as is, else the one visible crawl it prefixes
    (however old: the ledger looks the prefix up; an older ledger answers with the recent ones)."""
    prefix = given.strip().lower()
    if ids.FULL_UUID.match(prefix) or not ids.PREFIX.match(prefix):
        return ids.resolve(given, (), "crawl", "waggle crawls")  # as is, or its clear 400
    if len(prefix) < ids.MIN_CRAWL_PREFIX:
        raise ApiError(400, f"{given!r} is too short: give at least {ids.MIN_CRAWL_PREFIX} characters of the crawl id"
                            " (as `waggle crawls` shows)")
    rows = client.list_crawls(id_prefix=prefix)
    return ids.resolve(given, (c.get("crawlId") or c.get("id") for c in rows), "crawl", "waggle crawls")


def url_command(
    given_id: Annotated[str, typer.Argument(metavar="ARCHIVE_ID", help="The archive id, or a unique prefix of it (as `waggle archives` shows).")],
    download: Annotated[Optional[Path], typer.Option("--download", help="Also save the WACZ into this directory.", file_okay=False, callback=download_dir)] = None,
) -> None:
    """Print a signed download URL for one archive (valid 300 s) on stdout."""
    console = _console()
    err = Console(stderr=True, highlight=False)
    try:
        with _client() as client:
            archive_id = resolve_archive_id(client, given_id)
            signed = client.sign_url(archive_id)
            print(signed["url"])
            err.print(f"valid for {signed.get('expiresIn')} s")
            if download is not None:
                from ledger.client.api import download as fetch

                from urllib.parse import unquote, urlsplit

                from ledger.client.follow import archive_filename

                # named as `waggle crawl --download` names it (the object key is the signed URL's path)
                key = unquote(urlsplit(signed["url"]).path)
                path = download / archive_filename({"id": archive_id, "objectKey": key})
                size = fetch(signed["url"], path)
                err.print(f"saved {path} ({size} bytes)")
    except (ApiError, ClientConfigError) as exc:
        raise _fail(console, str(exc)) from None


def replay_command(
    given_ids: Annotated[Optional[list[str]], typer.Argument(metavar="[ARCHIVE_ID...]", help="Archive ids or unique prefixes (as `waggle archives` shows).", show_default=False)] = None,
    crawl: Annotated[Optional[str], typer.Option("--crawl", help="Replay a whole crawl (an id or a unique prefix): every archive of it you may view, in one collection.")] = None,
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port on 127.0.0.1 (0: a free one).")] = 0,
    state_dir: Annotated[Optional[Path], typer.Option("--state-dir", help="Where pywb's environment and the downloads live (default: $WAGGLE_STATE_DIR, else the checkout's .waggle when run inside it, else ./.waggle).", file_okay=False)] = None,
) -> None:
    """Download archives through signed URLs and replay them with pywb on loopback until Ctrl-C:
    the given archives, or with --crawl a whole crawl as one site (links between its pages work)."""
    from ledger.client import replay
    from ledger.client.api import download as fetch
    from ledger.settings import default_state_dir

    console = _console()
    if bool(given_ids) == bool(crawl):
        raise _fail(console, "give archive ids, or --crawl ID for a whole crawl (one of the two)", 2)
    home = (state_dir or default_state_dir()).resolve() / "replay"
    starts: list[tuple[str, str | None]] = []  # (label, source URL) to print
    try:
        with _client() as client:
            waczs = []
            if crawl:
                crawl_id = resolve_crawl_id(client, crawl)
                body = client.collection(crawl_id)
                for m in body["resources"]:
                    path = home / "archives" / f"{m['archiveId']}.wacz"
                    if not replay.have(path, m.get("bytes"), m.get("hash")):  # a crawl replayed again: only new members
                        fetch(m["path"], path, via=client)  # a ledger path: 302 to a signed URL
                    waczs.append(path)
                originals = sum(1 for m in body["resources"] if m.get("role") == "original")
                console.print(f"crawl {render.short_id(crawl_id)}: {len(waczs)} archive(s) in one collection"
                              + (f" ({len(waczs) - originals} of this crawl, {originals} of earlier crawls holding"
                                 " the originals of its revisits)" if originals else "")
                              + (f", {body['missingCount']} page(s) not in it" if body.get("missingCount") else ""))
                for miss in body.get("missing", [])[:10]:
                    console.print(f"  not in it: {miss['url']} ({miss['why']}: {miss['reason']})", soft_wrap=True,
                                  markup=False)
                seeds = [m for m in body["resources"] if m.get("url")]
                starts = [(render.short_id(crawl_id), seeds[0]["url"] if seeds else None)]
                if not waczs:
                    raise replay.ReplayError("nothing to replay: this crawl has no archive you may view yet")
            else:
                rows = {str(r.get("id")): r for r in client.iter_archives()}
                wanted = list(dict.fromkeys(ids.resolve(g, rows, "archive", "waggle archives") for g in given_ids or []))
                for archive_id in wanted:
                    path = home / "archives" / f"{archive_id}.wacz"
                    size = fetch(client.sign_url(archive_id)["url"], path)
                    console.print(f"downloaded {render.short_id(archive_id)} ({size} bytes)")
                    waczs.append(path)
                    starts.append((render.short_id(archive_id), (rows.get(archive_id) or {}).get("sourceUrl")))
        bin_dir = replay.ensure_env(replay.venv_dir(home.parent), echo=console.print)
        replay.build_collection(home, waczs, bin_dir)
        port = port or replay.free_port()
        server = replay.start_server(home, bin_dir, port)
    except (ApiError, ClientConfigError, replay.ReplayError) as exc:
        raise _fail(console, str(exc)) from None
    console.print("open in a browser (Ctrl-C stops the replay):")
    for label, source in starts:
        target = replay.page_url(port, source) if source else f"http://{replay.HOST}:{port}/{replay.COLLECTION}/"
        console.print(f"  {label}  {target}", soft_wrap=True, markup=False)
    # pywb runs in its own session (Ctrl-C must reach waggle first), so a SIGTERM to waggle
    # must stop it too rather than leave it listening.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        server.wait()
    except KeyboardInterrupt:
        pass
    finally:
        replay.stop(server)


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def register(app: typer.Typer) -> None:
    """Add ``crawl``, ``crawls``, ``archives``, ``url`` and ``replay`` to the root ``waggle`` app
    (``search`` registers itself: :mod:`ledger.client.search` builds on this module)."""
    app.command("crawl")(crawl_command)
    app.command("crawls")(crawls_command)
    app.command("archives")(archives_command)
    app.command("url")(url_command)
    app.command("replay")(replay_command)

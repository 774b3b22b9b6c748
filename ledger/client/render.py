"""Rich renderables for crawl status, summaries and archive lists (pure: dict in, renderable out).

Reads the crawl status body of ``GET /api/crawls/{id}`` (ledger.md §6.8 and issue 2): ``state``,
``stopReason``, ``pagesDiscovered``, ``pagesCaptured``, ``pagesFailed``, ``pagesSkipped``,
``lastJob{id, depth}``, ``hostsInFlight``, ``failures[{url, depth, reason}]``, ``error``,
``startedAt``/``finishedAt``, and while running ``levelProgress{depth, planned, done, captured,
failed, capturing[{host, url, since}], finishing[…]?, queued[…]?}`` (captures as they finish, issue
15; loading, sealed and held ones apart, decision 401) and ``waiting[{host,
kind, reason, crawlId?, until?}]`` (why hosts wait: ledger.crawl.waits). Counters the
ledger does not send are shown as "–".
"""

from __future__ import annotations

import re

from datetime import datetime, timezone

from rich import box
from rich.console import Group
from rich import box
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text
from ledger.client.blocked import blocked_hosts_table, blocked_text
from ledger.client.links import links_text


def parse_time(value: object) -> datetime | None:
    """An ISO 8601 timestamp (``Z`` or offset) as an aware datetime, or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def elapsed_s(crawl: dict, now: datetime | None = None) -> float | None:
    """Seconds from ``startedAt`` to ``finishedAt`` (or to now while running)."""
    start = parse_time(crawl.get("startedAt"))
    if start is None:
        return None
    end = parse_time(crawl.get("finishedAt")) or now or datetime.now(timezone.utc)
    return max(0.0, (end - start).total_seconds())


def format_duration(seconds: float | None) -> str:
    """``73.4`` → ``1m13s``; None → ``–``."""
    if seconds is None:
        return "–"
    whole = int(seconds)
    if whole < 60:
        return f"{seconds:.1f}s"
    minutes, sec = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{sec:02d}s"


def level_of(crawl: dict) -> int | None:
    """The level in flight (or last run): ``level``/``depth`` if sent, else ``lastJob.depth``."""
    for key in ("level", "depth", "currentDepth"):
        if isinstance(crawl.get(key), int):
            return crawl[key]
    job = crawl.get("lastJob")
    if isinstance(job, dict) and isinstance(job.get("depth"), int):
        return job["depth"]
    return None


def count(crawl: dict, *keys: str) -> int | None:
    """The first integer among ``keys`` (camelCase counters), or None when the ledger sends none."""
    for key in keys:
        value = crawl.get(key)
        if isinstance(value, int):
            return value
    counters = crawl.get("counters")
    if isinstance(counters, dict):
        return count(counters, *keys)
    return None


def failed_count(crawl: dict) -> int | None:
    return count(crawl, "pagesFailed", "failed")


def skipped_count(crawl: dict) -> int | None:
    return count(crawl, "pagesSkipped", "skipped")


def captured_count(crawl: dict) -> int | None:
    return count(crawl, "pagesCaptured", "captured")


def captured_live(crawl: dict) -> str:
    """Captured pages as the live views say it: ``pagesCaptured`` moves when a level reports, so
    a running crawl's level in flight (its progress line) is added — never less than the line
    beside it, as the web page says it (issue 30 item 4): ``"5 (4 in the level in flight)"``."""
    n = captured_count(crawl)
    progress = level_progress(crawl) if crawl.get("state") == "running" else None
    flight = progress.get("captured", 0) if progress is not None else 0
    if not isinstance(n, int) or not isinstance(flight, int) or flight <= 0:
        return _n(n)
    return f"{_n(n + flight)} ({flight} in the level in flight)"


def hosts_in_flight(crawl: dict) -> list[str] | int | None:
    value = crawl.get("hostsInFlight")
    if isinstance(value, (list, int)):
        return value
    return None


def robots_meta_text(crawl: dict) -> str:
    """How the crawl treats the pages' robots meta and X-Robots-Tag (``ignoreRobotsMeta``)."""
    if crawl.get("ignoreRobotsMeta"):
        return ("ignored (noarchive pages archived, a page's nofollow meta or header not applied;"
                " links marked rel=nofollow are still not followed)")
    return "honoured (noarchive pages not archived, nofollow pages' links not followed)"


def servers_text(crawl: dict) -> str | None:
    """The crawl's hosts that are one server (``servers``, decision 241), one line each
    (``127.0.0.1:8080: 127.0.0.1:8080, localhost:8080``), with the grouping and the slow-host
    factor (decision 242); None for an older ledger that says neither."""
    if "servers" not in crawl and "groupHosts" not in crawl:
        return None
    lines = [f"{s.get('server')}: {', '.join(s.get('hosts') or [])}" for s in crawl.get("servers") or []]
    by = "address and registered domain" if crawl.get("groupHosts") == "domain" else "address"
    factor = crawl.get("delayFactor")
    tail = f"(grouped by {by}" + (f"; slow-host factor {factor:g})" if isinstance(factor, (int, float)) else ")")
    return "\n".join(lines + [tail]) if lines else "each host its own " + tail


def stop_reason_text(crawl: dict) -> str:
    """The stop reason as shown: ``stopReason`` once the crawl has ended; while it runs the ledger
    already records the limit it reached (``max_pages``, ``max_depth``), shown as "will stop at
    max pages" (the crawl ends after the level in flight); "–" when there is none."""
    reason = crawl.get("stopReason")
    if not reason:
        return "–"
    return f"will stop at {str(reason).replace('_', ' ')}" if crawl.get("state") == "running" else str(reason)


def _n(value: int | None) -> str:
    return "–" if value is None else str(value)


def level_progress(crawl: dict) -> dict | None:
    """``levelProgress`` of a running crawl (issue 15), or None when the ledger sends none."""
    value = crawl.get("levelProgress")
    return value if isinstance(value, dict) and isinstance(value.get("planned"), int) else None


def level_pages(progress: dict) -> str:
    """``12/28 pages`` of the level in flight (captures finished / planned)."""
    return f"{progress.get('done', 0)}/{progress['planned']} pages"


def capturing(progress: dict, limit: int = 6, key: str = "capturing") -> str:
    """The captures of ``progress[key]``, ``host (url), …``: ``capturing`` (loading now, one per
    host), ``finishing`` (sealed, writing the archive) or ``queued`` (held behind the host's
    loading page, nothing sent yet; decision 401)."""
    items = [c for c in progress.get(key) or [] if isinstance(c, dict)]
    text = ", ".join(f"{c.get('host')} ({c.get('url')})" for c in items[:limit])
    return text + (" …" if len(items) > limit else "") if items else "–"


def _urls(progress: dict, key: str) -> list[str]:
    return [str(c.get("url") or c.get("host")) for c in progress.get(key) or [] if isinstance(c, dict)]


def waiting(crawl: dict, limit: int = 4) -> str | None:
    """Why hosts wait (``waiting`` of a running crawl: another crawl's turn, robots.txt first, the
    host's gap), ``; ``-joined, or None when nothing waits or the ledger does not say."""
    items = [w for w in crawl.get("waiting") or [] if isinstance(w, dict) and w.get("reason")]
    if not items:
        return None
    return "; ".join(str(w["reason"]) for w in items[:limit]) + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def status_line(crawl: dict) -> str:
    """One plain line for logs and non-terminal output."""
    hosts = hosts_in_flight(crawl)
    hosts_txt = _n(len(hosts) if isinstance(hosts, list) else hosts)
    progress = level_progress(crawl)
    if progress is not None:  # one line per finished capture, and what runs now
        # the pages, not their hosts: a pipelined host has one loading, one finishing, one queued
        hosts_txt += f" · level {level_pages(progress)}"
        for key, label in (("capturing", "capturing"), ("finishing", "finishing"), ("queued", "queued")):
            if urls := _urls(progress, key):
                hosts_txt += f" · {label} {', '.join(urls)}"
    waits = waiting(crawl)
    return (
        f"crawl {crawl.get('crawlId', '?')} {crawl.get('state', '?')}: level {_n(level_of(crawl))}"
        f" · captured {captured_live(crawl)} · failed {_n(failed_count(crawl))}"
        f" · skipped {_n(skipped_count(crawl))}{blocked_text(crawl)} · discovered {_n(count(crawl, 'pagesDiscovered'))}"
        f" · hosts in flight {hosts_txt}" + (f" · waiting: {waits}" if waits else "")
        + f" · elapsed {format_duration(elapsed_s(crawl))}"
    )


def progress_view(crawl: dict, note: str | None = None) -> Table:
    """The live progress panel: level, captured/failed/skipped, hosts in flight, elapsed."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("crawl", f"{crawl.get('crawlId', '?')}  [{crawl.get('state', '?')}]")
    max_depth = crawl.get("maxDepth")
    level = _n(level_of(crawl)) + (f" of {max_depth}" if isinstance(max_depth, int) else "")
    grid.add_row("level", level)
    max_pages = crawl.get("maxPages")
    captured = captured_live(crawl) + (f" / budget {max_pages}" if isinstance(max_pages, int) else "")
    grid.add_row("captured", captured)
    grid.add_row("failed", _n(failed_count(crawl)))
    grid.add_row("skipped", _n(skipped_count(crawl)))
    grid.add_row("discovered", _n(count(crawl, "pagesDiscovered")))
    hosts = hosts_in_flight(crawl)
    if isinstance(hosts, list):
        hosts_txt = f"{len(hosts)}  " + ", ".join(hosts[:6]) + (" …" if len(hosts) > 6 else "")
    else:
        hosts_txt = _n(hosts)
    grid.add_row("hosts in flight", hosts_txt)
    progress = level_progress(crawl)
    if progress is not None:
        done = f"{level_pages(progress)} (captured {progress.get('captured', 0)}, failed {progress.get('failed', 0)})"
        grid.add_row("this level", done)
        grid.add_row("capturing now", capturing(progress))
        if progress.get("finishing"):
            grid.add_row("finishing", capturing(progress, key="finishing"))  # sealed: no more requests
        if progress.get("queued"):
            grid.add_row("queued", capturing(progress, key="queued"))  # held behind its host's loading page
    waits = waiting(crawl, limit=6)
    if waits:
        grid.add_row("waiting", waits)
    grid.add_row("elapsed", format_duration(elapsed_s(crawl)))
    if note:
        grid.add_row("", Text(note, style="yellow"))
    return grid


def scope_text(crawl: dict) -> str:
    """``origin`` / ``prefix, include /a/, exclude \\.pdf$, extra hops 1``: what the crawl takes."""
    parts = [str(crawl["scope"])]
    parts += [f"include {p}" for p in crawl.get("include") or []]
    parts += [f"exclude {p}" for p in crawl.get("exclude") or []]
    if crawl.get("extraHops"):
        parts.append(f"extra hops {crawl['extraHops']}")
    return ", ".join(parts)


def sitemap_text(crawl: dict) -> str:
    """``lastmod after 2024-01-01T00:00:00.000Z; 3 files, 120 found, 40 older, 70 queued, 10 out of
    scope, 0 not queued``: what the seed hosts' sitemaps gave (ledger.crawl.sitemaps)."""
    parts = [f"lastmod after {crawl['sitemapLastmodAfter']}"] if crawl.get("sitemapLastmodAfter") else []
    got = crawl.get("sitemap")
    if got:
        parts.append(f"{got.get('files', 0)} files, {got.get('found', 0)} found, {got.get('older', 0)} older,"
                     f" {got.get('queued', 0)} queued, {got.get('outOfScope', 0)} out of scope,"
                     f" {got.get('notQueued', 0)} not queued")
    else:
        parts.append("not read yet")
    return "; ".join(parts)


def summary_view(crawl: dict, so_far: bool = False) -> Group:
    """The end-of-crawl summary: pages, stop reason, error, failures with reasons. ``so_far``:
    the counts as they stand (after Ctrl-C captures in flight are still recorded), said in the
    title with the command that shows the final ones."""
    title = f"crawl {crawl.get('crawlId', '?')}"
    if so_far:
        title += (f" (counts so far: captures in flight may still be recorded;"
                  f" `waggle crawls {short_id(crawl.get('crawlId', 'ID'))}` shows the final totals)")
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    state = crawl.get("state", "?")
    style = {"succeeded": "green", "failed": "red"}.get(state, "yellow")
    pausing = " (pausing: it pauses when its level in flight has reported)" if crawl.get("pauseRequested") else ""
    table.add_row("state", Text(state + pausing, style=style))
    table.add_row("stop reason", stop_reason_text(crawl))
    table.add_row("seeds", "\n".join(crawl.get("seeds") or []) or "–")
    if crawl.get("workflow"):  # a trial: nothing named the workflow that ran a crawl
        table.add_row("workflow", f"{crawl['workflow']['name']} ({short_id(crawl['workflow']['workflowId'])})")
    table.add_row("levels", _n(level_of(crawl)) + (f" (max depth {crawl['maxDepth']})" if "maxDepth" in crawl else ""))
    if crawl.get("scope"):
        table.add_row("scope", scope_text(crawl))
    limits = [f"{label} {crawl[key]}" for key, label in (("timeLimitS", "time limit (s)"), ("maxBytes", "max bytes"),
              ("maxPagesPerHost", "max pages per host")) if crawl.get(key)]
    if limits:
        table.add_row("limits", ", ".join(limits))
    if crawl.get("useSitemap"):
        table.add_row("sitemap", sitemap_text(crawl))
    table.add_row("pages captured", _n(captured_count(crawl)))
    table.add_row("pages failed", _n(failed_count(crawl)))
    table.add_row("pages skipped", _n(skipped_count(crawl)))
    if crawl.get("pagesBlocked"):  # decision 231: their hosts answered with challenge or block pages
        table.add_row("pages blocked", Text(_n(crawl["pagesBlocked"]), style="magenta"))
    table.add_row("pages discovered", _n(count(crawl, "pagesDiscovered")))
    if crawl.get("formats"):  # chosen for this crawl (else the deployment's default)
        table.add_row("formats", ", ".join(map(str, crawl["formats"])))
    if "ignoreRobotsMeta" in crawl:  # issue 24 item 7 (older ledgers do not say)
        table.add_row("robots meta", robots_meta_text(crawl))
    if crawl.get("signing") is not None:  # chosen for this crawl (else the deployment's default)
        table.add_row("signing", "signed WACZ" if crawl["signing"] else "unsigned WACZ")
    if (shared := servers_text(crawl)) is not None:  # hosts that are one server (decision 241)
        table.add_row("servers", shared)
    table.add_row("elapsed", format_duration(elapsed_s(crawl)))
    if "totalBytes" in crawl:  # the archives' summed size; those not measured yet are said
        unknown = crawl.get("bytesUnknown") or 0
        table.add_row("archive bytes", size_text(crawl["totalBytes"])
                      + (f" (+ {unknown} archive(s) not measured yet)" if unknown else ""))
    waits = waiting(crawl, limit=6)
    if waits:  # `waggle crawls ID` of a running crawl: why its hosts are not being captured now
        table.add_row("waiting", Text(waits, style="yellow"))
    drops = crawl.get("drops")
    if isinstance(drops, dict) and drops:
        # links the ledger did not follow, per reason (scope, nofollow, trap defences)
        table.add_row("links not followed", ", ".join(f"{reason} {n}" for reason, n in sorted(drops.items())))
    if crawl.get("archivesIncomplete"):
        table.add_row("archives incomplete", Text(_n(crawl["archivesIncomplete"]), style="yellow"))
    if crawl.get("error"):
        table.add_row("error", Text(str(crawl["error"]), style="red"))
    parts: list = [table]
    if (paused := blocked_hosts_table(crawl)) is not None:
        parts.append(paused)
    problems = crawl.get("archiveProblems") or []
    if problems:  # the ledger's WACZ check: what is missing or does not match (newest first)
        pt = Table(title="incomplete archives (newest first)", title_justify="left")
        pt.add_column("url", overflow="fold")
        pt.add_column("reason", overflow="fold")
        for p in problems:
            pt.add_row(str(p.get("url", "")), str(p.get("reason") or "–"))
        parts.append(pt)
    failures = crawl.get("failures") or []
    if failures:
        ft = Table(title="failures (newest first)", title_justify="left")
        ft.add_column("url", overflow="fold")
        ft.add_column("level", justify="right")
        ft.add_column("class", no_wrap=True)
        ft.add_column("reason", overflow="fold")
        for f in failures:
            ft.add_row(str(f.get("url", "")), _n(f.get("depth")), str(f.get("failureClass") or "–"),
                       str(f.get("reason") or "–"))
        parts.append(ft)
        more = (failed_count(crawl) or 0) - len(failures)
        if more > 0:  # the ledger sends the 5 newest; say where the rest are
            parts.append(Text(f"{more} more: waggle crawls {short_id(crawl.get('crawlId', 'ID'))} --pages --state failed",
                              style="dim"))
    return Group(*parts)


SHORT_ID = 8  # hex digits of an id shown by default; `waggle url` accepts any unique prefix


def short_id(value: object) -> str:
    """The first :data:`SHORT_ID` characters of an id (a UUID's first group)."""
    return str(value)[:SHORT_ID]


def short_time(value: object) -> str:
    """``2026-12-01T03:40:12.345Z`` → ``2026-12-01 03:40:12`` (UTC); anything else as given."""
    parsed = parse_time(value)
    if parsed is None:
        return "–" if value in (None, "") else str(value)
    return parsed.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


STATE_STYLES = {"captured": "green", "failed": "red", "skipped": "yellow", "blocked": "magenta", "pending": "dim"}


def size_text(n: int | None) -> str:
    """``12.3 kB`` style (SI), or ``size unknown``."""
    if n is None:
        return "size unknown"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def contents_text(item: dict) -> str | None:
    """What is in a page or archive (issue 25 item 5): ``"title" · HTTP 200 · text/html · 12.3
    kB · screenshot`` (``· revisit`` after the type of a page stored as a revisit, decision
    341), each part saying ``unknown`` when the ledger does not know it; None for a row from a
    ledger that does not say (no ``title`` key)."""
    if "title" not in item:
        return None
    parts = [f"“{item['title']}”" if item.get("title") else "title unknown"]
    if "httpStatus" in item:
        parts.append(f"HTTP {item['httpStatus']}" if item.get("httpStatus") else "status unknown")
        parts.append(item.get("contentType") or "type unknown")
    if item.get("revisit"):  # stored as a revisit of an earlier capture; the type is the original's
        parts.append("revisit")
    parts.append(size_text(item.get("bytes")))
    if item.get("thumbnailUrl"):
        parts.append("screenshot")
    return " · ".join(parts)


CUT_MIN = 16  # a cut URL keeps at least this many cells (its start, "…", its end)


def cut_middle(line: Text, width: int, end: bool = False) -> Text:
    """``line`` as it is when it fits ``width`` cells, else its start, ``…`` and its end (the
    end one cell longer when odd: a URL's page name is there); ``end``: its start and ``…``."""
    if line.cell_len <= width:
        return line
    if width <= 1:
        return Text("…")
    keep = width - 1
    head, tail = (keep, 0) if end else (keep // 2, keep - keep // 2)
    if end:
        cut = Text.assemble(line[:head], "…")
        while cut.cell_len > width and head > 0:
            head -= 1
            cut = Text.assemble(line[:head], "…")
        return cut
    cut = Text.assemble(line[:head], "…", line[len(line.plain) - tail:])
    while cut.cell_len > width and tail > 1:  # wide characters: trim until it fits
        tail -= 1
        cut = Text.assemble(line[:head], "…", line[len(line.plain) - tail:])
    return cut


_URL = re.compile(r"^(.*?)([A-Za-z][A-Za-z0-9+.-]*://)([^/?#\s]*)(.*)$", re.S)
PATH_MIN = 6  # cells of the path kept (with its "…") before the scheme is dropped for room


def cut_url(line: Text, width: int) -> Text:
    """A line holding a URL (after an optional lead such as ``→ ``) cut to ``width`` cells so
    that its host:port stays whole: the path is cut in the middle (its page name kept) and,
    when the host still needs the room, the scheme is dropped (``127.0.0.1:8631/in…x.html``);
    only a host wider than the column itself is cut at its end. Other lines: :func:`cut_middle`."""
    if line.cell_len <= width:
        return line
    m = _URL.match(line.plain)
    if not m:
        return cut_middle(line, width)
    lead, scheme, authority = m.group(1), m.group(2), m.group(3)
    host_at = len(lead) + len(scheme)
    path_at = host_at + len(authority)
    path = line[path_at:]
    lead_text = line[:len(lead)]
    for head in (line[:path_at], Text.assemble(lead_text, line[host_at:path_at])):  # with the scheme, then without
        room = width - head.cell_len
        if room >= max(1, min(path.cell_len, PATH_MIN)):
            return Text.assemble(head, cut_middle(path, room))
    return cut_middle(Text.assemble(lead_text, line[host_at:]), width, end=True)


class Cut:
    """A cell of one-line texts: each line wider than its column is cut instead of wrapping
    (``--wide`` prints them whole) — a URL keeping its host:port whole (:func:`cut_url`), any
    other line (a title) at its end, or with ``end`` every line at its end; the column may
    shrink to ``minimum`` cells. Issue 30 item 6."""

    def __init__(self, text: str | Text, style: str = "", minimum: int = CUT_MIN, end: bool = False) -> None:
        self.lines = (Text(text, style=style) if isinstance(text, str) else text).split("\n")
        self.minimum, self.end = minimum, end

    def __rich_measure__(self, console, options) -> Measurement:
        longest = max((line.cell_len for line in self.lines), default=0)
        return Measurement(min(longest, self.minimum), longest)

    def __rich_console__(self, console, options):
        for line in self.lines:
            width = options.max_width
            out = cut_middle(line, width, True) if self.end or "://" not in line.plain else cut_url(line, width)
            out.no_wrap, out.overflow = True, "ignore"
            yield out


def url_cell(text: str | Text, wide: bool) -> str | Text | Cut:
    """Whole (folding) with ``wide``, else cut to the column (:class:`Cut`), which shrinks no
    narrower than its first URL's scheme-less host:port and one more cell (``127.0.0.1:8631/…``)."""
    if wide:
        return text
    m = _URL.match(str(text).split("\n", 1)[0])
    host = len(m.group(1)) + len(m.group(3)) + 2 if m else 0
    return Cut(text, minimum=min(max(CUT_MIN, host), 40))


def _page_cell(page: dict) -> Text:
    """URL, then on their own lines: ``→ final URL`` when it differs, the reason, and
    ``archive <id>`` (dim)."""
    text = Text(str(page.get("url", "")))
    final = page.get("finalUrl")
    if final and final != page.get("url"):
        text.append(f"\n→ {final}")
    if page.get("reason"):
        text.append(f"\n{page['reason']}", style=STATE_STYLES.get(str(page.get("state")), ""))
    if links := links_text(page):  # decision 232: how many of its links the crawl took, and why not the rest
        text.append(f"\n{links}", style="dim")
    if page.get("archiveId"):
        what = contents_text(page)
        if what:
            text.append(f"\n{what}")
        text.append(f"\narchive {page['archiveId']}", style="dim")
    return text


def _page_group(page: dict) -> Group:
    """:func:`_page_cell` with its URL lines cut to the column (the reason folds)."""
    urls = str(page.get("url", ""))
    final = page.get("finalUrl")
    if final and final != page.get("url"):
        urls += f"\n→ {final}"
    rest = _page_cell({k: v for k, v in page.items() if k not in ("url", "finalUrl")})
    if rest.plain.startswith("\n"):
        rest = rest[1:]
    return Group(Cut(urls), rest) if rest.plain else Group(Cut(urls))


def _outcome_cell(page: dict) -> Text:
    state = str(page.get("state") or "?")
    text = Text(state, style=STATE_STYLES.get(state, ""))
    if page.get("failureClass"):
        text.append(f"\n{page['failureClass']}")
    return text


def pages_table(pages: list[dict], title: str = "pages", wide: bool = False) -> Table:
    """``waggle crawls ID --pages``: one row per page, readable at 80 columns (the page cell
    holds URL, final URL, reason and archive id on their own lines; URLs cut in the middle to
    the column unless ``wide``, the reason folds)."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_lines=True)
    table.add_column("page", overflow="fold")
    table.add_column("lvl", justify="right", no_wrap=True)
    table.add_column("outcome", no_wrap=True)
    table.add_column("ms", justify="right", no_wrap=True)
    table.add_column("wait", justify="right", no_wrap=True)  # behind the previous page (held), not in ms
    for p in pages:
        table.add_row(_page_cell(p) if wide else _page_group(p), _n(p.get("depth")), _outcome_cell(p), _n(p.get("captureMs")),
                      _n(p.get("waitMs")) if p.get("waitMs") else "")
    return table


def crawls_table(crawls: list[dict], wide: bool = False) -> Table:
    """``waggle crawls``: one row per crawl, running ones first (with their level), newest first.
    Default: one line per crawl at 80 columns — short id, short state and stop reason, the
    first seed cut to the column (:class:`Cut`), start to the minute; ``wide``: everything
    whole (folding)."""
    if wide:
        table = Table(title="crawls", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False,
                      collapse_padding=True)
        # every header at least its longest word wide (decision 265: at 80 columns --wide folds
        # cells, the full id too when the rest needs the room, but never a header mid-word)
        for name, fold in (("id", True), ("state", True), ("stop reason", True), ("seeds", True),
                           ("captured", False), ("blocked", True), ("started", True), ("elapsed", False)):
            table.add_column(name, overflow="fold", no_wrap=not fold, ratio=1 if name == "seeds" else None,
                             min_width=header_width(name))
    else:
        table = _one_line_table("crawls")
        table.add_column("id", no_wrap=True)
        # state and stop capped (cut at their end): at 80 columns the seeds keep room for a host:port
        table.add_column("state", max_width=10)
        table.add_column("stop", max_width=10)
        table.add_column("seeds", ratio=1)
        table.add_column("pages", no_wrap=True, justify="right")
        table.add_column("blk", no_wrap=True, justify="right")  # blocked pages (/hosts), as the web list (decision 354)
        table.add_column("started UTC", no_wrap=True)
        table.add_column("elapsed", no_wrap=True, justify="right")
    for c in crawls:
        seeds = c.get("seeds") or []
        seeds_txt = seeds[0] + (f" (+{len(seeds) - 1})" if len(seeds) > 1 else "") if seeds else "–"
        crawl_id = str(c.get("crawlId") or c.get("id"))
        state = str(c.get("state"))
        waiting_hosts = c.get("levelState") == "waiting"
        if wide:
            if state == "running" and c.get("currentDepth") is not None:
                state = f"running (level {c['currentDepth']}{' waiting for hosts' if waiting_hosts else ''})"
            stop = stop_reason_text(c)
            started = str(c.get("startedAt") or "–")
        else:
            if state == "running" and c.get("currentDepth") is not None:
                state = f"{'waiting' if waiting_hosts else 'running'} L{c['currentDepth']}"
            stop = stop_reason_text(c)  # cut at its end when the seeds need the room
            started = short_time(c.get("startedAt"))[5:16] if c.get("startedAt") else "–"
        table.add_row(crawl_id if wide else short_id(crawl_id), state if wide else Cut(state, minimum=9, end=True),
                      stop if wide else Cut(stop, minimum=9, end=True), url_cell(seeds_txt, wide),
                      _n(captured_count(c)), blocked_cell(c, wide), started, format_duration(elapsed_s(c)))
    return table


def blocked_cell(crawl: dict, wide: bool) -> str:
    """Pages recorded blocked and hosts paused for blocking the crawler (decision 231), as the
    web list says them (decision 354): ``4 (1 host)`` with ``wide``, else ``4/1h``; ``0`` when
    none, ``–`` when an older ledger does not say."""
    pages, hosts = crawl.get("pagesBlocked"), crawl.get("hostsBlocked") or 0
    if not isinstance(pages, int):
        return "–"
    if not hosts:
        return str(pages)
    return f"{pages} ({hosts} host{'s' if hosts != 1 else ''})" if wide else f"{pages}/{hosts}h"


def header_width(name: str) -> int:
    """The longest word of a column header: a folding column never narrower (no "stat e")."""
    return max(len(word) for word in name.split())


def _one_line_table(title: str) -> Table:
    """A table whose columns are one space apart and whose rows never wrap (80 columns)."""
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False,
                 padding=0, collapse_padding=True)


def archives_table(archives: list[dict], title: str = "archives", wide: bool = False) -> Table:
    """``waggle archives`` and the end of ``waggle crawl``: one row per archive.

    Default: short id, source URL (cut in the middle to the column, :class:`Cut`), capture
    time (UTC, seconds), completeness — one line per archive at 80 columns (plus one of what
    is in it). ``wide``: the full id and the object key too, everything whole (folding).
    """
    signed = any(a.get("signed") for a in archives)  # the column only when some archive is signed
    if wide:
        table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False,
                      collapse_padding=True)
        table.add_column("id", overflow="fold", min_width=8)  # whole when there is room (as in crawls_table)
        for name in ("source url", "captured", "complete") + (("signed",) if signed else ()) + ("object key",):
            table.add_column(name, overflow="fold", ratio=1 if name == "source url" else None,
                             min_width=header_width(name))
    else:
        table = _one_line_table(title)
        table.add_column("id", no_wrap=True)
        table.add_column("source url", ratio=1)
        table.add_column("captured (UTC)", no_wrap=True)
        table.add_column("complete")
        if signed:
            table.add_column("signed")
    for a in archives:
        row = [
            str(a.get("id")) if wide else short_id(a.get("id")),
            url_cell(str(a.get("sourceUrl")) + (f"\n{contents_text(a)}" if contents_text(a) else ""), wide),
            str(a.get("capturedAt")) if wide else short_time(a.get("capturedAt")),
            with_revisits(complete_cell(a), a),
        ]
        if signed:
            row.append(signed_cell(a))
        if not wide:  # completeness and signer cut at their end when the URL needs the room
            row[3:] = [Cut(cell, minimum=10, end=True) for cell in row[3:]]
        if wide:
            row.append(str(a.get("objectKey")))
        table.add_row(*row)
    return table


# Short words for an archive's ``incompleteReason`` (docs/capture-server.md extension 14).
INCOMPLETE_REASONS = {"page-load-deadline": "load deadline"}


def complete_cell(a: dict) -> str | Text:
    """``yes``, ``–`` (unknown) or ``incomplete`` with why, when the manifest said:
    ``incomplete (3 without body, 1 cut)``, ``incomplete (load deadline, 1 without body)``."""
    complete = a.get("waczComplete")
    if complete is None:
        return "–"
    if complete:
        return "yes"
    why = [INCOMPLETE_REASONS.get(a["incompleteReason"], a["incompleteReason"])] if a.get("incompleteReason") else []
    missing = a.get("missingBodyCount")
    if missing:
        why.append(f"{missing} without body")
    if a.get("truncatedUrls"):
        why.append(f"{len(a['truncatedUrls'])} cut")
    return Text("incomplete" + (f" ({', '.join(why)})" if why else ""), style="yellow")


def signed_cell(a: dict) -> str | Text:
    """``<domain> ✓`` (signature verified at admission), ``unverified`` or ``–`` (unsigned)."""
    if not a.get("signed"):
        return "–"
    if a.get("signatureVerified"):
        return Text(f"{a.get('signatureDomain') or '?'} \u2713", style="green")
    return Text("unverified", style="yellow")


def with_revisits(cell: str | Text, a: dict) -> str | Text:
    """``cell`` + ``, n revisits`` when the archive holds revisit records (decision 181)."""
    n = (a.get("revisits") or {}).get("count") or 0
    if not n:
        return cell
    return cell + f", {n} revisit{'s' if n != 1 else ''}"  # str or Text alike


def missing_view(archives: list[dict]) -> Table | str:
    """:func:`missing_table`, or a sentence when it would be empty (an empty table reads like a
    failure to list)."""
    table = missing_table(archives)
    return table if table.row_count else "nothing missing: every archive listed holds every body it recorded"


def missing_table(archives: list[dict]) -> Table:
    """``waggle archives --missing``: per incomplete archive, the URLs without a body in it
    (``without body``: failed or still pending when the capture stopped; ``cut``: a size cap
    dropped it); ``… N more`` when the manifest listed only the first ones."""
    table = Table(title="URLs without a body in the archive", title_justify="left")
    for col in ("archive", "url", "why"):
        table.add_column(col, overflow="fold")
    for a in archives:
        urls = a.get("missingBodyUrls") or []
        for url in urls:
            table.add_row(str(a.get("id")), str(url), "without body")
        more = (a.get("missingBodyCount") or 0) - len(urls)
        if more > 0:
            table.add_row(str(a.get("id")), f"… {more} more", "without body")
        for url in a.get("truncatedUrls") or []:
            table.add_row(str(a.get("id")), str(url), "cut")
    return table

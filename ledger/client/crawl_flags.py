"""The crawl options as command-line flags, defined once for every command that takes them
(``waggle crawl``, ``waggle workflows create|edit``; decision 353).

:func:`crawl_flags` adds the flags of :data:`FLAGS` to a Typer command's signature and hands the
command one :class:`CrawlFlags` (argument ``crawl``) instead of twenty keyword arguments; a flag
added here reaches every such command. :meth:`CrawlFlags.body` is the ``POST /api/crawls`` body
of the flags given (``ledger.client.cli.build_crawl_body``), so an option not given is not sent
and the ledger's default (or a workflow's saved option) applies.
"""

import functools
import inspect
import typing
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Callable, Optional

import typer


class Scope(str, Enum):
    """Scope types (ledger.crawl.scope); same-origin / same-host: the old names, still accepted."""

    page = "page"
    prefix = "prefix"
    host = "host"
    domain = "domain"
    origin = "origin"
    same_origin = "same-origin"
    same_host = "same-host"


def _opt(*names: str, **kw: Any) -> Any:
    return typer.Option(*names, **kw)


# name → (annotation, default): the crawl options every crawl-making command takes
FLAGS: dict[str, tuple[Any, Any]] = {
    "depth": (Annotated[Optional[int], _opt("--depth", min=0, max=10, help="Levels after the seeds (maxDepth; ledger default 2).")], None),
    "max_pages": (Annotated[Optional[int], _opt("--max-pages", min=1, help="Page budget of the whole crawl (ledger default max(30, #seeds)).")], None),
    "delay_ms": (Annotated[Optional[int], _opt("--delay-ms", min=0, max=600000, help="Per-host politeness delay in ms (ledger default 2000; robots Crawl-delay wins when longer).")], None),
    "parallelism": (Annotated[Optional[int], _opt("--parallelism", min=1, max=32, help="Hosts crawled at once (ledger default 4; the flow uses at most this, usually one per browser).")], None),
    "scope": (Annotated[Optional[Scope], _opt("--scope", help="Which links are followed: page (the seeds only), prefix (under a seed's path), host, domain (registered domain and subdomains), origin (ledger default; same-origin/same-host: old names).")], None),
    "include": (Annotated[Optional[list[str]], _opt("--include", help="Regular expression (RE2) over the normalized URL: matching URLs are in scope too. Repeatable.")], None),
    "exclude": (Annotated[Optional[list[str]], _opt("--exclude", help="Regular expression (RE2) over the normalized URL: matching URLs are never taken (wins over everything). Repeatable.")], None),
    "time_limit": (Annotated[Optional[int], _opt("--time-limit", min=1, help="End the crawl after this many seconds (stop reason time_limit; captures in flight are kept).")], None),
    "max_bytes": (Annotated[Optional[int], _opt("--max-bytes", min=1, help="End the crawl once its admitted archives total this many bytes (stop reason size_limit; archives are counted as they are admitted, after each level, so the last level can pass it).")], None),
    "max_pages_per_host": (Annotated[Optional[int], _opt("--max-pages-per-host", min=1, help="Take at most this many pages of one host (its further links dropped: max_pages_per_host).")], None),
    "sitemap": (Annotated[bool, _opt("--sitemap", help="Also queue the URLs in scope listed by the seed hosts' sitemaps (robots.txt Sitemap: lines, else /sitemap.xml), after the seeds.")], False),
    "sitemap_lastmod_after": (Annotated[Optional[str], _opt("--sitemap-lastmod-after", metavar="DATE", help="With --sitemap: only URLs whose lastmod is after DATE (2024-01-31, or an ISO date-time with offset).")], None),
    "extra_hops": (Annotated[Optional[int], _opt("--extra-hops", min=0, max=10, help="Also capture pages up to N links out of scope (their links not expanded past N).")], None),
    "script": (Annotated[Optional[list[str]], _opt("--script", help="Page script: a catalogue id (autoscroll, autoscroll@2) or a .ts file (\\[preload:|behavior:]path.ts). Repeatable; default = the catalogue's default set.")], None),
    "no_scripts": (Annotated[bool, _opt("--no-scripts", help="Run no page scripts at all.")], False),
    "formats": (Annotated[Optional[str], _opt("--formats", help="Capture formats, comma-separated, with wacz: wacz,png,webp,html,links,mhtml (default: the deployment's WAGGLE_CAPTURE_FORMATS). Screenshots go into the WACZ where the capture server can.")], None),
    "ignore_robots_meta": (Annotated[bool, _opt("--ignore-robots-meta", help="Archive pages whose robots meta or X-Robots-Tag says noarchive, and follow the links of pages saying nofollow (default: both honoured).")], False),
    "group_hosts": (Annotated[Optional[str], _opt("--group-hosts", help="Hosts that are one server share one gap and one lease: address (ledger default: hosts resolving to a shared address) or domain (also every host of a registered domain).")], None),
    "delay_factor": (Annotated[Optional[float], _opt("--delay-factor", min=0, max=60, help="A slow host's gap is at least this times its last page's document time, never below the delay (ledger default 5; 0 = off).")], None),
    "sign": (Annotated[Optional[bool], _opt("--sign/--no-sign", help="Signed WACZ (wacz-auth) for every capture: the capture server's signer signs, the ledger verifies at admission (default: the deployment's WAGGLE_CAPTURE_SIGNING).")], None),
}


@dataclass(frozen=True)
class CrawlFlags:
    """The crawl flags as given on the command line (name → value, :data:`FLAGS`' names)."""

    values: dict

    def given(self) -> bool:
        """Whether any crawl flag was given (a value other than its default)."""
        return any(self.values[k] != default for k, (_, default) in FLAGS.items())

    def conflict(self) -> str | None:
        """Why the flags cannot go together, or None."""
        if self.values["no_scripts"] and self.values["script"]:
            return "--script and --no-scripts exclude each other"
        return None

    def body(self, seeds: list[str]) -> dict:
        """The ``POST /api/crawls`` body: ``seeds`` and the options given."""
        from ledger.client.cli import build_crawl_body

        v = self.values
        return build_crawl_body(
            seeds, v["depth"], v["max_pages"], v["delay_ms"], v["parallelism"],
            v["scope"].value if v["scope"] else None, v["script"], v["no_scripts"], v["formats"], v["include"],
            v["exclude"], v["extra_hops"], v["time_limit"], v["max_bytes"], v["max_pages_per_host"],
            ignore_robots_meta=v["ignore_robots_meta"], sign=v["sign"], sitemap=v["sitemap"],
            sitemap_lastmod_after=v["sitemap_lastmod_after"], group_hosts=v["group_hosts"],
            delay_factor=v["delay_factor"])


def crawl_flags(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give a Typer command the crawl flags: ``command`` takes ``crawl: CrawlFlags``; the flags
    are inserted in its signature (and annotations) where ``crawl`` was."""
    sig = inspect.signature(command)
    resolved = typing.get_type_hints(command, include_extras=True)  # the command's own, evaluated
    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=ann, default=default)
             for name, (ann, default) in FLAGS.items()]
    params = []
    for p in sig.parameters.values():
        if p.name == "crawl":
            params += added
        else:
            params.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=resolved.get(p.name, p.annotation)))

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        values = {name: kwargs.pop(name) for name in FLAGS}
        return command(crawl=CrawlFlags(values), **kwargs)

    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined] — read before __wrapped__
    wrapper.__annotations__ = {p.name: p.annotation for p in params if p.annotation is not inspect.Parameter.empty}
    if "return" in resolved:
        wrapper.__annotations__["return"] = resolved["return"]
    return wrapper

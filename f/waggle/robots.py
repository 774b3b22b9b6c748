# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1", "protego==0.7.0"]
# ///
"""robots.txt for plan_level: the RFC 9309 fetch policy and a protego adapter (library script).

Fetch (RFC 9309 §2.3.1): 2xx → parse the first 512 KiB (a cut last line is dropped, a UTF-8
BOM or a leading part of one is skipped, UTF-16/32 is decoded and a body undecodable in it is
unreachable; see :func:`decode_robots`); up to 5 redirects are followed and the rules apply to the initial
authority; 4xx (except 429) → unavailable, no restrictions; 5xx, 429, a timeout, a network
error, a refused or non-http(s) redirect → unreachable, the host is skipped this level.

Matching: protego 0.7.0 parses; we choose the group ourselves — the group whose user-agent
(cut at the first space, case-insensitive) equals our product token exactly, else ``*`` —
because protego's own matching lets a ``Foo`` group apply to ``FooBot`` (cases/README C4).
Groups are delimited by us too (:func:`relevant_groups`, RFC 9309 §2.1 as Google's reference
matcher reads it): protego ends a group at an unknown line or a ``Crawl-delay`` (also
``Request-rate``/``Visit-time``) between two ``User-agent`` lines, so the text it parses is rewritten first (unknown lines
dropped, each group's agents written before its rules).

Size: protego spends ~30 µs on each rule, so the rules that apply to us are deduplicated and
capped at ``MAX_RULES``; a file with more is not guessed at: every URL of the host is
skipped this level with reason ``robots-too-large`` (never crawl what a dropped rule forbids).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx
from protego import Protego
from protego._protego import (
    _CRAWL_DELAY_DIRECTIVE,
    _DISALLOW_DIRECTIVE,
    _REQUEST_RATE_DIRECTIVE,
    _USER_AGENT_DIRECTIVE,
    _VISIT_TIME_DIRECTIVE,
    _extract_directive,
)

from f.waggle.useragent import PRODUCT_TOKEN, USER_AGENT  # noqa: F401 — one source with the capture server

ROBOTS_MAX_BYTES = 512 * 1024  # RFC 9309 §2.5: at least 500 KiB must be parsed
MAX_RULES = 5000  # distinct Allow/Disallow rules of our groups; above → host skipped (see above)
ROBOTS_TIMEOUT_S = 10.0
ROBOTS_MAX_REDIRECTS = 5  # RFC 9309 §2.3.1.2: follow at least five

ALLOWED = "allowed"  # parsed rules apply
UNAVAILABLE = "unavailable"  # 4xx: no restrictions
UNREACHABLE = "unreachable"  # 5xx/429/timeout/network: everything disallowed this level
NOT_FETCHED = "not-fetched"  # respect_robots false


# Characters that are never part of a robots.txt line's text: C0 controls (NUL included), DEL
# and a BOM repeated inside the file. Stripped at a line's ends; inside a value see below.
_JUNK = "".join(map(chr, range(0x20))) + "\x7f\ufeff"
_STRIP = _JUNK + " "


_UNDECODED = re.compile("[\x00-\x1f\x7f\ufeff\udc80-\udcff]")  # _JUNK or a surrogateescape'd byte


def _agent_value(value: str) -> str:
    """A ``User-agent`` value up to its first undecodable byte or control character: such a
    byte ends the name (as a space does), so ``*\\xff`` is still ``*`` and its group applies."""
    found = _UNDECODED.search(value)
    return value if found is None else value[: found.start()].strip()


def _escaped_value(value: str) -> str:
    """A rule's value with each undecodable byte or control character written as ``%XX``
    (the byte as it appears in a URL path; a control character in a path is always escaped)."""
    if _UNDECODED.search(value) is None:
        return value
    out = []
    for ch in value:
        if "\udc80" <= ch <= "\udcff":
            out.append(f"%{ord(ch) - 0xDC00:02X}")
        elif ch in _JUNK:
            out.append("".join(f"%{b:02X}" for b in ch.encode()))
        else:
            out.append(ch)
    return "".join(out)


def _agent_token(agent: str) -> str:
    """The product token of a ``User-agent`` value: cut at the first space (as Google does) and at ``/``."""
    return agent.strip().lower().split(" ")[0].split("/")[0]


_RULE_FIELDS = {"allow"} | _DISALLOW_DIRECTIVE  # the lines that close a group (RFC 9309 §2.1)
_MEMBER_FIELDS = _RULE_FIELDS | _CRAWL_DELAY_DIRECTIVE | _REQUEST_RATE_DIRECTIVE | _VISIT_TIME_DIRECTIVE


def _agent_matches(agent: str, token: str) -> bool:
    """True when a ``User-agent`` value names ``token`` (exact product token, see module doc)."""
    return token in (_agent_token(agent), _agent_token(agent.replace("*", "")))


def relevant_groups(text: str, token: str) -> str:
    """``text`` rewritten to the groups that can apply to ``token`` (its own or ``*``), in a
    normal form protego groups exactly as RFC 9309 §2.1 and Google's reference matcher do.

    Group boundaries are ours, not protego's: a group is its ``User-agent`` lines plus the
    lines up to the next ``User-agent`` line that follows an Allow/Disallow line. Nothing else
    ends a group — not a blank line, comment, ``Sitemap``/``Host`` line, ``Crawl-delay``, or a
    line no parser knows (``Invalid-Unknown-Line: x``); protego 0.7.0 ends a group at the
    last two (and at ``Request-rate``/``Visit-time``). Each kept group is written out as ``User-agent: <token>`` and/or
    ``User-agent: *`` followed by its member lines only (Allow, Disallow, Crawl-delay,
    Request-rate, Visit-time); unknown and site-wide lines are dropped, so protego cannot
    split the group again. Writing our agent under the bare token also merges every group
    naming us (``waggle``, ``waggle/2.0``) into one, as RFC 9309 §2.2.1 requires. Bytes that
    were not text (see :func:`decode_robots`) never drop a line: they end a user-agent value
    and are written ``%XX`` in a rule. Other
    agents' groups are never built, which keeps hostile files (thousands of agents) cheap;
    a rule repeated within a group is written once.
    """
    out: list[str] = []
    agents: list[str] = []  # the current group's user-agent values (lower-cased)
    agent_lines: list[int] = []  # their line numbers (1-based, in ``text``)
    members: list[tuple[str, int | str]] = []  # (line, its source line number or kept note)
    closed = False  # an Allow/Disallow line was seen: the next User-agent line starts a group

    def flush() -> None:
        ours = any(_agent_matches(a, token) for a in agents)
        star = "*" in agents
        if not (ours or star):
            return
        if ours:
            out.append(f"user-agent: {token}")
        if star:
            out.append("user-agent: *")
        seen: set[str] = set()
        for rule, note in members:
            if rule not in seen:
                seen.add(rule)
                out.append(rule + (source(note) if isinstance(note, int) else note))

    def source(number: int) -> str:
        """Where a rule came from, kept in the normal form as a comment protego ignores:
        `` #L<rule line> g<group's first agent line> n<agent lines> u<our line> s<* line>``."""
        ours = next((n for a, n in zip(agents, agent_lines) if _agent_matches(a, token)), 0)
        star = next((n for a, n in zip(agents, agent_lines) if a == "*"), 0)
        return f" #L{number} g{agent_lines[0]} n{len(agent_lines)} u{ours} s{star}"

    for number, raw in enumerate(text.splitlines(), start=1):
        body, hash_, comment = raw.partition("#")
        line = body.strip(_STRIP)
        if not line:
            continue
        parsed = _extract_directive(line)
        if parsed is None:
            continue
        field, value = parsed
        if field in _USER_AGENT_DIRECTIVE:
            if closed:
                flush()
                agents, agent_lines, members, closed = [], [], [], False
            agents.append(_agent_value(value).strip().lower())
            agent_lines.append(number)
        elif field in _MEMBER_FIELDS:
            closed = closed or field in _RULE_FIELDS
            if agents:  # a rule before any user-agent line belongs to no group
                note: int | str = ""  # the source line, or the note of a normal form read again
                if field in _RULE_FIELDS:
                    kept = _SOURCE.fullmatch(hash_ + comment) if hash_ else None
                    note = " " + kept.group(0).strip() if kept else number
                members.append((f"{field}: {_escaped_value(value)}", note))
    flush()
    return "\n".join(out) + "\n"


_SOURCE = re.compile(r"#L(\d+) g(\d+) n(\d+) u(\d+) s(\d+)\s*")
_FIELD_NAMES = {"user-agent": "User-agent", "allow": "Allow", "disallow": "Disallow"}


@dataclass(frozen=True)
class RuleSource:
    """Where the rule that decided a URL stands in the site's robots.txt (1-based lines):
    ``field`` (allow/disallow) ``value``, at ``line``; its group's first ``User-agent`` line
    ``group_start``, its ``agent_lines`` count, and the line naming our agent (or ``*``) ``agent_line``."""

    field: str
    value: str
    line: int
    group_start: int
    agent_lines: int
    agent_line: int
    agent: str

    def describe(self) -> str:
        """``robots.txt lines 1–5: `User-agent: *` … `Disallow: /```, plus why a group spans
        several User-agent lines (RFC 9309 §2.1 as Google reads it) when it does."""
        value = self.value if len(self.value) <= 200 else self.value[:200] + "\u2026"  # a reason, not a dump
        rule = f"{_FIELD_NAMES.get(self.field, self.field)}: {value}".rstrip()
        text = (f"robots.txt lines {self.group_start}\u2013{self.line}: `User-agent: {self.agent}`"
                + (f" (line {self.agent_line})" if self.agent_line != self.group_start else "")
                + f" \u2026 `{rule}`")
        if self.agent_lines > 1:
            text += " (one group: a group ends only at a User-agent line after a rule)"
        return text


def count_rules(text: str) -> int:
    """Allow/Disallow lines in ``text`` as returned by :func:`relevant_groups`."""
    count = 0
    for line in text.splitlines():
        parsed = _extract_directive(line.split("#", 1)[0])
        if parsed is not None and parsed[0] in _RULE_FIELDS:
            count += 1
    return count


class RobotsRules:
    """The rules of one robots.txt for one product token (exact match, else ``*``)."""

    def __init__(self, text: str, token: str = PRODUCT_TOKEN) -> None:
        """``text``: the decoded body (a leading BOM is stripped here too)."""
        relevant = relevant_groups(text.lstrip("\ufeff"), token.lower())
        self.rule_count = count_rules(relevant)
        #: True when more than MAX_RULES rules apply to us: nothing but /robots.txt is allowed.
        self.too_large = self.rule_count > MAX_RULES
        #: the text parsed (:func:`relevant_groups`' normal form; None when too large): what the
        #: crawl's robots.txt cache stores — RobotsRules(text) decides exactly as this object
        self.text: str | None = None if self.too_large else relevant
        self._parser = Protego.parse("" if self.too_large else relevant)
        #: the file's ``Sitemap:`` lines as served (f/waggle/sitemaps.py; not in the cached normal form)
        self.sitemap_lines = "\n".join(x for x in text.splitlines() if re.match(r"\s*sitemap\s*:", x, re.I))
        self._group = None if self.too_large else self._choose_group(token.lower())
        self._token = token.lower()
        self._exact = self._group is not None and self._group is not self._parser._user_agents.get("*")

    def rule_for(self, url: str) -> RuleSource | None:
        """The robots.txt line that disallows (or allows) ``url`` for us, or None (no rule
        matched, or the file was too large). Mirrors protego 0.7.0's ``can_fetch``: the first of
        the chosen group's rules (sorted by priority) that matches decides."""
        if self._group is None or self.text is None:
            return None
        from protego._utils import _quote_path  # pinned protego 0.7.0

        group = self._group
        if group._plain_prefixes is None:
            group._build_index()
        quoted = _quote_path(url)
        decided = next((r for r in group._rules if r.value.match(quoted)), None)
        if decided is None:
            return None
        patterns = {raw for raw, pat in self._parser._url_patterns.items() if pat is decided.value}
        for line in self.text.splitlines():
            rule, _, note = line.partition(" #L")
            parsed = _extract_directive(rule)
            found = _SOURCE.fullmatch("#L" + note) if note else None
            if parsed is None or found is None or parsed[0] != decided.field:
                continue
            if parsed[1] not in patterns and parsed[1].replace("$", "%24") not in patterns:
                continue
            number, start, count, ours, star = (int(g) for g in found.groups())
            agent_line = ours if self._exact else star
            if not agent_line:
                continue  # the same rule in a group that does not apply to us
            agent = self._token if self._exact else "*"
            return RuleSource(decided.field, parsed[1], number, start, count, agent_line, agent)
        return None

    def _choose_group(self, token: str):  # -> protego _RuleSet | None
        groups = self._parser._user_agents  # pinned protego 0.7.0: {lower-cased agent: rule set}
        exact = [rs for agent, rs in groups.items() if agent.split(" ")[0].split("/")[0] == token]
        if exact:
            return exact[0]
        return groups.get("*")

    def allowed(self, url: str) -> bool:
        """True when ``url`` may be fetched; ``/robots.txt`` itself always may (RFC 9309 §2.2.2)."""
        if urlsplit(url).path == "/robots.txt":
            return True
        if self.too_large:
            return False
        if self._group is None:
            return True
        return bool(self._group.can_fetch(url))

    def crawl_delay_s(self) -> float | None:
        """Crawl-delay of the chosen group in seconds (decimals allowed), or None."""
        if self._group is None:
            return None
        value = self._group.crawl_delay
        if value is None:
            return None
        try:
            delay = float(value)
        except (TypeError, ValueError):
            return None
        return delay if delay >= 0 and delay == delay and delay != float("inf") else None


@dataclass
class RobotsOutcome:
    """What one robots.txt fetch decided: ``state`` is one of ALLOWED/UNAVAILABLE/UNREACHABLE."""

    state: str
    rules: RobotsRules | None = None
    detail: str = ""

    def allowed(self, url: str) -> bool:
        if self.state == UNREACHABLE:
            return False
        if self.state == ALLOWED and self.rules is not None:
            return self.rules.allowed(url)
        return True

    def crawl_delay_s(self) -> float | None:
        return self.rules.crawl_delay_s() if self.state == ALLOWED and self.rules else None

    def why_disallowed(self, url: str) -> str:
        """A skip reason a person can act on for a URL :meth:`allowed` refused: ``robots: <the
        lines that did it>`` (see :meth:`RuleSource.describe`), or plain ``robots`` when no
        line can be named (e.g. a cached copy written before lines were kept)."""
        source = self.rules.rule_for(url) if self.state == ALLOWED and self.rules is not None else None
        return f"robots: {source.describe()}" if source is not None else "robots"


class RobotsUndecodable(ValueError):
    """A robots.txt body that cannot be read as text (RFC 9309 §2.3.1.4: treated as unreachable)."""


_UTF8_BOM = b"\xef\xbb\xbf"
_WIDE_BOMS = (  # longest first: a UTF-32 LE BOM starts with the UTF-16 LE one
    (b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"),
)


def _wide_encoding(data: bytes) -> tuple[str | None, int]:
    """(codec, BOM length) of a UTF-16/32 body: by its BOM, else by NUL bytes sitting in every
    other position of its first 512 bytes (UTF-16 without a BOM); (None, 0) for byte text."""
    for bom, codec in _WIDE_BOMS:
        if data.startswith(bom):
            return codec, len(bom)
    head = data[:512]
    if len(head) >= 4 and head.count(0) * 3 >= len(head):  # ≥ 1/3 NULs: not byte text
        even, odd = head[0::2].count(0), head[1::2].count(0)
        if odd * 4 >= len(head[1::2]) * 3 and even == 0:
            return "utf-16-le", 0
        if even * 4 >= len(head[0::2]) * 3 and odd == 0:
            return "utf-16-be", 0
    return None, 0


def decode_robots(data: bytes, truncated: bool) -> str:
    """The text of a robots.txt body, decoded so that no decoding problem can turn a rule into an
    allow (issue 24). Raises :class:`RobotsUndecodable` when the body cannot be read at all.

    * A UTF-8 BOM, or any leading part of one (``EF`` or ``EF BB``), is skipped, as Google's
      robots.txt parser does: the first line still parses.
    * UTF-16/UTF-32 (by BOM, or UTF-16 by its NUL pattern) is decoded strictly; a body that is
      not valid in that encoding raises (the host is then treated as unreachable, never as
      allow-all).
    * Any other bytes are UTF-8; each byte that is not valid UTF-8 becomes a lone surrogate
      (``surrogateescape``), which :func:`relevant_groups` turns into ``%XX`` in a rule's path
      (so ``Disallow: /caf\\xe9`` disallows ``/caf%E9``) and treats as the end of a user-agent
      value — the line, and so its group, is kept.
    * A cut last line (``truncated``: the body ran past ROBOTS_MAX_BYTES) is dropped.
    """
    codec, skip = _wide_encoding(data)
    if codec is not None:
        body = data[skip:]
        if truncated:  # cut at a code unit boundary; the cut last line goes below
            unit = 4 if codec.startswith("utf-32") else 2
            body = body[: len(body) - len(body) % unit]
        try:
            text = body.decode(codec)
        except UnicodeDecodeError as exc:
            raise RobotsUndecodable(f"not valid {codec} at byte {exc.start + skip}") from None
        if truncated:
            cut = max(text.rfind("\n"), text.rfind("\r"))
            text = text[: cut + 1] if cut >= 0 else ""
        return text
    for size in (3, 2, 1):  # the whole UTF-8 BOM, or the part of it the body starts with
        if data[:size] == _UTF8_BOM[:size]:
            data = data[size:]
            break
    if truncated:
        cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
        data = data[: cut + 1] if cut >= 0 else b""
    return data.decode("utf-8", "surrogateescape")


def fetch_robots(
    robots_url: str,
    *,
    transport: httpx.BaseTransport | None = None,
    timeout_s: float = ROBOTS_TIMEOUT_S,
    token: str = PRODUCT_TOKEN,
    user_agent: str = USER_AGENT,
    log: Callable[[str], None] = print,
) -> RobotsOutcome:
    """Fetch ``robots_url`` once and classify it per RFC 9309 §2.3.1 (see module doc).

    ``transport`` is the httpx transport every hop goes through (the private-host guard's
    ``guarded_transport()`` in production); it stays open (the caller owns it, and plan_level
    shares one across its fetching threads). Never raises for network trouble: that is
    UNREACHABLE, with ``detail`` saying why.
    """
    deadline = time.monotonic() + timeout_s
    url = robots_url
    headers = {"user-agent": user_agent, "accept": "text/plain, */*;q=0.1"}
    try:
        borrowed = _Borrowed(transport) if transport is not None else None
        with httpx.Client(transport=borrowed, follow_redirects=False, timeout=timeout_s) as client:
            for hop in range(ROBOTS_MAX_REDIRECTS + 1):
                with client.stream("GET", url, headers=headers) as response:
                    status = response.status_code
                    if status in (301, 302, 303, 307, 308) and "location" in response.headers:
                        target = urljoin(url, response.headers["location"])
                        if urlsplit(target).scheme not in ("http", "https"):
                            log(f"robots {robots_url}: redirect to {target!r} refused (not http/https)")
                            return RobotsOutcome(UNREACHABLE, detail=f"redirect to non-http(s) {target}")
                        url = target
                        continue
                    if 200 <= status < 300:
                        data, truncated = _read_capped(response, deadline)
                        try:
                            text = decode_robots(data, truncated)
                        except RobotsUndecodable as exc:  # RFC 9309 §2.3.1.4: as if unreachable
                            log(f"robots {robots_url}: {status} but unreadable ({exc}); host skipped this level")
                            return RobotsOutcome(UNREACHABLE, detail=f"{status} unreadable: {exc}")
                        rules = RobotsRules(text, token)
                        return RobotsOutcome(ALLOWED, rules, detail=f"{status}")
                    if status == 429 or status >= 500:
                        return RobotsOutcome(UNREACHABLE, detail=f"{status}")
                    if 400 <= status < 500:
                        return RobotsOutcome(UNAVAILABLE, detail=f"{status}")
                    # 1xx/3xx without a usable Location: nothing parseable, treat as unavailable
                    return RobotsOutcome(UNAVAILABLE, detail=f"{status}")
            log(f"robots {robots_url}: more than {ROBOTS_MAX_REDIRECTS} redirects; treated as unavailable")
            return RobotsOutcome(UNAVAILABLE, detail="too many redirects")
    except _Deadline:
        return RobotsOutcome(UNREACHABLE, detail=f"no complete answer within {timeout_s:g}s")
    except httpx.TimeoutException as exc:
        return RobotsOutcome(UNREACHABLE, detail=f"timeout ({type(exc).__name__})")
    except (httpx.HTTPError, ValueError, OSError) as exc:
        # ValueError covers the private-host guard's HostRefused (a ValueError subclass).
        return RobotsOutcome(UNREACHABLE, detail=f"{type(exc).__name__}: {exc}")


class _Deadline(Exception):
    pass


class _Borrowed(httpx.BaseTransport):
    """A caller's transport lent to one client: closing the client leaves it open (httpx closes
    its transport on exit, which under another thread's request breaks that request)."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self.inner.handle_request(request)

    def close(self) -> None:
        pass


def _read_capped(response: httpx.Response, deadline: float) -> tuple[bytes, bool]:
    """Up to ROBOTS_MAX_BYTES of the body; (bytes, truncated). Raises _Deadline past ``deadline``."""
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        if time.monotonic() > deadline:
            raise _Deadline()
        chunks.append(chunk)
        size += len(chunk)
        if size > ROBOTS_MAX_BYTES:
            return b"".join(chunks)[:ROBOTS_MAX_BYTES], True
    return b"".join(chunks), False

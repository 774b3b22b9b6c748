"""Ledger configuration, read from ``WAGGLE_*`` environment variables (and ``.env``).

Rules:
* An empty value means absent (``WAGGLE_X=`` is the same as not setting it).
* Every missing required setting is reported together, in one message that says where
  to set each one (:class:`MissingSettings`), never one at a time.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

CAPTURE_FORMAT_NAMES = ("png", "webp", "html", "links", "mhtml", "wacz")


class MissingSettings(RuntimeError):
    """Raised at start-up when required settings are absent; ``str()`` lists them all."""

    def __init__(self, missing: dict[str, str]):
        self.missing = missing
        lines = ["waggle cannot start: these settings are missing"]
        for name, where in missing.items():
            lines.append(f"  {name} — {where}")
        lines.append("Set them in the environment or in .env (an empty value counts as missing).")
        super().__init__("\n".join(lines))


CHECKOUT = Path(__file__).resolve().parents[1]  # the waggle checkout this module runs from


def default_state_dir(cwd: Path | None = None) -> Path:
    """State directory of the embedded stack: ``$WAGGLE_STATE_DIR``; else, run from anywhere
    inside this waggle checkout, the checkout's ``.waggle`` (``waggle dev status`` from
    ``docs/`` once said postgres was stopped: it looked in ``docs/.waggle``); else ``./.waggle``."""
    if os.environ.get("WAGGLE_STATE_DIR"):
        return Path(os.environ["WAGGLE_STATE_DIR"]).resolve()
    here = (cwd or Path.cwd()).resolve()
    if (CHECKOUT / "pyproject.toml").is_file() and (here == CHECKOUT or CHECKOUT in here.parents):
        return CHECKOUT / ".waggle"
    return here / ".waggle"


class Settings(BaseSettings):
    """All ledger settings. Times are named with their unit (``_s``, ``_ms``)."""

    model_config = SettingsConfigDict(
        env_prefix="WAGGLE_",
        env_file=".env",
        env_ignore_empty=True,  # empty value == absent
        extra="ignore",
    )

    # -- process / storage -------------------------------------------------
    state_dir: Path = Field(default_factory=default_state_dir)
    database_url: str | None = None  # None → embedded Postgres (pgserver) under state_dir/pg
    api_host: str = "127.0.0.1"
    api_port: int = Field(7070, ge=0, le=65535)  # 0 = an OS-chosen port (tests)
    public_url: str | None = None  # how the flow reaches the ledger; default http://api_host:api_port

    # -- identity ----------------------------------------------------------
    oidc_issuer: str | None = None  # set → JWT mode (wins over dev identity)
    oidc_audience: str = "waggle"
    dev_identity: bool = False  # WAGGLE_DEV_IDENTITY=1 → trust X-Waggle-Subject/-Organizations
    dev_issuer_port: int = 9099
    oidc_client_id: str = "waggle"  # the web page's OIDC client (authorization code + PKCE)
    oidc_client_secret: str | None = None  # only for an issuer that wants a confidential client
    oidc_scopes: str = "openid"
    web_url: str | None = None  # the page's URL as browsers see it; default: the request's own
    replay_dir: Path | None = None  # ReplayWeb.page's files (ui.js, sw.js); default: ledger/web/replay
    replay_url: str | None = None  # a separate origin for replay (archived scripts run there); see README

    # -- OpenFGA -------------------------------------------------------------
    fga_api_url: str = "http://127.0.0.1:8090"
    fga_api_token: str | None = None
    fga_store_id: str | None = None
    fga_model_id: str | None = None

    # -- S3 ------------------------------------------------------------------
    s3_endpoint: str | None = None
    s3_bucket: str | None = None
    s3_region: str = "us-east-1"
    s3_access_key_id: str | None = None
    s3_secret_access_key: str | None = None

    # -- crawling --------------------------------------------------------------
    crawl_webhook_url: str | None = None  # …/api/w/{ws}/jobs/run/f/f/waggle/crawl_level
    crawl_webhook_token: str | None = None
    crawl_webhook_timeout_s: float = 10.0
    capture_formats: Annotated[tuple[str, ...], NoDecode] = ("wacz",)
    capture_signing: bool = False  # default of a crawl's `signing` (a crawl request may say otherwise)
    # authsign roots YAML (SHA-256 fingerprints of trusted domain and timestamp roots) a signed
    # WACZ must chain to at admission and in `waggle verify`; None = authsign's bundled public roots
    signing_trusted_roots: str | None = None
    max_pages: int = Field(1000, ge=1)  # upper bound a caller may ask for
    max_pages_per_host: int | None = None  # trap defence; None = no per-host cap
    trap_walk_levels: int = Field(5, ge=0)  # parameter_walk: levels a digit-masked query may span (0 = off)
    trap_query_variants: int = Field(50, ge=0)  # query_variants: distinct queries per path (0 = off)
    trap_path_walk_levels: int = Field(5, ge=0)  # path_walk: levels a digit-masked path may span (0 = off)
    allow_private_hosts: bool = False  # WAGGLE_ALLOW_PRIVATE_HOSTS=1 opts out of the guard
    # politeness per server (ledger.crawl.servers): a hosts-file-like test resolver,
    # "name=address[ address…],name=…" (IP literals only), used instead of the system resolver
    # for the names it lists; None = the system resolver for every host
    resolve_hosts: str | None = None
    crawl_stall_s: float = 900.0  # watchdog: no progress for this long → crawl failed
    watchdog_interval_s: float = 15.0
    # search (ledger.search.backend): unset/"postgres" = Postgres full-text search in this
    # database (the default); "off" = none (/index and /api/search answer 404); a URL is refused
    search_url: str | None = None
    search_sweep_interval_s: float = Field(10.0, gt=0)  # search loop: archives left unindexed (late admissions)
    search_sweep_grace_s: float = Field(10.0, ge=0)  # …admitted at least this long ago (younger: index_level's)
    links_max_bytes: int = Field(8 * 1024 * 1024, ge=1024)  # larger .links.json files are skipped
    # level report bodies (hostile input, issue 14): inline links per result (the flow is told
    # this cap and counts the rest in linksOverflow), links and results per report
    report_links_per_page: int = Field(1000, ge=0, le=100_000)
    # blocked answers (403/429/503) in a row that pause a host for the rest of its crawl (the flow's
    # blocked_after; decision 231); 0 = only a challenge signature the capture server reports
    blocked_after: int = Field(3, ge=0, le=1000)
    report_links_max: int = Field(200_000, ge=0)
    report_results_max: int = Field(20_000, ge=1)
    wacz_hash_max_bytes: int = Field(64 * 1024 * 1024, ge=0)  # WACZ check: hash listed files up to this total
    max_running_crawls_per_org: int = Field(4, ge=1)  # more running crawls of one organization → 429
    lease_interval_s: float = Field(1.0, gt=0)  # lease loop: waiting levels, expired host leases
    # robots.txt cache per crawl (docs/internals.md): a host's outcome younger than this is sent to
    # the next level instead of a fetch; 0 = every level fetches; at most 24 h (RFC 9309 §2.4)
    robots_cache_ttl_s: int = Field(3600, ge=0, le=86400)
    # a crawl's collection (issue 25): how long each member's signed URL lives (the player asks the
    # collection again when one expires), and how long a replay ticket lets the player ask
    collection_url_expiry_s: int = Field(300, ge=1, le=604800)
    collection_ticket_ttl_s: int = Field(8 * 3600, ge=60, le=7 * 86400)
    # how long a finished crawl's members, and a caller's decisions over more than 50 of them
    # (while fga_outbox is unchanged), are reused by the collection answer (decision 371); 0: never
    collection_cache_s: int = Field(30, ge=0, le=3600)

    # -- background work -------------------------------------------------------
    drain_interval_s: float = 5.0  # outbox worker period
    reconcile_interval_s: float = 300.0  # reconciler period
    schedule_reconcile_interval_s: float = Field(60.0, gt=0)  # workflow schedules vs Windmill (decision 352)
    reconcile_since_days: int = 7

    @field_validator("capture_formats", mode="before")
    @classmethod
    def _parse_formats(cls, value: object) -> tuple[str, ...]:
        if isinstance(value, str):
            items = [v.strip() for v in value.split(",") if v.strip()]
        else:
            items = list(value)  # type: ignore[arg-type]
        unknown = [v for v in items if v not in CAPTURE_FORMAT_NAMES]
        if unknown or not items:
            raise ValueError(
                f"WAGGLE_CAPTURE_FORMATS must be a comma list of {','.join(CAPTURE_FORMAT_NAMES)};"
                f" unknown: {','.join(unknown) or '(empty)'}"
            )
        return tuple(dict.fromkeys(items))

    @field_validator("search_url")
    @classmethod
    def _known_search_backend(cls, value: str | None) -> str | None:
        from ledger.search.backend import backend_of

        backend_of(value)  # raises with what to set instead
        return value

    @model_validator(mode="after")
    def _signing_needs_wacz(self) -> "Settings":
        if self.capture_signing and "wacz" not in self.capture_formats:
            raise ValueError("WAGGLE_CAPTURE_SIGNING requires wacz in WAGGLE_CAPTURE_FORMATS")
        return self

    # -- derived ---------------------------------------------------------------
    @property
    def crawls_enabled(self) -> bool:
        return bool(self.crawl_webhook_url and self.crawl_webhook_token)

    def require(self, *names: str) -> None:
        """Raise :class:`MissingSettings` naming every absent setting among ``names``."""
        where = {
            "fga_store_id": "run `waggle fga deploy` and copy the printed store id",
            "fga_model_id": "run `waggle fga deploy` and copy the printed model id",
        }
        missing = {
            f"WAGGLE_{n.upper()}": where.get(n, "environment or .env")
            for n in names
            if getattr(self, n) in (None, "")
        }
        if missing:
            raise MissingSettings(missing)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (cached; tests build their own ``Settings(...)``)."""
    return Settings()

"""One default per-host delay: the ledger's ``DEFAULT_PER_HOST_DELAY_MS``; every copy agrees with it.

The ledger always sends the crawl's delay to the flow, so the flow's own defaults are only
fallbacks Windmill needs as literals (schema inference, the UI); they must say the same number.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import yaml

from f.waggle import plan_level
from ledger.api.crawls import CrawlRequest
from ledger.crawl.crawls import DEFAULT_PER_HOST_DELAY_MS
from ledger.crawl.dispatch import webhook_body

REPO = Path(__file__).resolve().parents[2]


def _yaml(rel: str) -> dict:
    return yaml.safe_load((REPO / rel).read_text())


def test_every_copy_of_the_default_delay_agrees_with_the_ledgers() -> None:
    copies = {
        "POST /api/crawls model (CrawlRequest.perHostDelayMs)": CrawlRequest.model_fields["perHostDelayMs"].default,
        "f/waggle/plan_level.py main() literal": inspect.signature(plan_level.main).parameters["per_host_delay_ms"].default,
        "f/waggle/plan_level.py DEFAULT_DELAY_MS": plan_level.DEFAULT_DELAY_MS,
        "f/waggle/plan_level.script.yaml": _yaml("f/waggle/plan_level.script.yaml")["schema"]["properties"]["per_host_delay_ms"]["default"],
        "f/waggle/crawl_level.flow/flow.yaml": _yaml("f/waggle/crawl_level.flow/flow.yaml")["schema"]["properties"]["per_host_delay_ms"]["default"],
    }
    wrong = {where: value for where, value in copies.items() if value != DEFAULT_PER_HOST_DELAY_MS}
    assert not wrong, f"default delay differs from ledger.crawl.crawls.DEFAULT_PER_HOST_DELAY_MS={DEFAULT_PER_HOST_DELAY_MS}: {wrong}"


def test_the_client_help_names_the_ledgers_default() -> None:
    from ledger.client import cli

    import typing

    hint = typing.get_type_hints(cli.crawl_command, include_extras=True)["delay_ms"]
    help_text = hint.__metadata__[0].help
    assert f"ledger default {DEFAULT_PER_HOST_DELAY_MS};" in help_text


def test_the_ledger_always_sends_an_explicit_delay() -> None:
    """A crawl made without a delay still sends the default to the flow, never null."""
    body = CrawlRequest.model_validate({"seeds": ["https://example.org/"]})
    assert body.perHostDelayMs == DEFAULT_PER_HOST_DELAY_MS
    crawl = {"id": "00000000-0000-0000-0000-000000000001", "per_host_delay_ms": body.perHostDelayMs,
             "host_parallelism": body.hostParallelism, "max_depth": 1, "scripts": []}

    from ledger.settings import Settings

    settings = Settings(_env_file=None, fga_store_id="s", fga_model_id="m", s3_endpoint="http://127.0.0.1:1",
                        s3_bucket="b", s3_access_key_id="k", s3_secret_access_key="s")
    args = webhook_body(crawl, 0, [], settings)
    assert args["per_host_delay_ms"] == DEFAULT_PER_HOST_DELAY_MS

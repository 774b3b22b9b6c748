"""schemathesis over the ledger's own OpenAPI document: no 500, no response outside the schema.

A real ledger (uvicorn on 127.0.0.1) with real Postgres, the OpenFGA and S3 stand-ins and a fake
Windmill webhook. Every operation of the document (built by ``create_app`` with crawl routes on,
so routes added later are fuzzed too) gets valid and invalid inputs (schemathesis' positive and
negative generation) with dev identity headers of a submitter, and once without identity.
Checks: ``not_a_server_error``, ``response_schema_conformance``, ``content_type_conformance``.
Bounded: :data:`EXAMPLES` examples per operation and mode, derandomized so failures reproduce.
"""

from __future__ import annotations

import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance

from ledger.api.app import create_app
from ledger.settings import Settings
from tests.hostile.conftest import WHO

EXAMPLES = 20
CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]

_SPEC = create_app(
    Settings(
        _env_file=None,
        dev_identity=True,
        crawl_webhook_url="http://127.0.0.1:9/api/w/waggle/jobs/run/f/f/waggle/crawl_level",
        crawl_webhook_token="unused",
    )
).openapi()
SCHEMA = schemathesis.openapi.from_dict(_SPEC)
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]


def _negatable(operation) -> bool:
    """Has an input that can be invalid: a body, or a parameter narrower than "any string"."""
    raw = operation.definition.raw
    if "requestBody" in raw:
        return True
    constraints = {"format", "pattern", "enum", "minLength", "maxLength", "minimum", "maximum"}
    return any(
        (p.get("schema") or {}).get("type", "string") != "string" or constraints & set(p.get("schema") or {})
        for p in raw.get("parameters", [])
    )


CASES = [pytest.param(op, GenerationMode.POSITIVE, id=f"{op.label}-positive") for op in OPERATIONS] + [
    pytest.param(op, GenerationMode.NEGATIVE, id=f"{op.label}-negative") for op in OPERATIONS if _negatable(op)
]


def test_the_document_served_is_the_one_fuzzed(hostile_ledger):
    import httpx

    served = httpx.get(f"{hostile_ledger.url}/openapi.json", timeout=10).json()
    assert set(served["paths"]) == set(_SPEC["paths"])
    assert len(OPERATIONS) >= 8


@pytest.mark.parametrize(("operation", "mode"), CASES)
def test_no_server_error_and_no_schema_violation(operation, mode, hostile_ledger):
    @hypothesis.given(case=operation.as_strategy(generation_mode=mode))
    @hypothesis.settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def run(case):
        case.call_and_validate(base_url=hostile_ledger.url, headers=WHO, checks=CHECKS, timeout=15)

    run()


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda op: op.label)
def test_without_identity_no_server_error(operation, hostile_ledger):
    @hypothesis.given(case=operation.as_strategy())
    @hypothesis.settings(max_examples=5, deadline=None, derandomize=True, database=None,
                         phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    def run(case):
        case.call_and_validate(base_url=hostile_ledger.url, checks=CHECKS, timeout=15)

    run()

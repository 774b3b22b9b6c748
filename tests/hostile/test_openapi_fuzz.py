"""schemathesis over the ledger's own OpenAPI document: no 500, no response outside the schema.

A real ledger (uvicorn on 127.0.0.1) with real Postgres, the OpenFGA and S3 stand-ins and a fake
Windmill webhook. Every operation of the document (built by ``create_app`` with crawl routes on,
so routes added later are fuzzed too) gets valid and invalid inputs (schemathesis' positive and
negative generation) with dev identity headers of a submitter, and once without identity.
Checks: ``not_a_server_error`` (except a degraded dependency, below), ``response_schema_conformance``,
``content_type_conformance``. A 503 the operation documents, whose body says ``status: degraded`` and
names in ``degraded`` the dependencies that did not answer, each ``ok: false`` with its ``error``,
is a dependency the suite's own load slowed (``GET /api/health``: the local S3 gave "no answer
within 3 s" while the whole suite ran, issue 30), not a fault of the ledger; any other 5xx fails.
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


def degraded_dependency(responses: dict, status: int, body: object) -> bool:
    """``status`` is a 503 that ``responses`` (the operation's OpenAPI responses) documents and
    ``body`` names the dependencies that did not answer, each failing with its error."""
    if status != 503 or "503" not in responses or not isinstance(body, dict) or body.get("status") != "degraded":
        return False
    names = body.get("degraded")
    return bool(names) and isinstance(names, list) and all(
        isinstance(body.get(n), dict) and body[n].get("ok") is False and body[n].get("error") for n in names)


@schemathesis.check
def not_a_server_error_but_a_degraded_dependency(ctx, response, case):
    """``not_a_server_error``, except for a documented 503 naming its degraded dependencies."""
    try:
        body = response.json()
    except Exception:  # noqa: BLE001 - not JSON: not the degraded answer
        body = None
    if degraded_dependency(case.operation.definition.raw.get("responses", {}), response.status_code, body):
        return None
    return not_a_server_error(ctx, response, case)


CHECKS = [not_a_server_error_but_a_degraded_dependency, response_schema_conformance, content_type_conformance]

_SPEC = create_app(
    Settings(
        _env_file=None,
        dev_identity=True,
        crawl_webhook_url="http://127.0.0.1:9/api/w/waggle/jobs/run/f/f/waggle/crawl_level",
        crawl_webhook_token="unused",
    )
).openapi()
SCHEMA = schemathesis.openapi.from_dict(_SPEC)
# sorted: a route of several methods (GET and HEAD of a collection member) is a set in FastAPI,
# listed in a per-process order — xdist workers must collect the same tests in the same order
OPERATIONS = sorted((result.ok() for result in SCHEMA.get_all_operations()), key=lambda op: op.label)


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


HEALTH_503 = {"status": "degraded", "degraded": ["s3"], "database": {"ok": True, "latencyMs": 2.0},
              "openfga": {"ok": True, "latencyMs": 3.0},
              "s3": {"ok": False, "latencyMs": 3001.0, "error": "no answer within 3 s"}}


def test_a_degraded_dependency_is_told_from_a_server_error():
    health = _SPEC["paths"]["/api/health"]["get"]["responses"]
    assert degraded_dependency(health, 503, HEALTH_503)
    assert not degraded_dependency(health, 500, HEALTH_503)  # a 500 is always a server error
    assert not degraded_dependency({"200": {}}, 503, HEALTH_503)  # an undocumented 503 too
    assert not degraded_dependency(health, 503, {**HEALTH_503, "degraded": []})  # names nothing
    assert not degraded_dependency(health, 503, {**HEALTH_503, "degraded": ["database"]})  # names one that answered
    assert not degraded_dependency(health, 503, {**HEALTH_503, "s3": {"ok": False, "latencyMs": 1.0}})  # no reason
    assert not degraded_dependency(health, 503, {"detail": "Service Unavailable"})
    assert not degraded_dependency(health, 503, None)


def test_health_documents_its_503_with_the_body_it_sends():
    health = _SPEC["paths"]["/api/health"]["get"]["responses"]
    assert set(health) >= {"200", "503"}
    schema = _SPEC["components"]["schemas"]["HealthAnswer"]
    assert {"status", "degraded", "database", "openfga", "s3"} <= set(schema["required"])


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

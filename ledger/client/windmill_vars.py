"""The five Windmill variables the flow reads (reference/scheduler.md §3, §8.1), and writing them.

Written through Windmill's REST API: ``POST /api/w/{ws}/variables/create`` first (the common
first run), and on any refusal ``POST /api/w/{ws}/variables/update/{path}`` with the same body.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx

TOKEN = "u/admin/waggle_token"
API_URL = "u/admin/waggle_api_url"
ENDPOINTS = "u/admin/browserhive_endpoints"
TLS_CA = "u/admin/browserhive_tls_ca"
TS_COMPILE_URL = "u/admin/ts_compile_url"
VARIABLES = (TOKEN, API_URL, ENDPOINTS, TLS_CA, TS_COMPILE_URL)
SECRET = {TOKEN}
DESCRIPTION = "set by waggle scripts/windmill-variables"

# Defaults for the compose.yaml stack: service names as the Windmill workers resolve them.
DEFAULT_API_URL = "http://ledger:7070"
DEFAULT_ENDPOINTS = ("http://capture-1:50051", "http://capture-2:50051")  # profile browserhive: browserhive-1, -2
DEFAULT_TS_COMPILE_URL = "http://ts-compile:8080"


class VariableError(ValueError):
    """A value the flow could not use; ``str()`` names the variable and what to change."""


def _http_url(name: str, value: str) -> str:
    value = value.strip()
    if not (value.startswith("http://") or value.startswith("https://")) or len(value) < 10:
        raise VariableError(f"{name} must be an http:// or https:// URL, got {value!r}")
    return value.rstrip("/")


def build_values(flow_token: str, api_url: str, endpoints: list[str], tls_ca: str, ts_compile_url: str) -> dict[str, str]:
    """The five values, validated: non-empty token, http(s) URLs, ≥ 1 endpoint.

    ``endpoints`` become a JSON array string (what ``crawl_host`` parses); ``tls_ca`` is a PEM or
    ``""`` (= plaintext; written even when empty so "unreadable" never means "no TLS").
    Raises VariableError naming the first bad value.
    """
    if not flow_token.strip():
        raise VariableError(f"{TOKEN} would be empty: give the flow's JWT (--flow-token) or an issuer to mint one")
    urls = [_http_url(ENDPOINTS, e) for e in endpoints if e.strip()]
    if not urls:
        raise VariableError(f"{ENDPOINTS} needs at least one BrowserHive endpoint (http://host:port)")
    if tls_ca.strip() and "BEGIN CERTIFICATE" not in tls_ca:
        raise VariableError(f"{TLS_CA} must be a PEM certificate (-----BEGIN CERTIFICATE-----) or empty")
    return {
        TOKEN: flow_token.strip(),
        API_URL: _http_url(API_URL, api_url),
        ENDPOINTS: json.dumps(urls),
        TLS_CA: tls_ca,
        TS_COMPILE_URL: _http_url(TS_COMPILE_URL, ts_compile_url),
    }


@dataclass(frozen=True)
class Written:
    path: str
    action: str  # "created" | "updated"


class WindmillError(RuntimeError):
    """Windmill refused or did not answer; ``str()`` says which call and what to do."""


def upsert_variable(http: httpx.Client, workspace: str, path: str, value: str, is_secret: bool) -> Written:
    """Create the variable, or update it when create is refused. Raises WindmillError when both fail."""
    body = {"path": path, "value": value, "is_secret": is_secret, "description": DESCRIPTION}
    base = f"/api/w/{workspace}/variables"
    try:
        created = http.post(f"{base}/create", json=body)
        if created.status_code // 100 == 2:
            return Written(path, "created")
        if created.status_code == 401:
            raise WindmillError("Windmill does not accept WINDMILL_TOKEN (401): create a token in Windmill (account settings → tokens)")
        updated = http.post(f"{base}/update/{path}", json=body)
    except httpx.HTTPError as exc:
        raise WindmillError(f"Windmill at {http.base_url} does not answer ({exc.__class__.__name__}): start it, or set WINDMILL_URL") from exc
    if updated.status_code // 100 == 2:
        return Written(path, "updated")
    raise WindmillError(
        f"Windmill refused {path}: create → {created.status_code} {created.text[:200]!r}; "
        f"update → {updated.status_code} {updated.text[:200]!r} (is workspace {workspace!r} there, and may this token write u/admin/*?)"
    )


def write_variables(windmill_url: str, token: str, workspace: str, values: dict[str, str], timeout_s: float = 10.0) -> list[Written]:
    """Upsert every value in ``values`` (path → value) into the workspace; secrets per :data:`SECRET`."""
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=windmill_url.rstrip("/"), headers=headers, timeout=timeout_s) as http:
        return [upsert_variable(http, workspace, path, value, path in SECRET) for path, value in values.items()]

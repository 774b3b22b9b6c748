"""The ledger's OpenFGA client: submit/view Checks and tuple writes (openfga-sdk, async).

Calls (reference/ledger.md §4.2):
* :meth:`Authz.can_submit` — per organization ``user:<sub> can_submit organization:<org>``,
  ``HIGHER_CONSISTENCY``, **no** contextual tuples (membership must never satisfy it).
* :meth:`Authz.can_view` — ``user:<sub> can_view archive:<id>`` with one contextual
  ``member`` tuple per organization of the caller and context ``current_time``.
* :meth:`Authz.viewable` — up to 50 ids one BatchCheck of the same, more one ListObjects ∩ the
  ids (decision 142); BatchCheck results matched by correlation ids back to each
  request's object, never by position.
* :meth:`Authz.list_viewable` — one ListObjects of the same: every archive the caller may view.
* :meth:`Authz.write` — one Write; errors surface as ``openfga_sdk`` ``ApiException`` or an
  aiohttp connection error, classified by :func:`is_already_in_desired_state` and
  :func:`is_unreachable`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Awaitable, Iterable, Sequence
from datetime import datetime, timezone
from typing import Any, Protocol

import aiohttp
from aiohttp.helpers import basicauth_from_netrc, get_env_proxy_for_url, netrc_from_env
from openfga_sdk import ApiClient, OpenFgaApi, OpenFgaClient
from openfga_sdk.client.configuration import ClientConfiguration
from openfga_sdk.client.models import (
    ClientCheckRequest,
    ClientListObjectsRequest,
    ClientTuple,
)
from openfga_sdk.credentials import CredentialConfiguration, Credentials
from openfga_sdk.exceptions import ApiException
from openfga_sdk.models.batch_check_item import BatchCheckItem
from openfga_sdk.models.batch_check_request import BatchCheckRequest
from openfga_sdk.models.check_request import CheckRequest
from openfga_sdk.models.check_request_tuple_key import CheckRequestTupleKey
from openfga_sdk.models.contextual_tuple_keys import ContextualTupleKeys
from openfga_sdk.models.list_objects_request import ListObjectsRequest
from openfga_sdk.models.tuple_key import TupleKey
from openfga_sdk.models.write_request import WriteRequest
from openfga_sdk.models.write_request_deletes import WriteRequestDeletes
from openfga_sdk.models.write_request_writes import WriteRequestWrites
from yarl import URL
from openfga_sdk.models.relationship_condition import RelationshipCondition

log = logging.getLogger("waggle.authz")

HIGHER = {"consistency": "HIGHER_CONSISTENCY"}
# BatchCheck requests (50 Checks each) in flight at once: the SDK's default of 10 put 500 Checks
# on the server together and most timed out under load (decision 142)
BATCH_IN_FLIGHT = 2
# viewable(): up to this many ids one BatchCheck request, more through ListObjects (decision 142)
BATCH_MAX = 50
# ListObjects' deadline on the server (devstack.openfga_server.LIST_OBJECTS_SETTINGS, compose):
# an answer that took less, seen from here, was not cut off by it
LIST_OBJECTS_DEADLINE_S = 3.0
ALREADY_CODE = "write_failed_due_to_invalid_input"


class IdentityLike(Protocol):
    subject: str
    organizations: Sequence[str]


class FgaUnavailable(RuntimeError):
    """OpenFGA did not answer (connection refused, DNS failure, timeout)."""


def now_iso() -> str:
    """Current time, ISO 8601 UTC with milliseconds and ``Z`` (the condition's ``current_time``)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def is_already_in_desired_state(exc: BaseException | None) -> bool:
    """True for OpenFGA's "already exists" / "does not exist" write refusals (code
    ``write_failed_due_to_invalid_input``); a ``validation_error`` is a real failure."""
    if not isinstance(exc, ApiException):
        return False
    msg = exc.error_message or ""
    return exc.code == ALREADY_CODE and ("already exists" in msg or "does not exist" in msg)


def is_unreachable(exc: BaseException | None) -> bool:
    """True when the error means OpenFGA could not be reached at all (no HTTP answer)."""
    if isinstance(exc, FgaUnavailable):
        return True
    if isinstance(exc, (aiohttp.ClientConnectionError, asyncio.TimeoutError, ConnectionError)):
        return True
    if isinstance(exc, ApiException) and exc.status in (0, None):
        return True
    return False


def explain_unreachable(api_url: str, exc: BaseException) -> str:
    """One line for operators: where we looked, what to do, and the original error."""
    return (
        f"OpenFGA at {api_url} is not reachable — start it (`waggle dev up`) or set"
        f" WAGGLE_FGA_API_URL ({type(exc).__name__}: {exc})"
    )


def _tuple(t: dict) -> ClientTuple:
    cond = t.get("condition")
    return ClientTuple(
        user=t["user"],
        relation=t["relation"],
        object=t["object"],
        condition=RelationshipCondition(name=cond["name"], context=cond.get("context") or {}) if cond else None,
    )


def env_applies(api_url: str) -> bool:
    """True when a proxy variable (``HTTP(S)_PROXY``/``NO_PROXY``) or a ``~/.netrc`` entry
    applies to ``api_url`` — what aiohttp's ``trust_env`` would look up on each request."""
    url = URL(api_url)
    with contextlib.suppress(LookupError):
        get_env_proxy_for_url(url)
        return True
    try:
        basicauth_from_netrc(netrc_from_env(), url.host or "")
        return True
    except LookupError:
        return False


async def skip_env_lookups(api_client: ApiClient, api_url: str) -> bool:
    """openfga-sdk opens its aiohttp session with ``trust_env=True``, so every request reads
    ``~/.netrc`` and the proxy variables in a worker thread (two thread hops per Check). When
    neither applies to ``api_url`` (decided once, here) the session is replaced by an
    equivalent one (same pool size and TLS settings) that does not look; else it is kept.
    Returns True when replaced."""
    if env_applies(api_url):
        return False
    conf, rest = api_client.configuration, api_client.rest_client
    tls = ssl.create_default_context(cafile=conf.ssl_ca_cert)
    if conf.cert_file:
        tls.load_cert_chain(conf.cert_file, keyfile=conf.key_file)
    if not conf.verify_ssl:
        tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE
    old = rest.pool_manager
    rest.pool_manager = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=conf.connection_pool_maxsize, ssl=tls), trust_env=False)
    await old.close()  # never used
    return True


class Authz:
    """Pinned store + model on one OpenFGA server. ``api_token`` is sent as Bearer if set."""

    def __init__(self, api_url: str, store_id: str, model_id: str, api_token: str | None = None, *, timeout_s: float = 10.0):
        self.api_url, self.store_id, self.model_id = api_url.rstrip("/"), store_id, model_id
        self._token, self._timeout_ms = api_token, int(timeout_s * 1000)
        self._client: OpenFgaClient | None = None
        self._api: OpenFgaApi | None = None  # the SDK's generated API, for the hot Check path
        self._conf: ClientConfiguration | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def from_settings(cls, settings: Any) -> "Authz":
        settings.require("fga_store_id", "fga_model_id")
        return cls(settings.fga_api_url, settings.fga_store_id, settings.fga_model_id, settings.fga_api_token)

    def _sdk(self) -> OpenFgaClient:
        # aiohttp sessions belong to one event loop; CLIs and tests may run several loops.
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            creds = (
                Credentials(method="api_token", configuration=CredentialConfiguration(api_token=self._token))
                if self._token
                else None
            )
            conf = ClientConfiguration(
                api_url=self.api_url,
                store_id=self.store_id,
                authorization_model_id=self.model_id,
                credentials=creds,
                timeout_millisec=self._timeout_ms,
            )
            self._client, self._loop = OpenFgaClient(conf), loop
            self._api, self._conf = None, conf
        return self._client

    async def _check_api(self) -> tuple[OpenFgaApi, ClientConfiguration]:
        """The SDK's generated API on its own session (built once per loop), for Checks."""
        self._sdk()
        assert self._conf is not None
        if self._api is None:
            # set before the first await: callers running at once (search asks its scope with two
            # calls together) share this client; each built its own before, and one leaked
            api_client = ApiClient(self._conf)
            self._api = OpenFgaApi(api_client)
            await skip_env_lookups(api_client, self.api_url)  # swaps the session before its own await
        return self._api, self._conf

    async def close(self) -> None:
        for closable in (self._client, self._api):
            if closable is not None:
                try:
                    await closable.close()
                except RuntimeError:
                    pass  # its loop is gone
        self._client = self._api = None

    async def _call(self, coro_fn, *args, **kwargs):
        try:
            return await coro_fn(*args, **kwargs)
        except (aiohttp.ClientConnectionError, asyncio.TimeoutError, ConnectionError) as exc:
            raise FgaUnavailable(explain_unreachable(self.api_url, exc)) from exc

    # -- checks ----------------------------------------------------------------------------
    async def can_submit(self, identity: IdentityLike) -> bool:
        """May this caller start crawls? Any of its organizations granting ``can_submit``.

        No organizations → False without calling OpenFGA. Raises :class:`FgaUnavailable` or
        ``ApiException`` when no organization allows and some Check failed.
        """
        orgs = list(dict.fromkeys(o for o in identity.organizations if o))
        if not orgs or not identity.subject:
            return False
        sdk = self._sdk()

        async def one(org: str) -> bool:
            req = ClientCheckRequest(user=f"user:{identity.subject}", relation="can_submit", object=f"organization:{org}")
            res = await self._call(sdk.check, req, dict(HIGHER))
            return res.allowed is True

        results = await asyncio.gather(*(one(o) for o in orgs), return_exceptions=True)
        if any(r is True for r in results):
            return True
        for r in results:
            if isinstance(r, BaseException):
                raise r
        return False

    @staticmethod
    def _member_orgs(identity: IdentityLike) -> list[str]:
        """The caller's organizations sent as contextual ``member`` tuples: non-empty, first
        occurrence kept, in order."""
        return list(dict.fromkeys(o for o in identity.organizations if o))

    def _members(self, identity: IdentityLike) -> list[ClientTuple]:
        return [ClientTuple(user=f"user:{identity.subject}", relation="member", object=f"organization:{o}")
                for o in self._member_orgs(identity)]

    async def can_view(self, identity: IdentityLike, archive_id: str) -> bool:
        """May this caller read ``archive:<archive_id>``? True only on an explicit allow."""
        if not identity.subject:
            return False
        # The same request OpenFgaClient.check sends, built on the SDK's generated API with one
        # shared configuration: each model built without one constructs a fresh Configuration
        # (telemetry set-up, logger levels), which was most of the ledger's CPU per Check.
        api, conf = await self._check_api()
        user = f"user:{identity.subject}"
        members = [TupleKey(user=user, relation="member", object=f"organization:{o}", local_vars_configuration=conf)
                   for o in self._member_orgs(identity)]
        req = CheckRequest(
            tuple_key=TupleKey(user=user, relation="can_view", object=f"archive:{archive_id}",
                               local_vars_configuration=conf),
            contextual_tuples=ContextualTupleKeys(tuple_keys=members, local_vars_configuration=conf) if members else None,
            context={"current_time": now_iso()},
            authorization_model_id=self.model_id,
            consistency=HIGHER["consistency"],
            local_vars_configuration=conf,
        )
        res = await self._call(api.check, body=req)
        return res.allowed is True

    async def viewable(self, identity: IdentityLike, archive_ids: Iterable[str],
                       listed: Awaitable[tuple[set[str], float]] | None = None) -> set[str]:
        """The subset of ``archive_ids`` (bare ids) the caller may view (decision 142).

        Up to :data:`BATCH_MAX` ids (a page of the archives list): one BatchCheck request, whose
        cost does not depend on what else the caller can see. More: one ListObjects
        (:meth:`list_viewable`) ∩ the ids — measured 90–130× faster than BatchCheck at 1,000 and
        10,000 ids; when it ran into the server's deadline (:data:`LIST_OBJECTS_DEADLINE_S`) its
        answer may be partial, so the ids it did not list are asked by BatchCheck.

        BatchCheck: 50 Checks a request, :data:`BATCH_IN_FLIGHT` requests at a time; items the
        server answered with an error (e.g. ``deadline_exceeded`` when overloaded) are asked once
        more, and an item still in error counts as not viewable (logged). Empty input → empty set
        without calling OpenFGA. Raises :class:`FgaUnavailable` when OpenFGA does not answer.

        ``listed``: that ListObjects already asked (:meth:`timed_list_viewable`, started while the
        caller read its ids), used instead of asking again when there are more than BATCH_MAX ids.
        """
        ids = list(dict.fromkeys(archive_ids))
        if not ids or not identity.subject:
            return set()
        allowed: set[str] = set()
        if len(ids) > BATCH_MAX:
            listing, took = await (listed if listed is not None else self.timed_list_viewable(identity))
            allowed = listing & set(ids)
            if took < LIST_OBJECTS_DEADLINE_S:
                return allowed  # the server's own time was shorter: not cut off by its deadline
            log.info("ListObjects reached its deadline; BatchCheck for the rest", extra={"listed": len(allowed)})
            ids = [i for i in ids if i not in allowed]
        failed = await self._batch_check(identity, ids, allowed)
        if failed:
            log.info("BatchCheck items failed, asking once more", extra={"count": len(failed)})
            for obj, error in (await self._batch_check(identity, list(failed), allowed)).items():
                log.warning("BatchCheck item failed", extra={"object": obj, "error": error})
        return allowed

    async def _batch_check(self, identity: IdentityLike, ids: list[str], allowed: set[str]) -> dict[str, str]:
        """One BatchCheck round of ``can_view`` over archive ``ids``: allowed ids are added to
        ``allowed``; returns the ids the server answered with an error → that error."""
        got, failed = await self._batch_allowed(identity, "can_view", [f"archive:{i}" for i in ids],
                                                {"current_time": now_iso()})
        allowed.update(o.removeprefix("archive:") for o in got)
        return {o.removeprefix("archive:"): e for o, e in failed.items()}

    def _member_keys(self, identity: IdentityLike, conf: ClientConfiguration) -> list[TupleKey]:
        user = f"user:{identity.subject}"
        return [TupleKey(user=user, relation="member", object=f"organization:{o}", local_vars_configuration=conf)
                for o in self._member_orgs(identity)]

    async def _batch_allowed(self, identity: IdentityLike, relation: str, objects: list[str],
                             context: dict | None) -> tuple[set[str], dict[str, str]]:
        """BatchCheck ``user:<sub> relation object`` for each of ``objects`` (``type:id``) with
        the caller's contextual ``member`` tuples: :data:`BATCH_MAX` a request,
        :data:`BATCH_IN_FLIGHT` requests at a time. Built on the SDK's generated API with one
        shared configuration, like :meth:`can_view`: ``OpenFgaClient.batch_check`` builds every
        model with a fresh Configuration (each Check × each contextual tuple), which was most
        of the ledger's CPU per search (decision 381). Results are matched by correlation id
        (the object's position in its request), never by the order of the answer.
        Returns (objects allowed, object → error for items the server answered with an error)."""
        api, conf = await self._check_api()
        user = f"user:{identity.subject}"
        members = self._member_keys(identity, conf)
        contextual = ContextualTupleKeys(tuple_keys=members, local_vars_configuration=conf) if members else None
        gate = asyncio.Semaphore(BATCH_IN_FLIGHT)
        allowed: set[str] = set()
        failed: dict[str, str] = {}

        async def one(part: list[str]) -> None:
            checks = [BatchCheckItem(tuple_key=CheckRequestTupleKey(user=user, relation=relation, object=o,
                                                                    local_vars_configuration=conf),
                                     contextual_tuples=contextual, context=context, correlation_id=str(k),
                                     local_vars_configuration=conf)
                      for k, o in enumerate(part)]
            body = BatchCheckRequest(checks=checks, authorization_model_id=self.model_id, local_vars_configuration=conf)
            async with gate:
                res = await self._call(api.batch_check, body=body)
            for cid, item in (res.result or {}).items():
                obj = part[int(cid)]
                if item.error:
                    failed[obj] = str(item.error)
                elif item.allowed is True:
                    allowed.add(obj)

        await asyncio.gather(*(one(objects[k: k + BATCH_MAX]) for k in range(0, len(objects), BATCH_MAX)))
        return allowed, failed

    async def timed_list_viewable(self, identity: IdentityLike) -> tuple[set[str], float]:
        """:meth:`list_viewable` of archives and the seconds it took (what :meth:`viewable` compares
        with the server's deadline)."""
        t0 = time.monotonic()
        got = await self.list_viewable(identity)
        return got, time.monotonic() - t0

    async def list_viewable(self, identity: IdentityLike, type: str = "archive") -> set[str]:
        """Every ``type`` object the caller may view (bare ids): one ListObjects ``user:<sub>
        can_view <type>`` with the same contextual ``member`` tuples and ``current_time`` as
        :meth:`can_view`. Its cost grows with what the caller can see in the whole store, not
        with a list of ids (decision 141). The server runs with ListObjects' result cap lifted
        and a 10 s deadline (``devstack.openfga_server.LIST_OBJECTS_SETTINGS``); a server that
        caps it would answer a silent subset. Raises like :meth:`can_view`."""
        if not identity.subject:
            return set()
        req = ClientListObjectsRequest(user=f"user:{identity.subject}", relation="can_view", type=type,
                                       contextual_tuples=self._members(identity) or None,
                                       context={"current_time": now_iso()})
        res = await self._call(self._sdk().list_objects, req, dict(HIGHER))
        prefix = f"{type}:"
        return {o.removeprefix(prefix) for o in res.objects or [] if o.startswith(prefix)}

    # -- search's candidate set (decision 311) ----------------------------------------------
    async def member_organizations(self, identity: IdentityLike) -> list[str]:
        """The caller's organizations (from the token) that OpenFGA confirms ``member`` of, with
        the same contextual tuples as every other decision: one BatchCheck; order kept. No
        subject or organizations → [] without calling OpenFGA. Raises :class:`FgaUnavailable`."""
        orgs = self._member_orgs(identity)
        if not orgs or not identity.subject:
            return []
        allowed, _ = await self._batch_allowed(identity, "member", [f"organization:{o}" for o in orgs], None)
        return [o for o in orgs if f"organization:{o}" in allowed]

    async def shared_with(self, identity: IdentityLike) -> set[str]:
        """Archives the caller may view *other than* as a member of their organizations: direct
        time-boxed grants and shares to their organizations' members (ListObjects ``viewer``,
        contextual ``member`` tuples and ``current_time``), and archives of capture jobs they own
        (ListObjects ``can_view`` without membership tuples — membership is never stored, so
        this lists grants and owned jobs only). Both sets are small for most callers (a
        submitter's owned jobs grow with what they crawled: decision 311's limits)."""
        if not identity.subject:
            return set()
        api, conf = await self._check_api()
        user, now = f"user:{identity.subject}", {"current_time": now_iso()}
        members = self._member_keys(identity, conf)

        def request(relation: str, contextual: list[TupleKey] | None) -> ListObjectsRequest:
            return ListObjectsRequest(
                authorization_model_id=self.model_id, type="archive", relation=relation, user=user,
                contextual_tuples=ContextualTupleKeys(tuple_keys=contextual, local_vars_configuration=conf)
                if contextual else None,
                context=now, consistency=HIGHER["consistency"], local_vars_configuration=conf)

        got = await asyncio.gather(self._call(api.list_objects, body=request("viewer", members)),
                                   self._call(api.list_objects, body=request("can_view", None)))
        return {o.removeprefix("archive:") for res in got for o in res.objects or [] if o.startswith("archive:")}

    async def checked_viewable(self, identity: IdentityLike, archive_ids: Iterable[str]) -> set[str]:
        """Like :meth:`viewable` but always by BatchCheck (never ListObjects): for a few ids
        taken from a candidate list, whose cost must not grow with what the caller can see."""
        ids = list(dict.fromkeys(archive_ids))
        if not ids or not identity.subject:
            return set()
        allowed: set[str] = set()
        failed = await self._batch_check(identity, ids, allowed)
        if failed:
            for obj, error in (await self._batch_check(identity, list(failed), allowed)).items():
                log.warning("BatchCheck item failed", extra={"object": obj, "error": error})
        return allowed

    async def check(self, user: str, relation: str, obj: str, *, contextual: list[dict] | None = None,
                    context: dict | None = None) -> bool:
        """A plain Check (``HIGHER_CONSISTENCY``), for CLIs and tests."""
        req = ClientCheckRequest(user=user, relation=relation, object=obj,
                                 contextual_tuples=[_tuple(t) for t in contextual] if contextual else None,
                                 context=context)
        res = await self._call(self._sdk().check, req, dict(HIGHER))
        return res.allowed is True

    # -- writes ----------------------------------------------------------------------------
    async def write(self, writes: list[dict] | None = None, deletes: list[dict] | None = None) -> None:
        """One OpenFGA Write (atomic). Tuples are ``{"user","relation","object"[,"condition"]}``.

        Raises ``ApiException`` when refused (see :func:`is_already_in_desired_state`) and
        :class:`FgaUnavailable` when OpenFGA does not answer.
        """
        # The request OpenFgaClient.write sends (one transactional Write), built with one shared
        # configuration: the client builds a Configuration() per tuple (~0.3 ms each).
        api, conf = await self._check_api()

        def key(t: dict) -> TupleKey:
            cond = t.get("condition")
            return TupleKey(
                user=t["user"], relation=t["relation"], object=t["object"],
                condition=RelationshipCondition(name=cond["name"], context=cond.get("context") or {},
                                                local_vars_configuration=conf) if cond else None,
                local_vars_configuration=conf,
            )

        body = WriteRequest(
            writes=WriteRequestWrites(tuple_keys=[key(t) for t in writes], local_vars_configuration=conf) if writes else None,
            deletes=WriteRequestDeletes(tuple_keys=[key(t) for t in deletes], local_vars_configuration=conf) if deletes else None,
            authorization_model_id=self.model_id,
            local_vars_configuration=conf,
        )
        await self._call(api.write, body)

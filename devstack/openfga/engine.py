"""Check evaluation over an OpenFGA authorization model in its JSON form.

The JSON form is what ``fga model transform`` prints and what ``POST
/stores/{id}/authorization-models`` receives: ``type_definitions`` with relation rewrites
(``this``, ``computedUserset``, ``tupleToUserset``, ``union``, ``intersection``,
``difference``), ``metadata.relations[*].directly_related_user_types`` and ``conditions``
(CEL expressions, evaluated with cel-python).

Semantics follow OpenFGA's Check:
* a stored or contextual tuple counts only if its user type is allowed by the relation's type
  restrictions (with the same condition);
* a conditioned tuple counts when its condition is true for the merged context (values stored
  on the tuple win over the request's ``context``); missing parameters raise
  :class:`CheckError` (``validation_error``) unless another path already allows;
* union = any allowed (errors lose to an allowed branch), intersection = all, difference =
  base and not subtract; cycles resolve to not allowed; depth is capped at 25.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import celpy
from celpy import celtypes

MAX_DEPTH = 25
_OBJ_RE = re.compile(r"^[^:#@\s]{1,254}:[^#@\s]{1,256}$")
_USER_RE = re.compile(r"^[^:#@\s]{1,254}:[^#:@\s]{1,256}(#[^:#@\s]{1,50})?$")


class ApiError(Exception):
    """An error the HTTP layer answers as ``{"code", "message"}`` with ``status``."""

    def __init__(self, code: str, message: str, status: int = 400):
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


class CheckError(ApiError):
    """A Check that cannot be answered (e.g. a condition lacks parameters)."""


def tuple_string(t: dict) -> str:
    """OpenFGA's tuple notation ``object#relation@user``."""
    return f"{t['object']}#{t['relation']}@{t['user']}"


@dataclass
class Restriction:
    type: str
    relation: str | None = None
    wildcard: bool = False
    condition: str = ""


@dataclass
class Model:
    """A parsed authorization model (schema 1.1)."""

    raw: dict
    relations: dict[str, dict[str, dict]] = field(default_factory=dict)  # type -> rel -> rewrite
    restrictions: dict[tuple[str, str], list[Restriction]] = field(default_factory=dict)
    conditions: dict[str, dict] = field(default_factory=dict)
    _programs: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: dict) -> "Model":
        """Raise :class:`ApiError` (``invalid_authorization_model``) on a malformed model."""
        if raw.get("schema_version") not in ("1.1", "1.2"):
            raise ApiError("invalid_authorization_model", "invalid schema version")
        tds = raw.get("type_definitions")
        if not isinstance(tds, list) or not tds:
            raise ApiError("type_definitions_too_few_items", "type_definitions must contain at least 1 item")
        model = cls(raw=raw)
        for td in tds:
            name = td.get("type")
            if not isinstance(name, str) or not name:
                raise ApiError("invalid_authorization_model", "a type definition has no type")
            if name in model.relations:
                raise ApiError("invalid_authorization_model", f"the type `{name}` is defined more than once")
            model.relations[name] = dict(td.get("relations") or {})
            meta = ((td.get("metadata") or {}).get("relations")) or {}
            for rel in model.relations[name]:
                items = (meta.get(rel) or {}).get("directly_related_user_types") or []
                model.restrictions[(name, rel)] = [
                    Restriction(
                        type=i.get("type", ""),
                        relation=i.get("relation") or None,
                        wildcard="wildcard" in i,
                        condition=i.get("condition") or "",
                    )
                    for i in items
                ]
        for cname, cond in (raw.get("conditions") or {}).items():
            try:
                model._programs[cname] = _program(cond["expression"])
            except Exception as exc:  # noqa: BLE001 - report any compile failure as a model error
                raise ApiError("invalid_authorization_model", f"condition {cname} is invalid: {exc}") from exc
            model.conditions[cname] = cond
        # references must resolve
        for tname, rels in model.relations.items():
            for rel, rewrite in rels.items():
                model._validate_rewrite(tname, rel, rewrite)
        return model

    def _validate_rewrite(self, tname: str, rel: str, rw: dict) -> None:
        if "computedUserset" in rw:
            target = rw["computedUserset"].get("relation")
            if target not in self.relations[tname]:
                raise ApiError("invalid_authorization_model", f"the relation `{target}` does not exist in type `{tname}`")
        elif "tupleToUserset" in rw:
            ts = rw["tupleToUserset"]["tupleset"].get("relation")
            if ts not in self.relations[tname]:
                raise ApiError("invalid_authorization_model", f"the relation `{ts}` does not exist in type `{tname}`")
        for key in ("union", "intersection"):
            if key in rw:
                for child in rw[key].get("child", []):
                    self._validate_rewrite(tname, rel, child)
        if "difference" in rw:
            self._validate_rewrite(tname, rel, rw["difference"]["base"])
            self._validate_rewrite(tname, rel, rw["difference"]["subtract"])

    # -- tuple validation ------------------------------------------------------------------
    def validate_tuple(self, t: dict, *, for_write: bool = True) -> None:
        """Raise :class:`ApiError` when ``t`` cannot be stored under this model."""
        user, rel, obj = t.get("user", ""), t.get("relation", ""), t.get("object", "")
        ts = tuple_string({"user": user, "relation": rel, "object": obj})
        if not _OBJ_RE.match(obj or "") or obj.endswith(":*"):
            raise ApiError("invalid_tuple", f"Invalid tuple '{ts}'. Reason: invalid 'object' field format")
        if not _USER_RE.match(user or "") and not re.match(r"^[^:#@\s]+:\*$", user or ""):
            raise ApiError("invalid_tuple", f"Invalid tuple '{ts}'. Reason: invalid 'user' field format")
        otype = obj.split(":", 1)[0]
        if otype not in self.relations:
            raise ApiError("type_not_found", f"type '{otype}' not found")
        if rel not in self.relations[otype]:
            raise ApiError("relation_not_found", f"relation '{otype}#{rel}' not found for tuple '{ts}'")
        utype = user.split(":", 1)[0]
        urel = user.split("#", 1)[1] if "#" in user else None
        wildcard = user.endswith(":*")
        cond = (t.get("condition") or {}).get("name") or ""
        allowed = self.restrictions.get((otype, rel)) or []
        for r in allowed:
            if r.type == utype and (r.relation or None) == urel and r.wildcard == wildcard:
                if r.condition == cond:
                    break
        else:
            if any(r.type == utype and (r.relation or None) == urel and r.wildcard == wildcard for r in allowed):
                reason = (
                    f"condition {cond} is undefined for relation {rel}" if cond and cond not in self.conditions
                    else "invalid condition for type restriction"
                )
            else:
                label = f"{utype}#{urel}" if urel else (f"{utype}:*" if wildcard else utype)
                reason = f"type '{label}' is not an allowed type restriction for '{otype}#{rel}'"
            raise ApiError("validation_error", f"Invalid tuple '{ts}'. Reason: {reason}")
        if cond:
            params = self.conditions[cond].get("parameters") or {}
            for k in ((t.get("condition") or {}).get("context") or {}):
                if k not in params:
                    raise ApiError(
                        "validation_error",
                        f"Invalid tuple '{ts}'. Reason: found invalid context parameter: {k}",
                    )

    # -- condition evaluation --------------------------------------------------------------
    def eval_condition(self, t: dict, request_context: dict) -> bool:
        cond = t.get("condition") or None
        if not cond or not cond.get("name"):
            return True
        name = cond["name"]
        spec = self.conditions.get(name)
        if spec is None:
            raise CheckError("validation_error", f"condition '{name}' not found")
        ctx = dict(request_context or {})
        ctx.update(cond.get("context") or {})  # the tuple's own values win
        params = spec.get("parameters") or {}
        missing = sorted(p for p in params if p not in ctx)
        if missing:
            raise CheckError(
                "validation_error",
                f"failed to evaluate relationship condition: '{name}' - tuple '{tuple_string(t)}'"
                f" is missing context parameters '[{' '.join(missing)}]'",
            )
        activation = {}
        for p, ptype in params.items():
            try:
                activation[p] = _to_cel(ctx[p], ptype.get("type_name", ""))
            except Exception as exc:  # noqa: BLE001
                raise CheckError(
                    "validation_error",
                    f"failed to evaluate relationship condition: '{name}' - failed to convert context"
                    f" parameter '{p}': {exc}",
                ) from exc
        try:
            result = self._programs[name].evaluate(activation)
        except Exception as exc:  # noqa: BLE001
            raise CheckError("validation_error", f"failed to evaluate relationship condition: '{name}' - {exc}") from exc
        if isinstance(result, Exception):
            raise CheckError("validation_error", f"failed to evaluate relationship condition: '{name}' - {result}")
        return bool(result)


_CEL_ENV: celpy.Environment | None = None


@lru_cache(maxsize=256)
def _program(expression: str) -> Any:
    """Compiled CEL program (building cel-python's parser is slow: one environment, cached programs)."""
    global _CEL_ENV
    if _CEL_ENV is None:
        _CEL_ENV = celpy.Environment()
    return _CEL_ENV.program(_CEL_ENV.compile(expression))


def _to_cel(value: Any, type_name: str) -> Any:
    if type_name == "TYPE_NAME_TIMESTAMP":
        if not isinstance(value, str):
            raise ValueError("timestamp must be an RFC 3339 string")
        return celtypes.TimestampType(value)
    if type_name == "TYPE_NAME_DURATION":
        if not isinstance(value, str):
            raise ValueError("duration must be a string like '1h'")
        return celtypes.DurationType(value)
    if type_name == "TYPE_NAME_STRING":
        if not isinstance(value, str):
            raise ValueError("expected a string")
        return celtypes.StringType(value)
    if type_name == "TYPE_NAME_BOOL":
        if not isinstance(value, bool):
            raise ValueError("expected a bool")
        return celtypes.BoolType(value)
    if type_name == "TYPE_NAME_INT":
        return celtypes.IntType(int(value))
    if type_name == "TYPE_NAME_UINT":
        return celtypes.UintType(int(value))
    if type_name == "TYPE_NAME_DOUBLE":
        return celtypes.DoubleType(float(value))
    return celpy.json_to_cel(value)


class TupleIndex:
    """Tuples indexed by ``(object, relation)``; keys are ``(object, relation, user)``."""

    def __init__(self, tuples: dict[tuple[str, str, str], dict] | None = None):
        self.by_key: dict[tuple[str, str, str], dict] = {}
        self.by_obj_rel: dict[tuple[str, str], list[dict]] = {}
        for t in (tuples or {}).values():
            self.add(t)

    def add(self, t: dict) -> None:
        key = (t["object"], t["relation"], t["user"])
        if key in self.by_key:
            return
        self.by_key[key] = t
        self.by_obj_rel.setdefault((t["object"], t["relation"]), []).append(t)

    def remove(self, key: tuple[str, str, str]) -> None:
        """Drop the tuple stored under ``(object, relation, user)``; absent keys are ignored."""
        t = self.by_key.pop(key, None)
        if t is None:
            return
        bucket = self.by_obj_rel.get(key[:2])
        if bucket is not None:
            bucket[:] = [x for x in bucket if x is not t]
            if not bucket:
                del self.by_obj_rel[key[:2]]

    def find(self, obj: str, rel: str) -> list[dict]:
        return self.by_obj_rel.get((obj, rel), [])


class Evaluator:
    """One Check request: model + stored tuples + contextual tuples + context."""

    def __init__(self, model: Model, stored: TupleIndex, contextual: list[dict], context: dict | None):
        self.model = model
        self.stored = stored
        self.contextual = TupleIndex()
        for t in contextual:
            self.contextual.add(t)
        self.context = context or {}

    def _tuples(self, obj: str, rel: str) -> list[dict]:
        out = list(self.contextual.find(obj, rel))
        seen = {(t["object"], t["relation"], t["user"]) for t in out}
        out.extend(t for t in self.stored.find(obj, rel) if (t["object"], t["relation"], t["user"]) not in seen)
        return out

    def _valid(self, t: dict) -> bool:
        try:
            self.model.validate_tuple(t)
            return True
        except ApiError:
            return False  # tuples the model no longer admits are ignored, as upstream

    def check(self, obj: str, rel: str, user: str) -> bool:
        otype = obj.split(":", 1)[0]
        if otype not in self.model.relations:
            raise CheckError("validation_error", f"type '{otype}' not found")
        if rel not in self.model.relations[otype]:
            raise CheckError("validation_error", f"relation '{otype}#{rel}' not found")
        return self._check(obj, rel, user, 0, frozenset())

    def _check(self, obj: str, rel: str, user: str, depth: int, path: frozenset) -> bool:
        if depth > MAX_DEPTH:
            raise CheckError(
                "authorization_model_resolution_too_complex",
                "Authorization Model resolution required too many rewrite rules to be resolved."
                " Check your authorization model for infinite recursion or too much nesting",
            )
        key = (obj, rel, user)
        if key in path:
            return False
        path = path | {key}
        otype = obj.split(":", 1)[0]
        rewrite = self.model.relations.get(otype, {}).get(rel)
        if rewrite is None:
            return False
        return self._rewrite(obj, rel, rewrite, user, depth, path)

    def _any(self, thunks) -> bool:
        error: CheckError | None = None
        for thunk in thunks:
            try:
                if thunk():
                    return True
            except CheckError as exc:
                error = error or exc
        if error:
            raise error
        return False

    def _rewrite(self, obj: str, rel: str, rw: dict, user: str, depth: int, path: frozenset) -> bool:
        if "this" in rw:
            return self._any(self._direct(obj, rel, user, depth, path))
        if "computedUserset" in rw:
            return self._check(obj, rw["computedUserset"]["relation"], user, depth + 1, path)
        if "tupleToUserset" in rw:
            ttu = rw["tupleToUserset"]
            ts_rel, target = ttu["tupleset"]["relation"], ttu["computedUserset"]["relation"]

            def via(t: dict):
                def run() -> bool:
                    parent = t["user"]
                    ptype = parent.split(":", 1)[0]
                    if target not in self.model.relations.get(ptype, {}):
                        return False
                    if not self.model.eval_condition(t, self.context):
                        return False
                    return self._check(parent, target, user, depth + 1, path)
                return run

            tuples = [t for t in self._tuples(obj, ts_rel) if "#" not in t["user"] and self._valid(t)]
            return self._any(via(t) for t in tuples)
        if "union" in rw:
            return self._any(
                (lambda c=c: self._rewrite(obj, rel, c, user, depth + 1, path)) for c in rw["union"]["child"]
            )
        if "intersection" in rw:
            error: CheckError | None = None
            for c in rw["intersection"]["child"]:
                try:
                    if not self._rewrite(obj, rel, c, user, depth + 1, path):
                        return False
                except CheckError as exc:
                    error = error or exc
            if error:
                raise error
            return True
        if "difference" in rw:
            diff = rw["difference"]
            base_err = sub_err = None
            try:
                base = self._rewrite(obj, rel, diff["base"], user, depth + 1, path)
            except CheckError as exc:
                base, base_err = None, exc
            if base is False:
                return False
            try:
                sub = self._rewrite(obj, rel, diff["subtract"], user, depth + 1, path)
            except CheckError as exc:
                sub, sub_err = None, exc
            if sub is True:
                return False
            if base_err or sub_err:
                raise base_err or sub_err  # type: ignore[misc]
            return True
        raise CheckError("validation_error", f"unsupported rewrite for '{obj}#{rel}'")

    def _direct(self, obj: str, rel: str, user: str, depth: int, path: frozenset):
        utype = user.split(":", 1)[0]
        for t in self._tuples(obj, rel):
            if not self._valid(t):
                continue
            tu = t["user"]

            if tu == user or (tu.endswith(":*") and "#" not in user and tu.split(":", 1)[0] == utype):
                yield (lambda t=t: self.model.eval_condition(t, self.context))
            elif "#" in tu:
                uobj, urel = tu.split("#", 1)

                def run(t=t, uobj=uobj, urel=urel) -> bool:
                    if not self.model.eval_condition(t, self.context):
                        return False
                    return self._check(uobj, urel, user, depth + 1, path)

                yield run

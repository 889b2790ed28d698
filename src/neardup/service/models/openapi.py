"""The OpenAPI document of ``neardup serve`` and the JSON Schemas of
``docs/schemas``, both generated from the models (``msgspec.json.schema_components``).

The routes' permissions (:data:`PERMISSION`) are here too: the server checks them
before it reads a request, and the document lists the roles that have each.
"""

from __future__ import annotations

from typing import Any

import msgspec

from neardup.service.auth import PERMISSIONS
from neardup.service.models.events import EVENTS
from neardup.service.models.fields import (
    EventsLimit,
    IdempotencyKey,
    ItemId,
    Purpose,
    Seq,
    TenantId,
)
from neardup.service.models.requests import REQUESTS
from neardup.service.models.responses import RESPONSES

__all__ = ["MODELS", "PERMISSION", "components", "json_schemas", "openapi"]

#: Every published model: a file each in ``docs/schemas``, a component each in
#: ``/openapi.json`` (beside the nested models they reach).
MODELS: tuple[type[msgspec.Struct], ...] = (*REQUESTS, *RESPONSES, *EVENTS)
_DRAFT = "https://json-schema.org/draft/2020-12/schema"


def components() -> dict[str, dict[str, Any]]:
    """The JSON Schema of every model and of the models they nest, by name, with
    references as ``#/components/schemas/NAME``."""
    _, out = msgspec.json.schema_components(MODELS, ref_template="#/components/schemas/{name}")
    return out


def json_schemas() -> dict[str, dict[str, Any]]:
    """A standalone JSON Schema (2020-12) of each model in :data:`MODELS`, by name:
    the models it nests are in its ``$defs``."""
    _, defs = msgspec.json.schema_components(MODELS, ref_template="#/$defs/{name}")
    out = {}
    for model in MODELS:
        name = model.__name__
        reached = _reached(defs, name)
        doc: dict[str, Any] = {"$schema": _DRAFT, **defs[name]}
        if reached:
            doc["$defs"] = {n: defs[n] for n in sorted(reached)}
        out[name] = doc
    return out


def _reached(defs: dict[str, dict[str, Any]], name: str) -> set[str]:
    """The names ``defs[name]`` refers to, directly or not (``name`` itself excluded)."""
    seen: set[str] = set()
    todo = [defs[name]]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                target = ref.rsplit("/", 1)[1]
                if target not in seen and target != name:
                    seen.add(target)
                    todo.append(defs[target])
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return seen


def _param(model: Any) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.json.schema(model)
    return out


_T, _I = "/v1/tenants/{tenant}", "/v1/tenants/{tenant}/items/{item_id}"

#: The permission (``neardup.service.auth.PERMISSIONS``) each operation needs: the server
#: checks it before it reads the request, and the document lists the roles that
#: have it (``x-roles``).
PERMISSION: dict[tuple[str, str], str] = {
    ("POST", "/v1/keys"): "tenant",
    ("PUT", _T): "tenant",
    ("GET", _T): "read",
    ("POST", f"{_T}/reopen"): "tenant",
    ("POST", f"{_T}/items"): "upsert",
    ("DELETE", _I): "tombstone",
    ("GET", _I): "read",
    ("GET", f"{_I}/content"): "content",
    ("GET", f"{_I}/decision"): "read",
    ("POST", f"{_I}/unlink"): "resolve",
    ("POST", f"{_I}/release"): "resolve",
    ("PUT", f"{_T}/policy"): "policy",
    ("GET", f"{_T}/policy"): "read",
    ("GET", f"{_T}/decisions"): "decisions",
    ("POST", f"{_T}/labels"): "feedback",
    ("PUT", f"{_T}/shadow"): "shadow",
    ("GET", f"{_T}/shadow"): "read",
    ("POST", f"{_T}/shadow/promote"): "shadow",
    ("POST", f"{_T}/shadow/rollback"): "shadow",
    ("POST", f"{_T}/shadow/retire"): "shadow",
    ("GET", f"{_T}/threshold-report"): "decisions",
    ("GET", f"{_T}/digest"): "stats",
    ("POST", f"{_T}/candidates"): "candidates",
    ("POST", f"{_T}/decide"): "decide",
    ("POST", f"{_T}/verify"): "verify",
    ("POST", f"{_T}/compact"): "compact",
    ("POST", f"{_T}/snapshot"): "snapshot",
    ("POST", f"{_T}/restore"): "restore",
}


def _op(
    summary: str, req: str | None, resp: str, *, role: str, raw: bool = False
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        "description": f"Role: {role}.",
        "security": [{"apiKey": []}],
        "responses": {
            "200": {
                "description": "OK",
                "content": {
                    "application/octet-stream" if raw else "application/json": {
                        "schema": {"type": "string", "format": "binary"}
                    }
                    if raw
                    else {"schema": {"$ref": f"#/components/schemas/{resp}"}}
                },
            },
            "4XX": {
                "description": "the request was refused; the body says why and the fix",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
            },
            "503": {
                "description": "the tenant is degraded or busy switching versions, the "
                "request used up its time budget before it was logged, or the "
                "server's storage failed; "
                "retry later with the same idempotency key",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
            },
        },
    }
    if req:
        ctype = "application/octet-stream" if req == "binary" else "application/json"
        schema = (
            {"type": "string", "format": "binary"}
            if req == "binary"
            else {"$ref": f"#/components/schemas/{req}"}
        )
        op["requestBody"] = {"required": True, "content": {ctype: {"schema": schema}}}
    return op


def openapi(version: str) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``neardup serve``."""
    tparam = {"name": "tenant", "in": "path", "required": True, "schema": _param(TenantId)}
    iparam = {"name": "item_id", "in": "path", "required": True, "schema": _param(ItemId)}
    paths: dict[str, Any] = {
        "/healthz": {"get": {"summary": "liveness", "responses": {"200": {"description": "OK"}}}},
        "/readyz": {
            "get": {"summary": "readiness and mode", "responses": {"200": {"description": "ready"}}}
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics",
                "responses": {"200": {"description": "text exposition"}},
            }
        },
        "/openapi.json": {
            "get": {"summary": "this document", "responses": {"200": {"description": "OpenAPI"}}}
        },
        "/v1/keys": {
            "post": _op(
                "create an API key for tenants the operator's own key is scoped to",
                "KeyRequest",
                "KeyResponse",
                role="operator",
            )
        },
        "/v1/tenants/{tenant}": {
            "parameters": [tparam],
            "put": _op(
                "create a tenant (idempotent for the same configuration); a layout whose "
                "predicted recall at the threshold is below the service minimum is refused "
                "(400), below the recall target it is created with a warning",
                "TenantConfig",
                "TenantResponse",
                role="operator",
            ),
            "get": _op("tenant stats", None, "TenantResponse", role="any of the tenant"),
        },
        "/v1/tenants/{tenant}/reopen": {
            "parameters": [tparam],
            "post": _op(
                "open a tenant that failed to start or stopped writing after a storage "
                "error, once repaired (`neardup repair`); a healthy tenant is left as is",
                None,
                "TenantResponse",
                role="operator",
            ),
        },
        "/v1/tenants/{tenant}/items": {
            "parameters": [tparam],
            "post": _op(
                "upsert an item; returns its exactly scored candidates",
                "UpsertRequest",
                "UpsertResponse",
                role="producer",
            ),
        },
        "/v1/tenants/{tenant}/items/{item_id}": {
            "parameters": [tparam, iparam],
            "delete": {
                **_op("tombstone an item", None, "TombstoneResponse", role="producer"),
                "parameters": [
                    {
                        "name": "epoch",
                        "in": "query",
                        "required": False,
                        "description": "the version the caller saw; an older epoch than "
                        "the stored version is refused (409)",
                        "schema": _param(Seq),
                    },
                    {
                        "name": "Idempotency-Key",
                        "in": "header",
                        "required": False,
                        "schema": _param(IdempotencyKey),
                    },
                ],
            },
            "get": _op("stored version of an item (metadata)", None, "ItemResponse", role="any"),
        },
        "/v1/tenants/{tenant}/items/{item_id}/content": {
            "parameters": [tparam, iparam],
            "get": {
                **_op(
                    "the retained normalized text of a live item (tenants with retain=text); "
                    "an item stored with an access_policy only for keys allowed that policy "
                    "(403 otherwise); every read is written to the audit log",
                    None,
                    "ContentResponse",
                    role="reviewer",
                ),
                "parameters": [
                    {
                        "name": "purpose",
                        "in": "query",
                        "required": False,
                        "schema": _param(Purpose),
                    },
                ],
            },
        },
        "/v1/tenants/{tenant}/items/{item_id}/decision": {
            "parameters": [tparam, iparam],
            "get": _op(
                "the item's current decision state (unique, duplicate with its canonical "
                "item, or review)",
                None,
                "ItemStateResponse",
                role="any of the tenant",
            ),
        },
        "/v1/tenants/{tenant}/items/{item_id}/unlink": {
            "parameters": [tparam, iparam],
            "post": _op(
                "reverse a duplicate link (recorded in the decision log)",
                "ResolveRequest",
                "EventResponse",
                role="reviewer or operator",
            ),
        },
        "/v1/tenants/{tenant}/items/{item_id}/release": {
            "parameters": [tparam, iparam],
            "post": _op(
                "release a quarantined item as unique or as a duplicate of `of`",
                "ResolveRequest",
                "EventResponse",
                role="reviewer or operator",
            ),
        },
        "/v1/tenants/{tenant}/policy": {
            "parameters": [tparam],
            "put": _op(
                "install the next policy version (bounded, audited)",
                "Policy",
                "PolicyResponse",
                role="operator",
            ),
            "get": _op("current policy and history", None, "PolicyResponse", role="any"),
        },
        "/v1/tenants/{tenant}/decisions": {
            "parameters": [
                tparam,
                {"name": "after", "in": "query", "required": False, "schema": _param(Seq)},
                {
                    "name": "limit",
                    "in": "query",
                    "required": False,
                    "schema": _param(EventsLimit),
                },
            ],
            "get": _op(
                "the hash-chained decision log (verified on read)",
                None,
                "EventsResponse",
                role="reviewer or operator",
            ),
        },
        "/v1/tenants/{tenant}/labels": {
            "parameters": [tparam],
            "post": _op(
                "a reviewer label for a pair (immutable event with the pair's exact score)",
                "LabelRequest",
                "EventResponse",
                role="reviewer",
            ),
        },
        "/v1/tenants/{tenant}/threshold-report": {
            "parameters": [tparam],
            "get": _op(
                "threshold evaluation on reviewer labels after quality checks; a suggestion, "
                "never applied automatically",
                None,
                "ThresholdReportResponse",
                role="reviewer or operator",
            ),
        },
        "/v1/tenants/{tenant}/shadow": {
            "parameters": [tparam],
            "put": _op(
                "build a shadow index with a new configuration (rebuilt from canonical "
                "features, or retained text when the shingles change); mirrored and compared "
                "until promoted or rolled back",
                "TenantConfig",
                "ShadowResponse",
                role="operator",
            ),
            "get": _op(
                "shadow / previous version status: disagreement, candidate counts, labelled "
                "recall of both",
                None,
                "ShadowResponse",
                role="any of the tenant",
            ),
        },
        **{
            f"/v1/tenants/{{tenant}}/shadow/{action}": {
                "parameters": [tparam],
                "post": _op(summary, None, "ShadowResponse", role="operator"),
            }
            for action, summary in (
                ("promote", "make the shadow (or previous version) live, atomically; recorded"),
                ("rollback", "drop the shadow; the live version is untouched"),
                ("retire", "drop the previous version after a promotion"),
            )
        },
        "/v1/tenants/{tenant}/candidates": {
            "parameters": [tparam],
            "post": _op(
                "candidates of an item without storing it",
                "QueryRequest",
                "CandidatesResponse",
                role="producer",
            ),
        },
        "/v1/tenants/{tenant}/decide": {
            "parameters": [tparam],
            "post": _op(
                "decide duplicate / unique", "DecideRequest", "DecideResponse", role="producer"
            ),
        },
        "/v1/tenants/{tenant}/verify": {
            "parameters": [tparam],
            "post": _op(
                "exact score of two stored items",
                "VerifyRequest",
                "VerifyResponse",
                role="producer or operator",
            ),
        },
        "/v1/tenants/{tenant}/digest": {
            "parameters": [tparam],
            "get": _op(
                "SHA-256 of the tenant's logical state", None, "DigestResponse", role="operator"
            ),
        },
        "/v1/tenants/{tenant}/compact": {
            "parameters": [tparam],
            "post": _op(
                "merge the index delta and purge tombstones",
                None,
                "CompactResponse",
                role="operator",
            ),
        },
        "/v1/tenants/{tenant}/snapshot": {
            "parameters": [tparam],
            "post": _op("snapshot the tenant", None, "Error", role="operator", raw=True),
        },
        "/v1/tenants/{tenant}/restore": {
            "parameters": [tparam],
            "post": _op(
                "restore a snapshot (verified first)", "binary", "RestoreResponse", role="operator"
            ),
        },
    }
    for (method, path), perm in PERMISSION.items():
        op = paths[path][method.lower()]
        op["x-permission"] = perm
        op["x-roles"] = [role for role, ops in PERMISSIONS.items() if perm in ops]
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "neardup",
            "version": version,
            "description": "Near-duplicate detection with exact verification.",
        },
        "paths": paths,
        "components": {
            "schemas": components(),
            "securitySchemes": {
                "apiKey": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "nd_<key id>_<secret>",
                }
            },
        },
    }

"""JSON Schemas of the service's requests, responses and log events, and the OpenAPI
document built from them (served at ``/openapi.json``; published in ``docs/schemas``)."""

from __future__ import annotations

from typing import Any

from neardup.service.auth import PERMISSIONS

__all__ = ["PERMISSION", "SCHEMAS", "openapi"]

_str = {"type": "string"}
_int = {"type": "integer"}
_num = {"type": "number"}
_bool = {"type": "boolean"}

#: The largest integer the service stores (SQLite's INTEGER is signed 64-bit).
INT64_MAX = (1 << 63) - 1
#: Tenant names (``neardup.service.tenant.valid_tenant_id``).
TENANT_PATTERN = "^[a-z0-9][a-z0-9_-]{0,62}$"
_tenant = {"type": "string", "pattern": TENANT_PATTERN}
_item_id = {
    "type": "string",
    "minLength": 1,
    "maxLength": 256,
    "description": "any text of 1-256 characters; in a URL path, percent-encode it (a '/' as %2F)",
}
_seq = {"type": "integer", "minimum": 0, "maximum": INT64_MAX}
_rationale = {"type": "string", "maxLength": 2000}

_envelope = {
    "tenant_id": _str,
    "method": {"type": "string", "description": "candidate method and verification"},
    "scheme_fingerprint": _str,
    "scheme_version": _int,
    "policy_version": _int,
}

_candidate = {
    "type": "object",
    "required": ["item_id", "score", "shared", "union", "bands", "method"],
    "properties": {
        "item_id": _str,
        "score": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "exact Jaccard of the stored shingle-hash sets",
        },
        "shared": _int,
        "union": _int,
        "bands": {"type": "integer", "description": "LSH bands that collided"},
        "first_band": {"type": ["integer", "null"]},
        "method": {"enum": ["minhash-lsh", "identical", "unverified"]},
    },
}

_span_list = {
    "type": "array",
    "items": {"type": "array", "items": _int, "minItems": 2, "maxItems": 2},
    "description": "[start, end) character offsets, merged into maximal runs",
}

_explanation = {
    "type": "object",
    "required": ["candidate", "shared_shingles", "total_shingles", "bands_collided", "spans"],
    "properties": {
        "candidate": _str,
        "jaccard": _num,
        "shared_shingles": _int,
        "total_shingles": _int,
        "method": _str,
        "bands_collided": {"type": "array", "items": _int},
        "bands_total": _int,
        "rows_per_band": _int,
        "spans": {
            "type": "object",
            "properties": {
                "query": {"oneOf": [_span_list, {"type": "null"}]},
                "query_offsets": _str,
                "candidate": {"oneOf": [_span_list, {"type": "null"}]},
                "candidate_offsets": _str,
            },
        },
        "why": _str,
    },
}

_decision = {
    "type": "object",
    "required": ["state", "threshold", "policy_version", "predicted_recall", "reason"],
    "properties": {
        "state": {"enum": ["duplicate", "unique", "review", "rejected"]},
        "duplicate_of": _str,
        "canonical": {"type": ["string", "null"], "description": "the cluster's canonical item"},
        "review_band": {"type": "array", "items": _num},
        "policy_fingerprint": _str,
        "verification": _str,
        "explanation": _explanation,
        "score": {"type": ["number", "null"]},
        "threshold": _num,
        "policy_version": _int,
        "predicted_recall": {
            "type": "number",
            "description": "probability that a pair at the threshold is a candidate",
        },
        "capped": _bool,
        "reason": _str,
    },
}

_warnings = {
    "type": "array",
    "items": _str,
    "description": "the guard's warnings: predicted recall at the threshold below the target",
}

_relink = {
    "type": "object",
    "required": ["item_id", "state", "canonical"],
    "properties": {
        "item_id": _str,
        "state": {"enum": ["unique", "duplicate", "tombstoned"]},
        "canonical": {"type": ["string", "null"]},
    },
}

_item_props: dict[str, Any] = {
    "tenant_id": {**_tenant, "description": "must equal the tenant of the URL"},
    "item_id": _item_id,
    # Optional fields may also be sent as null (= absent), as before.
    "content": {"type": ["string", "null"], "description": "exactly one of content, content_uri"},
    "content_uri": {"type": ["string", "null"], "description": "file:// under a content root"},
    "media_type": {"enum": ["text/plain", "text/markdown", "text/html"]},
    "source_time": {
        "type": ["string", "null"],
        "maxLength": 256,
        "description": "ISO 8601 time the item was produced (ingest-lag metric)",
    },
    "normalization_version": {"enum": [1, None]},
    "idempotency_key": {"type": ["string", "null"], "maxLength": 256},
    "replace": _bool,
}
_item = {"type": "object", "additionalProperties": False, "properties": _item_props}

_query_info = {
    "candidates_found": _int,
    "candidates_verified": _int,
    "bucket_entries_scanned": _int,
    "capped": _bool,
}

SCHEMAS: dict[str, dict[str, Any]] = {
    "UpsertRequest": {**_item, "required": ["item_id"]},
    "QueryRequest": {
        **_item,
        "properties": {
            **_item_props,
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": INT64_MAX,
                "description": "candidates to return (default 10); more than the server's "
                "or the tenant's max_candidates is refused with 422",
            },
        },
    },
    "DecideRequest": {
        **_item,
        "description": "with item_id the item is stored too (and linked or quarantined "
        "by the decision); without it only the decision is recorded",
    },
    "UpsertResponse": {
        "type": "object",
        "required": ["item_id", "seq", "status", "candidates"],
        "properties": {
            **_envelope,
            **_query_info,
            "item_id": _str,
            "seq": _int,
            "version": _int,
            "status": {"enum": ["inserted", "replaced", "unchanged"]},
            "candidates": {"type": "array", "items": _candidate},
            "decision": _decision,
        },
    },
    "CandidatesResponse": {
        "type": "object",
        "required": ["candidates", "decision"],
        "properties": {
            **_envelope,
            **_query_info,
            "candidates": {"type": "array", "items": _candidate},
            "decision": _decision,
        },
    },
    "DecideResponse": {
        "type": "object",
        "required": ["decision"],
        "properties": {
            **_envelope,
            **_query_info,
            "decision": _decision,
            "decision_seq": _int,
            "event_hash": _str,
            "evidence": {"type": "array", "items": _candidate},
        },
    },
    "VerifyRequest": {
        "type": "object",
        "additionalProperties": False,
        "required": ["left", "right"],
        "properties": {"left": _item_id, "right": _item_id},
    },
    "VerifyResponse": {
        "type": "object",
        "properties": {
            **_envelope,
            "left": _str,
            "right": _str,
            "score": _num,
            "shared": _int,
            "union": _int,
            "threshold": _num,
            "state": {"enum": ["duplicate", "distinct"]},
        },
    },
    "TenantResponse": {
        "type": "object",
        "required": ["tenant_id", "items", "bands", "rows", "predicted_recall"],
        "properties": {
            **_envelope,
            "items": _int,
            "bands": _int,
            "rows": _int,
            "predicted_recall": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "description": "probability that a pair at the tenant's threshold shares a band",
            },
            "recall_target": {
                "type": "number",
                "description": "the service's target for predicted_recall (tenant creation)",
            },
            "failed_commands": {
                "type": "integer",
                "description": "logged commands recorded as failed (skipped on replay)",
            },
            "stopped": {
                "type": ["string", "null"],
                "description": "why writes stopped after a storage error (null: healthy)",
            },
            "reopened": _bool,
            "warnings": {
                "type": "array",
                "items": _str,
                "description": "why the configuration may not serve its threshold, and the fix",
            },
        },
    },
    "TombstoneResponse": {
        "type": "object",
        "properties": {
            **_envelope,
            "item_id": _str,
            "seq": _int,
            "tombstoned": _bool,
            "epoch": _int,
            "relinks": {
                "type": "array",
                "items": _relink,
                "description": "links changed: the item left its cluster; a canonical "
                "item's cluster went to its oldest live member",
            },
        },
    },
    "ItemResponse": {
        "type": "object",
        "properties": {
            **_envelope,
            "item_id": _str,
            "version": _int,
            "live": _bool,
            "tombstone_epoch": {"type": ["integer", "null"]},
            "shingles": _int,
            "media_type": {"type": ["string", "null"]},
            "source_time": {"type": ["string", "null"]},
        },
    },
    "Policy": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "version": {"type": "integer", "minimum": 1, "maximum": 1 << 30},
            "metric": {"const": "jaccard"},
            "threshold": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            "review_below": {"type": "number", "minimum": 0, "maximum": 0.5},
            "review_above": {"type": "number", "minimum": 0, "maximum": 0.5},
            "exact_duplicates": {"enum": ["duplicate", "review"]},
            "max_candidates": {"type": "integer", "minimum": 1, "maximum": 10000},
            "estimates": {"enum": ["never", "non_destructive"]},
        },
    },
    "PolicyResponse": {
        "type": "object",
        "properties": {
            **_envelope,
            "policy": {"type": "object"},
            "current": {"type": "object"},
            "history": {"type": "array", "items": {"type": "object"}},
            "fingerprint": _str,
            "predicted_recall_at_threshold": _num,
            "event_hash": _str,
            "warnings": _warnings,
        },
    },
    "DecisionEvent": {
        "description": "one record of the hash-chained decision log",
        "type": "object",
        "required": ["seq", "kind", "time", "policy_version", "scheme_version", "prev"],
        "properties": {
            "seq": _int,
            "kind": {
                "enum": ["decision", "unlink", "release", "label", "policy", "shadow", "relink"]
            },
            "item_id": {"type": ["string", "null"]},
            "actor": {"type": ["string", "null"], "description": "API key id"},
            "time": _num,
            "tenant": _str,
            "method": _str,
            "scheme_version": _int,
            "scheme_fingerprint": _str,
            "policy_version": _int,
            "decision": _decision,
            "stored": _bool,
            "effect": {"type": "object"},
            "relinks": {
                "type": "array",
                "items": _relink,
                "description": "other items' links changed by this event (applied first)",
            },
            "cause": {"enum": ["tombstone", "repair"], "description": "of a relink event"},
            "inherited": {
                "type": "boolean",
                "description": "of a policy event: a version recorded by another index of "
                "the tenant (its live version, or before a restore), continued here",
            },
            "source": {
                "enum": ["shadow start", "promote", "restore"],
                "description": "of a policy event not written by PUT .../policy",
            },
            "before": {"type": "object"},
            "rationale": _str,
            "prev": {"type": "string", "description": "SHA-256 of the previous record"},
        },
    },
    "EventsResponse": {
        "type": "object",
        "required": ["events", "chain_verified", "head"],
        "properties": {
            **_envelope,
            "events": {"type": "array", "items": {"$ref": "#/components/schemas/DecisionEvent"}},
            "chain_verified": _int,
            "head": _str,
        },
    },
    "ItemStateResponse": {
        "type": "object",
        "required": ["item_id", "state"],
        "properties": {
            **_envelope,
            "item_id": _str,
            "state": {"enum": ["unique", "duplicate", "review"]},
            "canonical": {"type": ["string", "null"]},
        },
    },
    "ResolveRequest": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "as": {"enum": ["unique", "duplicate"]},
            "of": _item_id,
            "rationale": _rationale,
        },
    },
    "LabelRequest": {
        "type": "object",
        "additionalProperties": False,
        "required": ["label"],
        "description": "a pair (left + right) or a recorded decision (decision_seq)",
        "properties": {
            "left": _item_id,
            "right": _item_id,
            "label": {"enum": ["duplicate", "not_duplicate", "unsure"]},
            "rationale": _rationale,
            "decision_seq": {"type": "integer", "minimum": 1, "maximum": INT64_MAX},
        },
    },
    "ThresholdReportResponse": {
        "type": "object",
        "required": ["labels", "report", "labelled_recall"],
        "properties": {
            **_envelope,
            "labels": _int,
            "report": {
                "type": "object",
                "description": "neardup.service.ThresholdReport.to_dict(): reviewers (agreement, "
                "weight, flagged), pairs, thresholds (precision / recall / F1 with Wilson "
                "intervals), current, suggested_threshold, regression_set",
            },
            "labelled_recall": {"type": "object"},
        },
    },
    "ShadowResponse": {
        "type": "object",
        "required": ["tenant_id", "live", "role"],
        "properties": {
            "tenant_id": _str,
            "role": {"enum": ["shadow", "previous", None]},
            "live": {"type": "object"},
            "other": {"type": "object"},
            "comparison": {
                "type": "object",
                "properties": {
                    "queries": _int,
                    "candidate_disagreements": _int,
                    "decision_disagreements": _int,
                    "candidates_live": _int,
                    "candidates_other": _int,
                    "mirror_errors": _int,
                    "missed_writes": _int,
                    "examples": {"type": "array"},
                },
            },
            "rebuilt_items": _int,
            "event_hash": _str,
            "warnings": _warnings,
        },
    },
    "EventResponse": {
        "type": "object",
        "required": ["event", "event_hash"],
        "properties": {**_envelope, "event": {"type": "object"}, "event_hash": _str},
    },
    "ContentResponse": {
        "type": "object",
        "required": ["item_id", "version", "normalizer", "text"],
        "properties": {
            **_envelope,
            "item_id": _str,
            "version": _int,
            "normalizer": _str,
            "text": {"type": "string", "description": "the retained normalized text"},
        },
    },
    "TenantConfig": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "threshold": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            "shingle": {
                "type": "string",
                "pattern": "^(word|char|byte):[0-9]{1,4}$",
                "description": "KIND:K with K in 1..1024",
            },
            "normalizer": {"enum": ["nfkc-casefold", "nfkc", "raw"]},
            "num_perm": {"type": "integer", "minimum": 1, "maximum": 4096},
            "bands": {"type": ["integer", "null"], "minimum": 1, "maximum": 4096},
            "rows": {"type": ["integer", "null"], "minimum": 1, "maximum": 4096},
            "retain": {"enum": ["hashes", "text"]},
            "scheme_version": {"type": "integer", "minimum": 1, "maximum": 1 << 30},
            "policy_version": {"type": "integer", "minimum": 1, "maximum": 1 << 30},
            "max_items": {"type": "integer", "minimum": 1, "maximum": 1 << 40},
            "max_shingles": {"type": "integer", "minimum": 1, "maximum": 1 << 40},
            "max_candidates": {"type": "integer", "minimum": 1, "maximum": 10_000},
            "max_bucket_size": {"type": "integer", "minimum": 2, "maximum": 1 << 30},
            "rate_per_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 1e7},
            "burst": {"type": "integer", "minimum": 1, "maximum": 1 << 30},
        },
    },
    "KeyRequest": {
        "type": "object",
        "additionalProperties": False,
        "required": ["role", "tenants"],
        "properties": {
            "role": {"enum": ["producer", "reviewer", "operator"]},
            "tenants": {
                "type": "array",
                "items": _tenant,
                "minItems": 1,
                "maxItems": 1000,
                "description": "exactly one for producer and reviewer keys",
            },
        },
    },
    "KeyResponse": {
        "type": "object",
        "required": ["token"],
        "properties": {
            "token": {"type": "string", "description": "nd_<key id>_<secret>; shown once"}
        },
    },
    "DigestResponse": {
        "type": "object",
        "required": ["tenant_id", "seq", "digest"],
        "properties": {"tenant_id": _str, "seq": _int, "digest": _str},
    },
    "CompactResponse": {
        "type": "object",
        "required": ["seq", "purged_features", "index_entries_dropped", "index_bytes"],
        "properties": {
            **_envelope,
            "seq": _int,
            "purged_features": _int,
            "index_entries_dropped": _int,
            "index_bytes": _int,
        },
    },
    "RestoreResponse": {
        "type": "object",
        "required": ["restored_seq", "items", "generation"],
        "properties": {**_envelope, "restored_seq": _int, "items": _int, "generation": _int},
    },
    "Error": {
        "type": "object",
        "required": ["error", "message", "fix"],
        "properties": {
            "error": {"type": "string", "description": "stable machine-readable code"},
            "message": {"type": "string", "description": "what was wrong, with the value"},
            "fix": {"type": "string", "description": "what to do instead"},
        },
    },
    "CommandEvent": {
        "description": "header of a command-log record (the blob holds features and band keys)",
        "type": "object",
        "required": ["op"],
        "properties": {
            "op": {"enum": ["upsert", "tombstone", "compact"]},
            "item_id": _str,
            "pos": _int,
            "epoch": _int,
            "replaces": {"type": ["integer", "null"]},
            "response": {
                "type": ["object", "null"],
                "description": "the response to repeat for the idempotency key; null "
                "when the request carried none",
            },
            "event": {
                "type": ["object", "null"],
                "description": "the decision-log record applied with the command "
                "(an upsert's decision; a tombstone's relink, when links change)",
            },
        },
    },
    "AuditEvent": {
        "type": "object",
        "required": ["time", "op", "prev"],
        "properties": {
            "time": _num,
            "key_id": {"type": ["string", "null"]},
            "role": {"type": ["string", "null"]},
            "op": _str,
            "tenant": {"type": ["string", "null"]},
            "prev": {"type": "string", "description": "SHA-256 of the previous line"},
        },
    },
}


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
    tparam = {"name": "tenant", "in": "path", "required": True, "schema": _tenant}
    iparam = {"name": "item_id", "in": "path", "required": True, "schema": _item_id}
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
                        "schema": _seq,
                    },
                    {
                        "name": "Idempotency-Key",
                        "in": "header",
                        "required": False,
                        "schema": {"type": "string", "maxLength": 256},
                    },
                ],
            },
            "get": _op("stored version of an item (metadata)", None, "ItemResponse", role="any"),
        },
        "/v1/tenants/{tenant}/items/{item_id}/content": {
            "parameters": [tparam, iparam],
            "get": _op(
                "the retained normalized text of a live item (tenants with retain=text); "
                "every read is written to the audit log",
                None,
                "ContentResponse",
                role="reviewer",
            ),
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
                {"name": "after", "in": "query", "required": False, "schema": _seq},
                {
                    "name": "limit",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "integer", "minimum": 1, "maximum": 10_000},
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
            "schemas": SCHEMAS,
            "securitySchemes": {
                "apiKey": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "nd_<key id>_<secret>",
                }
            },
        },
    }

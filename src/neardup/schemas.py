"""JSON Schemas of the service's requests, responses and log events, and the OpenAPI
document built from them (served at ``/openapi.json``; published in ``docs/schemas``)."""

from __future__ import annotations

from typing import Any

__all__ = ["SCHEMAS", "openapi"]

_str = {"type": "string"}
_int = {"type": "integer"}
_num = {"type": "number"}
_bool = {"type": "boolean"}

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
                "query": _span_list,
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

_item = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "tenant_id": _str,
        "item_id": {"type": "string", "minLength": 1, "maxLength": 256},
        "content": _str,
        "content_uri": {"type": "string", "description": "file:// under a content root"},
        "media_type": {"enum": ["text/plain", "text/markdown", "text/html"]},
        "source_time": _str,
        "normalization_version": {"const": 1},
        "idempotency_key": {"type": "string", "maxLength": 256},
        "replace": _bool,
        "limit": {"type": "integer", "minimum": 1},
    },
}

_query_info = {
    "candidates_found": _int,
    "candidates_verified": _int,
    "bucket_entries_scanned": _int,
    "capped": _bool,
}

SCHEMAS: dict[str, dict[str, Any]] = {
    "UpsertRequest": {**_item, "required": ["item_id"]},
    "QueryRequest": _item,
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
        "properties": {"left": _str, "right": _str},
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
            "version": {"type": "integer", "minimum": 1},
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
            "of": _str,
            "rationale": {"type": "string", "maxLength": 2000},
        },
    },
    "LabelRequest": {
        "type": "object",
        "additionalProperties": False,
        "required": ["label"],
        "description": "a pair (left + right) or a recorded decision (decision_seq)",
        "properties": {
            "left": _str,
            "right": _str,
            "label": {"enum": ["duplicate", "not_duplicate", "unsure"]},
            "rationale": {"type": "string", "maxLength": 2000},
            "decision_seq": _int,
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
                "description": "neardup.ThresholdReport.to_dict(): reviewers (agreement, "
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
            "shingle": {"type": "string", "pattern": "^(word|char|byte):[0-9]+$"},
            "normalizer": {"enum": ["nfkc-casefold", "nfkc", "raw"]},
            "num_perm": _int,
            "bands": {"type": ["integer", "null"]},
            "rows": {"type": ["integer", "null"]},
            "retain": {"enum": ["hashes", "text"]},
            "scheme_version": _int,
            "policy_version": _int,
            "max_items": _int,
            "max_shingles": _int,
            "max_candidates": _int,
            "max_bucket_size": _int,
            "rate_per_s": _num,
            "burst": _int,
        },
    },
    "KeyRequest": {
        "type": "object",
        "additionalProperties": False,
        "required": ["role", "tenants"],
        "properties": {
            "role": {"enum": ["producer", "reviewer", "operator"]},
            "tenants": {"type": "array", "items": _str, "minItems": 1},
        },
    },
    "Error": {
        "type": "object",
        "required": ["error", "message"],
        "properties": {"error": _str, "message": _str, "fix": _str},
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
            "response": {"type": "object"},
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
    tparam = {"name": "tenant", "in": "path", "required": True, "schema": _str}
    iparam = {"name": "item_id", "in": "path", "required": True, "schema": _str}
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
        "/v1/keys": {"post": _op("create an API key", "KeyRequest", "Error", role="operator")},
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
            "parameters": [
                tparam,
                {"name": "item_id", "in": "path", "required": True, "schema": _str},
                {"name": "epoch", "in": "query", "required": False, "schema": _int},
            ],
            "delete": _op("tombstone an item", None, "TombstoneResponse", role="producer"),
            "get": _op("stored version of an item (metadata)", None, "ItemResponse", role="any"),
        },
        "/v1/tenants/{tenant}/items/{item_id}/content": {
            "parameters": [
                tparam,
                {"name": "item_id", "in": "path", "required": True, "schema": _str},
            ],
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
                {"name": "after", "in": "query", "required": False, "schema": _int},
                {"name": "limit", "in": "query", "required": False, "schema": _int},
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
                "decide duplicate / unique", "QueryRequest", "DecideResponse", role="producer"
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
            "get": _op("SHA-256 of the tenant's logical state", None, "Error", role="operator"),
        },
        "/v1/tenants/{tenant}/compact": {
            "parameters": [tparam],
            "post": _op(
                "merge the index delta and purge tombstones", None, "Error", role="operator"
            ),
        },
        "/v1/tenants/{tenant}/snapshot": {
            "parameters": [tparam],
            "post": _op("snapshot the tenant", None, "Error", role="operator", raw=True),
        },
        "/v1/tenants/{tenant}/restore": {
            "parameters": [tparam],
            "post": _op("restore a snapshot (verified first)", "binary", "Error", role="operator"),
        },
    }
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

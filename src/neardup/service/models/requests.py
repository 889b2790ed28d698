"""The service's request bodies, declared once: ``validate`` checks a body against
them and ``/openapi.json`` (and ``docs/schemas``) publishes their JSON Schemas.

An optional field is ``UNSET`` when absent; ``| None`` marks the fields that may
also be sent as ``null`` (meaning absent, as they always could).  Every model
refuses unknown fields.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from neardup.service.models.fields import (
    INT64_MAX,
    AccessPolicy,
    IdempotencyKey,
    ItemId,
    Rationale,
    TenantId,
)

__all__ = [
    "REQUESTS",
    "DecideRequest",
    "KeyRequest",
    "LabelRequest",
    "Policy",
    "QueryRequest",
    "ResolveRequest",
    "TenantConfig",
    "UpsertRequest",
    "VerifyRequest",
]


class _Request(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A request body: keyword fields, unknown fields refused."""


class _Item(_Request, kw_only=True):
    """The fields of an item request."""

    tenant_id: Annotated[TenantId, Meta(description="must equal the tenant of the URL")] | (
        UnsetType
    ) = UNSET
    item_id: ItemId | UnsetType = UNSET
    content: Annotated[str | None, Meta(description="exactly one of content, content_uri")] | (
        UnsetType
    ) = UNSET
    content_uri: Annotated[str | None, Meta(description="file:// under a content root")] | (
        UnsetType
    ) = UNSET
    media_type: Literal["text/plain", "text/markdown", "text/html"] | UnsetType = UNSET
    source_time: (
        Annotated[
            Annotated[str, Meta(max_length=256)] | None,
            Meta(description="ISO 8601 time the item was produced (ingest-lag metric)"),
        ]
        | UnsetType
    ) = UNSET
    normalization_version: Literal[1] | UnsetType | None = UNSET
    idempotency_key: IdempotencyKey | UnsetType | None = UNSET
    replace: bool | UnsetType = UNSET


class UpsertRequest(_Item, kw_only=True):
    """An item to store: its candidates are scored exactly and it is decided."""

    item_id: ItemId
    access_policy: AccessPolicy | UnsetType | None = UNSET


class QueryRequest(_Item, kw_only=True):
    """An item whose candidates are wanted; nothing is stored."""

    limit: (
        Annotated[
            int,
            Meta(
                ge=1,
                le=INT64_MAX,
                description="candidates to return (default 10); more than the server's "
                "or the tenant's max_candidates is refused with 422",
            ),
        ]
        | UnsetType
    ) = UNSET


class DecideRequest(_Item, kw_only=True):
    """with item_id the item is stored too (and linked or quarantined by the
    decision); without it only the decision is recorded"""

    access_policy: AccessPolicy | UnsetType | None = UNSET


class VerifyRequest(_Request, kw_only=True):
    """Two stored items to score exactly."""

    left: ItemId
    right: ItemId


class Policy(_Request, kw_only=True):
    """A tenant's next policy (absent: the next version, the other defaults)."""

    version: Annotated[int, Meta(ge=1, le=1 << 30)] | UnsetType = UNSET
    metric: Literal["jaccard"] | UnsetType = UNSET
    threshold: Annotated[float, Meta(gt=0, le=1)] | UnsetType = UNSET
    review_below: Annotated[float, Meta(ge=0, le=0.5)] | UnsetType = UNSET
    review_above: Annotated[float, Meta(ge=0, le=0.5)] | UnsetType = UNSET
    exact_duplicates: Literal["duplicate", "review"] | UnsetType = UNSET
    max_candidates: Annotated[int, Meta(ge=1, le=10_000)] | UnsetType = UNSET
    estimates: Literal["never", "non_destructive"] | UnsetType = UNSET


class ResolveRequest(_Request, kw_only=True):
    """How to resolve a linked or quarantined item."""

    as_: Literal["unique", "duplicate"] | UnsetType = msgspec.field(default=UNSET, name="as")
    of: ItemId | UnsetType = UNSET
    rationale: Rationale | UnsetType = UNSET


class LabelRequest(_Request, kw_only=True):
    """a pair (left + right) or a recorded decision (decision_seq)"""

    left: ItemId | UnsetType = UNSET
    right: ItemId | UnsetType = UNSET
    label: Literal["duplicate", "not_duplicate", "unsure"]
    rationale: Rationale | UnsetType = UNSET
    decision_seq: Annotated[int, Meta(ge=1, le=INT64_MAX)] | UnsetType = UNSET


_Perm = Annotated[int, Meta(ge=1, le=4096)]
_Version = Annotated[int, Meta(ge=1, le=1 << 30)]


class TenantConfig(_Request, kw_only=True):
    """A tenant's configuration (absent fields: neardup.service.TenantConfig's defaults)."""

    threshold: Annotated[float, Meta(gt=0, le=1)] | UnsetType = UNSET
    shingle: (
        Annotated[
            str,
            Meta(
                pattern="^(word|char|byte):[0-9]{1,4}(?!\\n)$",
                description="KIND:K with K in 1..1024",
            ),
        ]
        | UnsetType
    ) = UNSET
    tokenizer: (
        Annotated[
            Literal[1, 2],
            Meta(
                description="word tokenizer: 2 script-aware (default), 1 that of older releases"
            ),
        ]
        | UnsetType
    ) = UNSET
    normalizer: Literal["nfkc-casefold", "nfkc", "raw"] | UnsetType = UNSET
    num_perm: _Perm | UnsetType = UNSET
    bands: _Perm | UnsetType | None = UNSET
    rows: _Perm | UnsetType | None = UNSET
    retain: Literal["hashes", "text"] | UnsetType = UNSET
    scheme_version: _Version | UnsetType = UNSET
    policy_version: _Version | UnsetType = UNSET
    max_items: Annotated[int, Meta(ge=1, le=1 << 40)] | UnsetType = UNSET
    max_shingles: Annotated[int, Meta(ge=1, le=1 << 40)] | UnsetType = UNSET
    max_candidates: Annotated[int, Meta(ge=1, le=10_000)] | UnsetType = UNSET
    max_bucket_size: Annotated[int, Meta(ge=2, le=1 << 30)] | UnsetType = UNSET
    rate_per_s: Annotated[float, Meta(gt=0, le=1e7)] | UnsetType = UNSET
    burst: Annotated[int, Meta(ge=1, le=1 << 30)] | UnsetType = UNSET


class KeyRequest(_Request, kw_only=True):
    """A new API key's role and tenants."""

    role: Literal["producer", "reviewer", "operator"]
    tenants: Annotated[
        list[TenantId],
        Meta(
            min_length=1, max_length=1000, description="exactly one for producer and reviewer keys"
        ),
    ]
    policies: (
        Annotated[
            list[AccessPolicy],
            Meta(
                max_length=1000,
                description="the access policies whose items' content the key may read "
                "(absent: any)",
            ),
        ]
        | UnsetType
        | None
    ) = UNSET


#: Every request model, as ``/openapi.json`` names it.
REQUESTS: tuple[type[msgspec.Struct], ...] = (
    UpsertRequest,
    QueryRequest,
    DecideRequest,
    VerifyRequest,
    Policy,
    ResolveRequest,
    LabelRequest,
    TenantConfig,
    KeyRequest,
)

"""The service's response bodies, declared once: ``/openapi.json`` and
``docs/schemas`` publish their JSON Schemas, and the tests check real answers
against them.

The handlers build these answers as dicts; the models describe them (required
fields are the ones every answer has; others are ``UNSET`` when absent).  They
allow fields they do not name, as the answers may grow.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

__all__ = [
    "RESPONSES",
    "Candidate",
    "CandidatesResponse",
    "CompactResponse",
    "ContentResponse",
    "DecideResponse",
    "Decision",
    "DigestResponse",
    "Envelope",
    "Error",
    "EventResponse",
    "Explanation",
    "ItemResponse",
    "ItemStateResponse",
    "KeyResponse",
    "PolicyResponse",
    "Relink",
    "RestoreResponse",
    "ShadowComparison",
    "ShadowResponse",
    "Spans",
    "TenantResponse",
    "ThresholdReportResponse",
    "TombstoneResponse",
    "UpsertResponse",
    "VerifyResponse",
]

_Object = dict[str, Any]
_Warnings = Annotated[
    list[str],
    Meta(description="the guard's warnings: predicted recall at the threshold below the target"),
]


class _Answer(msgspec.Struct, kw_only=True):
    """A response body: keyword fields, more fields allowed."""


class Envelope(_Answer, kw_only=True):
    """What answers about a tenant's items say about the scheme that made them."""

    tenant_id: str | UnsetType = UNSET
    method: Annotated[str, Meta(description="candidate method and verification")] | (
        UnsetType
    ) = UNSET
    scheme_fingerprint: str | UnsetType = UNSET
    scheme_version: int | UnsetType = UNSET
    policy_version: int | UnsetType = UNSET


class _QueryInfo(Envelope, kw_only=True):
    """The work a query did."""

    candidates_found: int | UnsetType = UNSET
    candidates_verified: int | UnsetType = UNSET
    bucket_entries_scanned: int | UnsetType = UNSET
    capped: bool | UnsetType = UNSET


class Candidate(_Answer, kw_only=True):
    """A stored item sharing a band with the query, scored exactly."""

    item_id: str
    score: Annotated[
        float, Meta(ge=0, le=1, description="exact Jaccard of the stored shingle-hash sets")
    ]
    shared: int
    union: int
    bands: Annotated[int, Meta(description="LSH bands that collided")]
    first_band: int | UnsetType | None = UNSET
    method: Literal["minhash-lsh", "identical", "unverified"]


_SpanList = Annotated[
    list[Annotated[list[int], Meta(min_length=2, max_length=2)]],
    Meta(description="[start, end) character offsets, merged into maximal runs"),
]


class Spans(_Answer, kw_only=True):
    """The shared text of a query and a candidate (null: the text is not retained)."""

    query: _SpanList | UnsetType | None = UNSET
    query_offsets: str | UnsetType = UNSET
    candidate: _SpanList | UnsetType | None = UNSET
    candidate_offsets: str | UnsetType = UNSET


class Explanation(_Answer, kw_only=True):
    """Why a candidate scored what it did."""

    candidate: str
    jaccard: float | UnsetType = UNSET
    shared_shingles: int
    total_shingles: int
    method: str | UnsetType = UNSET
    bands_collided: list[int]
    bands_total: int | UnsetType = UNSET
    rows_per_band: int | UnsetType = UNSET
    spans: Spans
    why: str | UnsetType = UNSET


class Decision(_Answer, kw_only=True):
    """A policy's decision on an item."""

    state: Literal["duplicate", "unique", "review", "rejected"]
    duplicate_of: str | UnsetType = UNSET
    canonical: Annotated[str | None, Meta(description="the cluster's canonical item")] | (
        UnsetType
    ) = UNSET
    review_band: list[float] | UnsetType = UNSET
    policy_fingerprint: str | UnsetType = UNSET
    verification: str | UnsetType = UNSET
    explanation: Explanation | UnsetType = UNSET
    score: float | UnsetType | None = UNSET
    threshold: float
    policy_version: int
    predicted_recall: Annotated[
        float, Meta(description="probability that a pair at the threshold is a candidate")
    ]
    capped: bool | UnsetType = UNSET
    reason: str


class Relink(_Answer, kw_only=True):
    """An item whose link changed."""

    item_id: str
    state: Literal["unique", "duplicate", "tombstoned"]
    canonical: str | None


class UpsertResponse(_QueryInfo, kw_only=True):
    """The stored item, its candidates and its decision."""

    item_id: str
    seq: int
    version: int | UnsetType = UNSET
    status: Literal["inserted", "replaced", "unchanged"]
    candidates: list[Candidate]
    decision: Decision | UnsetType = UNSET


class CandidatesResponse(_QueryInfo, kw_only=True):
    """An item's candidates and the decision it would get."""

    candidates: list[Candidate]
    decision: Decision


class DecideResponse(_QueryInfo, kw_only=True):
    """A decision and the candidates it rests on."""

    decision: Decision
    decision_seq: int | UnsetType = UNSET
    event_hash: str | UnsetType = UNSET
    evidence: list[Candidate] | UnsetType = UNSET


class VerifyResponse(Envelope, kw_only=True):
    """The exact score of two stored items."""

    left: str | UnsetType = UNSET
    right: str | UnsetType = UNSET
    score: float | UnsetType = UNSET
    shared: int | UnsetType = UNSET
    union: int | UnsetType = UNSET
    threshold: float | UnsetType = UNSET
    state: Literal["duplicate", "distinct"] | UnsetType = UNSET


class TenantResponse(Envelope, kw_only=True):
    """A tenant's stats and layout."""

    tenant_id: str
    items: int
    bands: int
    rows: int
    predicted_recall: Annotated[
        float,
        Meta(
            ge=0,
            le=1,
            description="probability that a pair at the tenant's threshold shares a band",
        ),
    ]
    recall_target: (
        Annotated[
            float, Meta(description="the service's target for predicted_recall (tenant creation)")
        ]
        | UnsetType
    ) = UNSET
    failed_commands: (
        Annotated[int, Meta(description="logged commands recorded as failed (skipped on replay)")]
        | UnsetType
    ) = UNSET
    stopped: (
        Annotated[
            str | None, Meta(description="why writes stopped after a storage error (null: healthy)")
        ]
        | UnsetType
    ) = UNSET
    reopened: bool | UnsetType = UNSET
    warnings: (
        Annotated[
            list[str],
            Meta(description="why the configuration may not serve its threshold, and the fix"),
        ]
        | UnsetType
    ) = UNSET


class TombstoneResponse(Envelope, kw_only=True):
    """The tombstoned item and the links that changed."""

    item_id: str | UnsetType = UNSET
    seq: int | UnsetType = UNSET
    tombstoned: bool | UnsetType = UNSET
    epoch: int | UnsetType = UNSET
    relinks: (
        Annotated[
            list[Relink],
            Meta(
                description="links changed: the item left its cluster; a canonical "
                "item's cluster went to its oldest live member"
            ),
        ]
        | UnsetType
    ) = UNSET


class ItemResponse(Envelope, kw_only=True):
    """A stored item's metadata."""

    item_id: str | UnsetType = UNSET
    version: int | UnsetType = UNSET
    live: bool | UnsetType = UNSET
    tombstone_epoch: int | UnsetType | None = UNSET
    shingles: int | UnsetType = UNSET
    media_type: str | UnsetType | None = UNSET
    source_time: str | UnsetType | None = UNSET
    access_policy: (
        Annotated[str, Meta(description="the access policy it was stored with (absent: none)")]
        | UnsetType
    ) = UNSET


class PolicyResponse(Envelope, kw_only=True):
    """A tenant's policy: the installed or current version and the history."""

    policy: _Object | UnsetType = UNSET
    current: _Object | UnsetType = UNSET
    history: list[_Object] | UnsetType = UNSET
    fingerprint: str | UnsetType = UNSET
    predicted_recall_at_threshold: float | UnsetType = UNSET
    event_hash: str | UnsetType = UNSET
    warnings: _Warnings | UnsetType = UNSET


class ItemStateResponse(Envelope, kw_only=True):
    """An item's current decision state."""

    item_id: str
    state: Literal["unique", "duplicate", "review"]
    canonical: str | UnsetType | None = UNSET


class ThresholdReportResponse(Envelope, kw_only=True):
    """The threshold evaluation on reviewer labels."""

    labels: int
    report: Annotated[
        _Object,
        Meta(
            description="neardup.service.ThresholdReport.to_dict(): reviewers (agreement, "
            "weight, flagged), pairs, thresholds (precision / recall / F1 with Wilson "
            "intervals), current, suggested_threshold, regression_set"
        ),
    ]
    labelled_recall: _Object


class ShadowComparison(_Answer, kw_only=True):
    """How the shadow (or previous) version's answers differ from the live one's."""

    queries: int | UnsetType = UNSET
    candidate_disagreements: int | UnsetType = UNSET
    decision_disagreements: int | UnsetType = UNSET
    candidates_live: int | UnsetType = UNSET
    candidates_other: int | UnsetType = UNSET
    mirror_errors: int | UnsetType = UNSET
    missed_writes: int | UnsetType = UNSET
    examples: list[Any] | UnsetType = UNSET


class ShadowResponse(_Answer, kw_only=True):
    """The status of a tenant's shadow or previous version."""

    tenant_id: str
    role: Literal["shadow", "previous"] | None
    live: _Object
    other: _Object | UnsetType = UNSET
    comparison: ShadowComparison | UnsetType = UNSET
    rebuilt_items: int | UnsetType = UNSET
    event_hash: str | UnsetType = UNSET
    warnings: _Warnings | UnsetType = UNSET


class EventResponse(Envelope, kw_only=True):
    """A decision-log event just recorded."""

    event: _Object
    event_hash: str


class ContentResponse(Envelope, kw_only=True):
    """A live item's retained normalized text."""

    item_id: str
    version: int
    normalizer: str
    text: Annotated[str, Meta(description="the retained normalized text")]
    access_policy: (
        Annotated[str, Meta(description="the item's access policy (absent: none)")] | UnsetType
    ) = UNSET


class KeyResponse(_Answer, kw_only=True):
    """A new API key."""

    token: Annotated[str, Meta(description="nd_<key id>_<secret>; shown once")]


class DigestResponse(_Answer, kw_only=True):
    """The SHA-256 of a tenant's logical state."""

    tenant_id: str
    seq: int
    digest: str


class CompactResponse(Envelope, kw_only=True):
    """What a compaction merged and purged."""

    seq: int
    purged_features: int
    index_entries_dropped: int
    index_bytes: int


class RestoreResponse(Envelope, kw_only=True):
    """The restored snapshot."""

    restored_seq: int
    items: int
    generation: int


class Error(_Answer, kw_only=True):
    """A refused request."""

    error: Annotated[str, Meta(description="stable machine-readable code")]
    message: Annotated[str, Meta(description="what was wrong, with the value")]
    fix: Annotated[str, Meta(description="what to do instead")]


#: Every response model ``/openapi.json`` names (the nested ones are reached from these).
RESPONSES: tuple[type[msgspec.Struct], ...] = (
    UpsertResponse,
    CandidatesResponse,
    DecideResponse,
    VerifyResponse,
    TenantResponse,
    TombstoneResponse,
    ItemResponse,
    PolicyResponse,
    ItemStateResponse,
    ThresholdReportResponse,
    ShadowResponse,
    EventResponse,
    ContentResponse,
    KeyResponse,
    DigestResponse,
    CompactResponse,
    RestoreResponse,
    Error,
)

"""The constrained field types the service's models share (tenant and item ids,
log positions, free text): one definition each, used by the request and response
models, the OpenAPI path parameters and the validation of path values."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

__all__ = [
    "ACCESS_POLICY_PATTERN",
    "INT64_MAX",
    "INT64_MIN",
    "TENANT_PATTERN",
    "AccessPolicy",
    "EventsLimit",
    "IdempotencyKey",
    "ItemId",
    "Purpose",
    "Rationale",
    "Seq",
    "TenantId",
]

#: The largest integer the service stores (SQLite's ``INTEGER`` is signed 64-bit).
INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)

#: Tenant names (``neardup.service.tenant.valid_tenant_id``).  ``(?!\n)$`` is the end
#: of the text in both dialects: validation runs Python's ``re``, whose ``$`` alone
#: also matches before a final newline; ECMA-262 (the JSON Schema dialect) reads it
#: as a plain ``$``.
TENANT_PATTERN = "^[a-z0-9][a-z0-9_-]{0,62}(?!\\n)$"
TenantId = Annotated[str, Meta(pattern=TENANT_PATTERN)]
ItemId = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=256,
        description="any text of 1-256 characters; in a URL path, percent-encode it (a '/' as %2F)",
    ),
]
#: A position in a tenant's logs (tombstone ``epoch``, ``after`` of the decision log).
Seq = Annotated[int, Meta(ge=0, le=INT64_MAX)]
#: Entries of the decision log one ``GET .../decisions`` returns.
EventsLimit = Annotated[int, Meta(ge=1, le=10_000)]
IdempotencyKey = Annotated[str, Meta(max_length=256)]
Rationale = Annotated[str, Meta(max_length=2000)]

#: An item's access policy: a short label (``restricted``, ``eu-only``); a reviewer
#: key reads the content of such an item only if the key is allowed the label.
ACCESS_POLICY_PATTERN = "^[a-z0-9][a-z0-9_.:-]{0,62}(?!\\n)$"
AccessPolicy = Annotated[
    str,
    Meta(
        pattern=ACCESS_POLICY_PATTERN,
        description="access-policy label: 1-63 of a-z 0-9 _ . : - (starting with a letter "
        "or digit); only reviewer keys allowed this label read the item's content",
    ),
]
#: Why a reviewer reads an item's content (``?purpose=`` of a content read): kept in
#: the audit log with the read.
Purpose = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=200,
        description="why the content is read (a ticket, a review task): written to the "
        "audit log with the read",
    ),
]

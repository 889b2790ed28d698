"""The constrained field types the service's models share (tenant and item ids,
log positions, free text): one definition each, used by the request and response
models, the OpenAPI path parameters and the validation of path values."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "TENANT_PATTERN",
    "EventsLimit",
    "IdempotencyKey",
    "ItemId",
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

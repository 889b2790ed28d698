"""The records the service writes to its logs, declared once: ``docs/schemas`` and
``/openapi.json`` publish their JSON Schemas, and the tests check real records
against them.  The writers build the records as dicts; these models describe them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from neardup.service.models.responses import Decision, Envelope, Relink

__all__ = ["EVENTS", "AuditEvent", "CommandEvent", "DecisionEvent"]


class DecisionEvent(msgspec.Struct, kw_only=True):
    """one record of the hash-chained decision log"""

    seq: int
    kind: Literal["decision", "unlink", "release", "label", "policy", "shadow", "relink"]
    item_id: str | UnsetType | None = UNSET
    actor: Annotated[str | None, Meta(description="API key id")] | UnsetType = UNSET
    time: float
    tenant: str | UnsetType = UNSET
    method: str | UnsetType = UNSET
    scheme_version: int
    scheme_fingerprint: str | UnsetType = UNSET
    policy_version: int
    decision: Decision | UnsetType = UNSET
    stored: bool | UnsetType = UNSET
    effect: dict[str, Any] | UnsetType = UNSET
    relinks: (
        Annotated[
            list[Relink],
            Meta(description="other items' links changed by this event (applied first)"),
        ]
        | UnsetType
    ) = UNSET
    cause: (
        Annotated[Literal["tombstone", "repair"], Meta(description="of a relink event")] | UnsetType
    ) = UNSET
    inherited: (
        Annotated[
            bool,
            Meta(
                description="of a policy event: a version recorded by another index of "
                "the tenant (its live version, or before a restore), continued here"
            ),
        ]
        | UnsetType
    ) = UNSET
    source: (
        Annotated[
            Literal["shadow start", "promote", "restore"],
            Meta(description="of a policy event not written by PUT .../policy"),
        ]
        | UnsetType
    ) = UNSET
    before: dict[str, Any] | UnsetType = UNSET
    rationale: str | UnsetType = UNSET
    prev: Annotated[str, Meta(description="SHA-256 of the previous record")]


class EventsResponse(Envelope, kw_only=True):
    """A page of the decision log, its chain verified."""

    events: list[DecisionEvent]
    chain_verified: int
    head: str


class CommandEvent(msgspec.Struct, kw_only=True):
    """header of a command-log record (the blob holds features and band keys)"""

    op: Literal["upsert", "tombstone", "compact"]
    item_id: str | UnsetType = UNSET
    pos: int | UnsetType = UNSET
    epoch: int | UnsetType = UNSET
    replaces: int | UnsetType | None = UNSET
    response: (
        Annotated[
            dict[str, Any] | None,
            Meta(
                description="the response to repeat for the idempotency key; null "
                "when the request carried none"
            ),
        ]
        | UnsetType
    ) = UNSET
    event: (
        Annotated[
            dict[str, Any] | None,
            Meta(
                description="the decision-log record applied with the command "
                "(an upsert's decision; a tombstone's relink, when links change)"
            ),
        ]
        | UnsetType
    ) = UNSET


class AuditEvent(msgspec.Struct, kw_only=True):
    """One line of the audit log (hash-chained)."""

    time: float
    key_id: str | UnsetType | None = UNSET
    role: str | UnsetType | None = UNSET
    op: str
    tenant: str | UnsetType | None = UNSET
    prev: Annotated[str, Meta(description="SHA-256 of the previous line")]


#: Every log record model, and the answer that carries decision-log records.
EVENTS: tuple[type[msgspec.Struct], ...] = (
    DecisionEvent,
    EventsResponse,
    CommandEvent,
    AuditEvent,
)

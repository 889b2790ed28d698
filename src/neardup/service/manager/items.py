"""Item operations: upserts (mirrored to a shadow), queries, decisions, tombstones, reads.

What producers and readers call on a :class:`~neardup.service.manager.Service`; each
operation is one request (:func:`~neardup.service.manager.gating.request_scope`)
on one tenant found through :meth:`~neardup.service.manager.gating.GatingMixin.tenant`.
"""

from __future__ import annotations

from typing import Any

from neardup.core._errors import (
    DocumentTooLarge,
    EmptyDocument,
    Forbidden,
    LimitExceeded,
    NeardupError,
)
from neardup.service.auth import Principal
from neardup.service.manager._state import ServiceState
from neardup.service.manager.gating import request_scope
from neardup.service.models.checks import check_int, validate
from neardup.service.models.fields import INT64_MAX, IdempotencyKey, Purpose
from neardup.service.models.requests import VerifyRequest
from neardup.service.tenant import Tenant

__all__ = ["ItemsMixin"]


class ItemsMixin(ServiceState):
    @request_scope
    def upsert(self, principal: Principal, tenant_id: str, body: dict[str, Any]) -> dict[str, Any]:
        self.tenant(principal, "upsert", tenant_id)
        self._check_item(body, tenant_id, "UpsertRequest")
        content = self._content(body)
        return self._store(
            tenant_id,
            {
                "item_id": body["item_id"],
                "content": content,
                "media_type": body.get("media_type"),
                "source_time": body.get("source_time"),
                "access_policy": body.get("access_policy"),
                "idempotency_key": body.get("idempotency_key"),
                "replace": bool(body.get("replace", False)),
                "body": body,
                "max_token_bytes": self.config.max_token_bytes,
                "actor": principal.key_id,
            },
        )

    def _store(self, tenant_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        """Upsert into the live version, mirrored to a shadow / previous version.

        Under the request's lease: no switch happens between the two, so a write is
        acknowledged only once both versions have it (or the companion's miss is
        counted, and it is never promoted)."""
        mig = self._migrations[tenant_id]
        out = mig.live.upsert(**kwargs)
        cmp = mig.mirror_upsert(kwargs, out)
        return out if cmp is None else {**out, "shadow": cmp}

    @request_scope
    def candidates(
        self, principal: Principal, tenant_id: str, body: dict[str, Any], limit: int | None = None
    ) -> dict[str, Any]:
        t = self.tenant(principal, "candidates", tenant_id)
        self._check_item(body, tenant_id, "QueryRequest")
        lim = body.get("limit", limit if limit is not None else 10)
        check_int("limit", lim, 1, INT64_MAX)
        cap = min(self.config.max_candidates, t.config.scheme.max_candidates)
        if lim > cap:
            raise LimitExceeded(
                f"limit={lim} exceeds the server cap of {cap} candidates", f"ask for at most {cap}"
            )
        content = self._content(body)
        out = t.candidates(content, limit=lim, max_token_bytes=self.config.max_token_bytes)
        cmp = self._migrations[tenant_id].compare_query(content, out)
        return out if cmp is None else {**out, "shadow": cmp}

    @request_scope
    def decide(self, principal: Principal, tenant_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """Decide an item and record it; with ``item_id`` the item is stored too (and
        linked or quarantined by the decision), without it only the decision is logged."""
        t = self.tenant(principal, "decide", tenant_id)
        self._check_item(body, tenant_id, "DecideRequest")
        try:
            return self._decide(principal, t, tenant_id, body)
        except (LimitExceeded, EmptyDocument, DocumentTooLarge) as exc:
            if isinstance(exc, LimitExceeded) and exc.retry_after is not None:
                raise  # a rate limit says "later", not "this item is rejected"
            item = body.get("item_id")
            return t.reject(
                str(exc), actor=principal.key_id, item_id=item if isinstance(item, str) else None
            )

    def _decide(
        self, principal: Principal, t: Tenant, tenant_id: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        if body.get("item_id"):
            out = self.upsert(principal, tenant_id, body)
            return {
                **{k: v for k, v in out.items() if k != "candidates"},
                "decision_seq": out.get("seq"),
                "evidence": out.get("candidates", [])[:5],
            }
        return t.decide(
            self._content(body),
            max_token_bytes=self.config.max_token_bytes,
            actor=principal.key_id,
        )

    @request_scope
    def verify(self, principal: Principal, tenant_id: str, left: str, right: str) -> dict[str, Any]:
        t = self.tenant(principal, "verify", tenant_id)
        return t.verify(self._check_id(left, "left"), self._check_id(right, "right"))

    @request_scope
    def verify_request(self, principal: Principal, tenant_id: str, body: Any) -> dict[str, Any]:
        """``POST .../verify``: the body validated after the caller is authorized."""
        principal.require("verify", tenant_id)
        validate(VerifyRequest, body, "body")
        return self.verify(principal, tenant_id, body["left"], body["right"])

    @request_scope
    def tombstone(
        self,
        principal: Principal,
        tenant_id: str,
        item_id: str,
        epoch: int | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        t = self.tenant(principal, "tombstone", tenant_id)
        self._check_id(item_id)
        if epoch is not None:
            check_int("epoch", epoch, 0, INT64_MAX)
        if idempotency_key is not None:
            validate(IdempotencyKey, idempotency_key, "idempotency_key")
        out = t.tombstone(
            item_id, epoch=epoch, idempotency_key=idempotency_key, actor=principal.key_id
        )
        self._migrations[tenant_id].mirror_tombstone(item_id)
        return out

    @request_scope
    def item(self, principal: Principal, tenant_id: str, item_id: str) -> dict[str, Any]:
        t = self.tenant(principal, "read", tenant_id)
        return t.item(self._check_id(item_id))

    @request_scope
    def content(
        self, principal: Principal, tenant_id: str, item_id: str, purpose: str | None = None
    ) -> dict[str, Any]:
        """Retained text of an item: reviewer role only, only items whose access
        policy the key is allowed, and every attempt is audited (outcome, the item's
        access policy, the stated ``purpose``)."""
        why: dict[str, str] = {}
        t: Tenant | None = None
        try:
            if purpose is not None:
                # Recorded only once valid (an invalid one is refused, and audited without it).
                why["purpose"] = validate(Purpose, purpose, "purpose")
            t = self.tenant(principal, "content", tenant_id)
            out = t.content(
                self._check_id(item_id), allowed=principal.policies, key_id=principal.key_id
            )
        except NeardupError as exc:
            # A denial by the item's access policy names the policy; other refusals
            # (role, tenant scope, unknown item, bad request) only the error.
            cur = t.store.current(item_id) if t is not None and isinstance(exc, Forbidden) else None
            denied = cur is not None and cur.access_policy is not None
            self.audit.write(
                principal,
                "content",
                tenant_id,
                item_id=item_id,
                outcome="denied" if denied else "refused",
                error=type(exc).__name__,
                **({"access_policy": cur.access_policy} if denied and cur else {}),
                **why,
            )
            raise
        self.audit.write(
            principal,
            "content",
            tenant_id,
            item_id=item_id,
            outcome="ok",
            version=out["version"],
            chars=len(out["text"]),
            **({"access_policy": out["access_policy"]} if "access_policy" in out else {}),
            **why,
        )
        return out

    @request_scope
    def digest(self, principal: Principal, tenant_id: str) -> dict[str, Any]:
        t = self.tenant(principal, "stats", tenant_id)
        return {"tenant_id": tenant_id, "seq": t.seq, "digest": t.digest()}

    @request_scope
    def stats(self, principal: Principal, tenant_id: str) -> dict[str, Any]:
        return self.tenant(principal, "read", tenant_id).stats()

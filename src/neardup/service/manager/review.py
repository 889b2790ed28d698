"""The decision layer of the service: policies, events, resolutions, reviewer labels.

What reviewers and operators call on a :class:`~neardup.service.manager.Service` to
change or read how items are decided; each change is audited.  Apart from the item
operations because it changes a tenant's decisions rather than its items.
"""

from __future__ import annotations

from typing import Any

from neardup.core._errors import Conflict, InvalidConfig, NeardupError
from neardup.service.auth import Principal
from neardup.service.manager._state import ServiceState
from neardup.service.manager.gating import request_scope
from neardup.service.models.checks import check_int, short, validate
from neardup.service.models.fields import INT64_MAX
from neardup.service.models.requests import LabelRequest, Policy, ResolveRequest

__all__ = ["ReviewMixin"]


class ReviewMixin(ServiceState):
    @request_scope
    def set_policy(
        self, principal: Principal, tenant_id: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        self.tenant(principal, "policy", tenant_id)
        mig = self._migrations[tenant_id]
        try:
            validate(Policy, body, "policy")
            with mig.lock:  # no shadow starts or promotion in between
                if mig.role == "shadow":
                    raise Conflict(
                        f"tenant {tenant_id!r} has a shadow index, which brings its own "
                        "policy (the next version) when promoted",
                        "promote or roll back the shadow first",
                    )
                out = mig.live.set_policy(body, actor=principal.key_id, guard=self.guard)
        except NeardupError as exc:
            self.audit.write(
                principal, "policy", tenant_id, outcome="refused", error=str(exc)[:500]
            )
            raise
        self.audit.write(
            principal,
            "policy",
            tenant_id,
            outcome="ok",
            version=out["policy"]["version"],
            fingerprint=out["fingerprint"],
        )
        return out

    @request_scope
    def threshold_report(self, principal: Principal, tenant_id: str) -> dict[str, Any]:
        return self.tenant(principal, "decisions", tenant_id).threshold_report()

    @request_scope
    def policies(self, principal: Principal, tenant_id: str) -> dict[str, Any]:
        return self.tenant(principal, "read", tenant_id).policies()

    @request_scope
    def events(
        self, principal: Principal, tenant_id: str, after: int = 0, limit: int = 1000
    ) -> dict[str, Any]:
        t = self.tenant(principal, "decisions", tenant_id)
        check_int("after", after, 0, INT64_MAX)
        check_int("limit", limit, 1, 10_000)
        return t.events(after=after, limit=limit)

    @request_scope
    def item_state(self, principal: Principal, tenant_id: str, item_id: str) -> dict[str, Any]:
        t = self.tenant(principal, "read", tenant_id)
        return t.state(self._check_id(item_id))

    @request_scope
    def resolve_item(
        self, principal: Principal, tenant_id: str, item_id: str, action: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        """``unlink`` a duplicate or ``release`` a quarantined item (audited events)."""
        t = self.tenant(principal, "resolve", tenant_id)
        self._check_id(item_id)
        validate(ResolveRequest, body, "body")
        rationale = str(body.get("rationale", ""))
        if action == "unlink":
            out = t.unlink(item_id, actor=principal.key_id, rationale=rationale)
        else:
            out = t.release(
                item_id,
                actor=principal.key_id,
                as_state=str(body.get("as", "unique")),
                of=body.get("of"),
                rationale=rationale,
            )
        self.audit.write(principal, action, tenant_id, item_id=item_id, seq=out["event"]["seq"])
        return out

    @request_scope
    def label(self, principal: Principal, tenant_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """A reviewer label for a pair (``left``, ``right``) or for a recorded decision
        (``decision_seq``: its item and the candidate it was compared with)."""
        t = self.tenant(principal, "feedback", tenant_id)
        validate(LabelRequest, body, "body")
        seq = body.get("decision_seq")
        pair = {"left", "right"} <= set(body)
        if not (pair or seq is not None):
            raise InvalidConfig(
                "body",
                short(body),
                "needs label and either left + right or decision_seq",
                'send {"left": "A", "right": "B", "label": "duplicate"}',
            )
        if pair:
            left, right = str(body["left"]), str(body["right"])
        else:
            left, right = t.decision_pair(int(seq))  # type: ignore[arg-type]
        out = t.label(
            left,
            right,
            str(body["label"]),
            actor=principal.key_id,
            rationale=str(body.get("rationale", "")),
            decision_seq=seq,
        )
        self.audit.write(principal, "label", tenant_id, seq=out["event"]["seq"])
        return out

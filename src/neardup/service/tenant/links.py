"""A tenant's reviewer decisions: links, rejections, releases and their event chain."""

from __future__ import annotations

import logging
import time
from typing import Any

from neardup.core._errors import Conflict, InvalidConfig, NotFound
from neardup.service.cmdlog import Command
from neardup.service.decisions import chain_hash, verify_chain
from neardup.service.tenant.query import QueryMixin

_log = logging.getLogger("neardup.service.manager")


class LinksMixin(QueryMixin):
    def _canonical(self, item_id: str, relinks: dict[str, dict[str, Any]] | None = None) -> str:
        """The canonical item of ``item_id``'s cluster (``relinks``: changes about to be
        applied in the same command take precedence over the stored links)."""
        # Links always point at a cluster's canonical item, so one hop suffices.
        eff = relinks.get(item_id) if relinks else None
        if eff is not None:
            return str(eff["canonical"]) if eff["state"] == "duplicate" else item_id
        link = self.store.link(item_id)
        if link is not None and link[0] == "duplicate" and link[1] is not None:
            return link[1]
        return item_id

    def _handoff(self, item_id: str) -> list[dict[str, Any]]:
        """The re-links that hand ``item_id``'s cluster to a new canonical item, when
        ``item_id``'s current version leaves it (tombstone or replace).

        Rule: the new canonical is the **oldest live member** — the member whose
        current version was stored first (lowest position, so no ties) — and every
        other member becomes its duplicate.  Empty when ``item_id`` has no members.
        """
        members = [m for m in self.store.members(item_id) if m != item_id]
        if not members:
            return []
        head = members[0]
        out = [{"item_id": head, "state": "unique", "canonical": None}]
        out += [{"item_id": m, "state": "duplicate", "canonical": head} for m in members[1:]]
        return out

    def decide(
        self, content: str, *, max_token_bytes: int = 1024, actor: str | None = None
    ) -> dict[str, Any]:
        """Decide ``content`` under the current policy and record the decision.

        Nothing is stored but the decision-log event (``stored: false``); to store
        the item and link or quarantine it, upsert it (its decision is recorded too).
        """
        prep = self.prepare(content, max_token_bytes=max_token_bytes)
        verifiable = self.features_available()
        pre = self.preverify(prep) if verifiable else None
        with self._lock:
            if verifiable:
                cands, info = self.find(prep, limit=self.policy.max_candidates, known=pre)
            else:
                cands, info = self.find_unverified(prep)
            d = self.decision(cands, info, prep=prep, content=content, verifiable=verifiable)
            # Unverified candidates have no score and no id (the store is gone): the
            # decision reports how many there were, never what they might score.
            evidence = [c.to_dict() for c in cands[:5]] if verifiable else []
            seq = self.seq + 1
            event = self._event(
                seq,
                "decision",
                None,
                actor,
                decision=d,
                stored=False,
                content_hash=prep.content_hash,
                candidates=[
                    {k: e[k] for k in ("item_id", "score", "shared", "union")} for e in evidence
                ],
            )
            cmd = Command(seq, {"op": "event", "event": event})
            self._commit(cmd)
            sync_to = self.seq
        self.log.sync(sync_to)
        return {
            **self._envelope(),
            "decision": d,
            "decision_seq": seq,
            "event_hash": chain_hash(event),
            "evidence": evidence,
            **info,
        }

    def reject(self, reason: str, *, actor: str | None, item_id: str | None) -> dict[str, Any]:
        """Record a ``rejected`` decision (invalid or over-budget content, over quota)."""
        pol = self.policy
        d = {
            "state": "rejected",
            "reason": reason,
            "threshold": pol.threshold,
            "review_band": [pol.review_low, pol.review_high],
            "policy_version": pol.version,
            "policy_fingerprint": pol.fingerprint,
            "predicted_recall": self.predicted_recall_at(pol.threshold),
            "capped": False,
            "verification": "not attempted",
            "score": None,
        }
        event = self._record("decision", item_id, actor, decision=d, stored=False)
        self.counters.rejected += 1
        return {
            **self._envelope(),
            "decision": d,
            "decision_seq": event["seq"],
            "event_hash": chain_hash(event),
            "evidence": [],
            "candidates_found": 0,
            "candidates_verified": 0,
            "bucket_entries_scanned": 0,
            "capped": False,
        }

    # -- decision log ------------------------------------------------------------
    def _event(
        self, seq: int, kind: str, item_id: str | None, actor: str | None, **fields: Any
    ) -> dict[str, Any]:
        """A decision-log record, chained to the previous one (call under the lock)."""
        return {
            "seq": seq,
            "kind": kind,
            "item_id": item_id,
            "actor": actor,
            "time": round(time.time(), 6),
            "tenant": self.tenant,
            "method": "minhash-lsh+exact-jaccard",
            "scheme_version": self.config.scheme_version,
            "scheme_fingerprint": self.scheme.fingerprint,
            "policy_version": self.policy.version,
            **fields,
            "prev": self._last_hash,
        }

    def events(self, *, after: int = 0, limit: int = 1000) -> dict[str, Any]:
        """Decision-log records with ``seq > after`` (oldest first) and the chain check."""
        recs = self.store.events(after=after, limit=limit)
        n = verify_chain(self.store.events(limit=1 << 62), what=f"tenant {self.tenant} log")
        return {
            **self._envelope(),
            "events": recs,
            "chain_verified": n,
            "head": self._last_hash,
        }

    def _record(
        self, kind: str, item_id: str | None, actor: str | None, **fields: Any
    ) -> dict[str, Any]:
        """Write a standalone decision-layer event and apply it (durable on return)."""
        with self._lock:
            seq = self.seq + 1
            event = self._event(seq, kind, item_id, actor, **fields)
            cmd = Command(seq, {"op": "event", "event": event})
            self._commit(cmd)
            sync_to = self.seq
        self.log.sync(sync_to)
        return event

    def _linked(self, item_id: str, state: str, what: str, fix: str) -> tuple[str, str | None]:
        """``item_id``'s (state, canonical), which must be ``state`` (else a
        :class:`Conflict` says the item is not ``what``)."""
        link = self.store.link(item_id)
        if link is None or link[0] != state:
            raise Conflict(
                f"item {item_id!r} is not {what} (state {link[0] if link else 'unique'})", fix
            )
        return link

    def _record_review(
        self,
        kind: str,
        item_id: str,
        actor: str | None,
        rationale: str,
        link: tuple[str, str | None],
        state: str,
        canonical: str | None,
        **fields: Any,
    ) -> dict[str, Any]:
        """Record a reviewer's change of ``item_id`` from ``link`` to ``state`` (as a
        duplicate of ``canonical``), with the rationale's first 2000 characters."""
        return self._record(
            kind,
            item_id,
            actor,
            rationale=str(rationale)[:2000],
            before={"state": link[0], "canonical": link[1]},
            effect={"item_id": item_id, "state": state, "canonical": canonical},
            **fields,
        )

    def unlink(self, item_id: str, *, actor: str | None, rationale: str = "") -> dict[str, Any]:
        """Reverse a ``duplicate`` link: the item becomes unique again (an event too)."""
        self._require_features("unlinked")
        with self._lock:
            link = self._linked(
                item_id,
                "duplicate",
                "linked as a duplicate",
                "unlink only items decided duplicate; release quarantined ones",
            )
            event = self._record_review("unlink", item_id, actor, rationale, link, "unique", None)
        return {**self._envelope(), "event": event, "event_hash": chain_hash(event)}

    def release(
        self,
        item_id: str,
        *,
        actor: str | None,
        as_state: str = "unique",
        of: str | None = None,
        rationale: str = "",
    ) -> dict[str, Any]:
        """Resolve a quarantined (``review``) item as ``unique`` or as a ``duplicate`` of ``of``."""
        if as_state not in ("unique", "duplicate"):
            raise InvalidConfig("as", as_state, "unknown outcome", "use unique or duplicate")
        self._require_features("released")
        with self._lock:
            link = self._linked(
                item_id, "review", "quarantined", "release only items decided review"
            )
            canonical = None
            if as_state == "duplicate":
                cur = self.store.current(of) if isinstance(of, str) else None
                if not isinstance(of, str) or cur is None or not cur.live or of == item_id:
                    raise InvalidConfig(
                        "of", of, "must name another live stored item", "send the original's id"
                    )
                canonical = self._canonical(of)
                if canonical == item_id:
                    raise Conflict(
                        f"item {item_id!r} is the canonical item of {of!r}'s cluster; it "
                        "cannot be a duplicate of its own cluster",
                        "release it as unique (it stays the cluster's canonical item)",
                    )
            # A quarantined item may be the canonical of a cluster: released as a
            # duplicate, its members follow it into the other cluster (one hop).
            relinks = (
                [
                    {"item_id": m, "state": "duplicate", "canonical": canonical}
                    for m in self.store.members(item_id)
                ]
                if canonical is not None
                else []
            )
            extra = {"relinks": relinks} if relinks else {}
            event = self._record_review(
                "release", item_id, actor, rationale, link, as_state, canonical, **extra
            )
        return {**self._envelope(), "event": event, "event_hash": chain_hash(event)}

    def link_state(self) -> dict[str, tuple[str, str | None]]:
        """Current links and quarantines: item id -> (state, canonical)."""
        return self.store.link_state()

    def state(self, item_id: str) -> dict[str, Any]:
        """An item's current decision state (unique unless linked or quarantined)."""
        link = self.store.link(item_id)
        return {
            **self._envelope(),
            "item_id": item_id,
            "state": link[0] if link else "unique",
            "canonical": link[1] if link else None,
        }

    def decision_pair(self, seq: int) -> tuple[str, str]:
        """The (item, compared candidate) of the decision recorded at ``seq``."""
        ev = self.store.event(seq)
        if ev is None or ev.get("kind") != "decision":
            raise NotFound(f"no decision at sequence {seq}", "see GET .../decisions")
        d = ev.get("decision", {})
        item, other = ev.get("item_id"), d.get("duplicate_of")
        if not isinstance(item, str) or not isinstance(other, str):
            raise InvalidConfig(
                "decision_seq",
                seq,
                "names a decision without a stored item and a compared candidate",
                "label the pair with left and right",
            )
        return item, other

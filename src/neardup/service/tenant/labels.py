"""A tenant's labels and feedback: threshold reports and recall audits."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from typing import Any

import numpy as np

from neardup.core._errors import InvalidConfig, NeardupError
from neardup.service.decisions import chain_hash
from neardup.service.feedback import FeedbackPolicy, Label, evaluate_feedback
from neardup.service.tenant._state import TenantState, exact_scores
from neardup.service.tenant.config import Candidate, Prepared

_log = logging.getLogger("neardup.service.manager")


class LabelsMixin(TenantState):
    def label(
        self,
        left: str,
        right: str,
        label: str,
        *,
        actor: str,
        rationale: str = "",
        decision_seq: int | None = None,
    ) -> dict[str, Any]:
        """Record a reviewer label for a pair (an immutable event with its exact score)."""
        if label not in ("duplicate", "not_duplicate", "unsure"):
            raise InvalidConfig(
                "label", label, "unknown label", "use duplicate, not_duplicate or unsure"
            )
        if left == right:
            raise InvalidConfig("right", right, "labels a pair of two items", "name two items")
        score = self.verify(left, right)["score"]
        a, b = sorted((left, right))
        event = self._record(
            "label",
            None,
            actor,
            reviewer=actor,
            left=a,
            right=b,
            label=label,
            score=score,
            rationale=str(rationale)[:2000],
            decision_seq=decision_seq,
        )
        return {**self._envelope(), "event": event, "event_hash": chain_hash(event)}

    def threshold_report(self, *, policy: FeedbackPolicy | None = None) -> dict[str, Any]:
        """Precision / recall of the current and candidate thresholds on reviewer labels.

        Only labels of this scheme version count (scores under another scheme are not
        comparable); the quality checks of :func:`neardup.service.evaluate_feedback` decide
        which reviewers and pairs are trusted.  The suggestion is never applied here:
        a policy change is an operator's call.
        """
        labels = [
            Label(
                reviewer=str(e["reviewer"]),
                left=str(e["left"]),
                right=str(e["right"]),
                score=float(e["score"]),
                label=e["label"],
                policy_version=int(e["policy_version"]),
                scheme_version=int(e["scheme_version"]),
                seq=int(e["seq"]),
            )
            for e in self.store.labels()
            if int(e["scheme_version"]) == self.config.scheme_version
        ]
        rep = evaluate_feedback(labels, current_threshold=self.policy.threshold, policy=policy)
        cur = rep.current
        self.counters.last_report = {
            "precision": cur.precision,
            "recall": cur.recall,
            "suggested": rep.suggested_threshold,
        }
        return {
            **self._envelope(),
            "labels": len(labels),
            "report": rep.to_dict(),
            "labelled_recall": self.labelled_recall(),
        }

    def maybe_audit(
        self, prep: Prepared, cands: list[Candidate], *, itself: str | None = None
    ) -> bool:
        """Start a background exact audit of this query if it is sampled (see
        :meth:`exact_audit`); at most one runs at a time, one per ``audit_interval_s``."""
        if self.audit_rate <= 0 or self._closed:
            return False
        # Sampled by content, not by a shared RNG: the same item is always (not) sampled.
        u = ((prep.content_hash * 0x9E3779B97F4A7C15) & ((1 << 64) - 1)) / float(1 << 64)
        now = time.monotonic()
        if u >= self.audit_rate or now - self._audit_last < self.audit_interval_s:
            return False
        if not self._audit_busy.acquire(blocking=False):
            return False
        self._audit_last = now
        # An upserted item is stored by the time the scan reaches it: not a miss.
        found = {c.item_id for c in cands} | ({itself} if itself else set())

        def run() -> None:
            try:
                self.exact_audit(prep, found)
            except (NeardupError, sqlite3.Error) as exc:
                # The tenant was closed (or its store restored) under the scan: the
                # audit ends quietly, counting nothing.
                if not self._closed:
                    _log.warning("tenant %s: exact audit stopped: %s", self.tenant, exc)
            finally:
                self._audit_busy.release()

        threading.Thread(target=run, name=f"audit-{self.tenant}", daemon=True).start()
        return True

    def exact_audit(self, prep: Prepared, found: set[str]) -> dict[str, int]:
        """Exact search over live items: pairs at the threshold the index missed.

        A share of queries runs this in the background so that recall is *measured*,
        not only predicted from the S-curve.  Tenants larger than ``audit_max_items``
        are scanned on an evenly strided subset of about that size (only those rows
        are read; ``scanned`` says how many items the figures cover).
        """
        t = self.policy.threshold
        pairs = misses = scanned = 0
        q = prep.features
        stride = max(1, -(-self._next_pos // max(self.audit_max_items, 1)))
        for _pos, item_id, feats in self.store.all_features(stride):
            if self._closed:  # the tenant is closing: stop, count nothing
                return {"pairs": pairs, "misses": misses, "scanned": scanned}
            scanned += 1
            inter = int(np.intersect1d(q, feats, assume_unique=True).shape[0])
            union = int(q.shape[0] + feats.shape[0] - inter)
            if union and inter / union >= t:
                pairs += 1
                misses += item_id not in found
        with self._lock:
            c = self.counters
            c.audits += 1
            c.audit_pairs += pairs
            c.audit_misses += misses
            c.extra["audit_scanned"] = c.extra.get("audit_scanned", 0) + scanned
        return {"pairs": pairs, "misses": misses, "scanned": scanned}

    def labelled_pairs(self) -> list[tuple[str, str]]:
        """Pairs whose reviewer majority (``unsure`` aside) says ``duplicate``."""
        votes: dict[tuple[str, str], list[int]] = {}
        for e in self.store.labels():
            if e["label"] == "unsure":
                continue
            v = votes.setdefault((str(e["left"]), str(e["right"])), [0, 0])
            v[0 if e["label"] == "duplicate" else 1] += 1
        return sorted(k for k, (d, n) in votes.items() if d > n)

    def labelled_recall(self, pairs: list[tuple[str, str]] | None = None) -> dict[str, Any]:
        """Share of reviewer-confirmed duplicate pairs (majority ``duplicate``; or
        ``pairs``) that this index makes candidates (they share a band), and that
        verify at the threshold."""
        dup = self.labelled_pairs() if pairs is None else pairs
        found = verified = 0
        for left, right in dup:
            a, b = self.store.current(left), self.store.current(right)
            if a is None or b is None or not (a.live and b.live):
                continue
            ka, kb = self.store.bandkeys(a.pos), self.store.bandkeys(b.pos)
            if ka is not None and kb is not None and bool((ka == kb).any()):
                found += 1
                feats = self.store.features([a.pos, b.pos])
                inter, union = exact_scores(feats[a.pos][1], feats[b.pos][1])
                verified += int(union > 0 and inter / union >= self.policy.threshold)
        n = len(dup)
        return {
            "labelled_duplicates": n,
            "candidates": found,
            "verified_at_threshold": verified,
            "candidate_recall": found / n if n else None,
        }

"""Reading a tenant: candidate search, exact verification, explanations, decisions on a pair."""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Collection
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.core._errors import (
    Conflict,
    DeadlineExceeded,
    Degraded,
    Forbidden,
    NeardupError,
    NotFound,
)
from neardup.core._trace import span
from neardup.core.config import Config, ShingleSpec
from neardup.kernels.threads import limited_threads
from neardup.service.decisions import band_estimate, colliding_bands, outcome
from neardup.service.tenant._state import Preverified, TenantState, exact_scores
from neardup.service.tenant.config import Candidate, Prepared
from neardup.sketch.lsh import candidate_probability
from neardup.text.hashing import ShingleSets, hash_documents
from neardup.text.normalize import get_normalizer
from neardup.verify.explain import merge_spans, positioned_shingles

_log = logging.getLogger("neardup.service.manager")


class QueryMixin(TenantState):
    # -- queries -----------------------------------------------------------------
    def find(
        self,
        prep: Prepared,
        *,
        limit: int,
        exclude: int | None = None,
        known: Preverified | None = None,
        learn: Preverified | None = None,
    ) -> tuple[list[Candidate], dict[str, Any]]:
        """Exactly scored candidates of ``prep`` (best first, at most ``limit``).

        ``known`` holds scores computed earlier (see :meth:`preverify`): they are
        reused for positions still live, so the answer is exactly the one a fresh
        search would give.  ``learn`` collects the scores computed here instead,
        and then nothing is counted (a pre-pass, not a query).
        """
        if known is not None and known.generation != self.generation:
            known = None
        with span("band_read", bands=self.bands):
            q = self.index.query(prep.bandkeys, max_scan=self.max_scan)
            maybe = prep.content_hash in self._screen
            same = (
                [p for p in self.store.by_content_hash(prep.content_hash) if p != exclude]
                if maybe
                else []
            )
        pos = q.positions
        bands_hit = dict(zip(pos.tolist(), q.bands_hit.tolist(), strict=True))
        first = dict(zip(pos.tolist(), q.first_band.tolist(), strict=True))
        order = sorted(bands_hit, key=lambda p: (-bands_hit[p], p))
        cap = min(self.dedup.max_candidates, self.policy.max_candidates)
        capped = q.capped or len(order) > cap
        chosen = list(dict.fromkeys(same + [p for p in order if p != exclude]))[:cap]
        out: list[Candidate] = []
        # A work budget, not a clock: the same query over the same state verifies the
        # same candidates, so decisions replay exactly.  The first candidate is always
        # verified; past the budget the rest are reported as capped.
        budget, spent, over_budget = self.verify_budget, 0, False
        with span("verify", candidates=len(chosen)):
            for lo in range(0, len(chosen), 8):
                if over_budget:
                    break
                part = chosen[lo : lo + 8]
                seen = {p: known.scores[p] for p in part if p in known.scores} if known else {}
                live = self.store.live_positions(list(seen)) if seen else set()
                feats = self.store.features([p for p in part if p not in seen])
                for p in part:
                    if p in seen:
                        if p not in live:
                            continue  # tombstoned since it was scored
                        item_id, inter, union = seen[p]
                        # |A| + |B| = |A & B| + |A | B|: the same cost as below.
                        cost = inter + union
                    elif p in feats:
                        item_id, f = feats[p]
                        cost = int(prep.features.shape[0] + f.shape[0])
                    else:
                        continue  # tombstoned since the band read
                    if out and spent + cost > budget:
                        over_budget = True
                        break
                    spent += cost
                    if p not in seen:
                        inter, union = exact_scores(prep.features, f)
                        if learn is not None and p < learn.below:
                            learn.scores[p] = (item_id, inter, union)
                    score = inter / union if union else 1.0
                    method = "identical" if p in same and inter == union else "minhash-lsh"
                    out.append(
                        Candidate(
                            item_id,
                            score,
                            inter,
                            union,
                            bands_hit.get(p, 0),
                            first.get(p),
                            method,
                            p,
                        )
                    )
        capped = capped or over_budget
        out.sort(key=lambda c: (-c.score, c.item_id))
        if learn is not None:
            return out[:limit], {}
        self.counters.queries += 1
        self.counters.candidates_verified += len(out)
        if capped:
            self.counters.capped += 1
        info = {
            "candidates_found": len(order) + len([p for p in same if p not in bands_hit]),
            "candidates_verified": len(out),
            "bucket_entries_scanned": q.scanned,
            "capped": capped,
        }
        if over_budget:
            info["verify_budget_hit"] = True
        return out[:limit], info

    def preverify(self, prep: Prepared, item_id: str | None = None) -> Preverified:
        """Score ``prep``'s candidates without taking the write lock.

        The costly part of a write (reading candidates' features and intersecting
        them) runs here, concurrently with the tenant's other requests; under the
        lock :meth:`find` with ``known=`` then scores only what changed meanwhile,
        so a large item never holds up small writes.  Best effort: a store being
        swapped under the scan (a restore) leaves nothing known, never a wrong score.
        """
        pre = Preverified(self.generation, self._next_pos)
        try:
            cur = self.store.current(item_id) if item_id is not None else None
            exclude = cur.pos if cur is not None and cur.live else None
            self.find(prep, limit=self.policy.max_candidates, exclude=exclude, learn=pre)
        except (NeardupError, sqlite3.Error):
            pre.scores.clear()
        if self.generation != pre.generation:
            pre.scores.clear()
        return pre

    def _deadline(self, deadline: float | None) -> float | None:
        if deadline is not None or self.request_budget_s is None:
            return deadline
        return time.monotonic() + self.request_budget_s

    def _check_deadline(self, deadline: float | None, stage: str) -> None:
        """Raise :class:`DeadlineExceeded` past ``deadline``; only ever called before
        a command is logged, so a request that ends here left no trace."""
        if deadline is not None and time.monotonic() > deadline:
            budget = self.request_budget_s
            what = "its deadline" if budget is None else f"its time budget of {budget:g} s"
            raise DeadlineExceeded(
                f"the request to tenant {self.tenant!r} used up {what} {stage}; nothing "
                "was stored or recorded",
                "retry later (with the same idempotency key, if it had one); an operator "
                "can raise the budget with neardup serve --request-budget",
                retry_after=1.0,
            )

    def decision(
        self,
        cands: list[Candidate],
        info: dict[str, Any],
        *,
        prep: Prepared | None = None,
        content: str | None = None,
        verifiable: bool = True,
        relinks: dict[str, dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """The policy's outcome for these exactly scored candidates, with the evidence.

        With ``prep`` and ``content`` the best candidate of a ``duplicate`` or
        ``review`` outcome is explained: shared / total shingles, the bands that
        collided, and the shared spans as offsets into ``content`` (and into the
        candidate's retained normalized text when the tenant keeps text).
        """
        with span("decide", candidates=len(cands)):
            return self._decision(cands, info, prep, content, verifiable, relinks)

    def _decision(
        self,
        cands: list[Candidate],
        info: dict[str, Any],
        prep: Prepared | None,
        content: str | None,
        verifiable: bool,
        relinks: dict[str, dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        pol = self.policy
        best = cands[0] if cands else None
        est = band_estimate(max(c.bands for c in cands), self.bands, self.rows) if cands else None
        out = outcome(
            pol,
            best_score=best.score if best and verifiable else None,
            identical=bool(best and best.method == "identical" and verifiable),
            capped=bool(info["capped"]),
            found=int(info["candidates_found"]),
            predicted_recall=self.predicted_recall_at(pol.threshold),
            verifiable=verifiable,
            best_estimate=est,
        )
        d: dict[str, Any] = {
            "state": out.state,
            "reason": out.reason,
            "threshold": pol.threshold,
            "review_band": [pol.review_low, pol.review_high],
            "policy_version": pol.version,
            "policy_fingerprint": pol.fingerprint,
            "predicted_recall": self.predicted_recall_at(pol.threshold),
            "capped": info["capped"],
            "verification": "exact" if verifiable else "unavailable (exact-hash-only mode)",
            "score": best.score if best and verifiable else None,
        }
        if best is not None and out.state in ("duplicate", "review") and verifiable:
            d["duplicate_of"] = best.item_id
            if out.state == "duplicate":
                d["canonical"] = self._canonical(best.item_id, relinks)
            if prep is not None and content is not None:
                d["explanation"] = self._explain(prep, content, best, out.reason)
        return d

    def predicted_recall_at(self, threshold: float) -> float:
        """Probability that a pair at ``threshold`` shares a band (this layout)."""
        return float(candidate_probability(threshold, self.bands, self.rows))

    def _hash_strings(self, strings: list[str]) -> ShingleSets:
        """The keyed shingle hashes of each string (the strings are normalized shingles)."""
        raw = self.__dict__.get("_raw_cfg")
        if raw is None:
            raw = self.__dict__["_raw_cfg"] = Config(
                threshold=self.dedup.threshold,
                normalizer="raw",
                shingle=self.dedup.shingle,
                hash_algorithm="siphash24",
                num_perm=self.dedup.num_perm,
                bands=self.bands,
                rows=self.rows,
            )
        with limited_threads(1):
            return hash_documents(strings, raw, key=self.key)

    def _spans(self, text: str, normalizer: str, other: npt.NDArray[np.uint64]) -> list[list[int]]:
        """Character spans of ``text`` covered by shingles whose keyed hash is in ``other``.

        Works for hashes-only tenants: only the other side's hash set is needed.
        """
        spec = self.dedup.shingle
        char_spec = (
            spec
            if spec.kind != "byte"
            else ShingleSpec(kind="char", k=spec.k, max_shingles=spec.max_shingles)
        )
        nt = get_normalizer(normalizer).with_offsets(text)
        pos = positioned_shingles(nt, char_spec)
        if not pos:
            return []
        sets = self._hash_strings([p[0] for p in pos])
        # One membership test over all shingles, then "every hash of the string is
        # shared" per string (each normalized shingle hashes to one value).
        hit = np.isin(sets.data, other)
        sizes = np.diff(sets.indptr)
        starts = np.minimum(sets.indptr[:-1], max(hit.shape[0] - 1, 0))
        shared = np.logical_and.reduceat(hit, starts) if hit.size else np.zeros(0, bool)
        shared = shared & (sizes > 0) if hit.size else np.zeros(len(pos), dtype=bool)
        spans = [
            nt.original_span(s, e) for (_, s, e), ok in zip(pos, shared.tolist(), strict=True) if ok
        ]
        return [[a, b] for a, b in merge_spans(spans)]

    def _explain(
        self, prep: Prepared, content: str, best: Candidate, reason: str
    ) -> dict[str, Any]:
        stored_keys = self.store.bandkeys(best.pos)
        collided = (
            colliding_bands(prep.bandkeys.tolist(), stored_keys.tolist())
            if stored_keys is not None
            else []
        )
        feats = self.store.features([best.pos]).get(best.pos)
        other = feats[1] if feats is not None else np.zeros(0, dtype=np.uint64)
        # Offsets into an access-restricted candidate's text would describe text its
        # policy may hide from the caller: they are withheld.
        restricted = self.store.access_policy(best.pos) is not None
        cand_text = (
            self.store.text(best.pos)
            if self.config.retain == "text" and not restricted
            else None
        )
        limit = self.explain_max_chars
        # Spans cost Python work per shingle; past the limit the counts above still
        # explain the decision, and the request does not hold the tenant for seconds.
        query_spans = (
            self._spans(content, self.dedup.normalizer, other) if len(content) <= limit else None
        )
        cand_spans = (
            self._spans(cand_text, "raw", prep.features)
            if cand_text is not None and len(cand_text) <= limit
            else None
        )
        return {
            "candidate": best.item_id,
            "jaccard": best.score,
            "shared_shingles": best.shared,
            "total_shingles": best.union,
            "method": best.method,
            "bands_collided": collided,
            "bands_total": self.bands,
            "rows_per_band": self.rows,
            "spans": {
                "query": query_spans,
                "query_offsets": (
                    "characters of the submitted content"
                    if query_spans is not None
                    else f"not computed: the content has {len(content)} characters, over "
                    f"the explanation limit of {limit}"
                ),
                "candidate": cand_spans,
                "candidate_offsets": (
                    "characters of the candidate's retained normalized text"
                    if cand_spans is not None
                    else "withheld: the candidate was stored with an access policy"
                    if restricted
                    else "not available: the tenant retains hashed shingles only"
                    if cand_text is None
                    else f"not computed: the retained text has {len(cand_text)} characters, "
                    f"over the explanation limit of {limit}"
                ),
            },
            "why": reason,
        }

    def _envelope(self) -> dict[str, Any]:
        env = self.__dict__.get("_env")
        if env is None:
            env = self.__dict__["_env"] = {
                "tenant_id": self.tenant,
                "method": "minhash-lsh+exact-jaccard",
                "scheme_fingerprint": self.scheme.fingerprint,
                "scheme_version": self.config.scheme_version,
            }
        return {**env, "policy_version": self.policy.version}

    def candidates(
        self, content: str, *, limit: int, max_token_bytes: int = 1024
    ) -> dict[str, Any]:
        """Exactly scored candidates without storing anything; the ``decision`` in the
        answer is a preview under the current policy and is not recorded."""
        prep = self.prepare(content, max_token_bytes=max_token_bytes)
        if not self.features_available():
            # The same path as decide: unverified band candidates, never a score or id.
            cands, info = self.find_unverified(prep)
            return {
                **self._envelope(),
                "candidates": [],
                **info,
                "decision": self.decision(cands, info, verifiable=False),
            }
        cands, info = self.find(prep, limit=limit)
        self.maybe_audit(prep, cands)
        if cands:
            # Never answer with an item whose upsert is not yet on disk (records
            # reach the log before the index, so this covers all that find saw).
            self.log.sync(self.log.last_seq)
        return {
            **self._envelope(),
            "candidates": [c.to_dict() for c in cands],
            **info,
            "decision": self.decision(cands, info),
        }

    # -- degraded mode -----------------------------------------------------------
    def features_available(self) -> bool:
        """False when the feature store's file is gone or replaced (exact-hash-only mode)."""
        try:
            st = os.stat(self.store.path)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self._store_identity

    def _require_features(self, what: str) -> None:
        """Refuse (503 ``degraded``) what needs the feature store in exact-hash-only mode.

        The rule: items and links are neither changed (upsert, tombstone, unlink,
        release) nor exactly scored (verify, labels) while the store is unavailable;
        decisions and previews answer from the band index alone (``review`` at any
        candidate, never ``duplicate``), and policy changes are still recorded.
        """
        if not self.features_available():
            raise Degraded(
                f"tenant {self.tenant!r} is in exact-hash-only mode: its feature store is "
                f"unavailable, so nothing can be {what} (items and links are neither "
                "changed nor exactly scored until it is back)",
                "retry later; an operator restores the feature store (restart recovers it "
                "from the latest snapshot and the command log)",
            )

    @property
    def mode(self) -> str:
        if self.stopped is not None:
            return "stopped"
        return "normal" if self.features_available() else "exact-hash-only"

    def find_unverified(self, prep: Prepared) -> tuple[list[Candidate], dict[str, Any]]:
        """Band candidates without reading the feature store (scores unknown)."""
        q = self.index.query(prep.bandkeys, max_scan=self.max_scan)
        maybe = prep.content_hash in self._screen
        info = {
            "candidates_found": int(q.positions.shape[0]) + int(maybe),
            "candidates_verified": 0,
            "bucket_entries_scanned": q.scanned,
            "capped": q.capped,
        }
        cands = [
            Candidate("?", float("nan"), 0, 0, int(b), int(f), "unverified", int(p))
            for p, b, f in zip(
                q.positions.tolist(), q.bands_hit.tolist(), q.first_band.tolist(), strict=True
            )
        ]
        if maybe and not cands:
            cands = [Candidate("?", float("nan"), 0, 0, self.bands, 0, "unverified", -1)]
        return cands, info

    def verify(self, left: str, right: str) -> dict[str, Any]:
        """Exact Jaccard of two stored, live items under the tenant's policy."""
        self._require_features("exactly scored")
        items = []
        for item_id in (left, right):
            cur = self.store.current(item_id)
            if cur is None or not cur.live:
                raise NotFound(
                    f"item {item_id!r} is not stored (or is tombstoned)", "upsert it first"
                )
            items.append(cur)
        feats = self.store.features([items[0].pos, items[1].pos])
        inter, union = exact_scores(feats[items[0].pos][1], feats[items[1].pos][1])
        score = inter / union if union else 1.0
        t = self.dedup.threshold
        return {
            **self._envelope(),
            "left": left,
            "right": right,
            "score": score,
            "shared": inter,
            "union": union,
            "threshold": t,
            "state": "duplicate" if score >= t else "distinct",
        }

    def item(self, item_id: str) -> dict[str, Any]:
        """The stored version of ``item_id`` (metadata only; never content)."""
        cur = self.store.current(item_id)
        if cur is None:
            raise NotFound(f"item {item_id!r} was never stored", "check the item id")
        return {
            **self._envelope(),
            "item_id": item_id,
            "version": cur.version,
            "live": cur.live,
            "tombstone_epoch": cur.tombstone_epoch,
            "shingles": cur.n_shingles,
            "media_type": cur.media_type,
            "source_time": cur.source_time,
            **({"access_policy": cur.access_policy} if cur.access_policy is not None else {}),
        }

    def content(
        self, item_id: str, *, allowed: Collection[str] | None = None, key_id: str = ""
    ) -> dict[str, Any]:
        """The retained normalized text of live ``item_id`` (tenants with ``retain="text"``).

        Raises :class:`NotFound` for an unknown or tombstoned item,
        :class:`Conflict` when the tenant keeps hashed shingles only (there is no
        text to return, by the tenant's own choice), and :class:`Forbidden` when
        the item was stored with an access policy that is not in ``allowed`` (the
        policies of the caller ``key_id``; None: the caller is not restricted),
        before its text is read.  The answer names the item's ``access_policy``
        when it has one.
        """
        if self.config.retain != "text":
            raise Conflict(
                f"tenant {self.tenant!r} retains hashed shingle sets only (retain="
                f"{self.config.retain!r}); no text is stored",
                "create the tenant with retain='text' to keep normalized text",
            )
        cur = self.store.current(item_id)
        if cur is None or not cur.live:
            raise NotFound(f"item {item_id!r} is not stored (or is tombstoned)", "check the id")
        policy = cur.access_policy
        if policy is not None and allowed is not None and policy not in allowed:
            raise Forbidden(
                f"item {item_id!r} has access policy {policy!r}, and key {key_id!r} is "
                f"not allowed it (it is allowed {sorted(allowed)})",
                f"read it with a reviewer key allowed policy {policy!r} "
                f"(neardup apikey ... --policy {policy})",
            )
        text = self.store.text(cur.pos)
        if text is None:
            raise NotFound(f"item {item_id!r} has no retained text", "check the id")
        return {
            **self._envelope(),
            "item_id": item_id,
            "version": cur.version,
            "normalizer": self.dedup.normalizer,
            "text": text,
            **({"access_policy": policy} if policy is not None else {}),
        }

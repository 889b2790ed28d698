"""Writing to a tenant: preparing content, upserts, tombstones, idempotency keys."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.core._errors import Conflict, EmptyDocument, InvalidConfig, LimitExceeded, NotFound
from neardup.core._fingerprint import canonical_json
from neardup.core._trace import span
from neardup.kernels.threads import limited_threads
from neardup.service.cmdlog import Command
from neardup.service.decisions import chain_hash
from neardup.service.models.checks import check_access_policy
from neardup.service.online import fold_keys
from neardup.service.store import StoredItem
from neardup.service.tenant._state import Preverified
from neardup.service.tenant.config import Prepared
from neardup.service.tenant.query import QueryMixin
from neardup.service.tenant.writer import WriteJob, Writer
from neardup.text.hashing import ShingleSets, hash_encoded
from neardup.text.normalize import EncodedTexts, encode_text

_log = logging.getLogger("neardup.service.manager")


class IngestMixin(QueryMixin):
    # -- features ----------------------------------------------------------------
    def prepare(self, content: str, *, max_token_bytes: int = 1024) -> Prepared:
        """Normalize, check limits, hash (keyed) and sign ``content``.

        Raises :class:`LimitExceeded` (422) for content over ``max_document_bytes``,
        a token longer than ``max_token_bytes`` or more than ``max_shingles``
        shingles, and :class:`EmptyDocument` when nothing is left to compare.
        """
        if not isinstance(content, str):
            raise InvalidConfig("content", type(content).__name__, "must be a string", "send text")
        with span("normalize", chars=len(content)):
            normalized = self._norm(content)
            enc = encode_text(normalized)
        if len(enc) > self.dedup.max_document_bytes:
            raise LimitExceeded(
                f"content is {len(enc)} bytes after normalization, over the "
                f"{self.dedup.max_document_bytes}-byte limit",
                "split the item or raise the limit",
                status=413,
            )
        longest = max((len(t) for t in normalized.split()), default=0)
        if longest > max_token_bytes:
            raise LimitExceeded(
                f"a token of {longest} characters exceeds max_token_bytes={max_token_bytes}",
                "send natural text (token stuffing is refused)",
            )
        # One item: the kernels' parallel workers would only spin (2x the CPU for the
        # same wall time), so this thread uses one; the setting is per thread.
        with limited_threads(1), span("signature", scheme=self.scheme.fingerprint):
            sets = hash_encoded(EncodedTexts.from_bytes([enc]), self.dedup, self.key, self.scheme)
            sig = self.hasher.from_sets(sets)
            keys = fold_keys(sig.band_keys()[0])
        if sets.raw_counts[0] == 0:
            raise EmptyDocument(None, "(no shingles after normalization)")
        if bool(sets.truncated[0]):
            raise LimitExceeded(
                f"content has more than max_shingles={self.dedup.shingle.max_shingles} shingles",
                "split the item, or create the tenant with a larger max_shingles",
            )
        return Prepared(sets.get(0).copy(), int(sets.content_hash[0]), keys, normalized)

    def prepare_from_features(
        self, features: npt.NDArray[np.uint64], content_hash: int
    ) -> Prepared:
        """A :class:`Prepared` from stored shingle hashes of the *same* shingle scheme
        (a layout-only migration: signatures and band keys are recomputed)."""
        feats = np.ascontiguousarray(features, dtype=np.uint64)
        sets = ShingleSets(
            feats,
            np.array([0, feats.shape[0]], dtype=np.int64),
            np.array([feats.shape[0]], dtype=np.int64),
            np.zeros(1, dtype=np.bool_),
            np.array([content_hash], dtype=np.uint64),
            np.zeros(1, dtype=np.int64),
            self.scheme,
        )
        with limited_threads(1):
            keys = fold_keys(self.hasher.from_sets(sets).band_keys()[0])
        return Prepared(feats, int(content_hash), keys, "")

    def ingest(
        self,
        item_id: str,
        prep: Prepared,
        *,
        text: str | None,
        media_type: str | None = None,
        source_time: str | None = None,
        access_policy: str | None = None,
    ) -> None:
        """Store a copy of an item without deciding it (index rebuilds, migrations).

        Durable once :meth:`flush` returns; no decision-log event is written.
        """
        check_access_policy(access_policy)
        with self._lock:
            cur = self.store.current(item_id)
            if cur is not None and cur.live:
                return
            seq, pos = self.seq + 1, self._next_pos
            keep = text if (self.config.retain == "text" and text is not None) else None
            tb = keep.encode("utf-8") if keep is not None else b""
            header = {
                "op": "upsert",
                "item_id": item_id,
                "pos": pos,
                "content_hash": prep.content_hash,
                "replaces": None,
                "media_type": media_type,
                "source_time": source_time,
                "n_features": int(prep.features.shape[0]),
                "text_bytes": len(tb) if keep is not None else None,
                "idem": None,
                "response": {"status": "ingested"},
                **({"access_policy": access_policy} if access_policy is not None else {}),
            }
            blob = (
                np.ascontiguousarray(prep.features, dtype="<u8").tobytes()
                + np.ascontiguousarray(prep.bandkeys, dtype="<u4").tobytes()
                + tb
            )
            cmd = Command(seq, header, blob)
            self._commit(cmd)

    def flush(self) -> None:
        """Wait until every command written so far is on disk."""
        self.log.sync(self.log.last_seq)
        self._maybe_compact_index()

    def ingest_tombstoned(self, item: StoredItem) -> None:
        """Record that ``item`` was stored and is tombstoned (a shadow build carries
        the live version's tombstones, so that the item reads as deleted, not as
        never stored).  No features are kept; no decision event is written."""
        if item.tombstone_epoch is None:
            return
        with self._lock:
            if self.store.current(item.item_id) is not None:
                return
            prep = self.prepare_from_features(np.zeros(0, dtype=np.uint64), item.content_hash)
            self.ingest(
                item.item_id,
                prep,
                text=None,
                media_type=item.media_type,
                source_time=item.source_time,
                access_policy=item.access_policy,
            )
            cur = self.store.current(item.item_id)
            if cur is None:  # pragma: no cover - ingest just stored it
                return
            header = {
                "op": "tombstone",
                "item_id": item.item_id,
                "pos": cur.pos,
                "epoch": item.tombstone_epoch,
                "response": None,
                "idem": None,
                "event": None,
            }
            self._commit(Command(self.seq + 1, header))

    def live_items(self) -> Iterator[tuple[StoredItem, npt.NDArray[np.uint64], str | None]]:
        """(item, features, retained text) of every live item, in position order."""
        for pos, item_id, feats in self.store.all_features():
            cur = self.store.current(item_id)
            if cur is None or cur.pos != pos:
                continue
            text = self.store.text(pos) if self.config.retain == "text" else None
            yield cur, feats, text

    # -- state changes -----------------------------------------------------------
    @staticmethod
    def body_sha(body: dict[str, Any]) -> str:
        return hashlib.sha256(canonical_json(body).encode()).hexdigest()

    def _idempotent(
        self, key: str | None, body: dict[str, Any], deadline: float | None, stage: str
    ) -> dict[str, Any] | None:
        """The answer recorded for an earlier request with idempotency key ``key`` (a
        :class:`Conflict` if that request's body differs), else None once ``deadline``
        is checked: a repeat is answered even past it, since it records nothing."""
        prev = self.store.idempotent(key) if key else None
        if prev is None:
            self._check_deadline(deadline, stage)
            return None
        if prev[0] != self.body_sha(body):
            raise Conflict(
                f"idempotency key {key!r} was used with a different request body",
                "use a new idempotency key for a new request",
            )
        stored: dict[str, Any] = json.loads(prev[1])
        return stored

    def upsert(
        self,
        *,
        item_id: str,
        content: str,
        media_type: str | None = None,
        source_time: str | None = None,
        idempotency_key: str | None = None,
        replace: bool = False,
        body: dict[str, Any] | None = None,
        max_token_bytes: int = 1024,
        actor: str | None = None,
        deadline: float | None = None,
        access_policy: str | None = None,
    ) -> dict[str, Any]:
        """Store an item, decide it under the current policy (recorded in the decision
        log: linked, quarantined or kept) and return its exactly scored candidates.

        ``access_policy`` (a label, see :func:`check_access_policy`) is stored with
        this version: :meth:`content` then answers only callers allowed it.

        Candidates are scored before the write lock is taken (:meth:`preverify`);
        the decision is the one a search under the lock gives.  ``deadline`` (a
        ``time.monotonic()`` value; default: now + ``request_budget_s``) bounds the
        time until the command is logged: past it :class:`DeadlineExceeded` and
        nothing is recorded.  A logged command is always completed.
        """
        deadline = self._deadline(deadline)
        if not isinstance(item_id, str) or not 0 < len(item_id) <= 256:
            raise InvalidConfig("item_id", item_id, "must be a 1-256 character string", "send one")
        check_access_policy(access_policy)
        body = body if body is not None else {"item_id": item_id, "content": content}
        prep = self.prepare(content, max_token_bytes=max_token_bytes)
        self._require_features("stored")
        self._check_deadline(deadline, "while preparing its content")
        pre = self.preverify(prep, item_id)
        self._check_deadline(deadline, "while scoring its candidates")
        args = (item_id, prep, body, idempotency_key, replace, media_type, source_time)
        kw: dict[str, Any] = {
            "content": content,
            "actor": actor,
            "pre": pre,
            "deadline": deadline,
            "access_policy": access_policy,
        }
        if self._batch_writes:
            if self._writer is None:
                with self._lock:
                    if self._writer is None:
                        self._writer = Writer(self)
            job = WriteJob(args, kw)
            self._writer.submit(job)
            job.done.wait()
            if job.error is not None:
                raise job.error
            response = job.result if job.result is not None else {}
        else:
            with self._lock:
                response = self._upsert_locked(*args, **kw)
                # Whatever this response reports (its own record, an earlier one it
                # repeats, or candidates written by concurrent requests) is on disk
                # before it is acknowledged; the fsync happens outside the lock so
                # that concurrent upserts share it (group commit).
                sync_to = self.seq
            self.log.sync(sync_to)
        self._maybe_compact_index()
        if source_time:
            self._note_source_time(source_time)
        return response

    def _note_source_time(self, source_time: str) -> None:
        import datetime as dt

        try:
            ts = dt.datetime.fromisoformat(source_time.replace("Z", "+00:00"))
        except (TypeError, ValueError):
            return
        if ts.tzinfo is None:
            ts = ts.replace(tzinfo=dt.UTC)
        t = ts.timestamp()
        c = self.counters
        if c.last_source_time is None or t > c.last_source_time:
            c.last_source_time = t

    def _upsert_locked(
        self,
        item_id: str,
        prep: Prepared,
        body: dict[str, Any],
        idempotency_key: str | None,
        replace: bool,
        media_type: str | None,
        source_time: str | None,
        *,
        content: str,
        actor: str | None,
        pre: Preverified | None = None,
        deadline: float | None = None,
        access_policy: str | None = None,
    ) -> dict[str, Any]:
        stored = self._idempotent(
            idempotency_key, body, deadline, "waiting for the tenant's writer"
        )
        if stored is not None:
            return stored
        cur = self.store.current(item_id)
        replaces = None
        if cur is not None and cur.live:
            same = self.store.features([cur.pos]).get(cur.pos)
            # A new access policy for the same content is a new version (replace=true).
            if (
                same is not None
                and np.array_equal(same[1], prep.features)
                and cur.access_policy == access_policy
            ):
                link = self.store.link(item_id)
                pol = self.policy
                return {
                    **self._envelope(),
                    "item_id": item_id,
                    "status": "unchanged",
                    "version": cur.version,
                    "seq": self.seq,
                    "candidates": [],
                    "decision": {
                        "state": link[0] if link else "unique",
                        "canonical": link[1] if link else None,
                        "reason": "already stored with the same content; its recorded "
                        "decision stands",
                        "threshold": pol.threshold,
                        "policy_version": pol.version,
                        "predicted_recall": self.predicted_recall_at(pol.threshold),
                    },
                }
            if not replace:
                other = (
                    "other content"
                    if same is None or not np.array_equal(same[1], prep.features)
                    else f"access policy {cur.access_policy!r}, not {access_policy!r}"
                )
                raise Conflict(
                    f"item {item_id!r} is stored (version {cur.version}) with {other}",
                    "send replace=true to store a new version, or use a new item id",
                )
            replaces = cur.pos
        if replaces is None and self._live >= self.config.max_items:
            raise LimitExceeded(
                f"tenant {self.tenant!r} holds {self._live} items, its quota is "
                f"{self.config.max_items}",
                "tombstone and compact items, or ask an operator to raise max_items",
                status=429,
            )
        cands, info = self.find(prep, limit=self.policy.max_candidates, exclude=replaces, known=pre)
        self.maybe_audit(prep, cands, itself=item_id)
        seq, pos = self.seq + 1, self._next_pos
        # A replaced version leaves its cluster like a tombstoned one: a canonical
        # item's cluster is handed to its oldest live member before the new version
        # is decided (so it can never be linked to itself).
        relinks = self._handoff(item_id) if replaces is not None else []
        decision = self.decision(
            cands,
            info,
            prep=prep,
            content=content,
            relinks={r["item_id"]: r for r in relinks},
        )
        event = self._event(
            seq,
            "decision",
            item_id,
            actor,
            decision=decision,
            stored=True,
            content_hash=prep.content_hash,
            candidates=[
                {"item_id": c.item_id, "score": c.score, "shared": c.shared, "union": c.union}
                for c in cands[:5]
            ],
            effect={
                "item_id": item_id,
                "state": decision["state"],
                "canonical": decision.get("canonical"),
            },
            **({"relinks": relinks} if relinks else {}),
        )
        response = {
            **self._envelope(),
            "item_id": item_id,
            "seq": seq,
            "version": seq,
            "status": "replaced" if replaces is not None else "inserted",
            "candidates": [c.to_dict() for c in cands],
            **info,
            "decision": decision,
            "event_hash": chain_hash(event),
        }
        text = prep.normalized if self.config.retain == "text" else None
        feats = np.ascontiguousarray(prep.features, dtype="<u8").tobytes()
        keys = np.ascontiguousarray(prep.bandkeys, dtype="<u4").tobytes()
        tb = text.encode("utf-8") if text is not None else b""
        header = {
            "op": "upsert",
            "item_id": item_id,
            "pos": pos,
            "content_hash": prep.content_hash,
            "replaces": replaces,
            "media_type": media_type,
            "source_time": source_time,
            "n_features": int(prep.features.shape[0]),
            "text_bytes": len(tb) if text else None,
            "idem": [idempotency_key, self.body_sha(body)] if idempotency_key else None,
            "response": response if idempotency_key else None,
            "event": event,
            # Only when set: headers (and digests) of items without one are unchanged.
            **({"access_policy": access_policy} if access_policy is not None else {}),
        }
        cmd = Command(seq, header, feats + keys + tb)
        self._commit(cmd)
        self.counters.upserts += 1
        return response

    def tombstone(
        self,
        item_id: str,
        *,
        epoch: int | None = None,
        idempotency_key: str | None = None,
        actor: str | None = None,
        deadline: float | None = None,
    ) -> dict[str, Any]:
        """Logically delete ``item_id``: never returned again; purged at compaction.

        ``epoch`` is the version the caller saw; a tombstone older than the stored
        version (the item was rewritten since) is refused with :class:`Conflict`.
        The item leaves its cluster; when it was the cluster's canonical item, the
        cluster is handed to its oldest live member (see :meth:`_handoff`), recorded
        in the same command as a ``relink`` event.  ``deadline`` as for :meth:`upsert`.
        """
        deadline = self._deadline(deadline)
        body = {"op": "tombstone", "item_id": item_id, "epoch": epoch}
        self._require_features("tombstoned")
        with self._lock:
            response = self._tombstone_locked(
                item_id, epoch, idempotency_key, body, actor, deadline=deadline
            )
            sync_to = self.seq
        self.log.sync(sync_to)
        return response

    def _tombstone_locked(
        self,
        item_id: str,
        epoch: int | None,
        idempotency_key: str | None,
        body: dict[str, Any],
        actor: str | None = None,
        *,
        deadline: float | None = None,
    ) -> dict[str, Any]:
        stored = self._idempotent(
            idempotency_key, body, deadline, "waiting for the tenant's write lock"
        )
        if stored is not None:
            return stored
        cur = self.store.current(item_id)
        if cur is None or not cur.live:
            raise NotFound(
                f"item {item_id!r} is not stored (or already tombstoned)", "check the item id"
            )
        if epoch is not None and epoch < cur.version:
            raise Conflict(
                f"tombstone epoch {epoch} is older than item {item_id!r} version {cur.version}",
                f"re-read the item and send epoch >= {cur.version}",
            )
        seq = self.seq + 1
        relinks = self._handoff(item_id)
        own = self.store.link(item_id)
        if own is not None:
            relinks.insert(0, {"item_id": item_id, "state": "tombstoned", "canonical": None})
        response = {
            **self._envelope(),
            "item_id": item_id,
            "seq": seq,
            "tombstoned": True,
            "epoch": epoch if epoch is not None else seq,
            "relinks": relinks,
        }
        event = None
        if relinks:
            event = self._event(
                seq,
                "relink",
                item_id,
                actor,
                cause="tombstone",
                before={"state": own[0] if own else "unique", "canonical": own[1] if own else None},
                relinks=relinks,
            )
        header = {
            "op": "tombstone",
            "item_id": item_id,
            "pos": cur.pos,
            "epoch": response["epoch"],
            "response": response if idempotency_key else None,
            "idem": [idempotency_key, self.body_sha(body)] if idempotency_key else None,
            "event": event,
        }
        cmd = Command(seq, header)
        self._commit(cmd)
        return response

"""The store's writes: each command applied in one transaction that advances
``applied_seq``, and the failed commands recorded."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.service.store._state import StoreState
from neardup.service.store.connection import signed


class WritesMixin(StoreState):
    def _event(self, seq: int, event: dict[str, Any]) -> None:
        """Record a decision-log event and its effect (inside the caller's transaction)."""
        rec = json.dumps(event, sort_keys=True, separators=(",", ":"))
        item = event.get("item_id")
        self._db.execute(
            "INSERT INTO events(seq, kind, item_id, record) VALUES (?,?,?,?)",
            (
                seq,
                event["kind"],
                None if item is None else self._id(str(item)),
                self._seal.bind_record("event", seq, rec),
            ),
        )
        # Re-links (a cluster handed to a new canonical item) first, then the
        # event's own effect on its item.
        for link in [*event.get("relinks", ()), event.get("effect")]:
            if link is None:
                continue
            ref = self._id(str(link["item_id"]))
            if link["state"] in ("duplicate", "review"):
                canonical = link.get("canonical")
                self._db.execute(
                    "INSERT OR REPLACE INTO links(item_id, state, canonical, seq) VALUES (?,?,?,?)",
                    (ref, link["state"], None if canonical is None else self._id(canonical), seq),
                )
            else:
                self._db.execute("DELETE FROM links WHERE item_id=?", (ref,))
        if event["kind"] == "policy":
            version = event["policy"]["version"]
            doc = json.dumps(event["policy"], sort_keys=True, separators=(",", ":"))
            self._db.execute(
                "INSERT INTO policies(version, doc, seq) VALUES (?,?,?)",
                (version, self._seal.bind_record("policy", version, doc), seq),
            )
        elif event["kind"] == "label":
            self._db.execute(
                "INSERT INTO labels(seq, reviewer, left_id, right_id, score, label, record) "
                "VALUES (?,?,?,?,?,?,?)",
                (
                    seq,
                    self._seal.ref("reviewer", str(event["reviewer"])),
                    self._id(str(event["left"])),
                    self._id(str(event["right"])),
                    float(event["score"]),
                    event["label"],
                    self._seal.bind_record("label", seq, rec),
                ),
            )

    def apply_event(
        self, seq: int, event: dict[str, Any], idem: tuple[str, str, bytes] | None = None
    ) -> bool:
        """Apply a decision-layer command; False (nothing changes) if already applied."""
        if seq <= self.applied_seq:
            return False
        with self._tx():
            self._finish(seq, event, idem)
        return True

    def _finish(
        self, seq: int, event: dict[str, Any] | None, idem: tuple[str, str, bytes] | None
    ) -> None:
        """The end of every command's transaction: its decision event (if any), its
        idempotency record, and ``applied_seq`` advanced to ``seq``."""
        if event is not None:
            self._event(seq, event)
        self._idem(seq, idem)
        self._set_applied(seq)

    # -- writes (each one transaction, advancing applied_seq) ----------------------
    def apply_upsert(
        self,
        seq: int,
        *,
        pos: int,
        item_id: str,
        content_hash: int,
        features: npt.NDArray[np.uint64],
        bandkeys: npt.NDArray[np.uint32],
        text: str | None,
        media_type: str | None,
        source_time: str | None,
        replaces: int | None,
        idem: tuple[str, str, bytes] | None,
        event: dict[str, Any] | None = None,
        access_policy: str | None = None,
    ) -> bool:
        """Apply an upsert command; False (and nothing changes) if already applied.

        ``access_policy`` (if any) is kept sealed to the item's row in ``access``."""
        if seq <= self.applied_seq:
            return False
        s = self._seal
        sealed_text = (
            None
            if text is None
            else self._sealer.seal(text.encode("utf-8"), s.pos_ad(pos, b"text"))
        )
        keys = np.ascontiguousarray(bandkeys, dtype="<u4").tobytes()
        row = (
            pos,
            self._id(item_id),
            seq,
            signed(content_hash),
            int(features.shape[0]),
            self._seal_features(pos, features),
            sealed_text,
            s.bind("bandkeys", pos, keys),
            s.bind("media_type", pos, media_type),
            s.bind("source_time", pos, source_time),
        )
        with self._tx():
            if replaces is not None:
                self._db.execute(
                    "UPDATE items SET tombstone_epoch=? WHERE pos=? AND tombstone_epoch IS NULL",
                    (seq, replaces),
                )
            self._db.execute(
                "INSERT INTO items(pos, item_id, version, content_hash, n_shingles, features, "
                "text, bandkeys, media_type, source_time, tombstone_epoch) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,NULL)",
                row,
            )
            if access_policy is not None:
                self._db.execute(
                    "INSERT INTO access(pos, policy) VALUES (?,?)",
                    (pos, s.bind("access", pos, access_policy)),
                )
            self._finish(seq, event, idem)
        return True

    def apply_tombstone(
        self,
        seq: int,
        *,
        pos: int,
        epoch: int,
        idem: tuple[str, str, bytes] | None,
        event: dict[str, Any] | None = None,
    ) -> bool:
        """Apply a tombstone command (and its re-link event, if any)."""
        if seq <= self.applied_seq:
            return False
        with self._tx():
            self._db.execute(
                "UPDATE items SET tombstone_epoch=? WHERE pos=? AND tombstone_epoch IS NULL",
                (epoch, pos),
            )
            self._finish(seq, event, idem)
        return True

    def apply_compact(self, seq: int) -> int:
        """Physically drop the features, text and band keys of tombstoned rows (the
        row itself stays, so the tombstone is remembered); returns rows purged."""
        if seq <= self.applied_seq:
            return 0
        with self._tx():
            cur = self._db.execute(
                "UPDATE items SET features=NULL, text=NULL, bandkeys=NULL "
                "WHERE tombstone_epoch IS NOT NULL AND features IS NOT NULL"
            )
            n = cur.rowcount
            self._set_applied(seq)
        return int(n)

    def apply_failed(self, seq: int, op: str, reason: str) -> bool:
        """Record that command ``seq`` could not be applied, and step past it.

        The failure is part of the applied state: replay meets the same command,
        fails the same way and records the same row, so the state is reproducible.
        """
        if seq <= self.applied_seq:
            return False
        with self._tx():
            self._db.execute(
                "INSERT OR REPLACE INTO failed(seq, op, reason) VALUES (?,?,?)",
                (seq, op, self._seal.bind("failed", seq, reason)),
            )
            self._set_applied(seq)
        return True

    def failed_commands(self, limit: int = 100) -> list[dict[str, Any]]:
        """The most recent commands recorded as failed (newest last)."""
        rows = self._db.execute(
            "SELECT seq, op, reason FROM failed ORDER BY seq DESC LIMIT ?", (limit,)
        ).fetchall()
        return [
            {
                "seq": int(r[0]),
                "op": str(r[1]),
                "reason": str(self._seal.unbind_str("failed", int(r[0]), r[2])),
            }
            for r in rows[::-1]
        ]

    def failed_count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM failed").fetchone()[0])

    def apply_noop(self, seq: int) -> None:
        if seq > self.applied_seq:
            with self._tx():
                self._set_applied(seq)

    def _idem(self, seq: int, idem: tuple[str, str, bytes] | None) -> None:
        if idem is not None:
            key, body_sha, response = idem
            ref = self._idem_ref(key)
            self._db.execute(
                "INSERT OR IGNORE INTO idem(key, body_sha, seq, response) VALUES (?,?,?,?)",
                (
                    ref,
                    self._seal.bind("idem-body", ref.hex(), body_sha),
                    seq,
                    self._seal.bind_record("idem-response", ref.hex(), response.decode("utf-8")),
                ),
            )

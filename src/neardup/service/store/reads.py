"""The store's reads: items, features, band keys, decisions and digests."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.service.store._state import StoreState
from neardup.service.store.connection import signed, unsigned


@dataclass(frozen=True, slots=True)
class StoredItem:
    """The current version of an item."""

    pos: int
    item_id: str
    version: int
    content_hash: int
    n_shingles: int
    tombstone_epoch: int | None
    media_type: str | None
    source_time: str | None
    #: The access-policy label the item was stored with (None: unrestricted).
    access_policy: str | None = None

    @property
    def live(self) -> bool:
        return self.tombstone_epoch is None

    def __repr__(self) -> str:
        # An item without an access policy reads as it did before policies existed.
        names = [f.name for f in fields(self)]
        if self.access_policy is None:
            names.remove("access_policy")
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in names)
        return f"StoredItem({inner})"


# The columns :meth:`ReadsMixin._item` reads (``items`` joined with ``access``).
_ITEM_COLS = (
    "items.pos, item_id, version, content_hash, n_shingles, tombstone_epoch, "
    "media_type, source_time, a.policy"
)


class ReadsMixin(StoreState):
    # -- reads -------------------------------------------------------------------
    def next_pos(self) -> int:
        row = self._db.execute("SELECT MAX(pos) FROM items").fetchone()
        return 0 if row[0] is None else int(row[0]) + 1

    def current(self, item_id: str) -> StoredItem | None:
        row = self._db.execute(
            f"SELECT {_ITEM_COLS} FROM items LEFT JOIN access a ON a.pos = items.pos "  # noqa: S608
            "WHERE item_id=? ORDER BY items.pos DESC LIMIT 1",
            (self._id(item_id),),
        ).fetchone()
        return None if row is None else self._item(row, item_id)

    def _item(self, row: Sequence[Any], item_id: str | None = None) -> StoredItem:
        pos = int(row[0])
        return StoredItem(
            pos,
            item_id if item_id is not None else str(self._unid(row[1])),
            int(row[2]),
            unsigned(int(row[3])),
            int(row[4]),
            None if row[5] is None else int(row[5]),
            self._seal.unbind_str("media_type", pos, row[6]),
            self._seal.unbind_str("source_time", pos, row[7]),
            self._seal.unbind_str("access", pos, row[8]),
        )

    def tombstoned(self) -> list[StoredItem]:
        """Items whose current version is tombstoned, in position order."""
        rows = self._db.execute(
            f"SELECT {_ITEM_COLS} FROM items LEFT JOIN access a ON a.pos = items.pos "  # noqa: S608
            "WHERE tombstone_epoch IS NOT NULL AND items.pos = (SELECT MAX(pos) FROM items j "
            "WHERE j.item_id = items.item_id) ORDER BY items.pos"
        ).fetchall()
        return [self._item(r) for r in rows]

    def live_count(self) -> int:
        row = self._db.execute(
            "SELECT COUNT(*) FROM items WHERE tombstone_epoch IS NULL"
        ).fetchone()
        return int(row[0])

    def by_content_hash(self, h: int) -> list[int]:
        rows = self._db.execute(
            "SELECT pos FROM items WHERE content_hash=? AND tombstone_epoch IS NULL ORDER BY pos",
            (signed(h),),
        ).fetchall()
        return [int(r[0]) for r in rows]

    def live_content_hashes(self) -> npt.NDArray[np.uint64]:
        rows = self._db.execute("SELECT content_hash FROM items WHERE tombstone_epoch IS NULL")
        vals = np.fromiter((r[0] for r in rows), dtype=np.int64)
        return vals.view(np.uint64)

    def _live_rows(self, columns: str, positions: Sequence[int]) -> Iterator[tuple[Any, ...]]:
        """``columns`` of the live rows holding features among ``positions``."""
        ps = [int(p) for p in positions]
        for lo in range(0, len(ps), 500):
            chunk = ps[lo : lo + 500]
            marks = ",".join("?" * len(chunk))
            yield from self._db.execute(
                f"SELECT {columns} FROM items WHERE pos IN ({marks}) "  # noqa: S608
                "AND tombstone_epoch IS NULL AND features IS NOT NULL",
                chunk,
            ).fetchall()

    def features(self, positions: Sequence[int]) -> dict[int, tuple[str, npt.NDArray[np.uint64]]]:
        """``{pos: (item_id, features)}`` for the live positions among ``positions``."""
        return {
            int(pos): (str(self._unid(item_id)), self._open_features(int(pos), bytes(blob)))
            for pos, item_id, blob in self._live_rows("pos, item_id, features", positions)
        }

    def live_positions(self, positions: Sequence[int]) -> set[int]:
        """The positions among ``positions`` that are live and hold features (what
        :meth:`features` would return, without reading or opening any blob)."""
        return {int(r[0]) for r in self._live_rows("pos", positions)}

    def text(self, pos: int) -> str | None:
        row = self._db.execute("SELECT text FROM items WHERE pos=?", (pos,)).fetchone()
        if row is None or row[0] is None:
            return None
        raw = self._sealer.open(
            bytes(row[0]), self._seal.pos_ad(pos, b"text"), what=f"{self.path} text {pos}"
        )
        return raw.decode("utf-8")

    def live_bandkeys(self, bands: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint32]]:
        """Positions (ascending) and (n, bands) band keys of every live item."""
        rows = self._db.execute(
            "SELECT pos, bandkeys FROM items WHERE tombstone_epoch IS NULL ORDER BY pos"
        ).fetchall()
        pos = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        raw = b"".join(self._open_bandkeys(int(p), bytes(b)) for p, b in rows)
        keys = np.frombuffer(raw, dtype="<u4").astype(np.uint32)
        return pos, keys.reshape(len(rows), bands)

    def idempotent(self, key: str) -> tuple[str, bytes] | None:
        ref = self._idem_ref(key)
        row = self._db.execute("SELECT body_sha, response FROM idem WHERE key=?", (ref,)).fetchone()
        if row is None:
            return None
        body = self._seal.unbind_str("idem-body", ref.hex(), row[0])
        resp = self._seal.unbind_record("idem-response", ref.hex(), row[1])
        return str(body), resp.encode("utf-8")

    def rows(self) -> Iterator[tuple[Any, ...]]:
        """Every item row in position order, opened (for digests)."""
        for r in self._db.execute(
            "SELECT pos, item_id, version, content_hash, n_shingles, features IS NOT NULL, "
            "tombstone_epoch, media_type, source_time FROM items ORDER BY pos"
        ):
            pos = int(r[0])
            yield (
                pos,
                self._unid(r[1]),
                *r[2:7],
                self._seal.unbind_str("media_type", pos, r[7]),
                self._seal.unbind_str("source_time", pos, r[8]),
            )

    def all_features(self, stride: int = 1) -> Iterator[tuple[int, str, npt.NDArray[np.uint64]]]:
        """Live items' features in position order; with ``stride`` only positions that
        are multiples of it (a sample: only those rows are read and decrypted)."""
        for pos, item_id, blob in self._db.execute(
            "SELECT pos, item_id, features FROM items WHERE tombstone_epoch IS NULL "
            "AND features IS NOT NULL AND pos % ? = 0 ORDER BY pos",
            (max(int(stride), 1),),
        ):
            yield int(pos), str(self._unid(item_id)), self._open_features(int(pos), bytes(blob))

    def digest(self) -> str:
        """SHA-256 over the logical content (items, features, tombstones, idempotency),
        computed on opened values: the same in every on-disk format."""
        h = hashlib.sha256()
        for row in self.rows():
            h.update(json.dumps(list(row), separators=(",", ":")).encode())
        for pos, _item, feats in self.all_features():
            h.update(pos.to_bytes(8, "little") + feats.astype("<u8").tobytes())
        idem = []
        for ref, body, seq, resp in self._db.execute(
            "SELECT key, body_sha, seq, response FROM idem"
        ):
            k = bytes(ref).hex()
            idem.append(
                (
                    self._seal.unref("idem", ref),
                    self._seal.unbind_str("idem-body", k, body),
                    int(seq),
                    self._seal.unbind_record("idem-response", k, resp).encode("utf-8"),
                )
            )
        for key, body_sha, seq, resp in sorted(idem, key=lambda e: e[0].encode()):
            h.update(f"{key}\x00{body_sha}\x00{seq}\x00".encode() + resp)
        access = self.access_policies()
        if access:
            # Only stores holding policies hash them: other digests stay as they were.
            h.update(b"access" + json.dumps(sorted(access.items())).encode())
        h.update(self.decision_digest().encode())
        h.update(str(self.applied_seq).encode())
        return h.hexdigest()

    def access_policy(self, pos: int) -> str | None:
        """The access policy item row ``pos`` was stored with (None: none)."""
        row = self._db.execute("SELECT policy FROM access WHERE pos=?", (pos,)).fetchone()
        return None if row is None else self._seal.unbind_str("access", pos, row[0])

    def access_policies(self) -> dict[int, str]:
        """``{pos: access policy}`` of every item version stored with one."""
        return {
            int(pos): str(self._seal.unbind_str("access", int(pos), blob))
            for pos, blob in self._db.execute("SELECT pos, policy FROM access ORDER BY pos")
        }

    def _decision_rows(self, table: str) -> list[tuple[Any, ...]]:
        """The rows of a decision table, opened, in the order the digest uses."""
        s = self._seal
        if table == "events":
            return [
                (seq, kind, self._unid(i), s.unbind_record("event", seq, rec))
                for seq, kind, i, rec in self._db.execute("SELECT * FROM events ORDER BY seq")
            ]
        if table == "links":
            rows = [
                (self._unid(i), st, self._unid(c), seq)
                for i, st, c, seq in self._db.execute("SELECT * FROM links")
            ]
            return sorted(rows, key=lambda r: str(r[0]).encode())
        if table == "policies":
            return [
                (v, s.unbind_record("policy", v, doc), seq)
                for v, doc, seq in self._db.execute("SELECT * FROM policies ORDER BY version")
            ]
        return [
            (
                seq,
                s.unref("reviewer", rv),
                self._unid(a),
                self._unid(b),
                score,
                label,
                s.unbind_record("label", seq, rec),
            )
            for seq, rv, a, b, score, label, rec in self._db.execute(
                "SELECT * FROM labels ORDER BY seq"
            )
        ]

    def decision_digest(self) -> str:
        """SHA-256 over the decision layer: events, current links, policies, labels."""
        h = hashlib.sha256()
        for table in ("events", "links", "policies", "labels"):
            h.update(table.encode())
            for row in self._decision_rows(table):
                h.update(json.dumps(list(row), separators=(",", ":")).encode())
        return h.hexdigest()

    def link_state(self) -> dict[str, tuple[str, str | None]]:
        """item id -> (state, canonical) for items decided duplicate or review."""
        return {str(i): (str(st), c) for i, st, c, _seq in self._decision_rows("links")}

    def link(self, item_id: str) -> tuple[str, str | None] | None:
        row = self._db.execute(
            "SELECT state, canonical FROM links WHERE item_id=?", (self._id(item_id),)
        ).fetchone()
        return None if row is None else (str(row[0]), self._unid(row[1]))

    def members(self, canonical: str) -> list[str]:
        """Live items linked as duplicates of ``canonical``, oldest current version first."""
        return [
            str(self._unid(r[0]))
            for r in self._db.execute(
                "SELECT l.item_id FROM links l JOIN items i ON i.item_id = l.item_id "
                "AND i.tombstone_epoch IS NULL WHERE l.canonical=? AND l.state='duplicate' "
                "ORDER BY i.pos",
                (self._id(canonical),),
            )
        ]

    def broken_links(self, limit: int = 1) -> list[str]:
        """Items whose link breaks the link rules: the item is not live, or a duplicate
        link points at itself, at an item that is not live, or at another duplicate."""
        live = "SELECT 1 FROM items i WHERE i.item_id = {} AND i.tombstone_epoch IS NULL"
        return [
            str(self._unid(r[0]))
            for r in self._db.execute(
                f"SELECT l.item_id FROM links l WHERE NOT EXISTS ({live.format('l.item_id')}) "  # noqa: S608
                "OR (l.state = 'duplicate' AND (l.canonical IS NULL OR l.canonical = l.item_id "
                f"OR NOT EXISTS ({live.format('l.canonical')}) OR EXISTS (SELECT 1 FROM links m "
                "WHERE m.item_id = l.canonical AND m.state = 'duplicate'))) LIMIT ?",
                (limit,),
            )
        ]

    def events(self, after: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        return [
            self._record("event", seq, rec)
            for seq, rec in self._db.execute(
                "SELECT seq, record FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
                (after, limit),
            )
        ]

    def event(self, seq: int) -> dict[str, Any] | None:
        row = self._db.execute("SELECT record FROM events WHERE seq=?", (seq,)).fetchone()
        return None if row is None else self._record("event", seq, row[0])

    def last_event(self) -> dict[str, Any] | None:
        row = self._db.execute(
            "SELECT seq, record FROM events ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        return None if row is None else self._record("event", row[0], row[1])

    def policies(self) -> list[dict[str, Any]]:
        return [
            self._record("policy", v, doc)
            for v, doc in self._db.execute("SELECT version, doc FROM policies ORDER BY version")
        ]

    def labels(self) -> list[dict[str, Any]]:
        return [
            self._record("label", seq, rec)
            for seq, rec in self._db.execute("SELECT seq, record FROM labels ORDER BY seq")
        ]

    def bandkeys(self, pos: int) -> npt.NDArray[np.uint32] | None:
        row = self._db.execute("SELECT bandkeys FROM items WHERE pos=?", (pos,)).fetchone()
        if row is None or row[0] is None:
            return None
        raw = self._open_bandkeys(pos, bytes(row[0]))
        return np.frombuffer(raw, dtype="<u4").astype(np.uint32)

"""The state every part of :class:`~neardup.service.store.FeatureStore` shares.

The attributes the store sets at open, and what every part uses: the ``meta``
rows, the sealing of ids, features and records, and the transaction (as
``neardup.service.tenant._state`` does for a tenant).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.service._crypto import LegacySealer, Sealer
from neardup.service.store.connection import Serialized
from neardup.service.storeformat import RowSeal


class StoreState:
    """The attributes a store sets at open, and the helpers its parts share."""

    path: str
    upgraded_rows: int
    _sealer: Sealer
    _legacy: LegacySealer | None
    _tenant: str
    _seal: RowSeal
    _pending_applied: int | None
    _db: Serialized
    _applied: int

    # -- meta ------------------------------------------------------------------
    def meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT v FROM meta WHERE k=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def note(self, key: str, value: str) -> None:
        """Record a fact about the derived state (outside any command; e.g. a check
        that need not run again while this file lives)."""
        self._set_meta(key, value)

    def _set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta(k, v) VALUES (?, ?)", (key, value))

    def _set_applied(self, seq: int) -> None:
        # Cached only once the transaction commits (see _Tx).
        self._set_meta("applied_seq", str(seq))
        self._pending_applied = seq

    @property
    def applied_seq(self) -> int:
        """The last command applied (cached; written in each change's transaction)."""
        return self._applied

    # -- sealing -----------------------------------------------------------------
    def _id(self, item_id: str) -> bytes:
        return self._seal.ref("id", item_id)

    def _unid(self, blob: bytes | None) -> str | None:
        return None if blob is None else self._seal.unref("id", blob)

    def _idem_ref(self, key: str) -> bytes:
        return self._seal.ref("idem", key)

    def _seal_features(self, pos: int, features: npt.NDArray[np.uint64]) -> bytes:
        raw = np.ascontiguousarray(features, dtype="<u8").tobytes()
        return self._sealer.seal(raw, self._seal.pos_ad(pos, b"features"))

    def _open_features(self, pos: int, blob: bytes) -> npt.NDArray[np.uint64]:
        ad = self._seal.pos_ad(pos, b"features")
        raw = self._sealer.open(blob, ad, what=f"{self.path} item {pos}")
        return np.frombuffer(raw, dtype="<u8").astype(np.uint64)

    def _open_bandkeys(self, pos: int, blob: bytes) -> bytes:
        raw = self._seal.unbind("bandkeys", pos, blob)
        return b"" if raw is None else raw

    def _record(self, scope: str, key: object, blob: bytes) -> dict[str, Any]:
        d: dict[str, Any] = json.loads(self._seal.unbind_record(scope, key, blob))
        return d

    class _Tx:
        def __init__(self, store: StoreState) -> None:
            self.store = store

        def __enter__(self) -> None:
            self.store._pending_applied = None
            self.store._db.execute("BEGIN IMMEDIATE")

        def __exit__(self, et: object, ev: object, tb: object) -> None:
            st = self.store
            if et is not None:
                st._db.execute("ROLLBACK")
                return
            st._db.execute("COMMIT")
            if st._pending_applied is not None:
                st._applied = st._pending_applied

    def _tx(self) -> StoreState._Tx:
        return StoreState._Tx(self)

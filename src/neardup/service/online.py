"""A compact, bounded, concurrently readable LSH band index for the service.

Layout: per band, a sorted run of 32-bit bucket keys with the 32-bit item
positions beside it (``main``), plus a small unsorted ``delta`` of recent inserts
and a liveness map.  At 32 bands that is 8 × 32 = 256 bytes of index per item (and
one byte of liveness) — no Python object per item or per bucket.

Guarantees:

* ``query`` returns every live item that shares at least one band bucket with the
  query, except entries cut by a cap, and says so: ``capped`` when the scan limit
  stopped it, and inserts that would grow a bucket past ``max_bucket_size`` are
  left out of that band and counted in ``overflow``.  A 32-bit bucket key can
  collide by chance (probability ~ n / 2**32 per band); such extra candidates are
  harmless because every candidate is verified exactly afterwards.
* A tombstoned position is never returned again, immediately (the liveness map),
  and is physically dropped at the next :meth:`compact`.
* :meth:`compact` builds the merged arrays aside and swaps them in under a short
  lock, so readers keep using the old arrays meanwhile and never block on it;
  inserts made during the merge stay in the delta.

Example:
    >>> import numpy as np
    >>> idx = BandIndex(bands=2, max_bucket_size=10)
    >>> idx.add(0, np.array([7, 9], dtype=np.uint32))
    0
    >>> idx.add(1, np.array([7, 5], dtype=np.uint32))
    0
    >>> r = idx.query(np.array([7, 5], dtype=np.uint32))
    >>> r.positions.tolist(), r.bands_hit.tolist()
    ([0, 1], [1, 2])
    >>> idx.tombstone(0), idx.compact()   # (was live, entries dropped)
    (True, 2)
    >>> idx.query(np.array([7, 5], dtype=np.uint32)).positions.tolist()
    [1]
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from neardup.core._errors import InvalidConfig
from neardup.kernels import _okernels as OK

__all__ = ["BandIndex", "BandQuery", "fold_keys"]


def fold_keys(keys64: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint32]:
    """64-bit band keys folded to 32 bits (xor of the halves)."""
    k = np.asarray(keys64, dtype=np.uint64)
    return ((k >> np.uint64(32)) ^ (k & np.uint64(0xFFFFFFFF))).astype(np.uint32)


@dataclass(frozen=True, slots=True)
class BandQuery:
    """Distinct candidate positions (ascending), how many bands each shared with the
    query, the first band that collided, how many bucket entries were scanned and
    whether the scan cap stopped the search early."""

    positions: npt.NDArray[np.int64]
    bands_hit: npt.NDArray[np.int64]
    first_band: npt.NDArray[np.int64]
    scanned: int
    capped: bool


class BandIndex:
    """See the module docstring."""

    def __init__(self, *, bands: int, max_bucket_size: int, delta_capacity: int = 16384) -> None:
        if not isinstance(bands, int) or not 1 <= bands <= 1024:
            raise InvalidConfig("bands", bands, "must be in 1..1024", "use e.g. 32")
        if not isinstance(max_bucket_size, int) or max_bucket_size < 1:
            raise InvalidConfig("max_bucket_size", max_bucket_size, "must be >= 1", "use e.g. 1000")
        self.bands = bands
        self.max_bucket_size = max_bucket_size
        self.delta_capacity = max(int(delta_capacity), 16)
        self._lock = threading.Lock()
        self._merge_lock = threading.Lock()
        self._mkeys = np.zeros(0, dtype=np.uint32)
        self._mpos = np.zeros(0, dtype=np.uint32)
        self._offsets = np.zeros(bands + 1, dtype=np.int64)
        # The delta starts small and doubles; compaction is due at delta_capacity.
        start = min(256, self.delta_capacity)
        self._dkeys = np.zeros((start, bands), dtype=np.uint32)
        self._dmask = np.zeros((start, bands), dtype=np.bool_)
        self._dpos = np.zeros(start, dtype=np.int64)
        self._dn = 0
        self._alive = np.zeros(1024, dtype=np.bool_)
        self._live = 0
        self.overflow = 0

    # -- sizes -----------------------------------------------------------------
    def __len__(self) -> int:
        return self._live

    @property
    def delta_size(self) -> int:
        return self._dn

    @property
    def nbytes(self) -> int:
        """Bytes held by the index arrays (main, delta, liveness)."""
        return int(
            self._mkeys.nbytes
            + self._mpos.nbytes
            + self._offsets.nbytes
            + self._dkeys.nbytes
            + self._dmask.nbytes
            + self._dpos.nbytes
            + self._alive.nbytes
        )

    def bucket_sizes(self) -> npt.NDArray[np.int64]:
        """Sizes of all non-empty buckets, main arrays and delta together (metrics)."""
        out: list[npt.NDArray[np.int64]] = []
        mk, off = self._mkeys, self._offsets
        dn = self._dn
        dkeys, dmask = self._dkeys[:dn], self._dmask[:dn]
        for b in range(self.bands):
            seg = mk[off[b] : off[b + 1]]
            if dn:
                seg = np.sort(np.concatenate([seg, dkeys[:, b][dmask[:, b]]]))
            if seg.size:
                edges = np.flatnonzero(np.diff(seg)) + 1
                bounds = np.concatenate([[0], edges, [seg.size]])
                out.append(np.diff(bounds).astype(np.int64))
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    def dead_entries(self) -> int:
        """Index entries of tombstoned items not yet dropped by compaction."""
        alive = self._alive
        mpos, dpos = self._mpos, self._dpos[: self._dn]
        dead_main = int(np.count_nonzero(~alive[mpos])) if mpos.size else 0
        dead_delta = int(np.count_nonzero(~alive[dpos])) * self.bands if dpos.size else 0
        return dead_main + dead_delta

    # -- writes ----------------------------------------------------------------
    def _check_keys(self, keys: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
        k = np.ascontiguousarray(keys, dtype=np.uint32)
        if k.shape != (self.bands,):
            raise InvalidConfig(
                "band keys", k.shape, f"expected {self.bands} keys", "use this index's layout"
            )
        return k

    def add(self, pos: int, keys: npt.NDArray[np.uint32]) -> int:
        """Insert position ``pos`` with its band keys; returns how many bands were cut
        by the bucket cap (counted in ``overflow``)."""
        k = self._check_keys(keys)
        with self._lock:
            if self._dn >= self._dkeys.shape[0]:
                self._grow_delta()
            if pos >= self._alive.shape[0]:
                grown = np.zeros(max(pos + 1, 2 * self._alive.shape[0]), dtype=np.bool_)
                grown[: self._alive.shape[0]] = self._alive
                self._alive = grown
            if self._alive[pos]:
                raise InvalidConfig("pos", pos, "already live in the index", "tombstone it first")
            counts = np.zeros(self.bands, dtype=np.int64)
            OK.bucket_counts(
                self._mkeys, self._offsets, self._dkeys, self._dmask, self._dn, k, counts
            )
            mask = counts < self.max_bucket_size
            cut = int(self.bands - np.count_nonzero(mask))
            i = self._dn
            self._dkeys[i] = k
            self._dmask[i] = mask
            self._dpos[i] = pos
            self._dn = i + 1
            self._alive[pos] = True
            self._live += 1
            self.overflow += cut
            return cut

    def _grow_delta(self) -> None:
        cap = 2 * self._dkeys.shape[0]
        for name in ("_dkeys", "_dmask"):
            old = getattr(self, name)
            new = np.zeros((cap, self.bands), dtype=old.dtype)
            new[: old.shape[0]] = old
            setattr(self, name, new)
        dp = np.zeros(cap, dtype=np.int64)
        dp[: self._dpos.shape[0]] = self._dpos
        self._dpos = dp

    def tombstone(self, pos: int) -> bool:
        """Mark ``pos`` dead; True if it was live."""
        with self._lock:
            if 0 <= pos < self._alive.shape[0] and self._alive[pos]:
                self._alive[pos] = False
                self._live -= 1
                return True
            return False

    def is_live(self, pos: int) -> bool:
        return bool(0 <= pos < self._alive.shape[0] and self._alive[pos])

    # -- reads -----------------------------------------------------------------
    def query(self, keys: npt.NDArray[np.uint32], *, max_scan: int = 100_000) -> BandQuery:
        """Live bucket mates of ``keys`` (see the module guarantees)."""
        k = self._check_keys(keys)
        with self._lock:
            # References taken under the lock: a concurrent compaction swaps whole
            # arrays, so this view stays consistent after the lock is released.
            mk, mp, off = self._mkeys, self._mpos, self._offsets
            dk, dm, dp, dn, alive = self._dkeys, self._dmask, self._dpos, self._dn, self._alive
        room = int(min(max_scan, mk.shape[0] + dn * self.bands)) + 1
        out_pos = np.empty(room, dtype=np.int64)
        out_band = np.empty(room, dtype=np.int64)
        n, scanned, capped = OK.query(
            mk, mp, off, dk, dm, dp, dn, alive, k, max_scan, out_pos, out_band
        )
        if n == 0:
            z = np.zeros(0, dtype=np.int64)
            return BandQuery(z, z, z, int(scanned), bool(capped))
        pos, band = out_pos[:n], out_band[:n]
        order = np.lexsort((band, pos))
        pos, band = pos[order], band[order]
        starts = np.flatnonzero(np.concatenate([[True], pos[1:] != pos[:-1]]))
        counts = np.diff(np.concatenate([starts, [n]]))
        return BandQuery(
            pos[starts], counts.astype(np.int64), band[starts], int(scanned), bool(capped)
        )

    # -- maintenance -----------------------------------------------------------
    def compact(self) -> int:
        """Merge the delta into ``main`` and drop dead entries; returns entries dropped.

        Readers are never blocked for the merge itself (see module docstring); only
        one compaction runs at a time.
        """
        with self._merge_lock:
            with self._lock:
                mk, mp, off = self._mkeys, self._mpos, self._offsets
                dn = self._dn
                dk = self._dkeys[:dn].copy()
                dm = self._dmask[:dn].copy()
                dp = self._dpos[:dn].copy()
                alive = self._alive.copy()
            total_delta = int(dm.sum())
            rk = np.empty(total_delta, dtype=np.uint32)
            rp = np.empty(total_delta, dtype=np.int64)
            roff = np.zeros(self.bands + 1, dtype=np.int64)
            OK.delta_runs(dk, dm, dp, dn, self.bands, rk, rp, roff)
            cap = mk.shape[0] + total_delta
            nk = np.empty(cap, dtype=np.uint32)
            npos = np.empty(cap, dtype=np.uint32)
            noff = np.zeros(self.bands + 1, dtype=np.int64)
            w = OK.merge(mk, mp, off, rk, rp, roff, alive, nk, npos, noff)
            with self._lock:
                # Positions tombstoned during the merge are still filtered by
                # liveness at query time and dropped at the next compaction.
                self._mkeys, self._mpos, self._offsets = nk[:w].copy(), npos[:w].copy(), noff
                rest = self._dn - dn
                # A fresh, small delta: the merged entries no longer need room there.
                dcap = max(min(256, self.delta_capacity), 1 << max(rest - 1, 1).bit_length())
                nk_d = np.zeros((dcap, self.bands), dtype=np.uint32)
                nm_d = np.zeros((dcap, self.bands), dtype=np.bool_)
                np_d = np.zeros(dcap, dtype=np.int64)
                nk_d[:rest] = self._dkeys[dn : self._dn]
                nm_d[:rest] = self._dmask[dn : self._dn]
                np_d[:rest] = self._dpos[dn : self._dn]
                self._dkeys, self._dmask, self._dpos = nk_d, nm_d, np_d
                self._dn = rest
            return int(cap - w)

    def needs_compaction(self) -> bool:
        return self._dn >= self.delta_capacity

    def load(self, positions: npt.NDArray[np.int64], keys: npt.NDArray[np.uint32]) -> None:
        """Bulk-load live items (``keys`` is (n, bands)) into an empty index, applying
        the bucket cap in position order exactly as one-by-one :meth:`add` would."""
        if self._live or self._dn or self._mkeys.size:
            raise InvalidConfig("index", len(self), "bulk load needs an empty index", "use add()")
        pos = np.asarray(positions, dtype=np.int64)
        k = np.ascontiguousarray(keys, dtype=np.uint32).reshape(pos.shape[0], self.bands)
        if pos.size and np.any(np.diff(pos) <= 0):
            raise InvalidConfig("positions", "unsorted", "must be strictly increasing", "sort them")
        n = pos.shape[0]
        top = int(pos[-1]) + 1 if n else 0
        self._alive = np.zeros(max(top, 1024), dtype=np.bool_)
        self._alive[pos] = True
        self._live = n
        parts_k: list[npt.NDArray[np.uint32]] = []
        parts_p: list[npt.NDArray[np.uint32]] = []
        offsets = np.zeros(self.bands + 1, dtype=np.int64)
        for b in range(self.bands):
            order = np.argsort(k[:, b], kind="stable")
            kb, pb = k[order, b], pos[order]
            # Rank of each entry within its bucket (in position order): the cap keeps
            # the first max_bucket_size arrivals, as incremental inserts do.
            starts = np.flatnonzero(np.concatenate([[True], kb[1:] != kb[:-1]]))
            run = np.repeat(starts, np.diff(np.concatenate([starts, [n]])))
            keep = (np.arange(n) - run) < self.max_bucket_size
            self.overflow += int(n - np.count_nonzero(keep))
            parts_k.append(kb[keep])
            parts_p.append(pb[keep].astype(np.uint32))
            offsets[b + 1] = offsets[b] + int(np.count_nonzero(keep))
        self._mkeys = np.concatenate(parts_k) if parts_k else np.zeros(0, dtype=np.uint32)
        self._mpos = np.concatenate(parts_p) if parts_p else np.zeros(0, dtype=np.uint32)
        self._offsets = offsets

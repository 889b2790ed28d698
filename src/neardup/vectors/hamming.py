"""Stage 5 for vectors — Hamming band index over packed bit signatures.

A band is a bit mask over the signature; two signatures are candidates when they
agree on every bit of at least one band.  Two layouts:

* :meth:`BitBands.banded` — ``bands`` disjoint bands of ``rows`` bits.  For
  hyperplane bits that agree independently with probability p, a pair is a
  candidate with probability ``1 − (1 − p**rows)**bands``.
* :meth:`BitBands.blocks` — the permuted-blocks method for "all pairs within k
  bits" (Manku, Jain, Das Sarma 2007): the bits are cut into m > k blocks and each
  band is the union of m − k of them, one band per choice.  Two signatures that
  differ in at most k bits differ in at most k blocks, so they agree on one band
  entirely: **every** pair within k bits is a candidate, deterministically.

Buckets are bounded (``max_bucket_size``); what the bound cuts is counted.

Example:
    >>> import numpy as np
    >>> bands = BitBands.blocks(bits=64, radius=3)
    >>> index = HammingIndex(bands)
    >>> index.insert("a", np.array([0b1111], dtype=np.uint64))
    []
    >>> index.insert("b", np.array([0b0111 | 1 << 40], dtype=np.uint64))  # 2 bits differ
    ['a']
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from neardup.core._errors import InvalidConfig
from neardup.kernels import _vkernels as V

__all__ = ["BitBands", "HammingIndex", "bucket_mates", "code_band_keys", "fill_buckets"]

_MAX_BANDS = 4096


@dataclass(frozen=True, eq=False, slots=True)
class BitBands:
    """Bands as bit masks over ``bits``-bit signatures (``words`` = bits / 64)."""

    bits: int
    masks: npt.NDArray[np.uint64]
    word_lo: npt.NDArray[np.int64]
    word_hi: npt.NDArray[np.int64]
    radius: int | None = None

    def __len__(self) -> int:
        return int(self.masks.shape[0])

    @property
    def words(self) -> int:
        return self.bits // 64

    @classmethod
    def _from_ranges(
        cls, bits: int, groups: list[list[tuple[int, int]]], radius: int | None
    ) -> BitBands:
        w = bits // 64
        masks = np.zeros((len(groups), w), dtype=np.uint64)
        lo = np.zeros(len(groups), dtype=np.int64)
        hi = np.zeros(len(groups), dtype=np.int64)
        for g, ranges in enumerate(groups):
            for start, stop in ranges:
                for bit in range(start, stop):
                    masks[g, bit // 64] |= np.uint64(1 << (bit % 64))
            nz = np.flatnonzero(masks[g])
            lo[g], hi[g] = int(nz[0]), int(nz[-1]) + 1
        return cls(bits, masks, lo, hi, radius)

    @classmethod
    def banded(cls, *, bits: int, bands: int, rows: int) -> BitBands:
        """``bands`` disjoint bands of ``rows`` consecutive bits (bands·rows <= bits)."""
        if bits % 64 or bits < 64:
            raise InvalidConfig("bits", bits, "must be a positive multiple of 64", "use e.g. 256")
        if bands < 1 or rows < 1 or bands * rows > bits:
            raise InvalidConfig(
                "bands/rows", (bands, rows), f"need bands*rows <= bits={bits}", "use fewer bands"
            )
        return cls._from_ranges(bits, [[(i * rows, (i + 1) * rows)] for i in range(bands)], None)

    @classmethod
    def blocks(cls, *, bits: int, radius: int, blocks: int | None = None) -> BitBands:
        """Every pair within ``radius`` differing bits becomes a candidate.

        ``blocks`` (m, default radius + 1) trades bands for selectivity: there are
        C(m, radius) bands of about bits·(m − radius)/m bits each.
        """
        if bits % 64 or bits < 64:
            raise InvalidConfig("bits", bits, "must be a positive multiple of 64", "use e.g. 256")
        if radius < 0 or radius >= bits:
            raise InvalidConfig("radius", radius, f"must be in [0, {bits})", "use e.g. bits // 8")
        m = radius + 1 if blocks is None else blocks
        if m <= radius or m > bits:
            raise InvalidConfig(
                "blocks",
                m,
                f"need radius < blocks <= bits ({radius} < m <= {bits})",
                "use radius+1",
            )
        if math.comb(m, radius) > _MAX_BANDS:
            raise InvalidConfig(
                "blocks",
                m,
                f"C({m}, {radius}) bands exceed {_MAX_BANDS}",
                "use fewer blocks (radius + 1 is the minimum)",
            )
        edges = [round(i * bits / m) for i in range(m + 1)]
        spans = [(edges[i], edges[i + 1]) for i in range(m)]
        groups = [[spans[i] for i in keep] for keep in itertools.combinations(range(m), m - radius)]
        return cls._from_ranges(bits, groups, radius)

    def keys(
        self,
        sig: npt.NDArray[np.uint64],
        *,
        seed: int,
        band_lo: int = 0,
        band_hi: int | None = None,
    ) -> npt.NDArray[np.uint64]:
        """(n, bands in [band_lo, band_hi)) uniformly mixed keys of the masked bits."""
        hi = len(self) if band_hi is None else band_hi
        s = np.ascontiguousarray(sig, dtype=np.uint64)
        if s.ndim == 1:
            s = s[None, :]
        if s.shape[1] != self.words:
            raise InvalidConfig(
                "signature", s.shape, f"expected {self.words} words", "use this scheme's hasher"
            )
        out = np.empty((s.shape[0], hi - band_lo), dtype=np.uint64)
        V.mask_keys(s, self.masks, self.word_lo, self.word_hi, band_lo, np.uint64(seed), out)
        return out


def code_band_keys(
    codes: npt.NDArray[np.uint64],
    *,
    rows: int,
    seed: int,
    band_lo: int,
    band_hi: int,
) -> npt.NDArray[np.uint64]:
    """Keys of integer-code bands (p-stable): band t is codes [t·rows, (t+1)·rows)."""
    c = np.ascontiguousarray(codes, dtype=np.uint64)
    if c.ndim == 1:
        c = c[None, :]
    out = np.empty((c.shape[0], band_hi - band_lo), dtype=np.uint64)
    V.code_keys(c, band_lo, rows, np.uint64(seed), out)
    return out


BandKey = tuple[int, int]
"""(band, key) of one band of a stored signature."""


def bucket_mates(
    buckets: dict[BandKey, list[int]], live: list[bool], bkeys: Iterable[BandKey], cap: int
) -> tuple[list[int], int]:
    """The live positions that share a bucket with ``bkeys``, earliest first, cut to
    the first ``cap``; and how many the cut dropped (the online indexes' lookup)."""
    found: dict[int, None] = {}
    for bk in bkeys:
        for p in buckets.get(bk, ()):
            if live[p]:
                found[p] = None
    mates = sorted(found)
    return mates[:cap], max(0, len(mates) - cap)


def fill_buckets(
    buckets: dict[BandKey, list[int]], bkeys: Iterable[BandKey], p: int, max_bucket_size: int
) -> int:
    """Add position ``p`` to the bucket of each of ``bkeys`` that has room; returns
    how many buckets were full (bucket overflow)."""
    full = 0
    for bk in bkeys:
        bucket = buckets.setdefault(bk, [])
        if len(bucket) >= max_bucket_size:
            full += 1
        else:
            bucket.append(p)
    return full


@dataclass
class HammingIndex:
    """A growing index of bit signatures under :class:`BitBands`, with bounded buckets.

    ``insert`` returns the keys already stored that share a band with the new
    signature (at most ``max_candidates``, earliest first), then stores it.  A
    bucket holds at most ``max_bucket_size`` members; members past that are not
    stored in it and are counted in ``bucket_overflow``.  Candidates are unverified.
    """

    bands: BitBands
    seed: int = 42
    max_bucket_size: int = 10_000
    max_candidates: int = 1000
    bucket_overflow: int = 0
    candidate_overflow: int = 0
    _buckets: dict[tuple[int, int], list[int]] = field(default_factory=dict, repr=False)
    _keys: list[Hashable] = field(default_factory=list, repr=False)
    _live: list[bool] = field(default_factory=list, repr=False)
    _pos: dict[Hashable, int] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self._pos)

    def __contains__(self, key: object) -> bool:
        return key in self._pos

    def _band_keys(self, sig: npt.NDArray[np.uint64]) -> list[BandKey]:
        ks = self.bands.keys(np.asarray(sig, dtype=np.uint64), seed=self.seed)[0]
        return [(t, int(k)) for t, k in enumerate(ks)]

    def query(self, sig: npt.ArrayLike, *, limit: int | None = None) -> list[Hashable]:
        """Stored keys sharing at least one band with ``sig`` (earliest first)."""
        cap = self.max_candidates if limit is None else min(limit, self.max_candidates)
        bkeys = self._band_keys(np.asarray(sig, dtype=np.uint64))
        mates, cut = bucket_mates(self._buckets, self._live, bkeys, cap)
        self.candidate_overflow += cut
        return [self._keys[p] for p in mates]

    def insert(self, key: Hashable, sig: npt.ArrayLike) -> list[Hashable]:
        if key in self._pos:
            raise InvalidConfig("key", key, "is already in the index", "remove it first")
        s = np.asarray(sig, dtype=np.uint64)
        cands = self.query(s)
        p = len(self._keys)
        self._keys.append(key)
        self._live.append(True)
        self._pos[key] = p
        bkeys = self._band_keys(s)
        self.bucket_overflow += fill_buckets(self._buckets, bkeys, p, self.max_bucket_size)
        return cands

    def remove(self, key: Hashable) -> None:
        """Never returned again (a tombstone; buckets are compacted lazily)."""
        p = self._pos.pop(key)
        self._live[p] = False

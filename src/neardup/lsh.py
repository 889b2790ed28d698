"""Stage 5 — LSH banding: parameters with stated guarantees, and a bounded index.

A signature of k rows is cut into b bands of r rows (b·r <= k).  Two documents are
*candidates* when all r rows of at least one band agree.  For a pair with Jaccard
similarity s, under independent permutations, the probability of that is

    P(s) = 1 - (1 - s**r)**b            (:func:`candidate_probability`)

Guarantees and non-guarantees:

* Recall is a probability per pair, not a promise: a pair at the threshold t is
  missed with probability 1 - P(t).  A missed candidate can never be repaired by
  verification, so the default layout (:func:`default_layout`) is chosen so that
  P(t) >= ``recall_target`` (0.995 by default) and, among such layouts, the one with
  the least false-candidate mass below t.
* A candidate is only evidence: neardup verifies every candidate exactly before
  calling it a duplicate, so LSH false positives cost time, never precision.
* Buckets hold at most ``max_bucket_size`` members and a query returns at most
  ``max_candidates``; whatever those caps cut is counted in :class:`LSHStats`.

Example (the worked example of the design notes):
    >>> from neardup import Config, ShingleSpec, MinHasher
    >>> cfg = Config(threshold=0.75, shingle=ShingleSpec(kind="word", k=2))
    >>> mh = MinHasher(cfg)
    >>> index = LSHIndex(mh.scheme, threshold=0.75)
    >>> index.insert("A", mh.signature("red fox runs very fast"))
    []
    >>> index.insert("B", mh.signature("red fox runs very fast today"))
    ['A']
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from . import _kernels as K
from ._errors import InvalidConfig, NoFeasibleParameters
from ._unionfind import UnionFind
from .cluster import Cluster, Edge, build_clusters
from .hashing import SchemeDescriptor
from .minhash import Signature, SignatureSet

__all__ = [
    "LSHIndex",
    "LSHStats",
    "Layout",
    "candidate_pairs",
    "candidate_probability",
    "default_layout",
    "optimal_params",
]


def _score_pair(
    pa: int,
    sa: npt.NDArray[np.uint32],
    fa: npt.NDArray[np.uint64] | None,
    pb: int,
    sb: npt.NDArray[np.uint32],
    fb: npt.NDArray[np.uint64] | None,
    band: int | None,
) -> Edge:
    est = float(np.count_nonzero(sa == sb)) / int(sa.shape[0])
    if fa is not None and fb is not None:
        inter = int(K.intersect_count(fa, 0, fa.shape[0], fb, 0, fb.shape[0]))
        union = int(fa.shape[0] + fb.shape[0] - inter)
        j = inter / union if union else 0.0
        return Edge(
            a=pa,
            b=pb,
            jaccard=j,
            estimate=est,
            band=band,
            method="exact",
            intersection=inter,
            union=union,
        )
    return Edge(a=pa, b=pb, jaccard=None, estimate=est, band=band, method="estimate")


def candidate_probability(s: float, bands: int, rows: int) -> float:
    """Probability that a pair of Jaccard similarity ``s`` shares at least one band."""
    if not 0.0 <= s <= 1.0:
        raise InvalidConfig("s", s, "a similarity must be in [0, 1]", "pass 0 <= s <= 1")
    if bands < 1 or rows < 1:
        raise InvalidConfig("bands/rows", (bands, rows), "must be >= 1", "use positive integers")
    p = s**rows
    if p >= 1.0:
        return 1.0
    return -math.expm1(bands * math.log1p(-p))


def _fp_mass(t: float, b: int, r: int, steps: int = 200) -> float:
    h = t / steps
    total = 0.5 * (candidate_probability(0.0, b, r) + candidate_probability(t, b, r))
    for i in range(1, steps):
        total += candidate_probability(i * h, b, r)
    return total * h


def default_layout(threshold: float, num_perm: int, *, recall: float = 0.995) -> tuple[int, int]:
    """(bands, rows) for ``threshold``: P(threshold) >= recall, least mass below it.

    Only ``bands*rows <= num_perm`` rows are banded; the rest still sharpen the
    similarity estimate.  If no layout reaches ``recall`` (tiny k or threshold),
    the layout with the highest P(threshold) is returned.

    >>> default_layout(0.8, 128)
    (21, 6)
    """
    best: tuple[float, int, int] | None = None
    fallback: tuple[float, int, int] | None = None
    for r in range(1, num_perm + 1):
        b = num_perm // r
        p = candidate_probability(threshold, b, r)
        if fallback is None or p > fallback[0]:
            fallback = (p, b, r)
        if p >= recall:
            mass = _fp_mass(threshold, b, r)
            if best is None or mass < best[0]:
                best = (mass, b, r)
    chosen = best or fallback
    if chosen is None:  # pragma: no cover - num_perm >= 1 always yields a layout
        raise NoFeasibleParameters("num_perm", num_perm, "no layout", "use num_perm >= 1")
    return chosen[1], chosen[2]


@dataclass(frozen=True, slots=True)
class Layout:
    """An LSH layout with its predicted operating points."""

    bands: int
    rows: int
    p_near: float
    p_far: float
    expected_far_candidates: float

    @property
    def num_perm(self) -> int:
        return self.bands * self.rows


def optimal_params(
    *,
    near: float,
    far: float,
    recall: float,
    far_budget: float,
    n: int,
    max_perm: int = 512,
) -> Layout:
    """The smallest (b, r) with P(near) >= recall and n·P(far) <= far_budget.

    "Smallest" means fewest signature rows b·r, ties broken by fewer expected far
    candidates.  ``n·P(far)`` is the expected number of far candidates per query
    when all ``n`` stored items are at similarity ``far`` — a conservative bound.
    Raises :class:`NoFeasibleParameters` (with the nearest miss) if none exists.

    >>> optimal_params(near=0.8, far=0.3, recall=0.95, far_budget=20000, n=1_000_000,
    ...                max_perm=100)
    Layout(bands=8, rows=5, p_near=0.958..., p_far=0.0192..., expected_far_candidates=19...)
    """
    if not 0.0 <= far < near <= 1.0:
        raise InvalidConfig(
            "near/far", (near, far), "need 0 <= far < near <= 1", "e.g. near=0.8, far=0.3"
        )
    if not 0.0 < recall < 1.0:
        raise InvalidConfig("recall", recall, "must be in (0, 1)", "e.g. recall=0.95")
    if far_budget <= 0 or n < 1 or max_perm < 1:
        raise InvalidConfig(
            "far_budget/n/max_perm",
            (far_budget, n, max_perm),
            "must be positive",
            "e.g. far_budget=20000, n=1000000, max_perm=128",
        )
    best: Layout | None = None
    miss: Layout | None = None
    for total in range(1, max_perm + 1):
        for r in range(1, total + 1):
            if total % r:
                continue
            b = total // r
            pn = candidate_probability(near, b, r)
            pf = candidate_probability(far, b, r)
            lay = Layout(b, r, pn, pf, pf * n)
            if pn >= recall and pf * n <= far_budget:
                if best is None or lay.expected_far_candidates < best.expected_far_candidates:
                    best = lay
            elif pf * n <= far_budget and (miss is None or pn > miss.p_near):
                miss = lay
        if best is not None:
            return best
    hint = (
        f"the best within budget is b={miss.bands}, r={miss.rows} with recall {miss.p_near:.4f}"
        if miss
        else "no layout stays within the far-candidate budget"
    )
    raise NoFeasibleParameters(
        "recall",
        recall,
        f"no (b, r) with b*r <= {max_perm} meets it ({hint})",
        "raise max_perm or far_budget, lower recall, or move near/far apart",
    )


@dataclass(frozen=True, eq=False, slots=True)
class CandidatePairs:
    """Distinct candidate pairs ``(a[i] < b[i])`` and the first band they collided in."""

    a: npt.NDArray[np.int64]
    b: npt.NDArray[np.int64]
    band: npt.NDArray[np.int64]
    overflow: int

    def __len__(self) -> int:
        return int(self.a.shape[0])

    def pairs(self) -> set[tuple[int, int]]:
        return {(int(x), int(y)) for x, y in zip(self.a, self.b, strict=True)}


def candidate_pairs(signatures: SignatureSet, *, max_candidates: int = 64) -> CandidatePairs:
    """Every distinct pair sharing a band (unverified), as the batch path sees them.

    Within a bucket each member is paired with at most ``max_candidates`` preceding
    members; the pairs this cuts are counted in ``overflow``.
    """
    if max_candidates < 1:
        raise InvalidConfig("max_candidates", max_candidates, "must be >= 1", "use e.g. 64")
    n = len(signatures)
    keys = signatures.band_keys(order="F")
    parent = np.arange(n, dtype=np.int64)
    empty_u64 = np.zeros(1, dtype=np.uint64)
    indptr = np.zeros(n + 1, dtype=np.int64)
    a, b, band, _, _, _, _, _, overflow, _ = K.band_join(
        keys,
        0,
        np.ones(n, dtype=np.bool_),
        signatures.matrix,
        empty_u64,
        indptr,
        1.0,
        max_candidates,
        K.MODE_CANDIDATES,
        False,
        parent,
        K.new_seen(),
    )
    return CandidatePairs(a, b, band, int(overflow))


@dataclass(frozen=True, slots=True)
class LSHStats:
    """Counts describing an index and its predicted behaviour at the threshold."""

    documents: int
    tombstoned: int
    bands: int
    rows: int
    buckets: int
    largest_bucket: int
    bucket_overflow: int
    candidate_overflow: int
    threshold: float
    predicted_recall: float
    predicted_fp_rate: float
    """Mean candidate probability of pairs below the threshold (s uniform in [0, t)):
    the share of sub-threshold pairs that cost a verification."""
    predicted_fp_rate_at_half_threshold: float


class LSHIndex:
    """Banded LSH index over MinHash signatures, with optional exact features.

    ``insert(key, sig, features)`` returns the candidates among earlier items and
    then stores the item.  When features (the sorted shingle-hash set) are given
    for both sides, :meth:`verify` and :meth:`find_clusters` use the exact Jaccard
    similarity; otherwise they fall back to the signature estimate and say so
    (``Edge.method == "estimate"``).

    Guarantees: deterministic candidate order (most colliding bands first, then
    insertion order); tombstoned items are never returned; no bucket grows past
    ``max_bucket_size`` and no query returns more than ``max_candidates`` — both
    overflows are counted in :meth:`stats`.
    """

    def __init__(
        self,
        scheme: SchemeDescriptor,
        *,
        threshold: float,
        max_bucket_size: int = 10_000,
        max_candidates: int = 1000,
    ) -> None:
        if not 0.0 < threshold <= 1.0:
            raise InvalidConfig("threshold", threshold, "must be in (0, 1]", "use e.g. 0.8")
        if max_bucket_size < 2 or max_candidates < 1:
            raise InvalidConfig(
                "max_bucket_size/max_candidates",
                (max_bucket_size, max_candidates),
                "must be >= 2 and >= 1",
                "use e.g. 10000 and 1000",
            )
        self.scheme = scheme
        self.threshold = float(threshold)
        self.max_bucket_size = max_bucket_size
        self.max_candidates = max_candidates
        self._tables: list[dict[int, list[int]]] = [{} for _ in range(scheme.bands)]
        self._keys: list[Hashable] = []
        self._pos: dict[Hashable, int] = {}
        self._sigs: list[npt.NDArray[np.uint32]] = []
        self._features: list[npt.NDArray[np.uint64] | None] = []
        self._alive: list[bool] = []
        self.bucket_overflow = 0
        self.candidate_overflow = 0

    # -- basic container protocol -------------------------------------------------
    def __len__(self) -> int:
        return sum(self._alive)

    def __contains__(self, key: object) -> bool:
        pos = self._pos.get(key)
        return pos is not None and self._alive[pos]

    def __iter__(self) -> Iterator[Hashable]:
        return self.keys()

    def keys(self) -> Iterator[Hashable]:
        return (k for k, alive in zip(self._keys, self._alive, strict=True) if alive)

    def _band_keys(self, sig: npt.NDArray[np.uint32]) -> list[int]:
        out = np.empty((1, self.scheme.bands), dtype=np.uint64)
        K.band_keys(sig[None, :], 0, self.scheme.bands, self.scheme.rows, np.uint64(0), out)
        return [int(v) for v in out[0]]

    def _check(self, sig: Signature) -> None:
        self.scheme.require_same(sig.scheme)

    # -- queries ------------------------------------------------------------------
    def _candidates(self, bkeys: list[int], limit: int | None, exclude: int = -1) -> list[int]:
        hits: dict[int, int] = {}
        for table, bk in zip(self._tables, bkeys, strict=True):
            for pos in table.get(bk, ()):
                if pos != exclude and self._alive[pos]:
                    hits[pos] = hits.get(pos, 0) + 1
        order = sorted(hits, key=lambda p: (-hits[p], p))
        cap = self.max_candidates if limit is None else min(limit, self.max_candidates)
        if len(order) > cap:
            self.candidate_overflow += len(order) - cap
            order = order[:cap]
        return order

    def query(self, sig: Signature, *, limit: int | None = None) -> list[Hashable]:
        """Keys of stored items sharing at least one band with ``sig`` (no insert)."""
        self._check(sig)
        return [self._keys[p] for p in self._candidates(self._band_keys(sig.values), limit)]

    def insert(
        self,
        key: Hashable,
        sig: Signature,
        features: npt.NDArray[np.uint64] | None = None,
    ) -> list[Hashable]:
        """Return the candidates among stored items, then store ``key``.

        Re-inserting a live key raises InvalidConfig; a tombstoned key may be reused.
        """
        self._check(sig)
        if key in self:
            raise InvalidConfig(
                "key", key, "is already in the index", "remove it first or use a new key"
            )
        bkeys = self._band_keys(sig.values)
        cands = self._candidates(bkeys, None)
        pos = len(self._keys)
        self._keys.append(key)
        self._pos[key] = pos
        self._sigs.append(np.ascontiguousarray(sig.values, dtype=np.uint32))
        self._features.append(None if features is None else np.asarray(features, dtype=np.uint64))
        self._alive.append(True)
        for table, bk in zip(self._tables, bkeys, strict=True):
            bucket = table.setdefault(bk, [])
            if len(bucket) >= self.max_bucket_size:
                self.bucket_overflow += 1
            else:
                bucket.append(pos)
        return [self._keys[p] for p in cands]

    def remove(self, key: Hashable) -> None:
        """Tombstone ``key``: it is never returned again and leaves every bucket."""
        pos = self._pos.get(key)
        if pos is None or not self._alive[pos]:
            raise InvalidConfig("key", key, "is not in the index", "check the key")
        self._alive[pos] = False
        for table, bk in zip(self._tables, self._band_keys(self._sigs[pos]), strict=True):
            bucket = table.get(bk)
            if bucket is not None and pos in bucket:
                bucket.remove(pos)
                if not bucket:
                    del table[bk]

    def verify(self, a: Hashable, b: Hashable) -> Edge:
        """Score a pair: exact Jaccard when both have features, else the estimate."""
        pa, pb = self._pos[a], self._pos[b]
        return self._score(min(pa, pb), max(pa, pb), None)

    def _score(self, pa: int, pb: int, band: int | None) -> Edge:
        return _score_pair(
            pa, self._sigs[pa], self._features[pa], pb, self._sigs[pb], self._features[pb], band
        )

    def query_verified(
        self,
        sig: Signature,
        features: npt.NDArray[np.uint64] | None,
        *,
        limit: int | None = None,
        extra: Iterable[Hashable] = (),
    ) -> list[tuple[Hashable, Edge]]:
        """Candidates of ``sig`` (plus the live keys in ``extra``), each scored.

        The score is exact when ``features`` and the stored item's features are both
        present, else the signature estimate (``Edge.method`` says which).  In the
        returned edges ``a`` is -1 (the query) and ``b`` the stored position.
        """
        self._check(sig)
        positions = self._candidates(self._band_keys(sig.values), limit)
        seen = set(positions)
        for key in extra:
            pos = self._pos.get(key)
            if pos is not None and self._alive[pos] and pos not in seen:
                positions.append(pos)
                seen.add(pos)
        return [
            (
                self._keys[p],
                _score_pair(-1, sig.values, features, p, self._sigs[p], self._features[p], None),
            )
            for p in positions
        ]

    def _first_band(self, pa: int, pb: int) -> int | None:
        ka, kb = self._band_keys(self._sigs[pa]), self._band_keys(self._sigs[pb])
        for i, (x, y) in enumerate(zip(ka, kb, strict=True)):
            if x == y:
                return i
        return None

    def find_clusters(self, *, keep: str = "first") -> list[Cluster]:
        """Clusters of live items whose verified score is >= threshold.

        Member numbers are insertion positions; map them with :meth:`key_at`.
        """
        uf = UnionFind(len(self._keys))
        edges: list[Edge] = []
        for pos in range(len(self._keys)):
            if not self._alive[pos]:
                continue
            for c in self._candidates(self._band_keys(self._sigs[pos]), None, exclude=pos):
                if c > pos or uf.find(c) == uf.find(pos):
                    continue
                e = self._score(c, pos, self._first_band(c, pos))
                score = e.jaccard if e.jaccard is not None else e.estimate
                if score is not None and score >= self.threshold:
                    uf.union(c, pos)
                    edges.append(e)
        return build_clusters(len(self._keys), edges, keep=keep)

    def unique_indices(self) -> list[int]:
        """Positions of live items that are unique or the representative of a cluster."""
        dup: set[int] = set()
        for c in self.find_clusters():
            dup.update(m for m in c.members if m != c.representative)
        return [p for p in range(len(self._keys)) if self._alive[p] and p not in dup]

    def key_at(self, pos: int) -> Hashable:
        return self._keys[pos]

    def stats(self) -> LSHStats:
        sizes = [len(v) for t in self._tables for v in t.values()]
        b, r = self.scheme.bands, self.scheme.rows
        return LSHStats(
            documents=len(self),
            tombstoned=len(self._keys) - len(self),
            bands=b,
            rows=r,
            buckets=len(sizes),
            largest_bucket=max(sizes, default=0),
            bucket_overflow=self.bucket_overflow,
            candidate_overflow=self.candidate_overflow,
            threshold=self.threshold,
            predicted_recall=candidate_probability(self.threshold, b, r),
            predicted_fp_rate=_fp_mass(self.threshold, b, r) / self.threshold,
            predicted_fp_rate_at_half_threshold=candidate_probability(self.threshold / 2, b, r),
        )

    # -- persistence and merge ----------------------------------------------------
    def merge(self, other: LSHIndex) -> None:
        """Add every live item of ``other`` (same scheme required; keys must not clash)."""
        self.scheme.require_same(other.scheme, "indexes")
        clash = [k for k in other if k in self]
        if clash:
            raise InvalidConfig(
                "keys", clash[:5], "present in both indexes", "rename or remove them"
            )
        for pos, key in enumerate(other._keys):
            if other._alive[pos]:
                self.insert(key, Signature(other._sigs[pos], other.scheme), other._features[pos])

    def save(self, path: str) -> None:
        """Write a versioned, checksummed file (atomic: temp, fsync, rename, fsync dir)."""
        from .persist import save_index

        save_index(self, path)

    @classmethod
    def load(cls, path: str) -> LSHIndex:
        """Read a file written by :meth:`save`; raises CorruptFile on any damage."""
        from .persist import load_index

        return load_index(path)

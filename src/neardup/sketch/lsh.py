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
* One index may hold several layouts over the same signature, one per named
  similarity range (``LSHIndex(scheme, ranges={"near": 0.9, "related": 0.5})``,
  :mod:`neardup.sketch.ranges`); each query reads the layout of its range.

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

import builtins
from collections.abc import Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from neardup.core._errors import CorruptFile, InvalidConfig
from neardup.core._fingerprint import fingerprint
from neardup.core.checks import check_int, check_type
from neardup.core.layout import (
    Layout,
    candidate_probability,
    default_layout,
    optimal_params,
)
from neardup.core.persist import read_container, write_container
from neardup.graph.cluster import Cluster, Edge, build_clusters
from neardup.kernels import _arrays as KA
from neardup.kernels import _bandjoin as KB
from neardup.kernels import _signatures as KS
from neardup.kernels._unionfind import UnionFind
from neardup.sketch.minhash import Signature, SignatureSet
from neardup.sketch.ranges import (
    INDEX_FORMAT,
    LSHStats,
    SimilarityRange,
    index_ranges,
    layouts_text,
    range_stats,
    reaches,
)
from neardup.text.hashing import SchemeDescriptor

__all__ = [
    "LSHIndex",
    "LSHStats",
    "Layout",
    "SimilarityRange",
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
        inter = int(KA.intersect_count(fa, 0, fa.shape[0], fb, 0, fb.shape[0]))
        union = int(fa.shape[0] + fb.shape[0] - inter)
        j = inter / union if union else 0.0
        return Edge(
            a=pa,
            b=pb,
            score=j,
            estimate=est,
            band=band,
            method="exact",
            intersection=inter,
            union=union,
        )
    return Edge(a=pa, b=pb, score=None, estimate=est, band=band, method="estimate")


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
    a, b, band, _, _, _, _, _, overflow, _ = KB.band_join(
        keys,
        0,
        np.ones(n, dtype=np.bool_),
        signatures.matrix,
        empty_u64,
        indptr,
        1.0,
        max_candidates,
        KB.MODE_CANDIDATES,
        False,
        parent,
        KB.new_seen(),
    )
    return CandidatePairs(a, b, band, int(overflow))


class LSHIndex:
    """Banded LSH index over MinHash signatures, with optional exact features.

    ``insert(key, sig, features)`` returns the candidates among earlier items and
    then stores the item.  When features (the sorted shingle-hash set) are given
    for both sides, :meth:`verify` and :meth:`find_clusters` use the exact Jaccard
    similarity; otherwise they fall back to the signature estimate and say so
    (``Edge.method == "estimate"``).

    **Ranges.**  Without ``ranges`` the index has one layout, the scheme's, in a
    range named ``"default"`` at ``threshold``.  ``ranges={"near": 0.9,
    "related": 0.5}`` (or :class:`SimilarityRange` objects, for layouts of your
    own) files every item under one layout per range, each tuned for its
    threshold by :func:`default_layout`; ``query``, ``insert``, ``query_verified``
    and ``find_clusters`` take ``range=`` (default: the first range) and read that
    layout only.  All layouts band a prefix of the same signature (see
    :mod:`neardup.sketch.ranges` for why): each has its own S-curve and a second
    layout costs only its band keys (:meth:`stats` reports buckets and memory per
    range).  An unknown range raises InvalidConfig naming the known ones.

    Guarantees: deterministic candidate order (most colliding bands first, then
    insertion order); tombstoned items are never returned; no bucket grows past
    ``max_bucket_size`` and no query returns more than ``max_candidates`` — both
    overflows are counted in :meth:`stats`.

    Example (two ranges over one signature):
        >>> from neardup import Config, ShingleSpec, MinHasher
        >>> mh = MinHasher(Config(threshold=0.9, shingle=ShingleSpec(kind="word", k=1)))
        >>> index = LSHIndex(mh.scheme, ranges={"near": 0.9, "related": 0.5})
        >>> index.insert("A", mh.signature("a b c d e f g h i j k l m n o p q r s t"))
        []
        >>> near_copy = mh.signature("a b c d e f g h i j k l m n o p q r s x")
        >>> index.query(near_copy, range="near"), index.query(near_copy, range="related")
        (['A'], ['A'])
        >>> index.query(mh.signature("a b c d e f g h i j k l m n o u v w x y"), range="related")
        ['A']
        >>> [(r.name, r.bands, r.rows) for r in index.ranges]
        [('near', 14, 9), ('related', 42, 3)]
    """

    def __init__(
        self,
        scheme: SchemeDescriptor,
        *,
        threshold: float | None = None,
        ranges: Mapping[str, float] | Iterable[SimilarityRange] | None = None,
        max_bucket_size: int = 10_000,
        max_candidates: int = 1000,
    ) -> None:
        check_type("scheme", scheme, SchemeDescriptor, "pass MinHasher(config).scheme")
        resolved = index_ranges(
            ranges,
            threshold=threshold,
            num_perm=scheme.num_perm,
            layout=(scheme.bands, scheme.rows),
        )
        max_bucket_size = check_int(
            "max_bucket_size", max_bucket_size, 2, 1 << 62, "use e.g. 10000"
        )
        max_candidates = check_int("max_candidates", max_candidates, 1, 1 << 62, "use e.g. 1000")
        self.scheme = scheme
        self.ranges = resolved
        self.threshold = resolved[0].threshold
        self.max_bucket_size = max_bucket_size
        self.max_candidates = max_candidates
        self._range_pos = {r.name: i for i, r in enumerate(resolved)}
        # _tables[range][band]: band key -> insertion positions.
        self._tables: list[list[dict[int, list[int]]]] = [
            [{} for _ in range(r.bands)] for r in resolved
        ]
        self._overflow = [0] * len(resolved)
        self._keys: list[Hashable] = []
        self._pos: dict[Hashable, int] = {}
        self._sigs: list[npt.NDArray[np.uint32]] = []
        self._features: list[npt.NDArray[np.uint64] | None] = []
        self._alive: list[bool] = []
        self.candidate_overflow = 0

    @property
    def fingerprint(self) -> str:
        """16 hex digits over the scheme and every range (name, threshold, layout):
        equal for indexes that bucket and answer alike."""
        return fingerprint(
            {"scheme": self.scheme.to_dict(), "ranges": [r.to_dict() for r in self.ranges]}
        )

    @property
    def bucket_overflow(self) -> int:
        """Inserts cut by the bucket cap, summed over the ranges' layouts."""
        return sum(self._overflow)

    def _range(self, name: str | None) -> int:
        if name is None:
            return 0
        pos = self._range_pos.get(name)
        if pos is None:
            known = ", ".join(repr(r.name) for r in self.ranges)
            raise InvalidConfig(
                "range",
                name,
                f"is not a range of this index (it has {known})",
                f"pass one of {known}, or build the index with ranges={{{name!r}: threshold, ...}}",
            )
        return pos

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

    def _band_keys(self, sig: npt.NDArray[np.uint32], ri: int = 0) -> list[int]:
        # The kernel and seed of SignatureSet.band_keys, which `neardup signatures`
        # exports (tests/batch/test_sigexport.py checks that the two agree); every
        # range bands the signature's prefix with its own rows per band.
        r = self.ranges[ri]
        out = np.empty((1, r.bands), dtype=np.uint64)
        KS.band_keys(sig[None, :], 0, r.bands, r.rows, np.uint64(0), out)
        return [int(v) for v in out[0]]

    def _check(self, sig: Signature) -> None:
        check_type("sig", sig, Signature, "pass MinHasher(config).signature(text)")
        self.scheme.require_same(sig.scheme)

    # -- queries ------------------------------------------------------------------
    def _candidates(
        self, ri: int, bkeys: list[int], limit: int | None, exclude: int = -1
    ) -> list[int]:
        hits: dict[int, int] = {}
        for table, bk in zip(self._tables[ri], bkeys, strict=True):
            for pos in table.get(bk, ()):
                if pos != exclude and self._alive[pos]:
                    hits[pos] = hits.get(pos, 0) + 1
        order = sorted(hits, key=lambda p: (-hits[p], p))
        cap = self.max_candidates if limit is None else min(limit, self.max_candidates)
        if len(order) > cap:
            self.candidate_overflow += len(order) - cap
            order = order[:cap]
        return order

    def query(
        self, sig: Signature, *, limit: int | None = None, range: str | None = None
    ) -> list[Hashable]:
        """Keys of stored items sharing at least one band of ``range``'s layout
        (default: the first range) with ``sig``; nothing is stored."""
        self._check(sig)
        ri = self._range(range)
        return [self._keys[p] for p in self._candidates(ri, self._band_keys(sig.values, ri), limit)]

    def insert(
        self,
        key: Hashable,
        sig: Signature,
        features: npt.NDArray[np.uint64] | None = None,
        *,
        range: str | None = None,
    ) -> list[Hashable]:
        """Return the candidates among stored items under ``range``'s layout
        (default: the first range), then store ``key`` under every layout.

        Re-inserting a live key raises InvalidConfig; a tombstoned key may be reused.
        """
        self._check(sig)
        ri = self._range(range)
        if key in self:
            raise InvalidConfig(
                "key", key, "is already in the index", "remove it first or use a new key"
            )
        bkeys = [self._band_keys(sig.values, i) for i in builtins.range(len(self.ranges))]
        cands = self._candidates(ri, bkeys[ri], None)
        pos = len(self._keys)
        self._keys.append(key)
        self._pos[key] = pos
        self._sigs.append(np.ascontiguousarray(sig.values, dtype=np.uint32))
        self._features.append(None if features is None else np.asarray(features, dtype=np.uint64))
        self._alive.append(True)
        for i, tables in enumerate(self._tables):
            for table, bk in zip(tables, bkeys[i], strict=True):
                bucket = table.setdefault(bk, [])
                if len(bucket) >= self.max_bucket_size:
                    self._overflow[i] += 1
                else:
                    bucket.append(pos)
        return [self._keys[p] for p in cands]

    def remove(self, key: Hashable) -> None:
        """Tombstone ``key``: it is never returned again and leaves every bucket."""
        pos = self._pos.get(key)
        if pos is None or not self._alive[pos]:
            raise InvalidConfig("key", key, "is not in the index", "check the key")
        self._alive[pos] = False
        for i, tables in enumerate(self._tables):
            for table, bk in zip(tables, self._band_keys(self._sigs[pos], i), strict=True):
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
        range: str | None = None,
    ) -> list[tuple[Hashable, Edge]]:
        """Candidates of ``sig`` (plus the live keys in ``extra``), each scored.

        The score is exact when ``features`` and the stored item's features are both
        present, else the signature estimate (``Edge.method`` says which).  In the
        returned edges ``a`` is -1 (the query) and ``b`` the stored position.

        Without ``range`` every candidate of the first range's layout is returned,
        whatever its score (the caller decides).  Naming a range reads that
        range's layout and keeps only the pairs whose score reaches its threshold.
        """
        self._check(sig)
        ri = self._range(range)
        positions = self._candidates(ri, self._band_keys(sig.values, ri), limit)
        seen = set(positions)
        for key in extra:
            pos = self._pos.get(key)
            if pos is not None and self._alive[pos] and pos not in seen:
                positions.append(pos)
                seen.add(pos)
        out = [
            (
                self._keys[p],
                _score_pair(-1, sig.values, features, p, self._sigs[p], self._features[p], None),
            )
            for p in positions
        ]
        if range is None:
            return out
        t = self.ranges[ri].threshold
        return [(k, e) for k, e in out if reaches(e, t)]

    def _first_band(self, ri: int, pa: int, pb: int) -> int | None:
        ka, kb = self._band_keys(self._sigs[pa], ri), self._band_keys(self._sigs[pb], ri)
        for i, (x, y) in enumerate(zip(ka, kb, strict=True)):
            if x == y:
                return i
        return None

    def find_clusters(self, *, keep: str = "first", range: str | None = None) -> list[Cluster]:
        """Clusters of live items whose verified score is >= the threshold of
        ``range`` (default: the first range), found through that range's layout.

        Member numbers are insertion positions; map them with :meth:`key_at`.
        """
        ri = self._range(range)
        threshold = self.ranges[ri].threshold
        uf = UnionFind(len(self._keys))
        edges: list[Edge] = []
        for pos in builtins.range(len(self._keys)):
            if not self._alive[pos]:
                continue
            for c in self._candidates(ri, self._band_keys(self._sigs[pos], ri), None, exclude=pos):
                if c > pos or uf.find(c) == uf.find(pos):
                    continue
                e = self._score(c, pos, self._first_band(ri, c, pos))
                if reaches(e, threshold):
                    uf.union(c, pos)
                    edges.append(e)
        return build_clusters(len(self._keys), edges, keep=keep)

    def unique_indices(self, *, range: str | None = None) -> list[int]:
        """Positions of live items that are unique or the representative of a cluster
        (clusters of :meth:`find_clusters` for ``range``)."""
        dup: set[int] = set()
        for c in self.find_clusters(range=range):
            dup.update(m for m in c.members if m != c.representative)
        return [p for p in builtins.range(len(self._keys)) if self._alive[p] and p not in dup]

    def key_at(self, pos: int) -> Hashable:
        return self._keys[pos]

    def stats(self) -> LSHStats:
        per = tuple(
            range_stats(r, self._tables[i], self._overflow[i], len(self))
            for i, r in enumerate(self.ranges)
        )
        first = per[0]
        return LSHStats(
            documents=len(self),
            tombstoned=len(self._keys) - len(self),
            bands=first.bands,
            rows=first.rows,
            buckets=first.buckets,
            largest_bucket=first.largest_bucket,
            bucket_overflow=first.bucket_overflow,
            candidate_overflow=self.candidate_overflow,
            threshold=self.threshold,
            predicted_recall=first.predicted_recall,
            predicted_fp_rate=first.predicted_fp_rate,
            predicted_fp_rate_at_half_threshold=candidate_probability(
                self.threshold / 2, first.bands, first.rows
            ),
            ranges=per,
        )

    # -- persistence and merge ----------------------------------------------------
    def merge(self, other: LSHIndex) -> None:
        """Add every live item of ``other`` (same scheme and the same ranges' names
        and layouts required, this index's thresholds apply; keys must not clash)."""
        self.scheme.require_same(other.scheme, "indexes")
        mine = [(r.name, r.bands, r.rows) for r in self.ranges]
        theirs = [(r.name, r.bands, r.rows) for r in other.ranges]
        if mine != theirs:
            raise InvalidConfig(
                "ranges",
                layouts_text(other.ranges),
                f"the other index's layouts differ from this one's ({layouts_text(self.ranges)})",
                "merge indexes built with the same ranges, or insert the other's items "
                "into an index of the layouts you want",
            )
        clash = [k for k in other if k in self]
        if clash:
            raise InvalidConfig(
                "keys", clash[:5], "present in both indexes", "rename or remove them"
            )
        for pos, key in enumerate(other._keys):
            if other._alive[pos]:
                self.insert(key, Signature(other._sigs[pos], other.scheme), other._features[pos])

    def save(self, path: str) -> None:
        """Write a versioned, checksummed file (atomic: temp, fsync, rename, fsync dir).

        Buckets are not stored: :meth:`load` rebuilds them from the signatures.
        The ranges and the index fingerprint are recorded; files of releases
        before ranges (one layout, the scheme's) still load.
        """
        n = len(self._keys)
        k = self.scheme.num_perm
        sigs = np.stack(self._sigs) if n else np.empty((0, k), dtype=np.uint32)
        has_feat = np.array([f is not None for f in self._features], dtype=np.bool_)
        sizes = np.array([0 if f is None else f.shape[0] for f in self._features], dtype=np.int64)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(sizes, out=indptr[1:])
        feats = [f for f in self._features if f is not None]
        data = np.concatenate(feats) if feats else np.empty(0, dtype=np.uint64)
        keys = []
        for key in self._keys:
            if not isinstance(key, str | int) or isinstance(key, bool):
                raise CorruptFile(path, f"key {key!r} is not a str or int and cannot be saved")
            keys.append(key)
        meta = {
            "index_format": INDEX_FORMAT,
            "scheme": self.scheme.to_dict(),
            "threshold": self.threshold,
            "ranges": [
                {**r.to_dict(), "bucket_overflow": self._overflow[i]}
                for i, r in enumerate(self.ranges)
            ],
            "fingerprint": self.fingerprint,
            "max_bucket_size": self.max_bucket_size,
            "max_candidates": self.max_candidates,
            "keys": keys,
            "bucket_overflow": self._overflow[0],
            "candidate_overflow": self.candidate_overflow,
        }
        write_container(
            path,
            "lsh-index",
            meta,
            {
                "signatures": sigs,
                "alive": np.array(self._alive, dtype=np.bool_),
                "has_features": has_feat,
                "indptr": indptr,
                "features": data,
            },
        )

    @classmethod
    def load(cls, path: str) -> LSHIndex:
        """Read a file written by :meth:`save` (of this release or one before
        ranges); raises CorruptFile on any damage."""
        meta, arr = read_container(path, "lsh-index")
        version = meta.get("index_format", 1)
        if version not in (1, INDEX_FORMAT):
            raise CorruptFile(
                path,
                f"index format {version!r} is not supported (this build reads 1 and "
                f"{INDEX_FORMAT}); load it with the release that wrote it",
            )
        scheme = SchemeDescriptor.from_dict(meta["scheme"])
        common = {
            "max_bucket_size": meta["max_bucket_size"],
            "max_candidates": meta["max_candidates"],
        }
        if version == 1:
            index = cls(scheme, threshold=meta["threshold"], **common)
            overflow = [int(meta["bucket_overflow"])]
        else:
            try:
                ranges = [SimilarityRange.from_dict(d) for d in meta["ranges"]]
                overflow = [int(d["bucket_overflow"]) for d in meta["ranges"]]
                index = cls(scheme, ranges=ranges, **common)
            except (InvalidConfig, KeyError, TypeError, ValueError) as exc:
                raise CorruptFile(path, f"malformed ranges ({exc})") from exc
            if index.fingerprint != meta.get("fingerprint"):
                raise CorruptFile(path, "the recorded index fingerprint does not match its ranges")
        sigs, alive, has, indptr, feats = (
            arr["signatures"],
            arr["alive"],
            arr["has_features"],
            arr["indptr"],
            arr["features"],
        )
        keys = meta["keys"]
        n = len(keys)
        if not (n == sigs.shape[0] == alive.shape[0] == has.shape[0] == indptr.shape[0] - 1):
            raise CorruptFile(path, "array lengths disagree with the key list")
        for pos, key in enumerate(keys):
            f = feats[indptr[pos] : indptr[pos + 1]] if has[pos] else None
            index.insert(key, Signature(sigs[pos], scheme), f)
            if not alive[pos]:
                index.remove(key)
        index._overflow = overflow
        index.candidate_overflow = int(meta["candidate_overflow"])
        return index

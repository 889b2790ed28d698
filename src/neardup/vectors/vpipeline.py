"""Stages 5–7 for vectors: bands → exact verification → clusters, batch and online.

:func:`find_vector_duplicates` is the batch path (dense vectors or weighted bags of
features); :class:`VectorIndex` the online one (add one item, get its verified
matches).  Both use the geometry of a :class:`~neardup.VectorConfig`:

* a pair is a near duplicate when its **exact** score (cosine over the original
  values in float64, or the l2/l1 distance) passes the threshold — signatures only
  propose candidates;
* a pair at the threshold is a candidate with probability
  ``config.predicted_recall()`` (reported with every result); below that, LSH may
  miss it, and a missed candidate is never repaired by verification;
* clusters are connected components of verified edges (transitive: A~B, B~C puts
  A and C together), each listing the spanning-forest edges that joined it.

Example (the four vectors of the design notes):
    >>> import numpy as np
    >>> X = np.array([[1, 1, 1, 1], [1, .95, 1.05, 1], [.98, 1.02, 1, 1.01], [0, 1, 0, 1]])
    >>> res = find_vector_duplicates(X, VectorConfig(threshold=0.85))
    >>> [c.members for c in res.clusters]
    [(0, 1, 2)]
    >>> res.kept.tolist()
    [0, 3]
"""

from __future__ import annotations

import numbers
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.core._errors import InvalidConfig, ZeroVector, shown
from neardup.core.checks import check_pairs
from neardup.graph.cluster import Cluster, Deduplicated, Edge, Match, group_clusters
from neardup.kernels import _bandjoin as KB
from neardup.kernels import _hashes as KH
from neardup.kernels import _unionfind as UF
from neardup.kernels import _vkernels as V
from neardup.text.hashing import HashKey
from neardup.vectors.hamming import BitBands, bucket_mates, code_band_keys, fill_buckets
from neardup.vectors.sketches import (
    HyperplaneHasher,
    ICWSHasher,
    PStableHasher,
    VectorSignatures,
)
from neardup.vectors.vconfig import METRIC_CODES, SIMILARITIES, VectorConfig
from neardup.vectors.vlayout import cosine_from_hamming

__all__ = [
    "SparseBags",
    "VectorCluster",
    "VectorDedupResult",
    "VectorEdge",
    "VectorIndex",
    "VectorMatch",
    "find_vector_duplicates",
    "vector_scores",
    "weighted_bags",
    "weighted_jaccard",
]

_ROUND_BYTES = 256 * 1024**2


@dataclass(frozen=True, eq=False, slots=True)
class SparseBags:
    """Weighted bags of features in CSR form: for bag d, ``tokens[indptr[d]:indptr[d+1]]``
    (sorted, distinct 64-bit feature hashes) carry ``weights`` of the same slice."""

    tokens: npt.NDArray[np.uint64]
    weights: npt.NDArray[np.float64]
    indptr: npt.NDArray[np.int64]
    key_id: str | None = None

    def __len__(self) -> int:
        return int(self.indptr.shape[0] - 1)

    def norms(self) -> npt.NDArray[np.float64]:
        """Euclidean norm of each bag's weights (0.0 for an empty bag)."""
        doc = np.repeat(np.arange(len(self), dtype=np.int64), np.diff(self.indptr))
        sq = np.bincount(doc, weights=self.weights**2, minlength=len(self))
        return np.sqrt(sq)


def weighted_bags(
    bags: Sequence[Mapping[str, float]], *, key: HashKey | None = None, seed: int = 42
) -> SparseBags:
    """Hash feature names (keyed SipHash-2-4 when ``key`` is given — required when the
    features are untrusted — else xxh64 with ``seed``) and lay the bags out as CSR.

    >>> b = weighted_bags([{"red": 1.0, "shoe": 2.0}, {"shoe": 2.0, "red": 1.0}])
    >>> bool(np.array_equal(b.tokens[:2], b.tokens[2:]))
    True
    """
    if isinstance(bags, str | bytes | Mapping) or not isinstance(bags, Sequence):
        raise InvalidConfig(
            "bags", shown(bags), "is not a sequence of bags", "pass a list of {feature: weight}"
        )
    names: list[bytes] = []
    sizes = np.empty(len(bags), dtype=np.int64)
    wts: list[float] = []
    try:  # checked only when this fails: the loop is the cost of a large batch
        for d, bag in enumerate(bags):
            sizes[d] = len(bag)
            names.extend(t.encode("utf-8", "surrogatepass") for t in bag)
            wts.extend(bag.values())
        w = np.asarray(wts, dtype=np.float64)
        if w.shape != (len(names),):
            raise ValueError("a weight is not one number")
    except (AttributeError, TypeError, ValueError, OverflowError):
        for d, bag in enumerate(bags):
            _check_bag(f"bags[{d}]", bag)
        raise InvalidConfig(
            "bags", shown(bags), "has a weight that is not a number", "pass numeric weights"
        ) from None
    if not np.all(np.isfinite(w)):
        bad = int(np.searchsorted(np.cumsum(sizes), np.flatnonzero(~np.isfinite(w))[0], "right"))
        raise ZeroVector(bad, "has a NaN or infinite weight")
    lens = np.fromiter((len(x) for x in names), dtype=np.int64, count=len(names))
    starts = np.zeros(len(names) + 1, dtype=np.int64)
    np.cumsum(lens, out=starts[1:])
    buf = np.frombuffer(b"".join(names) or b"\x00", dtype=np.uint8)
    toks = np.empty(len(names), dtype=np.uint64)
    if key is not None:
        k0, k1 = key.halves()
        V.hash_ranges(
            buf, starts, KH.ALGO_SIPHASH24, np.uint64(0), np.uint64(k0), np.uint64(k1), toks
        )
    else:
        V.hash_ranges(buf, starts, KH.ALGO_XXH64, np.uint64(seed), np.uint64(0), np.uint64(0), toks)
    indptr = np.zeros(len(bags) + 1, dtype=np.int64)
    np.cumsum(sizes, out=indptr[1:])
    doc = np.repeat(np.arange(len(bags), dtype=np.int64), sizes)
    order = np.lexsort((toks, doc))
    return SparseBags(toks[order], w[order], indptr, key.key_id if key else None)


def _check_bag(name: str, bag: object) -> None:
    """A bag is a mapping of feature names (str) to real weights."""
    ok = isinstance(bag, Mapping) and all(
        isinstance(k, str) and isinstance(v, numbers.Real) and not isinstance(v, bool)
        for k, v in bag.items()
    )
    if not ok:
        raise InvalidConfig(
            name,
            shown(bag),
            "is not a bag of features (a mapping of str to a number)",
            'pass e.g. {"red": 1.0, "shoe": 2.0}',
        )


def weighted_jaccard(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """Exact weighted Jaccard Σ min / Σ max over non-negative weights (0.0 if both empty).

    >>> weighted_jaccard({"a": 2, "b": 1}, {"a": 1, "c": 1})
    0.25
    """
    _check_bag("a", a)
    _check_bag("b", b)
    if any(v < 0 for v in a.values()) or any(v < 0 for v in b.values()):
        raise InvalidConfig(
            "weights", "negative", "weighted Jaccard needs weights >= 0", "use cosine"
        )
    keys = set(a) | set(b)
    num = sum(min(a.get(k, 0.0), b.get(k, 0.0)) for k in keys)
    den = sum(max(a.get(k, 0.0), b.get(k, 0.0)) for k in keys)
    return float(num / den) if den else 0.0


VectorEdge = Edge
"""A verified pair of vectors: an :class:`~neardup.graph.cluster.Edge` whose
``score`` is the exact ``metric`` value, ``estimate`` the signature's view (cosine
from Hamming, or the fraction of p-stable codes shared), ``band`` the first band
the pair collided in."""

VectorCluster = Cluster
"""A family of near-duplicate vectors: a :class:`~neardup.graph.cluster.Cluster`."""

VectorMatch = Match
"""A stored vector that passed exact verification against a query: a
:class:`~neardup.graph.cluster.Match` scored by the index's metric."""


@dataclass(frozen=True, eq=False, slots=True)
class VectorDedupResult(Deduplicated):
    """What :func:`find_vector_duplicates` found.  ``representative[i]`` is the
    position kept for item i (itself when unique)."""

    n: int
    config: VectorConfig
    clusters: list[Cluster]
    edges: list[Edge]
    representative: npt.NDArray[np.int64]
    stats: dict[str, Any]

    def _own(self) -> tuple[int, npt.NDArray[np.bool_]]:
        return 0, self.representative != np.arange(self.n)

    def pairs(self) -> set[tuple[int, int]]:
        """The verified pairs found (all of them with ``all_edges=True``; otherwise
        the spanning forest)."""
        return {(e.a, e.b) for e in self.edges}


def _check_dense(X: npt.ArrayLike, metric: str) -> tuple[npt.NDArray[Any], npt.NDArray[np.float64]]:
    try:
        A = np.asarray(X)
        if A.dtype.kind not in "uifb":
            raise TypeError
    except (ValueError, TypeError, OverflowError):
        raise InvalidConfig(
            "vectors", shown(X), "is not an (n, dim) array of numbers", "stack vectors of floats"
        ) from None
    if A.ndim != 2 or A.shape[0] == 0 or A.shape[1] == 0:
        raise InvalidConfig(
            "vectors", A.shape, "must be a non-empty (n, dim) array", "stack vectors"
        )
    if A.dtype not in (np.float32, np.float64):
        A = A.astype(np.float64)
    A = np.ascontiguousarray(A)
    finite = np.isfinite(A).all(axis=1)
    if not finite.all():
        raise ZeroVector(int(np.flatnonzero(~finite)[0]), "has a NaN or infinite component")
    norms = np.sqrt(np.einsum("ij,ij->i", A, A, dtype=np.float64))
    if metric == "cosine" and not norms.all():
        raise ZeroVector(int(np.flatnonzero(norms == 0)[0]))
    return A, norms


def _signatures(
    cfg: VectorConfig, dim: int, A: npt.NDArray[Any] | None, bags: SparseBags | None
) -> VectorSignatures:
    if cfg.metric == "weighted_jaccard":
        if bags is None:  # pragma: no cover - refused by the caller
            raise InvalidConfig("vectors", "dense", "weighted Jaccard is for bags", "use bags")
        icws = ICWSHasher(hashes=(cfg.bands or 1) * (cfg.rows or 1), seed=cfg.seed)
        return icws.signatures(bags.tokens, bags.weights, bags.indptr)
    if cfg.metric == "cosine":
        h = HyperplaneHasher(dim=dim, bits=cfg.bits, seed=cfg.seed)
        if bags is not None:
            return h.sparse_signatures(bags.tokens, bags.weights, bags.indptr)
        return h.signatures(A if A is not None else np.zeros((0, dim)))
    if A is None:  # pragma: no cover - bags are refused for l1/l2 by the caller
        raise InvalidConfig("vectors", None, "no vectors", "pass an (n, dim) array")
    bands, rows = cfg.bands or 1, cfg.rows or 1
    width = float(cfg.width or 1.0)
    ph = PStableHasher(
        dim=dim, hashes=bands * rows, width=width, p=2 if cfg.metric == "l2" else 1, seed=cfg.seed
    )
    return ph.signatures(A)


def _bands_of(cfg: VectorConfig) -> BitBands | None:
    if cfg.metric != "cosine":
        return None
    if cfg.hamming_radius is not None:
        return BitBands.blocks(bits=cfg.bits, radius=cfg.hamming_radius)
    return BitBands.banded(bits=cfg.bits, bands=cfg.bands or 1, rows=cfg.rows or 1)


def _band_seed(cfg: VectorConfig) -> int:
    return (cfg.seed * 0x9E3779B97F4A7C15 + 0x5EED) % (1 << 64)


def find_vector_duplicates(
    vectors: npt.ArrayLike | SparseBags,
    config: VectorConfig | None = None,
    *,
    keep: str = "first",
    all_edges: bool = False,
) -> VectorDedupResult:
    """Near-duplicate clusters of the rows of ``vectors`` (or of weighted bags).

    Deterministic: same vectors and config ⇒ same clusters, edges and order,
    whatever the number of threads.  ``keep="first"`` keeps the earliest member of
    each cluster.  With ``all_edges`` every verified candidate pair is returned
    (for evaluation); by default only the spanning forest that joined clusters.
    """
    if keep != "first":
        raise InvalidConfig("keep", keep, "vectors have no length", "use keep='first'")
    cfg0 = config or VectorConfig()
    t0 = time.perf_counter()
    bags = vectors if isinstance(vectors, SparseBags) else None
    if bags is not None:
        if cfg0.metric not in SIMILARITIES:
            raise InvalidConfig(
                "metric",
                cfg0.metric,
                "weighted bags are compared by cosine or weighted Jaccard",
                "use metric='cosine' or metric='weighted_jaccard'",
            )
        if cfg0.metric == "weighted_jaccard" and bags.weights.size and bags.weights.min() < 0:
            raise InvalidConfig(
                "weights", float(bags.weights.min()), "weighted Jaccard needs weights >= 0",
                "use metric='cosine' for signed weights",
            )
        n = len(bags)
        norms = bags.norms()
        if n and not norms.all():
            raise ZeroVector(int(np.flatnonzero(norms == 0)[0]), "is an empty or all-zero bag")
        A = np.zeros((1, 1), dtype=np.float64)
        dim = 1
        metric_code = (
            V.METRIC_SPARSE_COSINE if cfg0.metric == "cosine" else V.METRIC_SPARSE_WJACCARD
        )
    else:
        if cfg0.metric == "weighted_jaccard":
            raise InvalidConfig(
                "metric", cfg0.metric, "is for weighted bags, not dense vectors",
                "pass weighted_bags(...), or use metric='cosine'/'l1'",
            )
        A, norms = _check_dense(vectors, cfg0.metric)  # type: ignore[arg-type]
        n, dim = A.shape
        metric_code = METRIC_CODES[cfg0.metric]
    cfg = cfg0.resolve(n)
    t_sig = time.perf_counter()
    sigs = _signatures(cfg, dim, None if bags is not None else A, bags)
    t_band = time.perf_counter()
    bit_bands = _bands_of(cfg)
    nbands = len(bit_bands) if bit_bands is not None else (cfg.bands or 1)
    per_round = max(1, min(nbands, _ROUND_BYTES // max(16 * n, 1)))
    parent = np.arange(n, dtype=np.int64)
    tok = bags.tokens if bags is not None else np.zeros(1, dtype=np.uint64)
    wts = bags.weights if bags is not None else np.zeros(1, dtype=np.float64)
    iptr = bags.indptr if bags is not None else np.zeros(2, dtype=np.int64)
    sig_kind = V.SIG_BITS if sigs.kind == "bits" else V.SIG_CODES
    mode = KB.MODE_ALL_EDGES if all_edges else KB.MODE_FOREST
    seed = _band_seed(cfg)
    fwords, fmax = cfg.prefilter()
    filtered = 0
    parts: list[tuple[Any, ...]] = []
    checks = cap_cut = bucket_cut = skipped = 0
    t_keys = t_join = 0.0
    for lo in range(0, nbands, per_round):
        hi = min(nbands, lo + per_round)
        tk = time.perf_counter()
        if bit_bands is not None:
            keys = bit_bands.keys(sigs.data, seed=seed, band_lo=lo, band_hi=hi)
        else:
            keys = code_band_keys(sigs.data, rows=cfg.rows or 1, seed=seed, band_lo=lo, band_hi=hi)
        orders, skeys = V.sort_bands(keys)
        del keys
        tj = time.perf_counter()
        out = V.vector_band_join(
            skeys,
            orders,
            lo,
            A,
            tok,
            wts,
            iptr,
            norms,
            metric_code,
            float(cfg.threshold),
            sigs.data,
            sig_kind,
            cfg.max_candidates,
            cfg.max_bucket_size,
            mode,
            parent,
            fwords,
            fmax,
        )
        t_keys += tj - tk
        t_join += time.perf_counter() - tj
        parts.append(out[:5])
        checks += int(out[5])
        cap_cut += int(out[7])
        bucket_cut += int(out[8])
        skipped += int(out[9])
        filtered += int(out[10])
    t_clu = time.perf_counter()
    edges: list[Edge] = []
    bits = sigs.width
    for ea, eb, eband, escore, eagree in parts:
        for a, b, band, s, g in zip(
            ea.tolist(), eb.tolist(), eband.tolist(), escore.tolist(), eagree.tolist(), strict=True
        ):
            est = cosine_from_hamming(g, bits) if sig_kind == V.SIG_BITS else g / bits
            edges.append(Edge(a=a, b=b, metric=cfg.metric, score=s, estimate=est, band=band))
    clusters, rep = _clusters(parent, edges)
    t_end = time.perf_counter()
    stats = {
        "items": n,
        "metric": cfg.metric,
        "scheme": cfg.scheme,
        "fingerprint": cfg.fingerprint,
        "bands": nbands,
        "rows": cfg.rows,
        "bits": cfg.bits if cfg.metric == "cosine" else None,
        "width": cfg.width,
        "hamming_radius": cfg.hamming_radius,
        "predicted_recall_at_threshold": cfg.predicted_recall(),
        "candidate_checks": checks,
        "verified_edges": len(edges),
        "skipped_connected": skipped,
        "prefiltered": filtered,
        "exact_scores": checks - filtered,
        "candidate_cap_cut": cap_cut,
        "bucket_overflow": bucket_cut,
        "clusters": len(clusters),
        "duplicates": int(n - int((rep == np.arange(n)).sum())),
        "timings": {
            "resolve": t_sig - t0,
            "signatures": t_band - t_sig,
            "band_keys": t_keys,
            "candidates_verify": t_join,
            "clusters": t_end - t_clu,
        },
    }
    return VectorDedupResult(n, cfg, clusters, edges, rep, stats)


def _clusters(
    parent: npt.NDArray[np.int64], edges: list[Edge]
) -> tuple[list[Cluster], npt.NDArray[np.int64]]:
    # The join joined exactly the verified edges; roots are the smallest members,
    # the representatives of keep="first".
    roots = UF.roots(parent)
    return group_clusters(roots, edges), roots


def vector_scores(
    vectors: npt.ArrayLike, a: npt.ArrayLike, b: npt.ArrayLike, *, metric: str = "cosine"
) -> npt.NDArray[np.float64]:
    """Exact scores of pairs (a[i], b[i]) of rows: cosine, l2 or l1, in float64.

    >>> vector_scores([[1, 0], [1, 1]], [0], [1]).round(4).tolist()
    [0.7071]
    """
    if not isinstance(metric, str) or metric not in METRIC_CODES:
        raise InvalidConfig("metric", shown(metric), "unknown metric", "use cosine, l2 or l1")
    A, norms = _check_dense(vectors, metric)
    aa, bb = check_pairs(a, b, A.shape[0])
    out = np.empty(aa.shape[0], dtype=np.float64)
    z8 = np.zeros(1, dtype=np.uint64)
    V.score_pairs(
        A, z8, np.zeros(1), np.zeros(2, dtype=np.int64), norms, METRIC_CODES[metric], aa, bb, out
    )
    return out


@dataclass
class VectorIndex:
    """An online index of dense vectors: ``add`` returns the verified matches of the new
    item among those stored, then stores it; ``candidates`` queries without storing.

    Buckets are bounded (``config.max_bucket_size``); at most ``limit`` candidates
    are verified per query (cuts counted in ``candidate_overflow``).  Each match is
    re-scored exactly; nothing unverified is returned.

    >>> idx = VectorIndex(dim=4, config=VectorConfig(threshold=0.85))
    >>> idx.add("v0", [1, 1, 1, 1]), idx.add("v3", [0, 1, 0, 1])
    ([], [])
    >>> [m.key for m in idx.add("v1", [1, 0.95, 1.05, 1])]
    ['v0']
    """

    dim: int
    config: VectorConfig = field(default_factory=VectorConfig)
    limit: int = 1000
    candidate_overflow: int = 0
    bucket_overflow: int = 0
    _cfg: VectorConfig = field(init=False, repr=False)
    _bands: BitBands | None = field(init=False, repr=False)
    _hyper: HyperplaneHasher | None = field(init=False, repr=False)
    _pstable: PStableHasher | None = field(init=False, repr=False)
    _buckets: dict[tuple[int, int], list[int]] = field(default_factory=dict, repr=False)
    _keys: list[Hashable] = field(default_factory=list, repr=False)
    _vecs: list[npt.NDArray[np.float64]] = field(default_factory=list, repr=False)
    _sigs: list[npt.NDArray[np.uint64]] = field(default_factory=list, repr=False)
    _pos: dict[Hashable, int] = field(default_factory=dict, repr=False)
    _live: list[bool] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if self.config.metric == "weighted_jaccard":
            raise InvalidConfig(
                "metric", "weighted_jaccard", "VectorIndex holds dense vectors",
                "use find_vector_duplicates(weighted_bags(...)) for bags",
            )
        self._cfg = self.config.resolve()
        self._bands = _bands_of(self._cfg)
        if self._cfg.metric == "cosine":
            self._hyper = HyperplaneHasher(dim=self.dim, bits=self._cfg.bits, seed=self._cfg.seed)
            self._pstable = None
        else:
            self._hyper = None
            self._pstable = PStableHasher(
                dim=self.dim,
                hashes=(self._cfg.bands or 1) * (self._cfg.rows or 1),
                width=float(self._cfg.width or 1.0),
                p=2 if self._cfg.metric == "l2" else 1,
                seed=self._cfg.seed,
            )

    @property
    def fingerprint(self) -> str:
        return self._cfg.fingerprint

    def __len__(self) -> int:
        return len(self._pos)

    def _prepare(
        self, vector: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.uint64], list[tuple[int, int]]]:
        A, _ = _check_dense(np.asarray(vector, dtype=np.float64).reshape(1, -1), self._cfg.metric)
        if A.shape[1] != self.dim:
            raise InvalidConfig("vector", A.shape[1], f"dimension is not {self.dim}", "use one dim")
        seed = _band_seed(self._cfg)
        if self._hyper is not None and self._bands is not None:
            sig = self._hyper.signatures(A).data
            keys = self._bands.keys(sig, seed=seed)[0]
        else:
            assert_p = self._pstable
            if assert_p is None:  # pragma: no cover - set in __post_init__
                raise InvalidConfig("metric", self._cfg.metric, "no hasher", "rebuild the index")
            sig = assert_p.signatures(A).data
            nb = self._cfg.bands or 1
            keys = code_band_keys(sig, rows=self._cfg.rows or 1, seed=seed, band_lo=0, band_hi=nb)[
                0
            ]
        return A[0].astype(np.float64), sig[0], [(t, int(k)) for t, k in enumerate(keys)]

    def _verify(
        self,
        v: npt.NDArray[np.float64],
        sig: npt.NDArray[np.uint64],
        bkeys: list[tuple[int, int]],
        limit: int,
    ) -> list[Match]:
        cands, cut = bucket_mates(self._buckets, self._live, bkeys, limit)
        self.candidate_overflow += cut
        if not cands:
            return []
        M = np.vstack([v] + [self._vecs[p] for p in cands])
        idx = np.arange(1, len(cands) + 1)
        scores = vector_scores(
            M, np.zeros(len(cands), dtype=np.int64), idx, metric=self._cfg.metric
        )
        t = float(self._cfg.threshold)
        out: list[Match] = []
        for p, s in zip(cands, scores.tolist(), strict=True):
            ok = s >= t if self._cfg.metric == "cosine" else s <= t
            if not ok:
                continue
            other = self._sigs[p]
            if self._hyper is not None:
                est = cosine_from_hamming(
                    int(np.bitwise_count(np.bitwise_xor(sig, other)).sum()), self._cfg.bits
                )
            else:
                est = float(np.mean(sig == other))
            out.append(Match(self._keys[p], float(s), est, metric=self._cfg.metric))
        sign = -1.0 if self._cfg.metric == "cosine" else 1.0
        # Every vector match has its exact score (``or`` only satisfies the type).
        out.sort(key=lambda m: (sign * (m.score or 0.0), self._pos[m.key]))
        return out

    def candidates(self, vector: npt.ArrayLike, *, limit: int | None = None) -> list[Match]:
        """Verified matches of ``vector`` among stored items, best first (not stored)."""
        v, sig, bkeys = self._prepare(vector)
        return self._verify(v, sig, bkeys, min(limit or self.limit, self.limit))

    def add(self, key: Hashable, vector: npt.ArrayLike) -> list[Match]:
        """Verified matches of the new item (best first), then store it under ``key``."""
        if key in self._pos:
            raise InvalidConfig("key", key, "is already in the index", "remove it first")
        v, sig, bkeys = self._prepare(vector)
        matches = self._verify(v, sig, bkeys, self.limit)
        p = len(self._keys)
        self._keys.append(key)
        self._vecs.append(v)
        self._sigs.append(sig)
        self._live.append(True)
        self._pos[key] = p
        self.bucket_overflow += fill_buckets(self._buckets, bkeys, p, self._cfg.max_bucket_size)
        return matches

    def remove(self, key: Hashable) -> None:
        """Tombstone ``key``: it is never returned again."""
        p = self._pos.pop(key)
        self._live[p] = False

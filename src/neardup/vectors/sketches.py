"""Stage 4 for vectors — random-hyperplane (SimHash) and p-stable signatures.

Not every duplicate is a set of shingles.  Each geometry here has its own
signature family, collision law and exact verifier, and none is mixed with MinHash
(a :class:`VectorConfig` has its own fingerprint, and its scheme names the family):

=============  =====================================  ==================================
metric         signature (one hash)                   collision probability of a pair
=============  =====================================  ==================================
``cosine``     sign(r·x), r ~ N(0, I) (a hyperplane)  1 − θ/π, θ = arccos(cos(x, y))
``l2``         floor((a·x + u) / w), a ~ N(0, I)      decreasing in ‖x − y‖₂ (Datar et al.)
``l1``         same with a ~ Cauchy                   decreasing in ‖x − y‖₁
``weighted_``  ICWS sample (feature, level) of a      J_w = Σ min(x, y) / Σ max(x, y)
``jaccard``    weighted bag (Ioffe 2010)              (exactly; weighted bags only)
=============  =====================================  ==================================

Guarantees and non-guarantees:

* **Scale is ignored by cosine.** sign(r·x) = sign(r·cx) for every c > 0, so
  (1, 1) and (100, 100) always collide and verify at cosine 1.0.  Use ``l2`` when
  magnitude matters.  A zero vector has no angle and is refused
  (:class:`~neardup.ZeroVector`).
* Collision laws are probabilities over the random hyperplanes/projections, which
  are a pure function of (scheme, seed, dimension): the same seed gives the same
  signatures on every machine.  Banding turns them into candidate probabilities
  ``1 − (1 − p**rows)**bands`` (:func:`neardup.candidate_probability`, shared with
  MinHash), and the default layout reaches ``recall_target`` at the threshold.
* Candidates are evidence only: every candidate is re-scored exactly (cosine, l2 or
  l1 over the original values, in float64) before it is called a duplicate.

Example:
    >>> import numpy as np
    >>> h = HyperplaneHasher(dim=4, bits=128, seed=7)
    >>> a, b = h.signatures(np.array([[1, 1, 1, 1], [100, 100, 100, 100]], float))
    >>> hamming_distance(a, b)          # scale is ignored
    0
    >>> round(cosine_from_hamming(32, 128), 4)   # 32 of 128 bits differ: theta = pi/4
    0.7071
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from neardup.core._errors import InvalidConfig, NoFeasibleParameters, ZeroVector
from neardup.core._fingerprint import FORMAT_VERSION, fingerprint
from neardup.kernels import _vkernels as V
from neardup.sketch.lsh import Layout, candidate_probability

__all__ = [
    "HyperplaneHasher",
    "ICWSHasher",
    "PStableHasher",
    "VectorConfig",
    "VectorSignatures",
    "cosine_from_hamming",
    "hamming_distance",
    "hyperplane_collision",
    "normalize_vector",
    "pick_width",
    "pstable_collision",
    "vector_layout",
]

VectorMetric = Literal["cosine", "l2", "l1", "weighted_jaccard"]
METRICS: tuple[str, ...] = ("cosine", "l2", "l1", "weighted_jaccard")
SIMILARITIES = ("cosine", "weighted_jaccard")  # higher is closer; the others are distances
METRIC_CODES = {"cosine": V.METRIC_COSINE, "l2": V.METRIC_L2, "l1": V.METRIC_L1}

_MAX_BITS = 16384
_DEFAULT_PLANNED = 1_000_000


def _rng(scheme: str, seed: int, dim: int) -> np.random.Generator:
    """A generator that is a pure function of (scheme, seed, dim) — never shared."""
    digest = hashlib.blake2b(
        f"{scheme}\x00{seed}\x00{dim}".encode(), digest_size=16, person=b"neardup-vecrng"
    ).digest()
    return np.random.Generator(np.random.PCG64(int.from_bytes(digest, "little")))


def normalize_vector(v: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """``v / ‖v‖₂`` in float64.  A zero (or non-finite) vector raises :class:`ZeroVector`.

    >>> normalize_vector([3.0, 4.0])
    array([0.6, 0.8])
    """
    x = np.asarray(v, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise InvalidConfig("vector", x.shape, "must be a non-empty 1-D array", "pass one vector")
    if not np.all(np.isfinite(x)):
        raise ZeroVector(None, "has a NaN or infinite component")
    n = float(np.linalg.norm(x))
    if n == 0.0:
        raise ZeroVector(None)
    return x / n


def hamming_distance(a: npt.ArrayLike, b: npt.ArrayLike) -> Any:
    """Differing bits of packed signatures (``uint64`` words): an int for two 1-D
    signatures, an array of ints for two (n, words) arrays row by row."""
    x = np.asarray(a, dtype=np.uint64)
    y = np.asarray(b, dtype=np.uint64)
    if x.shape != y.shape:
        raise InvalidConfig(
            "signatures", (x.shape, y.shape), "shapes differ", "compare signatures of one scheme"
        )
    z = np.bitwise_count(np.bitwise_xor(x, y)).astype(np.int64)
    if z.ndim <= 1:
        return int(z.sum())
    return z.sum(axis=-1)


def cosine_from_hamming(h: float, bits: int) -> float:
    """Cosine estimate from ``h`` differing of ``bits`` hyperplane bits: cos(π·h/bits).

    Monotone decreasing in ``h``; it is an estimate (standard error of the angle
    about π·sqrt(p(1−p)/bits)), never a verification.
    """
    if bits < 1 or not 0 <= h <= bits:
        raise InvalidConfig("h/bits", (h, bits), "need 0 <= h <= bits, bits >= 1", "check inputs")
    return math.cos(math.pi * h / bits)


def hyperplane_collision(cosine: float) -> float:
    """Probability that one random hyperplane puts both vectors on the same side:
    1 − arccos(cosine)/π."""
    c = min(1.0, max(-1.0, float(cosine)))
    return 1.0 - math.acos(c) / math.pi


def pstable_collision(distance: float, width: float, *, p: int = 2) -> float:
    """Probability that one quantized projection of width ``width`` collides for two
    points at l_p ``distance`` (p = 2: Gaussian projections, p = 1: Cauchy).

    Decreasing in ``distance``; 1 at distance 0 (Datar, Immorlica, Indyk, Mirrokni 2004).
    """
    if width <= 0:
        raise InvalidConfig("width", width, "must be > 0", "use pick_width(radius)")
    if distance < 0:
        raise InvalidConfig("distance", distance, "must be >= 0", "pass a distance")
    if distance == 0:
        return 1.0
    t = width / distance
    if p == 2:
        phi = 0.5 * math.erfc(t / math.sqrt(2.0))  # Phi(-t)
        return 1.0 - 2.0 * phi - 2.0 / (math.sqrt(2.0 * math.pi) * t) * (1.0 - math.exp(-t * t / 2))
    if p == 1:
        return 2.0 * math.atan(t) / math.pi - math.log1p(t * t) / (math.pi * t)
    raise InvalidConfig("p", p, "only l1 and l2 have p-stable families here", "use p=1 or p=2")


def binomial_cutoff(m: int, q: float, miss: float) -> int:
    """Smallest h with P(Binomial(m, q) > h) <= miss: of m independent hashes that
    each disagree with probability q, more than h disagree at most that often.

    >>> binomial_cutoff(256, 0.5, 1e-12) > 128
    True
    """
    if q <= 0.0:
        return 0
    if q >= 1.0:
        return m
    lq, lp = math.log(q), math.log1p(-q)
    logs = [
        math.lgamma(m + 1) - math.lgamma(h + 1) - math.lgamma(m - h + 1) + h * lq + (m - h) * lp
        for h in range(m + 1)
    ]
    tail = 0.0
    for h in range(m, -1, -1):  # tail = P(X > h - 1) after adding term h
        if tail + math.exp(logs[h]) > miss:
            return h
        tail += math.exp(logs[h])
    return 0


def _collisions(
    metric: str, threshold: float, far: float, width: float | None
) -> tuple[float, float]:
    if metric == "cosine":
        return hyperplane_collision(threshold), hyperplane_collision(far)
    if metric == "weighted_jaccard":  # consistent weighted sampling: P = J_w exactly
        return float(threshold), float(far)
    if width is None:  # pragma: no cover - callers resolve the width first
        raise InvalidConfig("width", width, "needed for l1/l2", "use pick_width(radius)")
    p = 2 if metric == "l2" else 1
    return pstable_collision(threshold, width, p=p), pstable_collision(far, width, p=p)


def vector_layout(
    metric: str,
    threshold: float,
    *,
    far: float,
    n: int,
    recall: float = 0.995,
    far_budget: float = 10.0,
    width: float | None = None,
    max_hashes: int = 4096,
    strict: bool = True,
) -> Layout:
    """The (bands, rows) with P(threshold) >= recall, ``n``·P(far) <= far_budget and
    the fewest hashes, where P is :func:`neardup.candidate_probability` (shared with
    MinHash) over this family's base collision probability.  Rows are at most 64
    (one band is one 64-bit word of hyperplane bits).

    No layout within the budget raises :class:`NoFeasibleParameters`, unless
    ``strict=False``: then the layout meeting the recall with the fewest expected
    far candidates is returned (its ``expected_far_candidates`` says the cost).

    >>> lay = vector_layout("cosine", 0.9, far=0.0, n=10_000, far_budget=10)
    >>> (lay.bands, lay.rows, round(lay.p_near, 4))
    (61, 16, 0.9952)
    """
    p_near, p_far = _collisions(metric, threshold, far, width)
    if not p_far < p_near:
        raise NoFeasibleParameters(
            "far",
            far,
            "the far point collides as often as the threshold",
            "move far away from the threshold (cosine: lower; l1/l2: larger)",
        )
    if not 0.0 < recall < 1.0 or n < 1 or not far_budget > 0:
        raise InvalidConfig(
            "recall/n/far_budget", (recall, n, far_budget), "out of range", "e.g. 0.995, n>=1, 10"
        )
    feasible: Layout | None = None
    fallback: Layout | None = None
    for r in range(1, 65):
        pr = p_near**r
        if pr <= 0.0:
            break
        if pr >= 1.0:
            b = 1
        else:
            b = max(1, math.ceil(math.log1p(-recall) / math.log1p(-pr)))
            while candidate_probability(p_near, b, r) < recall:  # float edge
                b += 1
        if b * r > max_hashes:
            continue
        pf = candidate_probability(p_far, b, r)
        lay = Layout(b, r, candidate_probability(p_near, b, r), pf, pf * n)
        if lay.expected_far_candidates <= far_budget:
            if feasible is None or lay.num_perm < feasible.num_perm:
                feasible = lay
        elif fallback is None or lay.expected_far_candidates < fallback.expected_far_candidates:
            fallback = lay
    if feasible is not None:
        return feasible
    if not strict and fallback is not None:
        return fallback
    raise NoFeasibleParameters(
        "far_budget",
        far_budget,
        f"no layout with <= {max_hashes} hashes reaches recall {recall} at {threshold} "
        f"with n*P(far={far}) <= far_budget for n={n}",
        "raise far_budget or max_hashes, lower recall, or move far away from the threshold",
    )


def pick_width(
    radius: float,
    *,
    p: int = 2,
    far_factor: float = 2.0,
    n: int = _DEFAULT_PLANNED,
    recall: float = 0.995,
    far_budget: float = 10.0,
) -> float:
    """A p-stable bucket width around the operational ``radius``: the width (searched
    over 0.5–16 × radius) whose layout needs the fewest projections to reach
    ``recall`` at ``radius`` with ``n``·P(far_factor·radius) <= far_budget.

    A width far below the radius (or below measurement noise) destroys collisions;
    far above it, everything collides and bands must be long.

    >>> w = pick_width(1.0)
    >>> 0.5 <= w <= 16
    True
    """
    if not radius > 0:
        raise InvalidConfig("radius", radius, "must be > 0", "pass the near-duplicate distance")
    if not far_factor > 1:
        raise InvalidConfig("far_factor", far_factor, "must be > 1", "use e.g. 2")
    metric = "l2" if p == 2 else "l1"
    # Feasible widths rank by hash count; when none meets the far budget (l2 at a
    # far factor of 2 over a million items needs ~n^(1/2) bands), the width with the
    # fewest expected far candidates is the least bad and is what strict=False layouts use.
    best: tuple[float, int, float] | None = None
    for i in range(0, 21):
        w = radius * 0.5 * 2 ** (i / 4)
        try:
            lay = vector_layout(
                metric,
                radius,
                far=far_factor * radius,
                n=n,
                recall=recall,
                far_budget=far_budget,
                width=w,
                strict=False,
            )
        except NoFeasibleParameters:
            continue
        over = max(lay.expected_far_candidates - far_budget, 0.0)
        key: tuple[float, int, float] = (over, lay.num_perm, w)
        if best is None or key[:2] < best[:2]:
            best = key
    if best is None:
        raise NoFeasibleParameters(
            "far_factor",
            far_factor,
            "no width reaches the recall within 4096 projections",
            "raise far_factor or far_budget, or lower recall",
        )
    return best[2]


def _check_pos_int(name: str, value: object, lo: int, hi: int, fix: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InvalidConfig(name, value, f"must be an integer in [{lo}, {hi}]", fix)


def _check_float(name: str, value: object, fix: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidConfig(name, value, "must be a finite number", fix)
    return float(value)


@dataclass(frozen=True, kw_only=True, slots=True)
class VectorConfig:
    """Everything that determines vector signatures, candidates and decisions.

    Parameters (all keyword-only):
        metric: ``cosine`` (random hyperplanes; scale ignored), ``l2`` or ``l1``
            (p-stable projections; scale matters), or ``weighted_jaccard``
            (weighted bags only: consistent weighted sampling, whose codes collide
            with probability equal to the weighted Jaccard sum(min)/sum(max)).
        threshold: cosine / weighted_jaccard: a pair is a near duplicate when its
            exact score is >= threshold (cosine in (-1, 1), weighted Jaccard in
            (0, 1]); l2/l1: when its exact distance is
            <= threshold (the radius, > 0).
        bands, rows: LSH layout (rows hashes per band; a band is an independent
            family of ``rows`` hyperplanes/projections).  Both None: chosen by
            :func:`vector_layout` for ``recall_target`` at the threshold and a
            far-candidate budget at ``far`` for ``planned_items`` items.
        far: the planning point for "unrelated" pairs (cosine, default 0.0;
            weighted Jaccard, threshold / 2; l2/l1: distance, default 2 × threshold).
            Pairs at the far point collide with probability P(far); items between
            far and threshold may collide more.
        far_budget: expected far candidates per item the default layout allows.
        planned_items: n for the layout; None means the batch size (or 1,000,000
            for an index that grows one item at a time).
        width: p-stable bucket width (default :func:`pick_width` around threshold).
        hamming_radius: cosine only — instead of (bands, rows), make every pair whose
            ``bits``-bit signatures differ in at most this many bits a candidate
            (permuted blocks: guaranteed by pigeonhole, not by probability).
        bits: signature bits (multiple of 64) for ``hamming_radius`` mode; in band
            mode the signature is bands × rows bits rounded up to 64.
        seed: selects the hyperplanes/projections (a pure function of scheme and seed).
        max_candidates, max_bucket_size: as for MinHash; cuts are counted.
        prefilter_miss: before the exact score, a candidate's leading 256
            signature bits (or 64 codes) are compared; the pair is dropped when they
            disagree so much that a pair at the threshold would do so with
            probability <= prefilter_miss (a binomial tail, computed exactly).  It
            saves reading two whole vectors for most far candidates; recall at
            the threshold drops by at most this much (it is included in
            :meth:`predicted_recall`).  None scores every candidate.
    """

    metric: VectorMetric = "cosine"
    threshold: float = 0.9
    bands: int | None = None
    rows: int | None = None
    far: float | None = None
    far_budget: float = 10.0
    planned_items: int | None = None
    width: float | None = None
    hamming_radius: int | None = None
    bits: int = 256
    recall_target: float = 0.995
    seed: int = 42
    max_candidates: int = 64
    max_bucket_size: int = 10_000
    prefilter_miss: float | None = 1e-12

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise InvalidConfig("metric", self.metric, "unknown metric", f"use one of {METRICS}")
        t = _check_float("threshold", self.threshold, "use e.g. threshold=0.9")
        if self.metric == "cosine" and not -1.0 < t < 1.0:
            raise InvalidConfig(
                "threshold", t, "a cosine threshold must be in (-1, 1)", "use e.g. 0.9"
            )
        if self.metric == "weighted_jaccard" and not 0.0 < t <= 1.0:
            raise InvalidConfig(
                "threshold", t, "a weighted Jaccard threshold must be in (0, 1]", "use e.g. 0.8"
            )
        if self.metric not in SIMILARITIES and not t > 0:
            raise InvalidConfig(
                "threshold", t, "a distance radius must be > 0", "use the near-duplicate distance"
            )
        if self.far is not None:
            f = _check_float("far", self.far, "leave far unset for the default")
            if self.metric in SIMILARITIES and not -1.0 <= f < t:
                raise InvalidConfig("far", f, "must be below the threshold", "use e.g. far=0.0")
            if self.metric == "weighted_jaccard" and f < 0:
                raise InvalidConfig("far", f, "must be in [0, threshold)", "use e.g. far=0.3")
            if self.metric not in SIMILARITIES and not f > t:
                raise InvalidConfig("far", f, "must exceed the radius", f"use e.g. far={2 * t}")
        fb = _check_float("far_budget", self.far_budget, "use e.g. 10")
        if not fb > 0:
            raise InvalidConfig("far_budget", fb, "must be > 0", "use e.g. 10")
        if self.planned_items is not None:
            _check_pos_int("planned_items", self.planned_items, 1, 1 << 40, "use e.g. 1000000")
        if self.width is not None:
            w = _check_float("width", self.width, "use pick_width(radius)")
            if not w > 0:
                raise InvalidConfig("width", w, "must be > 0", "use pick_width(radius)")
            if self.metric in SIMILARITIES:
                raise InvalidConfig("width", w, "only p-stable (l1/l2) has a width", "drop width")
        _check_pos_int("bits", self.bits, 64, _MAX_BITS, "use a multiple of 64, e.g. 256")
        if self.bits % 64:
            raise InvalidConfig(
                "bits", self.bits, "must be a multiple of 64", f"use {64 * -(-self.bits // 64)}"
            )
        r = self.recall_target
        if isinstance(r, bool) or not isinstance(r, int | float) or not 0.0 < float(r) < 1.0:
            raise InvalidConfig("recall_target", r, "must be in (0, 1)", "use e.g. 0.995")
        _check_pos_int("seed", self.seed, 0, (1 << 64) - 1, "use an integer in [0, 2**64)")
        _check_pos_int("max_candidates", self.max_candidates, 1, 1 << 30, "use e.g. 64")
        _check_pos_int("max_bucket_size", self.max_bucket_size, 2, 1 << 40, "use e.g. 10000")
        if self.prefilter_miss is not None:
            pm = self.prefilter_miss
            if isinstance(pm, bool) or not isinstance(pm, int | float) or not 0 < pm < 1e-3:
                raise InvalidConfig(
                    "prefilter_miss", pm, "must be in (0, 1e-3) or None", "use e.g. 1e-12"
                )
        if self.hamming_radius is not None:
            if self.metric != "cosine":
                raise InvalidConfig(
                    "hamming_radius", self.hamming_radius, "is for cosine signatures", "drop it"
                )
            _check_pos_int(
                "hamming_radius", self.hamming_radius, 0, self.bits // 2, "use e.g. bits // 8"
            )
            if self.bands is not None or self.rows is not None:
                raise InvalidConfig(
                    "bands",
                    self.bands,
                    "bands/rows and hamming_radius exclude each other",
                    "set one of them",
                )
            return
        if (self.bands is None) != (self.rows is None):
            raise InvalidConfig(
                "bands/rows",
                (self.bands, self.rows),
                "give both or neither",
                "e.g. bands=40, rows=16, or leave both unset for the default layout",
            )
        if self.bands is not None and self.rows is not None:
            _check_pos_int("bands", self.bands, 1, 4096, "use e.g. 40")
            _check_pos_int("rows", self.rows, 1, 64, "use e.g. 16 (at most 64 hashes per band)")
            if self.bands * self.rows > _MAX_BITS:
                raise InvalidConfig(
                    "bands", self.bands, f"bands*rows exceeds {_MAX_BITS}", "use fewer bands"
                )

    # -- resolved parameters ---------------------------------------------------------

    @property
    def far_point(self) -> float:
        if self.far is not None:
            return float(self.far)
        if self.metric == "cosine":
            return 0.0
        if self.metric == "weighted_jaccard":
            return 0.5 * float(self.threshold)
        return 2.0 * float(self.threshold)

    def _width_for(self, planned: int) -> float | None:
        if self.metric in SIMILARITIES:
            return None
        if self.width is not None:
            return float(self.width)
        return pick_width(
            float(self.threshold),
            p=2 if self.metric == "l2" else 1,
            far_factor=self.far_point / float(self.threshold),
            n=planned,
            recall=self.recall_target,
            far_budget=self.far_budget,
        )

    def resolve(self, n: int | None = None) -> VectorConfig:
        """This config with the layout, width and planned size fixed (``n`` = batch size
        when ``planned_items`` is unset).  The fingerprint of the result is what a
        signature set, index or decision records."""
        if self.is_resolved:
            return self
        planned = self.planned_items or n or _DEFAULT_PLANNED
        width = self._width_for(planned)
        bands, rows, bits = self.bands, self.rows, self.bits
        if self.hamming_radius is None and (bands is None or rows is None):
            lay = vector_layout(
                self.metric,
                float(self.threshold),
                far=self.far_point,
                n=planned,
                recall=self.recall_target,
                far_budget=self.far_budget,
                width=width,
                strict=False,
            )
            bands, rows = lay.bands, lay.rows
        if self.metric == "cosine" and bands is not None and rows is not None:
            bits = 64 * -(-(bands * rows) // 64)
        return VectorConfig(
            metric=self.metric,
            threshold=self.threshold,
            bands=bands,
            rows=rows,
            far=self.far_point,
            far_budget=self.far_budget,
            planned_items=planned,
            width=width,
            hamming_radius=self.hamming_radius,
            bits=bits,
            recall_target=self.recall_target,
            seed=self.seed,
            max_candidates=self.max_candidates,
            max_bucket_size=self.max_bucket_size,
            prefilter_miss=self.prefilter_miss,
        )

    @property
    def is_resolved(self) -> bool:
        return (
            self.planned_items is not None
            and self.far is not None
            and (self.hamming_radius is not None or self.bands is not None)
            and (self.metric in SIMILARITIES or self.width is not None)
        )

    @property
    def scheme(self) -> str:
        if self.metric == "cosine":
            return "hyperplane-v1"
        if self.metric == "weighted_jaccard":
            return "icws-v1"
        return f"pstable-{self.metric}-v1"

    def predicted_recall(self) -> float:
        """Candidate probability of a pair exactly at the threshold (resolved layout).

        In ``hamming_radius`` mode this is the probability that a pair at the
        threshold cosine differs in at most ``hamming_radius`` of ``bits`` bits."""
        cfg = self if self.is_resolved else self.resolve()
        if cfg.hamming_radius is not None:
            q = 1.0 - hyperplane_collision(float(cfg.threshold))
            return float(
                sum(
                    math.comb(cfg.bits, h) * q**h * (1 - q) ** (cfg.bits - h)
                    for h in range(cfg.hamming_radius + 1)
                )
            )
        p_near, _ = _collisions(cfg.metric, float(cfg.threshold), cfg.far_point, cfg.width)
        if cfg.bands is None or cfg.rows is None:  # pragma: no cover - resolved above
            return 0.0
        keep = 1.0 - (cfg.prefilter_miss or 0.0)
        return candidate_probability(p_near, cfg.bands, cfg.rows) * keep

    def prefilter(self) -> tuple[int, int]:
        """(words, max disagreements) of the sketch prefilter, (0, 0) when off.

        Words are 64-bit signature words (cosine: 64 bits each) or codes (p-stable,
        ICWS: one hash each) at the start of the signature."""
        cfg = self if self.is_resolved else self.resolve()
        if cfg.prefilter_miss is None:
            return 0, 0
        p_near, _ = _collisions(cfg.metric, float(cfg.threshold), cfg.far_point, cfg.width)
        if cfg.metric == "cosine":
            words = min(4, cfg.bits // 64)
            m = 64 * words
        else:
            words = min(64, (cfg.bands or 1) * (cfg.rows or 1))
            m = words
        return words, binomial_cutoff(m, 1.0 - p_near, float(cfg.prefilter_miss))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["scheme"] = self.scheme
        d["format_version"] = FORMAT_VERSION
        return d

    @property
    def fingerprint(self) -> str:
        """Stable fingerprint of the resolved config (the signature family included)."""
        cfg = self if self.is_resolved else self.resolve()
        return fingerprint(cfg.to_dict())


@dataclass(frozen=True, eq=False, slots=True)
class VectorSignatures:
    """Signatures of n vectors: packed bits (hyperplanes, (n, bits/64) ``uint64``) or
    integer codes (p-stable, (n, k) ``int64`` viewed as ``uint64``)."""

    data: npt.NDArray[np.uint64]
    kind: Literal["bits", "codes"]
    width: int
    fingerprint: str

    def __len__(self) -> int:
        return int(self.data.shape[0])

    def __iter__(self) -> Any:
        return iter(self.data)


def _as_matrix(X: npt.ArrayLike, dim: int | None) -> npt.NDArray[np.floating[Any]]:
    A = np.asarray(X)
    if A.ndim == 1:
        A = A[None, :]
    if A.ndim != 2:
        raise InvalidConfig("vectors", A.shape, "must be a 2-D array (n, dim)", "stack vectors")
    if A.dtype not in (np.float32, np.float64):
        A = A.astype(np.float64)
    if dim is not None and A.shape[1] != dim:
        raise InvalidConfig(
            "vectors", A.shape, f"dimension differs from the hasher's {dim}", "use one dimension"
        )
    return A


class HyperplaneHasher:
    """Random-hyperplane (SimHash) signatures: bit j of x is ``r_j·x > 0``.

    ``bits`` hyperplanes r_j ~ N(0, I_dim) drawn from a generator seeded by
    (scheme, seed, dim) only.  Bits agree with probability 1 − θ/π for vectors at
    angle θ; positive scale never changes a bit.  Signatures are packed 64 bits a
    word, little-endian bit order.
    """

    def __init__(self, *, dim: int, bits: int = 256, seed: int = 42) -> None:
        _check_pos_int("dim", dim, 1, 1 << 20, "pass the vectors' dimension")
        _check_pos_int("bits", bits, 64, _MAX_BITS, "use a multiple of 64, e.g. 256")
        if bits % 64:
            raise InvalidConfig("bits", bits, "must be a multiple of 64", "use e.g. 256")
        self.dim = dim
        self.bits = bits
        self.seed = seed
        self.planes = (
            _rng("hyperplane-v1", seed, dim).standard_normal((bits, dim)).astype(np.float32)
        )
        self.fingerprint = fingerprint(
            {"scheme": "hyperplane-v1", "dim": dim, "bits": bits, "seed": seed}
        )

    def projections(self, X: npt.ArrayLike) -> npt.NDArray[np.float32]:
        A = _as_matrix(X, self.dim)
        return np.asarray(A.astype(np.float32, copy=False) @ self.planes.T, dtype=np.float32)

    def signatures(self, X: npt.ArrayLike, *, chunk: int = 32768) -> VectorSignatures:
        """Packed signatures of the rows of ``X`` (computed ``chunk`` rows at a time)."""
        A = _as_matrix(X, self.dim)
        n = A.shape[0]
        out = np.empty((n, self.bits // 64), dtype=np.uint64)
        for s in range(0, n, chunk):
            out[s : s + chunk] = _pack(self.projections(A[s : s + chunk]) > 0)
        return VectorSignatures(out, "bits", self.bits, self.fingerprint)

    def sparse_signatures(
        self,
        tokens: npt.NDArray[np.uint64],
        weights: npt.NDArray[np.float64],
        indptr: npt.NDArray[np.int64],
    ) -> VectorSignatures:
        """Signatures of weighted bags of features in CSR form (token hashes, weights).

        The hyperplane component of a feature is a standard normal drawn from
        (seed, feature hash, bit), so bags of any vocabulary get the same 1 − θ/π
        law as dense vectors.  Token hashes must come from a keyed hash when the
        features are untrusted (:func:`neardup.vectors.vpipeline.weighted_bags`)."""
        n = indptr.shape[0] - 1
        seed = int.from_bytes(
            hashlib.blake2b(
                f"{self.seed}".encode(), digest_size=8, person=b"neardup-sparsehp"
            ).digest(),
            "little",
        )
        out = np.empty((n, self.bits // 64), dtype=np.uint64)
        step = 4096
        for s in range(0, n, step):
            e = min(n, s + step)
            proj = np.empty((e - s, self.bits), dtype=np.float64)
            sub = indptr[s : e + 1] - indptr[s]
            lo, hi = int(indptr[s]), int(indptr[e])
            V.sparse_projections(
                tokens[lo:hi], weights[lo:hi], sub, self.bits, np.uint64(seed), proj
            )
            out[s:e] = _pack(proj > 0)
        return VectorSignatures(out, "bits", self.bits, self.fingerprint + "-sparse")


def _pack(bits: npt.NDArray[np.bool_]) -> npt.NDArray[np.uint64]:
    packed = np.packbits(bits, axis=1, bitorder="little")
    return np.ascontiguousarray(packed).view("<u8").astype(np.uint64, copy=False)


class PStableHasher:
    """p-stable LSH for l2 (Gaussian) or l1 (Cauchy): h(x) = floor((a·x + u) / w).

    ``u ~ U[0, w)`` is the random shift.  Two points at distance c share one code
    with probability :func:`pstable_collision` (c, w), which decreases with c.
    """

    def __init__(self, *, dim: int, hashes: int, width: float, p: int = 2, seed: int = 42) -> None:
        _check_pos_int("dim", dim, 1, 1 << 20, "pass the vectors' dimension")
        _check_pos_int("hashes", hashes, 1, _MAX_BITS, "use bands * rows")
        if p not in (1, 2):
            raise InvalidConfig("p", p, "only l1 and l2", "use p=1 or p=2")
        if not width > 0:
            raise InvalidConfig("width", width, "must be > 0", "use pick_width(radius)")
        scheme = f"pstable-l{p}-v1"
        rng = _rng(scheme, seed, dim)
        a = rng.standard_normal((hashes, dim)) if p == 2 else rng.standard_cauchy((hashes, dim))
        self.dim, self.hashes, self.width, self.p, self.seed = dim, hashes, float(width), p, seed
        self.proj = a.astype(np.float64)
        self.shift = rng.uniform(0.0, width, hashes)
        self.fingerprint = fingerprint(
            {"scheme": scheme, "dim": dim, "hashes": hashes, "width": float(width), "seed": seed}
        )

    def signatures(self, X: npt.ArrayLike, *, chunk: int = 32768) -> VectorSignatures:
        A = _as_matrix(X, self.dim)
        n = A.shape[0]
        out = np.empty((n, self.hashes), dtype=np.int64)
        for s in range(0, n, chunk):
            z = (A[s : s + chunk].astype(np.float64) @ self.proj.T + self.shift) / self.width
            out[s : s + chunk] = np.floor(z).astype(np.int64)
        return VectorSignatures(out.view(np.uint64), "codes", self.hashes, self.fingerprint)


class ICWSHasher:
    """Consistent weighted sampling (Ioffe's improved CWS) for weighted bags: ``hashes``
    codes per bag; two bags share a code with probability equal to their weighted
    Jaccard similarity Σ min / Σ max (weights must be >= 0; zero weights are absent).

    Feature hashes must come from a keyed hash when the features are untrusted
    (:func:`neardup.vectors.weighted_bags` with ``key``).

    >>> from neardup.vectors import weighted_bags
    >>> b = weighted_bags([{"a": 2.0, "b": 1.0}, {"a": 2.0, "b": 1.0}, {"c": 1.0}])
    >>> s = ICWSHasher(hashes=64, seed=1).signatures(b.tokens, b.weights, b.indptr).data
    >>> bool((s[0] == s[1]).all()), bool((s[0] == s[2]).any())
    (True, False)
    """

    def __init__(self, *, hashes: int, seed: int = 42) -> None:
        _check_pos_int("hashes", hashes, 1, _MAX_BITS, "use bands * rows")
        _check_pos_int("seed", seed, 0, (1 << 64) - 1, "use an integer in [0, 2**64)")
        self.hashes = hashes
        self.seed = seed
        self.fingerprint = fingerprint({"scheme": "icws-v1", "hashes": hashes, "seed": seed})

    def signatures(
        self,
        tokens: npt.NDArray[np.uint64],
        weights: npt.NDArray[np.float64],
        indptr: npt.NDArray[np.int64],
    ) -> VectorSignatures:
        if weights.size and float(weights.min()) < 0:
            raise InvalidConfig(
                "weights", float(weights.min()), "weighted Jaccard needs weights >= 0",
                "use metric='cosine' for signed weights",
            )
        n = indptr.shape[0] - 1
        out = np.empty((n, self.hashes), dtype=np.uint64)
        seed = int.from_bytes(
            hashlib.blake2b(
                f"{self.seed}".encode(), digest_size=8, person=b"neardup-icws"
            ).digest(),
            "little",
        )
        V.icws_codes(tokens, weights, indptr, self.hashes, np.uint64(seed), out)
        return VectorSignatures(out, "codes", self.hashes, self.fingerprint)

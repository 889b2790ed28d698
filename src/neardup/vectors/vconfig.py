""":class:`VectorConfig`: everything that determines vector signatures, candidates and
decisions, validated when it is made and resolved (layout, width, planned size) into
the config whose fingerprint a signature set, index or decision records.

The metrics and the parameter checks the hashers of :mod:`neardup.vectors.sketches`
share with it live here too.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

from neardup.core._errors import InvalidConfig
from neardup.core._fingerprint import FORMAT_VERSION, fingerprint
from neardup.core.checks import check_float, check_int
from neardup.kernels import _vkernels as V
from neardup.sketch.lsh import candidate_probability
from neardup.vectors.vlayout import (
    DEFAULT_PLANNED,
    binomial_cutoff,
    collisions,
    hyperplane_collision,
    pick_width,
    vector_layout,
)

__all__ = ["VectorConfig"]

VectorMetric = Literal["cosine", "l2", "l1", "weighted_jaccard"]
METRICS: tuple[str, ...] = ("cosine", "l2", "l1", "weighted_jaccard")
SIMILARITIES = ("cosine", "weighted_jaccard")  # higher is closer; the others are distances
METRIC_CODES = {"cosine": V.METRIC_COSINE, "l2": V.METRIC_L2, "l1": V.METRIC_L1}

MAX_BITS = 16384


def check_pos_int(name: str, value: object, lo: int, hi: int, fix: str) -> None:
    """Raise :class:`InvalidConfig` unless ``value`` is an int (not a bool) in [lo, hi]."""
    check_int(name, value, lo, hi, fix)


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
        t = check_float("threshold", self.threshold, "use e.g. threshold=0.9")
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
            f = check_float("far", self.far, "leave far unset for the default")
            if self.metric in SIMILARITIES and not -1.0 <= f < t:
                raise InvalidConfig("far", f, "must be below the threshold", "use e.g. far=0.0")
            if self.metric == "weighted_jaccard" and f < 0:
                raise InvalidConfig("far", f, "must be in [0, threshold)", "use e.g. far=0.3")
            if self.metric not in SIMILARITIES and not f > t:
                raise InvalidConfig("far", f, "must exceed the radius", f"use e.g. far={2 * t}")
        fb = check_float("far_budget", self.far_budget, "use e.g. 10")
        if not fb > 0:
            raise InvalidConfig("far_budget", fb, "must be > 0", "use e.g. 10")
        if self.planned_items is not None:
            check_pos_int("planned_items", self.planned_items, 1, 1 << 40, "use e.g. 1000000")
        if self.width is not None:
            w = check_float("width", self.width, "use pick_width(radius)")
            if not w > 0:
                raise InvalidConfig("width", w, "must be > 0", "use pick_width(radius)")
            if self.metric in SIMILARITIES:
                raise InvalidConfig("width", w, "only p-stable (l1/l2) has a width", "drop width")
        check_pos_int("bits", self.bits, 64, MAX_BITS, "use a multiple of 64, e.g. 256")
        if self.bits % 64:
            raise InvalidConfig(
                "bits", self.bits, "must be a multiple of 64", f"use {64 * -(-self.bits // 64)}"
            )
        r = self.recall_target
        if isinstance(r, bool) or not isinstance(r, int | float) or not 0.0 < float(r) < 1.0:
            raise InvalidConfig("recall_target", r, "must be in (0, 1)", "use e.g. 0.995")
        check_pos_int("seed", self.seed, 0, (1 << 64) - 1, "use an integer in [0, 2**64)")
        check_pos_int("max_candidates", self.max_candidates, 1, 1 << 30, "use e.g. 64")
        check_pos_int("max_bucket_size", self.max_bucket_size, 2, 1 << 40, "use e.g. 10000")
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
            check_pos_int(
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
            check_pos_int("bands", self.bands, 1, 4096, "use e.g. 40")
            check_pos_int("rows", self.rows, 1, 64, "use e.g. 16 (at most 64 hashes per band)")
            if self.bands * self.rows > MAX_BITS:
                raise InvalidConfig(
                    "bands", self.bands, f"bands*rows exceeds {MAX_BITS}", "use fewer bands"
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
        planned = self.planned_items or n or DEFAULT_PLANNED
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
        p_near, _ = collisions(cfg.metric, float(cfg.threshold), cfg.far_point, cfg.width)
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
        p_near, _ = collisions(cfg.metric, float(cfg.threshold), cfg.far_point, cfg.width)
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

"""Collision laws and band layouts of the vector signature families
(:mod:`neardup.vectors.sketches`).

The probability that one hash of a pair collides — 1 − θ/π for a hyperplane, the
Datar et al. law for a p-stable projection, J_w for ICWS — and the (bands, rows)
layout built on it with :func:`neardup.candidate_probability` (shared with MinHash);
:func:`pick_width` chooses a p-stable bucket width around a radius.

    >>> round(hyperplane_collision(0.0), 3)     # orthogonal vectors: a coin flip
    0.5
"""

from __future__ import annotations

import math

from neardup.core._errors import InvalidConfig, NoFeasibleParameters, shown
from neardup.core.checks import check_float, check_int, check_layout_targets
from neardup.sketch.lsh import Layout, candidate_probability

__all__ = [
    "binomial_cutoff",
    "cosine_from_hamming",
    "hyperplane_collision",
    "pick_width",
    "pstable_collision",
    "vector_layout",
]

DEFAULT_PLANNED = 1_000_000
"""Items a layout plans for when neither the config nor the batch says."""


def cosine_from_hamming(h: float, bits: int) -> float:
    """Cosine estimate from ``h`` differing of ``bits`` hyperplane bits: cos(π·h/bits).

    Monotone decreasing in ``h``; it is an estimate (standard error of the angle
    about π·sqrt(p(1−p)/bits)), never a verification.
    """
    bits = check_int("bits", bits, 1, 1 << 40, "pass the signature's bit count")
    h = check_float("h", h, "pass a Hamming distance")
    if not 0 <= h <= bits:
        raise InvalidConfig("h/bits", (h, bits), "need 0 <= h <= bits, bits >= 1", "check inputs")
    return math.cos(math.pi * h / bits)


def hyperplane_collision(cosine: float) -> float:
    """Probability that one random hyperplane puts both vectors on the same side:
    1 − arccos(cosine)/π."""
    c = min(1.0, max(-1.0, check_float("cosine", cosine, "pass a cosine in [-1, 1]")))
    return 1.0 - math.acos(c) / math.pi


def pstable_collision(distance: float, width: float, *, p: int = 2) -> float:
    """Probability that one quantized projection of width ``width`` collides for two
    points at l_p ``distance`` (p = 2: Gaussian projections, p = 1: Cauchy).

    Decreasing in ``distance``; 1 at distance 0 (Datar, Immorlica, Indyk, Mirrokni 2004).
    """
    width = check_float("width", width, "use pick_width(radius)")
    distance = check_float("distance", distance, "pass a distance")
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


def collisions(
    metric: str, threshold: float, far: float, width: float | None
) -> tuple[float, float]:
    """One hash's collision probability at the threshold and at the far point."""
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
    if not isinstance(metric, str) or metric not in ("cosine", "l2", "l1", "weighted_jaccard"):
        raise InvalidConfig(
            "metric", shown(metric), "unknown metric", "use cosine, l2, l1 or weighted_jaccard"
        )
    threshold = check_float("threshold", threshold, "pass the near-duplicate threshold")
    far = check_float("far", far, "pass the far point")
    recall, far_budget, n = check_layout_targets(recall, far_budget, n)
    max_hashes = check_int("max_hashes", max_hashes, 1, 1 << 20, "use e.g. 4096")
    if width is not None:
        width = check_float("width", width, "use pick_width(radius)")
    if metric in ("l2", "l1") and width is None:
        raise InvalidConfig("width", width, f"needed for {metric}", "use pick_width(radius)")
    p_near, p_far = collisions(metric, threshold, far, width)
    if not p_far < p_near:
        raise NoFeasibleParameters(
            "far",
            far,
            "the far point collides as often as the threshold",
            "move far away from the threshold (cosine: lower; l1/l2: larger)",
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
    n: int = DEFAULT_PLANNED,
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
    radius = check_float("radius", radius, "pass the near-duplicate distance")
    far_factor = check_float("far_factor", far_factor, "use e.g. 2")
    if p not in (1, 2):
        raise InvalidConfig("p", shown(p), "only l1 and l2", "use p=1 or p=2")
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

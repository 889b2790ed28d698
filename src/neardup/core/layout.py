"""LSH layout arithmetic: the S-curve and the choice of (bands, rows).

Pure functions of the threshold and the signature length, below every stage that
needs them: :class:`~neardup.Config` picks its default layout here, the LSH index
and the vector calculators share :func:`candidate_probability`.

>>> round(candidate_probability(0.8, 21, 6), 4)
0.9983
>>> default_layout(0.8, 128)
(21, 6)
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from neardup.core._errors import InvalidConfig, NoFeasibleParameters
from neardup.core.checks import check_float, check_int, check_layout_targets

__all__ = [
    "Layout",
    "candidate_probability",
    "default_layout",
    "false_positive_mass",
    "optimal_params",
    "wilson_interval",
]


def candidate_probability(s: float, bands: int, rows: int) -> float:
    """Probability that a pair of Jaccard similarity ``s`` shares at least one band."""
    if type(s) is not float or type(bands) is not int or type(rows) is not int:
        # Checked off the hot path (the layout searches call this with exact types).
        s = check_float("s", s, "pass 0 <= s <= 1")
        bands = check_int("bands", bands, 1, 1 << 40, "use positive integers")
        rows = check_int("rows", rows, 1, 1 << 40, "use positive integers")
    if not 0.0 <= s <= 1.0:
        raise InvalidConfig("s", s, "a similarity must be in [0, 1]", "pass 0 <= s <= 1")
    if bands < 1 or rows < 1:
        raise InvalidConfig("bands/rows", (bands, rows), "must be >= 1", "use positive integers")
    p = s**rows
    if p >= 1.0:
        return 1.0
    return -math.expm1(bands * math.log1p(-p))


def false_positive_mass(t: float, b: int, r: int, steps: int = 200) -> float:
    """Area under the S-curve below ``t`` (trapezoid rule): the far-pair mass a layout lets in."""
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
    threshold = check_float("threshold", threshold, "use e.g. 0.8")
    num_perm = check_int("num_perm", num_perm, 1, 1 << 20, "use e.g. 128")
    recall = check_float("recall", recall, "use e.g. 0.995")
    if not 0.0 <= threshold <= 1.0:
        raise InvalidConfig("threshold", threshold, "must be in [0, 1]", "use e.g. 0.8")
    return _searched_layout(threshold, num_perm, recall)


@functools.lru_cache(maxsize=256)
def _searched_layout(threshold: float, num_perm: int, recall: float) -> tuple[int, int]:
    # A pure function of its arguments, asked for at every Config.layout access.
    best: tuple[float, int, int] | None = None
    fallback: tuple[float, int, int] | None = None
    for r in range(1, num_perm + 1):
        b = num_perm // r
        p = candidate_probability(threshold, b, r)
        if fallback is None or p > fallback[0]:
            fallback = (p, b, r)
        if p >= recall:
            mass = false_positive_mass(threshold, b, r)
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
    near = check_float("near", near, "e.g. near=0.8")
    far = check_float("far", far, "e.g. far=0.3")
    recall, far_budget, n = check_layout_targets(recall, far_budget, n)
    max_perm = check_int("max_perm", max_perm, 1, 1 << 16, "e.g. max_perm=128")
    if not 0.0 <= far < near <= 1.0:
        raise InvalidConfig(
            "near/far", (near, far), "need 0 <= far < near <= 1", "e.g. near=0.8, far=0.3"
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


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """The two-sided Wilson score interval of a binomial proportion at ``confidence``.

    Its lower end is a one-sided bound at ``(1 + confidence) / 2``: ``neardup tune``
    accepts a layout only when the lower end of the recall interval clears the
    target.  With no trials nothing is known: ``(0.0, 1.0)``.

    >>> lo, hi = wilson_interval(8, 10)
    >>> round(lo, 4), round(hi, 4)
    (0.4902, 0.9433)
    """
    successes = check_int("successes", successes, 0, 1 << 62, "pass a count >= 0")
    trials = check_int("trials", trials, 0, 1 << 62, "pass a count >= 0")
    confidence = check_float("confidence", confidence, "use e.g. 0.95")
    if successes > trials:
        raise InvalidConfig(
            "successes", successes, f"exceeds trials={trials}", "pass successes <= trials"
        )
    if not 0.0 < confidence < 1.0:
        raise InvalidConfig("confidence", confidence, "must be in (0, 1)", "use e.g. 0.95")
    if trials == 0:
        return 0.0, 1.0
    from statistics import NormalDist  # only for intervals: not every run's import cost

    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / trials
    z2n = z * z / trials
    centre = (p + z2n / 2) / (1 + z2n)
    half = z * math.sqrt(p * (1 - p) / trials + z2n / (4 * trials)) / (1 + z2n)
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == trials else min(1.0, centre + half)
    return lo, hi

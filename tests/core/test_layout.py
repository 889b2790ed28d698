"""The layout arithmetic of neardup.core.layout: the S-curve and the (b, r) choices."""

from __future__ import annotations

import pytest

from neardup import (
    InvalidConfig,
    NoFeasibleParameters,
    candidate_probability,
    default_layout,
    optimal_params,
)
from neardup.core.layout import false_positive_mass


def test_candidate_probability_formula() -> None:
    for s in (0.0, 0.3, 0.5, 0.8, 1.0):
        assert candidate_probability(s, 21, 6) == pytest.approx(1 - (1 - s**6) ** 21, abs=1e-12)
    with pytest.raises(InvalidConfig):
        candidate_probability(1.2, 2, 2)


def test_seed_exercise_optimizer() -> None:
    lay = optimal_params(
        near=0.8, far=0.3, recall=0.95, far_budget=20_000, n=1_000_000, max_perm=100
    )
    assert (lay.bands, lay.rows) == (8, 5)
    assert lay.p_near >= 0.95 and lay.expected_far_candidates < 20_000
    # Nothing smaller works: exhaustively check every layout with fewer rows.
    for total in range(1, lay.num_perm):
        for r in range(1, total + 1):
            if total % r == 0:
                b = total // r
                ok = (
                    candidate_probability(0.8, b, r) >= 0.95
                    and candidate_probability(0.3, b, r) * 1e6 <= 20_000
                )
                assert not ok


def test_optimizer_says_when_nothing_exists() -> None:
    with pytest.raises(NoFeasibleParameters, match="recall"):
        optimal_params(near=0.5, far=0.45, recall=0.99, far_budget=10, n=1_000_000, max_perm=64)


def test_default_layout_is_chosen_for_recall() -> None:
    b, r = default_layout(0.8, 128)
    assert (b, r) == (21, 6)
    assert candidate_probability(0.8, b, r) >= 0.995
    assert candidate_probability(0.85, b, r) >= 0.9999
    for t in (0.5, 0.7, 0.9, 0.95):
        b, r = default_layout(t, 128)
        assert b * r <= 128 and candidate_probability(t, b, r) >= 0.995


def test_false_positive_mass_is_the_area_under_the_curve_below_the_threshold() -> None:
    # 1 - (1 - s^r)^b integrates in closed form for b = 1: t^(r+1) / (r+1).
    assert false_positive_mass(0.8, 1, 3) == pytest.approx(0.8**4 / 4, rel=1e-4)
    # More rows per band push the curve right: less mass below the threshold.
    assert false_positive_mass(0.8, 21, 6) < false_positive_mass(0.8, 42, 3)


def test_wilson_interval_known_values_and_edges() -> None:
    from neardup.core.layout import wilson_interval

    # 8/10 at 95 %: the textbook Wilson interval (z = 1.95996).
    lo, hi = wilson_interval(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4) and hi == pytest.approx(0.9433, abs=1e-4)
    # By the closed form, at another level: z = 2.5758 for 99 %.
    z, k, n = 2.5758293035489, 45, 50
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5
    lo, hi = wilson_interval(k, n, 0.99)
    assert lo == pytest.approx(centre - half, rel=1e-9) and hi == pytest.approx(centre + half)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0
    assert wilson_interval(10, 10)[0] == pytest.approx(0.7225, abs=1e-4)
    for bad in ((11, 10, 0.95), (1, 10, 1.0), (-1, 10, 0.95), (1, 10, 0.0)):
        with pytest.raises(InvalidConfig):
            wilson_interval(*bad)


@pytest.mark.parametrize(("p", "n"), [(0.9, 150), (0.97, 400), (0.6, 60)])
def test_wilson_interval_covers_p_about_95_percent_of_the_time(p: float, n: int) -> None:
    """Binomial draws with known p: the two-sided interval holds p in about 95 % of
    them, and its lower end alone (the bound tune gates on) in at least 95 %."""
    import numpy as np

    from neardup.core.layout import wilson_interval

    rng = np.random.default_rng(12345)
    draws = rng.binomial(n, p, size=4000)
    ivs = [wilson_interval(int(k), n) for k in draws]
    inside = np.mean([lo <= p <= hi for lo, hi in ivs])
    below = np.mean([lo <= p for lo, _ in ivs])
    assert 0.925 <= inside <= 0.975, inside
    assert below >= 0.95, below

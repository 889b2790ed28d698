"""Collision laws and band layouts of the vector families (neardup.vectors.vlayout)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import NoFeasibleParameters, candidate_probability
from neardup.vectors.vlayout import (
    DEFAULT_PLANNED,
    binomial_cutoff,
    collisions,
    cosine_from_hamming,
    hyperplane_collision,
    pick_width,
    pstable_collision,
    vector_layout,
)


@given(st.floats(-0.999, 0.999), st.sampled_from([64, 256, 1024]))
def test_cosine_from_hamming_inverts_the_hyperplane_law(cosine: float, bits: int) -> None:
    """The expected differing bits of a pair at a cosine map back to that cosine."""
    expected_h = bits * (1.0 - hyperplane_collision(cosine))
    assert cosine_from_hamming(expected_h, bits) == pytest.approx(cosine, abs=1e-9)


@given(
    st.sampled_from(["cosine", "weighted_jaccard", "l2", "l1"]),
    st.floats(0.05, 0.95),
    st.floats(0.0, 0.9),
    st.floats(0.1, 8.0),
)
def test_collisions_are_the_law_of_each_metric(
    metric: str, a: float, b: float, width: float
) -> None:
    near, far = collisions(metric, a, b, width)
    if metric == "cosine":
        assert (near, far) == (hyperplane_collision(a), hyperplane_collision(b))
    elif metric == "weighted_jaccard":
        assert (near, far) == (a, b)  # consistent weighted sampling: P = J_w exactly
    else:
        p = 2 if metric == "l2" else 1
        assert (near, far) == (pstable_collision(a, width, p=p), pstable_collision(b, width, p=p))


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from(["cosine", "weighted_jaccard"]),
    st.floats(0.5, 0.95),
    st.integers(100, 10**7),
    st.sampled_from([0.9, 0.99, 0.995]),
)
def test_layout_meets_recall_and_budget_with_rows_of_at_most_one_word(
    metric: str, threshold: float, n: int, recall: float
) -> None:
    far = 0.0 if metric == "cosine" else threshold / 2
    try:
        lay = vector_layout(metric, threshold, far=far, n=n, recall=recall, far_budget=10.0)
    except NoFeasibleParameters:
        return  # the strict refusal is its own test
    p_near, p_far = collisions(metric, threshold, far, None)
    assert 1 <= lay.rows <= 64 and lay.bands * lay.rows <= 4096
    assert lay.p_near == candidate_probability(p_near, lay.bands, lay.rows) >= recall
    assert lay.expected_far_candidates == pytest.approx(
        n * candidate_probability(p_far, lay.bands, lay.rows)
    )
    assert lay.expected_far_candidates <= 10.0


def test_layout_refuses_a_far_point_that_collides_as_often() -> None:
    with pytest.raises(NoFeasibleParameters, match="far"):
        vector_layout("cosine", 0.5, far=0.5, n=1000)
    with pytest.raises(NoFeasibleParameters, match="far"):
        vector_layout("l2", 1.0, far=0.5, n=1000, width=2.0)


@settings(max_examples=10, deadline=None)
@given(st.floats(0.01, 100.0), st.sampled_from([1, 2]))
def test_pick_width_is_on_its_grid_and_defaults_to_the_planned_size(
    radius: float, p: int
) -> None:
    w = pick_width(radius, p=p)
    steps = [radius * 0.5 * 2 ** (i / 4) for i in range(21)]
    assert any(w == s for s in steps)
    assert w == pick_width(radius, p=p, n=DEFAULT_PLANNED)


@given(st.integers(1, 200), st.floats(0.01, 0.99), st.floats(0.01, 0.99))
def test_binomial_cutoff_grows_with_the_disagreement_rate(m: int, q1: float, q2: float) -> None:
    lo, hi = sorted((q1, q2))
    assert binomial_cutoff(m, lo, 1e-9) <= binomial_cutoff(m, hi, 1e-9) <= m
    assert binomial_cutoff(m, 0.0, 1e-9) == 0 and binomial_cutoff(m, 1.0, 1e-9) == m


def test_pstable_collision_is_one_at_zero_and_stays_a_probability() -> None:
    for p in (1, 2):
        assert pstable_collision(0.0, 1.0, p=p) == 1.0
        for d in (0.01, 0.5, 1.0, 4.0, 100.0):
            assert 0.0 <= pstable_collision(d, 1.0, p=p) <= 1.0
    assert math.isclose(hyperplane_collision(1.5), 1.0)  # clamped into [-1, 1]

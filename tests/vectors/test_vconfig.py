"""The vector config and its checks (neardup.vectors.vconfig)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import InvalidConfig
from neardup.vectors.vconfig import (
    METRIC_CODES,
    METRICS,
    SIMILARITIES,
    VectorConfig,
    check_float,
    check_pos_int,
)
from neardup.vectors.vlayout import DEFAULT_PLANNED, pick_width


@given(st.integers(-50, 50), st.integers(-20, 20), st.integers(0, 40))
def test_check_pos_int_accepts_exactly_the_range(value: int, lo: int, span: int) -> None:
    hi = lo + span
    if lo <= value <= hi:
        check_pos_int("x", value, lo, hi, "fix it")
    else:
        with pytest.raises(InvalidConfig, match=rf"\[{lo}, {hi}\]"):
            check_pos_int("x", value, lo, hi, "fix it")


@pytest.mark.parametrize("value", [True, False, 1.0, "1", None])
def test_check_pos_int_refuses_what_is_not_an_int(value: object) -> None:
    with pytest.raises(InvalidConfig, match="fix: fix it"):
        check_pos_int("x", value, 0, 10, "fix it")


@given(st.one_of(st.integers(-(10**6), 10**6), st.floats(allow_nan=False, allow_infinity=False)))
def test_check_float_returns_finite_numbers_as_floats(value: float) -> None:
    got = check_float("x", value, "fix it")
    assert type(got) is float and got == value


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, True, "0.5", None])
def test_check_float_refuses_the_rest(value: object) -> None:
    with pytest.raises(InvalidConfig, match="finite number"):
        check_float("x", value, "fix it")


def test_metric_tables_agree() -> None:
    assert set(SIMILARITIES) <= set(METRICS)
    assert set(METRIC_CODES) | {"weighted_jaccard"} == set(METRICS)
    assert len(set(METRIC_CODES.values())) == len(METRIC_CODES)
    with pytest.raises(InvalidConfig, match="bands\\*rows exceeds 16384"):
        VectorConfig(bands=4096, rows=64)


@pytest.mark.parametrize(
    ("metric", "threshold", "far", "scheme"),
    [
        ("cosine", 0.9, 0.0, "hyperplane-v1"),
        ("weighted_jaccard", 0.8, 0.4, "icws-v1"),
        ("l2", 1.5, 3.0, "pstable-l2-v1"),
        ("l1", 2.0, 4.0, "pstable-l1-v1"),
    ],
)
def test_default_far_point_and_scheme_per_metric(
    metric: str, threshold: float, far: float, scheme: str
) -> None:
    cfg = VectorConfig(metric=metric, threshold=threshold)  # type: ignore[arg-type]
    assert cfg.far_point == far and cfg.scheme == scheme
    assert cfg.to_dict()["scheme"] == scheme


def test_resolve_fixes_the_planned_size_width_and_signature_bits() -> None:
    cfg = VectorConfig(metric="l2", threshold=1.0)
    r = cfg.resolve()
    assert r.is_resolved and not cfg.is_resolved
    assert r.planned_items == DEFAULT_PLANNED
    assert r.width == pick_width(1.0, p=2, far_factor=2.0, n=DEFAULT_PLANNED)
    assert VectorConfig(metric="l2", threshold=1.0).resolve(500).planned_items == 500
    c = VectorConfig(threshold=0.9, planned_items=10_000).resolve()
    assert c.bands is not None and c.rows is not None
    assert c.bits == 64 * math.ceil(c.bands * c.rows / 64)


@settings(max_examples=10, deadline=None)
@given(st.sampled_from([1e-4, 1e-8, 1e-12]), st.floats(0.6, 0.95))
def test_prefilter_reads_a_few_words_and_costs_at_most_its_miss(
    miss: float, threshold: float
) -> None:
    base = VectorConfig(threshold=threshold, planned_items=10_000, prefilter_miss=None)
    cfg = VectorConfig(threshold=threshold, planned_items=10_000, prefilter_miss=miss)
    assert base.prefilter() == (0, 0)
    words, cutoff = cfg.prefilter()
    assert 1 <= words <= 4 and 0 <= cutoff <= 64 * words
    assert cfg.predicted_recall() == pytest.approx(base.predicted_recall() * (1 - miss))

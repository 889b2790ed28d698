"""neardup.batch.calibrate: colliding pairs, bucket sizes and the bound arithmetic
against brute force."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.batch.calibrate import (
    TuneConfig,
    band_buckets,
    hot_buckets,
    pair_codes,
    pairs_needed,
    quantiles,
    recall_rate,
)
from neardup.core.layout import wilson_interval


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 4), min_size=3, max_size=3), min_size=0, max_size=30),
    st.data(),
)
def test_pair_codes_are_the_pairs_sharing_a_band(
    rows: list[list[int]], data: st.DataObject
) -> None:
    keys = np.array(rows, dtype=np.uint64).reshape(len(rows), 3)
    m = len(rows)
    members = np.array(
        sorted(data.draw(st.sets(st.integers(0, max(m - 1, 0)), max_size=m)) if m else []),
        dtype=np.int64,
    )
    codes = pair_codes(band_buckets(keys, members), max(m, 1))
    want = sorted(
        a * max(m, 1) + b
        for a, b in itertools.combinations(members.tolist(), 2)
        if (keys[a] == keys[b]).any()
    )
    assert codes.tolist() == want


def test_hot_buckets_are_the_largest() -> None:
    keys = np.array([[1, 5], [1, 6], [1, 7], [2, 5], [3, 9]], dtype=np.uint64)
    hot = hot_buckets(band_buckets(keys, np.arange(5, dtype=np.int64)))
    assert hot == [(3, 0, 0), (2, 1, 0)]


def test_pairs_needed_and_rates() -> None:
    need = pairs_needed(0.95, 0.95)
    assert wilson_interval(need, need)[0] >= 0.95 > wilson_interval(need - 1, need - 1)[0]
    assert recall_rate(0, 0, 0.95) == {
        "pairs": 0,
        "found": 0,
        "recall": None,
        "lower": 0.0,
        "upper": 1.0,
    }
    q = quantiles(np.arange(1, 101, dtype=np.int64))
    assert (q["p50"], q["p95"], q["p99"], q["max"]) == (50.0, 95.0, 99.0, 100.0)
    assert TuneConfig().ranges == (0.5, 0.9)

"""The Ray engine's semi-join filter never drops a document that is in a pair."""

from __future__ import annotations

import numpy as np


def test_semi_join_bloom_filter_has_no_false_negatives() -> None:
    from neardup.engines.ray.verify import bloom_add, bloom_contains, ends_filter

    rng = np.random.default_rng(5)
    keys = rng.integers(0, 1 << 40, 20_000)
    bloom = ends_filter(keys.size)
    bloom_add(bloom, keys)
    assert bloom_contains(bloom, keys).all()
    others = rng.integers(1 << 41, 1 << 42, 20_000)
    assert bloom_contains(bloom, others).mean() < 0.03
    # Positions are dense small integers: mixed, they are as good as random keys.
    dense = ends_filter(20_000)
    bloom_add(dense, np.arange(20_000))
    assert bloom_contains(dense, np.arange(20_000)).all()
    assert bloom_contains(dense, np.arange(20_000, 40_000)).mean() < 0.03
    assert bloom_contains(dense, np.zeros(0, dtype=np.int64)).shape == (0,)

"""The Ray engine's semi-join filter never drops a document that is in a pair."""

from __future__ import annotations

import numpy as np


def test_semi_join_bloom_filter_has_no_false_negatives() -> None:
    from neardup.engines.ray.verify import bloom_add, bloom_contains

    rng = np.random.default_rng(5)
    keys = rng.integers(0, 1 << 40, 20_000)
    flags = np.zeros(8 * 20_000 * 10 // 8, dtype=np.bool_)
    bloom_add(flags, keys)
    bits = np.packbits(flags, bitorder="little")
    assert bloom_contains(bits, keys).all()
    others = rng.integers(1 << 41, 1 << 42, 20_000)
    assert bloom_contains(bits, others).mean() < 0.03

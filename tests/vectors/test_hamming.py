"""Hamming band index: banded and permuted-block layouts, bounded buckets."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import InvalidConfig
from neardup.vectors import BitBands, HammingIndex


def _flip(sig: np.ndarray, positions: list[int]) -> np.ndarray:
    out = sig.copy()
    for p in positions:
        out[p // 64] ^= np.uint64(1) << np.uint64(p % 64)
    return out


def test_banded_layout_covers_disjoint_bits() -> None:
    bb = BitBands.banded(bits=256, bands=8, rows=32)
    assert len(bb) == 8 and bb.words == 4
    total = sum(int(np.bitwise_count(m).sum()) for m in bb.masks)
    assert total == 256


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([64, 128, 256]),
    st.integers(0, 8),
    st.integers(0, 2**63),
    st.data(),
)
def test_blocks_make_every_pair_within_radius_a_candidate(
    bits: int, radius: int, seed: int, data: st.DataObject
) -> None:
    # Pigeonhole: differing in <= radius bits means differing in <= radius blocks,
    # so some band (m - radius blocks) is equal.  Deterministic, not probabilistic.
    bb = BitBands.blocks(bits=bits, radius=radius)
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2**63, size=bits // 64, dtype=np.uint64)
    k = data.draw(st.integers(0, radius))
    pos = data.draw(st.lists(st.integers(0, bits - 1), min_size=k, max_size=k, unique=True))
    b = _flip(a, pos)
    ka = bb.keys(a, seed=7)[0]
    kb = bb.keys(b, seed=7)[0]
    assert np.any(ka == kb)


def test_blocks_far_pairs_rarely_collide() -> None:
    bb = BitBands.blocks(bits=256, radius=4)
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2**63, size=(500, 4), dtype=np.uint64)
    b = rng.integers(0, 2**63, size=(500, 4), dtype=np.uint64)
    same = (bb.keys(a, seed=1) == bb.keys(b, seed=1)).any(axis=1)
    assert same.mean() < 0.01


def test_blocks_reject_too_few_blocks() -> None:
    with pytest.raises(InvalidConfig, match="blocks"):
        BitBands.blocks(bits=64, radius=3, blocks=3)


def test_keys_are_deterministic_and_seeded() -> None:
    bb = BitBands.banded(bits=128, bands=4, rows=32)
    s = np.arange(8, dtype=np.uint64).reshape(4, 2)
    assert np.array_equal(bb.keys(s, seed=1), bb.keys(s, seed=1))
    assert not np.array_equal(bb.keys(s, seed=1), bb.keys(s, seed=2))
    with pytest.raises(InvalidConfig, match="words"):
        bb.keys(np.zeros((2, 3), dtype=np.uint64), seed=1)


def test_index_query_insert_remove_and_bounded_buckets() -> None:
    bb = BitBands.blocks(bits=64, radius=2)
    idx = HammingIndex(bb, max_bucket_size=2)
    base = np.array([0xDEADBEEF], dtype=np.uint64)
    assert idx.insert("a", base) == []
    assert idx.insert("b", _flip(base, [3])) == ["a"]
    assert idx.insert("c", _flip(base, [5, 40])) == ["a", "b"]
    assert idx.query(np.array([~np.uint64(0xDEADBEEF)], dtype=np.uint64)) == []
    # buckets hold two members: the third identical signature is counted, not stored
    assert idx.bucket_overflow > 0
    idx.remove("a")
    assert "a" not in idx and len(idx) == 2
    assert "a" not in idx.query(base)
    with pytest.raises(InvalidConfig, match="already"):
        idx.insert("b", base)


def test_index_candidate_cap_is_counted() -> None:
    idx = HammingIndex(BitBands.banded(bits=64, bands=2, rows=32), max_candidates=3)
    s = np.array([42], dtype=np.uint64)
    for i in range(6):
        idx.insert(i, s)
    assert idx.query(s) == [0, 1, 2]
    assert idx.candidate_overflow > 0

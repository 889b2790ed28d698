from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup import CorruptFile, InvalidConfig
from neardup.sketch.screen import BloomFilter


@given(keys=st.lists(st.integers(0, 2**64 - 1), max_size=200))
def test_no_false_negatives(keys: list[int]) -> None:
    bf = BloomFilter(capacity=max(len(keys), 1), fp_rate=0.01)
    if keys:
        bf.add(keys)
        assert bf.contains(keys).all()


def test_false_positive_rate_near_target() -> None:
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 2**63, size=20_000, dtype=np.int64).astype(np.uint64)
    probe = rng.integers(0, 2**63, size=100_000, dtype=np.int64).astype(np.uint64) | np.uint64(
        2**63
    )
    bf = BloomFilter(capacity=20_000, fp_rate=0.01)
    bf.add(keys)
    rate = bf.contains(probe).mean()
    assert rate < 0.015
    assert bf.expected_fp_rate() == pytest.approx(0.01, rel=0.2)


def test_roundtrip_and_corruption() -> None:
    bf = BloomFilter(capacity=100, fp_rate=0.001)
    bf.add([1, 2, 3])
    data = bf.to_bytes()
    back = BloomFilter.from_bytes(data)
    assert 2 in back and back.count == 3 and back.to_bytes() == data
    bad = bytearray(data)
    bad[20] ^= 1
    with pytest.raises(CorruptFile):
        BloomFilter.from_bytes(bytes(bad))
    with pytest.raises(CorruptFile):
        BloomFilter.from_bytes(b"junk")


def test_validation() -> None:
    with pytest.raises(InvalidConfig):
        BloomFilter(capacity=0)
    with pytest.raises(InvalidConfig):
        BloomFilter(capacity=10, fp_rate=0.9)

"""BandIndex against a brute-force oracle: every live item sharing a band bucket."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.core._errors import InvalidConfig
from neardup.service.online import BandIndex, fold_keys


def oracle(keys: dict[int, np.ndarray], alive: set[int], q: np.ndarray) -> dict[int, int]:
    out = {}
    for p, k in keys.items():
        if p in alive:
            hits = int(np.count_nonzero(k == q))
            if hits:
                out[p] = hits
    return out


ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(st.integers(0, 5), min_size=3, max_size=3)),
        st.tuples(st.just("del"), st.integers(0, 40)),
        st.tuples(st.just("compact"), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(ops, st.lists(st.integers(0, 5), min_size=3, max_size=3), st.integers(16, 32))
def test_query_matches_oracle(seq, q, delta_cap) -> None:
    idx = BandIndex(bands=3, max_bucket_size=1000, delta_capacity=delta_cap)
    keys: dict[int, np.ndarray] = {}
    alive: set[int] = set()
    nxt = 0
    for op, arg in seq:
        if op == "add":
            k = np.array(arg, dtype=np.uint32)
            idx.add(nxt, k)
            keys[nxt] = k
            alive.add(nxt)
            nxt += 1
        elif op == "del":
            assert idx.tombstone(arg) == (arg in alive)
            alive.discard(arg)
        else:
            idx.compact()
        if idx.needs_compaction():
            idx.compact()
    qa = np.array(q, dtype=np.uint32)
    r = idx.query(qa)
    want = oracle(keys, alive, qa)
    assert r.positions.tolist() == sorted(want)
    assert r.bands_hit.tolist() == [want[p] for p in sorted(want)]
    assert not r.capped
    assert len(idx) == len(alive)


def test_bucket_cap_counts_overflow_and_bulk_load_agrees() -> None:
    idx = BandIndex(bands=2, max_bucket_size=3)
    cut = [idx.add(i, np.array([1, i], dtype=np.uint32)) for i in range(5)]
    assert cut == [0, 0, 0, 1, 1]
    assert idx.overflow == 2
    assert idx.query(np.array([1, 99], dtype=np.uint32)).positions.tolist() == [0, 1, 2]
    bulk = BandIndex(bands=2, max_bucket_size=3)
    bulk.load(np.arange(5), np.array([[1, i] for i in range(5)], dtype=np.uint32))
    assert bulk.overflow == 2
    assert bulk.query(np.array([1, 4], dtype=np.uint32)).positions.tolist() == [0, 1, 2, 4]


def test_scan_cap_reports_capped() -> None:
    idx = BandIndex(bands=1, max_bucket_size=100)
    for i in range(10):
        idx.add(i, np.array([7], dtype=np.uint32))
    r = idx.query(np.array([7], dtype=np.uint32), max_scan=4)
    assert r.capped and r.positions.tolist() == [0, 1, 2, 3]


def test_compaction_drops_tombstones_and_keeps_reads_consistent() -> None:
    rng = np.random.default_rng(0)
    idx = BandIndex(bands=8, max_bucket_size=10_000, delta_capacity=64)
    keys = rng.integers(0, 50, size=(3000, 8)).astype(np.uint32)
    for i in range(2000):
        idx.add(i, keys[i])
    for i in range(0, 2000, 3):
        idx.tombstone(i)
    errors: list[str] = []

    def reader() -> None:
        for _ in range(200):
            p = int(rng.integers(0, 2000))
            got = set(idx.query(keys[p]).positions.tolist())
            if p % 3 and p not in got:
                errors.append(f"lost {p}")

    th = threading.Thread(target=reader)
    th.start()
    idx.compact()
    for i in range(2000, 3000):
        idx.add(i, keys[i])
    idx.compact()
    th.join()
    assert not errors
    live = 3000 - len(range(0, 2000, 3))
    assert idx.nbytes < live * 8 * 8 + 20_000  # main arrays + a small delta + liveness
    assert len(idx) == 3000 - len(range(0, 2000, 3))


def test_fold_and_validation() -> None:
    assert fold_keys(np.array([(5 << 32) | 3], dtype=np.uint64)).tolist() == [6]
    with pytest.raises(InvalidConfig, match="bands"):
        BandIndex(bands=0, max_bucket_size=2)
    idx = BandIndex(bands=2, max_bucket_size=2)
    with pytest.raises(InvalidConfig, match="expected 2 keys"):
        idx.add(0, np.array([1], dtype=np.uint32))
    idx.add(0, np.array([1, 2], dtype=np.uint32))
    with pytest.raises(InvalidConfig, match="already live"):
        idx.add(0, np.array([1, 2], dtype=np.uint32))


def test_index_bytes_per_item_at_32_bands() -> None:
    n = 50_000
    idx = BandIndex(bands=32, max_bucket_size=1000)
    rng = np.random.default_rng(1)
    idx.load(np.arange(n), rng.integers(0, 2**32, size=(n, 32), dtype=np.uint64).astype(np.uint32))
    assert idx.nbytes / n <= 300

"""Named similarity ranges: an LSHIndex holding one band layout per range."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup import (
    Config,
    CorruptFile,
    InvalidConfig,
    LSHIndex,
    MinHasher,
    SchemeMismatch,
    ShingleSpec,
)
from neardup.core.persist import read_container, write_container
from neardup.sketch.lsh import SimilarityRange
from neardup.sketch.minhash import Signature, SignatureSet
from neardup.sketch.ranges import resolve_ranges

DATA = Path(__file__).resolve().parents[1] / "data"
MASK = (1 << 64) - 1


def _hashes(ids: list[int] | range) -> np.ndarray:
    # Spread small ids over 64 bits, as shingle hashes are.
    return np.unique(np.array([(i * 0x9E3779B97F4A7C15 + 1) & MASK for i in ids], np.uint64))


def _pair_ids(s: float, start: int, union: int = 200) -> tuple[list[int], list[int]]:
    """Two id sets of exact Jaccard similarity ``s``."""
    inter = round(s * union)
    side = (union - inter) // 2
    common = list(range(start, start + inter))
    a = common + list(range(start + inter, start + inter + side))
    b = common + list(range(start + inter + side, start + inter + 2 * side))
    return a, b


def _pair(mh: MinHasher, s: float, start: int) -> tuple[Signature, Signature]:
    """Signatures of two sets of exact Jaccard similarity ``s``."""
    a, b = _pair_ids(s, start)
    return mh.from_hashes(_hashes(a)), mh.from_hashes(_hashes(b))


def _two_range_index(**kw: object) -> tuple[MinHasher, LSHIndex]:
    mh = MinHasher(Config(threshold=0.9))
    return mh, LSHIndex(mh.scheme, ranges={"near": 0.9, "related": 0.5}, **kw)  # type: ignore[arg-type]


def test_ranges_get_the_default_layout_of_their_thresholds() -> None:
    mh, idx = _two_range_index()
    cfg9, cfg5 = Config(threshold=0.9), Config(threshold=0.5)
    assert [(r.name, r.threshold, r.bands, r.rows) for r in idx.ranges] == [
        ("near", 0.9, *cfg9.layout),
        ("related", 0.5, *cfg5.layout),
    ]
    assert idx.threshold == 0.9
    # Without ranges: one range, the scheme's layout, as before.
    one = LSHIndex(mh.scheme, threshold=0.9)
    assert one.ranges == (SimilarityRange("default", 0.9, mh.scheme.bands, mh.scheme.rows),)


@pytest.mark.parametrize(
    ("ranges", "match"),
    [
        ({}, "names no range"),
        ([SimilarityRange("a", 0.5, 8, 4), SimilarityRange("a", 0.8, 4, 8)], "twice"),
        ([SimilarityRange("a", 0.5, 8, 4), SimilarityRange("b", 0.8, 8, 4)], "layout of range"),
        ([SimilarityRange("a", 0.5, 8, 5)], "exceeds the signature's num_perm=32"),
        ([("a", 0.5)], "is not a SimilarityRange"),
        ({"a": 1.5}, r"in \(0, 1\]"),
        ({"": 0.5}, "non-empty"),
    ],
)
def test_bad_ranges_are_refused_with_the_fix(ranges: object, match: str) -> None:
    with pytest.raises(InvalidConfig, match=match):
        resolve_ranges(ranges, num_perm=32)  # type: ignore[arg-type]


def test_threshold_is_required_alone_and_must_agree_with_ranges() -> None:
    mh = MinHasher(Config())
    with pytest.raises(InvalidConfig, match="required without ranges"):
        LSHIndex(mh.scheme)
    with pytest.raises(InvalidConfig, match="differs from the first range's"):
        LSHIndex(mh.scheme, threshold=0.5, ranges={"near": 0.9, "related": 0.5})
    assert LSHIndex(mh.scheme, threshold=0.9, ranges={"near": 0.9}).threshold == 0.9
    for bad in ("0.8", True, 0.0, 1.5):
        with pytest.raises(InvalidConfig, match="threshold"):
            LSHIndex(mh.scheme, threshold=bad)  # type: ignore[arg-type]


def test_unknown_range_names_the_known_ones_and_the_fix() -> None:
    mh, idx = _two_range_index()
    a, _ = _pair(mh, 0.9, 0)
    idx.insert("a", a)
    calls = [
        lambda: idx.query(a, range="far"),
        lambda: idx.query_verified(a, None, range="far"),
        lambda: idx.insert("b", a, range="far"),
        lambda: idx.find_clusters(range="far"),
        lambda: idx.unique_indices(range="far"),
    ]
    for call in calls:
        with pytest.raises(InvalidConfig) as err:
            call()
        text = str(err.value)
        assert "'far'" in text and "'near', 'related'" in text and "ranges=" in text
    assert "b" not in idx  # the refused insert stored nothing


def test_the_wide_range_finds_a_pair_the_narrow_range_does_not() -> None:
    mh, idx = _two_range_index()
    a6, b6 = _pair(mh, 0.6, 0)
    a95, b95 = _pair(mh, 0.95, 10_000)
    idx.insert("a6", a6)
    idx.insert("a95", a95)
    assert idx.query(b6, range="related") == ["a6"]
    assert idx.query(b6, range="near") == []
    assert idx.query(b6) == []  # the first range is the default
    assert idx.query(b95, range="near") == ["a95"]
    assert idx.query(b95, range="related") == ["a95"]


def test_planted_pairs_recall_per_range() -> None:
    # 40 pairs at each level: the 0.5 layout (42x3) catches a 0.6 pair with
    # probability 1 - 4e-5, the 0.9 layout (14x9) with 0.13; both catch 0.95 pairs.
    mh, idx = _two_range_index()
    probes: dict[float, list[Signature]] = {0.6: [], 0.95: []}
    for s in probes:
        for i in range(40):
            a, b = _pair(mh, s, (i + (100 if s > 0.9 else 0)) * 1000)
            idx.insert(f"{s}-{i}", a)
            probes[s].append(b)

    def found(s: float, rng: str) -> int:
        return sum(f"{s}-{i}" in idx.query(b, range=rng) for i, b in enumerate(probes[s]))

    assert found(0.6, "related") == 40
    assert found(0.95, "related") == 40
    assert found(0.95, "near") == 40
    assert found(0.6, "near") <= 12


def test_insert_returns_candidates_of_its_range_and_remove_leaves_every_layout() -> None:
    mh, idx = _two_range_index()
    a, b = _pair(mh, 0.6, 0)
    assert idx.insert("a", a) == []
    assert idx.insert("b", b, range="related") == ["a"]
    assert idx.query(a, range="related") == ["a", "b"]
    idx.remove("a")
    assert idx.query(a, range="related") == ["b"]
    st_ = idx.stats()
    assert all(r.largest_bucket == 1 for r in st_.ranges)
    assert [r.buckets for r in st_.ranges] == [r.bands for r in idx.ranges]


def test_query_verified_with_a_range_keeps_the_pairs_in_that_range() -> None:
    mh, idx = _two_range_index()
    for key, s, start in (("a6", 0.6, 0), ("a4", 0.4, 5000)):
        a, b = _pair_ids(s, start)
        idx.insert(key, mh.from_hashes(_hashes(a)), _hashes(a))
        probe, feats = mh.from_hashes(_hashes(b)), _hashes(b)
        everything = dict(idx.query_verified(probe, feats, extra=[key]))
        assert everything[key].jaccard == pytest.approx(s) and everything[key].method == "exact"
        related = dict(idx.query_verified(probe, feats, range="related", extra=[key]))
        assert (key in related) == (s >= 0.5)
        assert dict(idx.query_verified(probe, feats, range="near", extra=[key])) == {}


def test_find_clusters_per_range() -> None:
    mh, idx = _two_range_index()
    a6, b6 = _pair(mh, 0.6, 0)
    a95, b95 = _pair(mh, 0.95, 10_000)
    for i, sig in enumerate((a6, b6, a95, b95)):
        idx.insert(i, sig)
    # No features: the estimate decides (and says so).
    near = idx.find_clusters(range="near")
    related = idx.find_clusters(range="related")
    assert [c.members for c in near] == [(2, 3)]
    assert sorted(c.members for c in related) == [(0, 1), (2, 3)]
    assert idx.find_clusters() == near
    assert idx.unique_indices(range="related") == [0, 2]


def test_stats_report_each_layout_and_its_memory() -> None:
    mh, idx = _two_range_index()
    n = 30
    for i in range(n):
        idx.insert(i, mh.from_hashes(_hashes(range(i * 100, i * 100 + 50))))
    st_ = idx.stats()
    near, related = st_.ranges
    assert (near.name, near.bands, near.rows) == ("near", 14, 9)
    assert (related.name, related.bands, related.rows) == ("related", 42, 3)
    # Unrelated items: one bucket per item and band.
    assert (near.buckets, related.buckets) == (14 * n, 42 * n)
    assert near.band_key_bytes == 8 * 14 * n and related.band_key_bytes == 8 * 42 * n
    assert related.table_bytes > 2 * near.table_bytes > 0
    assert near.predicted_recall > 0.99 and related.predicted_recall > 0.99
    # The top-level layout fields are the first range's.
    assert (st_.bands, st_.rows, st_.buckets, st_.threshold) == (14, 9, 14 * n, 0.9)


def test_bucket_cap_is_counted_per_range() -> None:
    mh, idx = _two_range_index(max_bucket_size=3)
    s = mh.from_hashes(_hashes(range(40)))
    for i in range(5):
        idx.insert(i, s)
    near, related = idx.stats().ranges
    assert (near.bucket_overflow, related.bucket_overflow) == (2 * 14, 2 * 42)
    assert idx.bucket_overflow == 2 * 14 + 2 * 42
    assert idx.stats().bucket_overflow == 2 * 14


def test_fingerprint_includes_the_layouts() -> None:
    mh, idx = _two_range_index()
    _, same = _two_range_index()
    assert idx.fingerprint == same.fingerprint
    others = [
        LSHIndex(mh.scheme, ranges={"near": 0.9}),
        LSHIndex(mh.scheme, ranges={"near": 0.9, "related": 0.6}),
        LSHIndex(mh.scheme, ranges={"near": 0.9, "wide": 0.5}),
        LSHIndex(mh.scheme, ranges=[SimilarityRange("near", 0.9, 14, 9), _r(0.5, 40, 3)]),
    ]
    assert len({idx.fingerprint, *(o.fingerprint for o in others)}) == 1 + len(others)


def _r(t: float, b: int, r: int) -> SimilarityRange:
    return SimilarityRange("related", t, b, r)


def test_save_load_round_trips_every_layout(tmp_path: Path) -> None:
    mh, idx = _two_range_index(max_bucket_size=2)
    a6, b6 = _pair(mh, 0.6, 0)
    a95, b95 = _pair(mh, 0.95, 10_000)
    sigs = {"a6": a6, "b6": b6, "a95": a95, "x": a95, "y": a95}
    for key, sig in sigs.items():
        idx.insert(key, sig)
    idx.remove("b6")
    path = str(tmp_path / "two.ndx")
    idx.save(path)
    back = LSHIndex.load(path)
    assert back.ranges == idx.ranges and back.fingerprint == idx.fingerprint
    assert list(back.keys()) == list(idx.keys())
    for rng in ("near", "related"):
        for probe in (a6, b6, a95, b95):
            assert back.query(probe, range=rng) == idx.query(probe, range=rng)
    assert back.stats().ranges == idx.stats().ranges
    assert back.bucket_overflow == idx.bucket_overflow > 0


def test_single_range_files_of_earlier_releases_still_load(tmp_path: Path) -> None:
    path = str(tmp_path / "old.ndx")
    shutil.copy(DATA / "lsh-index-v1.ndx", path)
    meta, _ = read_container(path, "lsh-index")
    assert "ranges" not in meta and "index_format" not in meta
    old = LSHIndex.load(path)
    assert [(r.name, r.threshold) for r in old.ranges] == [("default", 0.75)]
    assert (old.ranges[0].bands, old.ranges[0].rows) == (old.scheme.bands, old.scheme.rows)
    assert list(old.keys()) == ["k0", "k1"] and old.stats().tombstoned == 1
    assert old.verify("k0", "k1").jaccard == 0.8
    # Signatures are the same in every process: the file's items answer a fresh one.
    mh = MinHasher(Config(threshold=0.75, shingle=ShingleSpec(kind="word", k=2)))
    assert old.query(mh.signature("red fox runs very fast today")) == ["k1", "k0"]
    # Written again, it is a file of the current format that loads the same.
    old.save(path)
    again = LSHIndex.load(path)
    assert again.fingerprint == old.fingerprint and list(again.keys()) == ["k0", "k1"]


def _rewrite(path: str, out: str, **changes: object) -> None:
    meta, arrays = read_container(path, "lsh-index")
    write_container(out, "lsh-index", {**meta, **changes}, arrays)


def test_damaged_or_newer_range_records_are_refused(tmp_path: Path) -> None:
    mh, idx = _two_range_index()
    idx.insert("a", _pair(mh, 0.9, 0)[0])
    path, bad = str(tmp_path / "i.ndx"), str(tmp_path / "bad.ndx")
    idx.save(path)
    meta, _ = read_container(path, "lsh-index")
    _rewrite(path, bad, index_format=3)
    with pytest.raises(CorruptFile, match="index format 3 is not supported"):
        LSHIndex.load(bad)
    _rewrite(path, bad, ranges=[{"name": "near", "threshold": 0.9}])
    with pytest.raises(CorruptFile, match="malformed ranges"):
        LSHIndex.load(bad)
    changed = [dict(meta["ranges"][0], rows=8), meta["ranges"][1]]
    _rewrite(path, bad, ranges=changed)
    with pytest.raises(CorruptFile, match="fingerprint"):
        LSHIndex.load(bad)
    os.remove(bad)


def test_merge_needs_the_same_layouts() -> None:
    mh, a = _two_range_index()
    _, b = _two_range_index()
    sig = _pair(mh, 0.9, 0)[0]
    a.insert("x", sig)
    b.insert("y", sig)
    a.merge(b)
    assert a.query(sig, range="related") == ["x", "y"] and a.query(sig, range="near") == ["x", "y"]
    # A threshold with the same layout buckets alike: accepted, this index's threshold applies.
    c = LSHIndex(mh.scheme, ranges={"near": 0.9, "related": 0.6})
    c.insert("w", sig)
    a.merge(c)
    assert a.ranges[1].threshold == 0.5 and "w" in a
    for other in (
        LSHIndex(mh.scheme, threshold=0.9),
        LSHIndex(mh.scheme, ranges={"near": 0.9, "related": 0.3}),
        LSHIndex(mh.scheme, ranges={"related": 0.5, "near": 0.9}),
        LSHIndex(mh.scheme, ranges={"near": 0.9, "wide": 0.5}),
    ):
        other.insert("z", sig)
        with pytest.raises(InvalidConfig, match="layouts differ") as err:
            a.merge(other)
        assert "near: 14x9, related: 42x3" in str(err.value)
        assert "z" not in a
    other_scheme = MinHasher(Config(threshold=0.9, seed=7)).scheme
    with pytest.raises(SchemeMismatch):
        a.merge(LSHIndex(other_scheme, ranges={"near": 0.9, "related": 0.5}))


# -- property: candidates are exactly the band collisions of the range's layout ------

_LAYOUTS = st.tuples(st.integers(1, 8), st.integers(1, 4))


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sets=st.lists(st.frozensets(st.integers(0, 24), min_size=1, max_size=12), max_size=14),
    layouts=st.lists(_LAYOUTS, min_size=2, max_size=2, unique=True),
    thresholds=st.tuples(st.floats(0.05, 1.0), st.floats(0.05, 1.0)),
    probe=st.frozensets(st.integers(0, 24), min_size=1, max_size=12),
)
def test_candidates_are_exactly_the_band_collisions_of_the_range(
    sets: list[frozenset[int]],
    layouts: list[tuple[int, int]],
    thresholds: tuple[float, float],
    probe: frozenset[int],
) -> None:
    mh = MinHasher(Config(num_perm=32))
    ranges = [
        SimilarityRange(n, t, b, r) for n, t, (b, r) in zip("xy", thresholds, layouts, strict=True)
    ]
    idx = LSHIndex(mh.scheme, ranges=ranges, max_candidates=10_000)
    sigs = []
    for i, s in enumerate(sets):
        sig = mh.from_hashes(_hashes(sorted(s)))
        idx.insert(i, sig, _hashes(sorted(s)))
        sigs.append(sig.values)
    q = mh.from_hashes(_hashes(sorted(probe)))
    for rng in ranges:
        b, r = rng.bands, rng.rows
        # Brute force on the rows themselves: band i is rows [i*r, (i+1)*r).
        expected = {
            i
            for i, v in enumerate(sigs)
            if any(
                np.array_equal(v[j * r : (j + 1) * r], q.values[j * r : (j + 1) * r])
                for j in range(b)
            )
        }
        assert set(idx.query(q, range=rng.name)) == expected
        verified = idx.query_verified(q, _hashes(sorted(probe)), range=rng.name)
        jacc = {i: len(sets[i] & probe) / len(sets[i] | probe) for i in expected}
        assert {k for k, _ in verified} == {i for i in expected if jacc[i] >= rng.threshold}
        for k, e in verified:
            assert e.method == "exact" and e.jaccard == pytest.approx(jacc[k])


def test_a_ranges_keys_are_the_band_keys_of_a_scheme_with_its_layout() -> None:
    # What README says of `neardup signatures --bands b --rows r` (SignatureSet.band_keys).
    mh, idx = _two_range_index()
    related = idx.ranges[1]
    export = MinHasher(Config(threshold=0.9, bands=related.bands, rows=related.rows))
    ids = [
        _pair_ids(0.6, 0)[0],
        _pair_ids(0.6, 0)[1],
        _pair_ids(0.3, 900)[0],
        list(range(5000, 5100)),
    ]
    sigs = [mh.from_hashes(_hashes(i)) for i in ids]
    for i, sig in enumerate(sigs):
        idx.insert(i, sig)
    matrix = np.stack([export.from_hashes(_hashes(i)).values for i in ids])
    assert np.array_equal(matrix, np.stack([s.values for s in sigs]))  # one signature
    bk = SignatureSet(matrix, export.scheme).band_keys()
    for i, sig in enumerate(sigs):
        expected = [j for j in range(len(sigs)) if (bk[j] == bk[i]).any()]
        assert sorted(idx.query(sig, range="related")) == expected

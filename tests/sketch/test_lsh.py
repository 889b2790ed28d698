from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import (
    Config,
    CorruptFile,
    InvalidConfig,
    LSHIndex,
    MinHasher,
    SchemeMismatch,
    ShingleSpec,
    candidate_probability,
    hash_documents,
)
from neardup.text.hashing import SchemeDescriptor, ShingleSets


def _exact_pair_sets(s: float, pairs: int, seed: int, union: int = 200) -> ShingleSets:
    rng = np.random.default_rng(seed)
    inter = round(s * union)
    rest = union - inter
    a_only = rest // 2
    total = pairs * (2 * inter + a_only + (rest - a_only))
    vals = rng.integers(0, 2**63, size=(pairs, union), dtype=np.int64).astype(np.uint64)
    chunks = []
    for row in vals:
        a = np.sort(np.r_[row[:inter], row[inter : inter + a_only]])
        b = np.sort(np.r_[row[:inter], row[inter + a_only :]])
        chunks += [a, b]
    sizes = np.array([c.size for c in chunks], dtype=np.int64)
    assert sizes.sum() == total
    indptr = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=indptr[1:])
    n = sizes.size
    return ShingleSets(
        np.concatenate(chunks),
        indptr,
        sizes.copy(),
        np.zeros(n, bool),
        np.zeros(n, np.uint64),
        sizes.copy(),
        SchemeDescriptor.from_config(Config()),
    )


@pytest.mark.parametrize("signature", ["minhash", "oph"])
@pytest.mark.parametrize("s", [0.5, 0.7, 0.8, 0.9])
def test_measured_candidate_curve_matches_theory(signature: str, s: float) -> None:
    cfg = Config(threshold=0.8, signature=signature)  # type: ignore[arg-type]
    bands, rows = cfg.layout
    sets = _exact_pair_sets(s, 5000, seed=int(s * 100))
    sets = ShingleSets(
        sets.data,
        sets.indptr,
        sets.raw_counts,
        sets.truncated,
        sets.content_hash,
        sets.byte_lengths,
        SchemeDescriptor.from_config(cfg),
    )
    keys = MinHasher(cfg).from_sets(sets).band_keys()
    collide = (keys[0::2] == keys[1::2]).any(axis=1).mean()
    assert abs(collide - candidate_probability(s, bands, rows)) <= 0.02


def _hasher() -> MinHasher:
    return MinHasher(Config(threshold=0.75, shingle=ShingleSpec(kind="word", k=2)))


def test_worked_example() -> None:
    mh = _hasher()
    idx = LSHIndex(mh.scheme, threshold=0.75)
    feats = hash_documents(
        [
            "red fox runs very fast",
            "red fox runs very fast today",
            "database backup completed nightly",
        ],
        mh.config,
    )
    sigs = mh.from_sets(feats)
    assert idx.insert("A", sigs[0], feats.get(0)) == []
    assert idx.insert("B", sigs[1], feats.get(1)) == ["A"]
    assert idx.insert("C", sigs[2], feats.get(2)) == []
    e = idx.verify("A", "B")
    assert e.jaccard == 4 / 5 and e.method == "exact" and (e.intersection, e.union) == (4, 5)
    clusters = idx.find_clusters()
    assert [(c.members, c.representative) for c in clusters] == [((0, 1), 0)]
    assert idx.unique_indices() == [0, 2]
    with pytest.raises(InvalidConfig):
        Config(num_perm=31, bands=8)


def test_tombstone_never_returned_and_stats() -> None:
    mh = _hasher()
    idx = LSHIndex(mh.scheme, threshold=0.75)
    s = mh.signature("one two three four five")
    idx.insert("a", s)
    idx.insert("b", s)
    assert idx.query(s) == ["a", "b"]
    idx.remove("a")
    assert idx.query(s) == ["b"] and "a" not in idx and len(idx) == 1
    with pytest.raises(InvalidConfig):
        idx.remove("a")
    with pytest.raises(InvalidConfig):
        idx.insert("b", s)
    st = idx.stats()
    assert st.documents == 1 and st.tombstoned == 1 and st.largest_bucket == 1
    assert st.predicted_recall == pytest.approx(candidate_probability(0.75, st.bands, st.rows))
    assert 0.0 < st.predicted_fp_rate < st.predicted_recall
    # Without features verification falls back to the estimate, labelled as such.
    idx.insert("c", s)
    assert idx.verify("b", "c").method == "estimate"


def test_bucket_and_candidate_caps_are_counted() -> None:
    mh = _hasher()
    idx = LSHIndex(mh.scheme, threshold=0.75, max_bucket_size=3, max_candidates=2)
    s = mh.signature("same text for everyone here")
    for i in range(5):
        idx.insert(i, s)
    st = idx.stats()
    assert st.largest_bucket == 3
    assert st.bucket_overflow == 2 * st.bands
    assert len(idx.query(s)) == 2
    assert idx.stats().candidate_overflow > 0


def test_save_load_roundtrip_and_corruption(tmp_path: os.PathLike[str]) -> None:
    mh = _hasher()
    idx = LSHIndex(mh.scheme, threshold=0.75)
    texts = ["red fox runs very fast", "red fox runs very fast today", "something else entirely"]
    feats = hash_documents(texts, mh.config)
    sigs = mh.from_sets(feats)
    for i in range(len(texts)):
        idx.insert(f"k{i}", sigs[i], feats.get(i))
    idx.remove("k2")
    path = os.path.join(tmp_path, "index.ndx")
    idx.save(path)
    back = LSHIndex.load(path)
    assert list(back.keys()) == ["k0", "k1"]
    assert back.query(sigs[1]) == idx.query(sigs[1])
    assert back.verify("k0", "k1").jaccard == 0.8
    raw = bytearray(open(path, "rb").read())
    raw[len(raw) // 2] ^= 0xFF
    bad = os.path.join(tmp_path, "bad.ndx")
    open(bad, "wb").write(bytes(raw))
    with pytest.raises(CorruptFile, match="checksum"):
        LSHIndex.load(bad)
    open(bad, "wb").write(open(path, "rb").read()[:-10])
    with pytest.raises(CorruptFile):
        LSHIndex.load(bad)


def test_merge_same_scheme_only() -> None:
    mh = _hasher()
    a = LSHIndex(mh.scheme, threshold=0.75)
    b = LSHIndex(mh.scheme, threshold=0.75)
    s = mh.signature("red fox runs very fast")
    a.insert("x", s)
    b.insert("y", s)
    a.merge(b)
    assert sorted(map(str, a.keys())) == ["x", "y"]
    with pytest.raises(InvalidConfig):
        a.merge(b)
    other = MinHasher(Config(seed=9, threshold=0.75, shingle=ShingleSpec(kind="word", k=2)))
    c = LSHIndex(other.scheme, threshold=0.75)
    with pytest.raises(SchemeMismatch):
        a.merge(c)
    with pytest.raises(SchemeMismatch):
        a.insert("z", other.signature("red fox"))


def _reference_runs(keys: np.ndarray, active: np.ndarray, band: int) -> list[int]:
    """Buckets of >= 2 active members in ascending key order, members in index
    order, the first of each tagged: what the join walks, by brute force."""
    members: dict[int, list[int]] = {}
    for d in range(keys.shape[0]):
        if active[d]:
            members.setdefault(int(keys[d, band]), []).append(d)
    out: list[int] = []
    for key in sorted(members):
        docs = members[key]
        if len(docs) >= 2:
            out.append(docs[0] | (1 << 63))
            out.extend(docs[1:])
    return out


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 3000),
    bands=st.integers(1, 5),
    pool=st.sampled_from(["uniform", "few", "shared_top_bits", "small_values"]),
    layout=st.sampled_from(["C", "F"]),
    threads=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_band_runs_match_a_brute_force_grouping(
    n: int, bands: int, pool: str, layout: str, threads: int, seed: int
) -> None:
    from neardup.kernels import _bandjoin as KB

    rng = np.random.default_rng(seed)
    if pool == "uniform":
        keys = rng.integers(0, 2**64, (n, bands), dtype=np.uint64, endpoint=False)
    elif pool == "few":  # big buckets of equal keys
        keys = rng.integers(0, 2**64, 7, dtype=np.uint64)[rng.integers(0, 7, (n, bands))]
    elif pool == "shared_top_bits":  # distinct keys crowding one bucket of each level
        keys = (np.uint64(0xABC) << np.uint64(52)) | rng.integers(0, 500, (n, bands)).astype(
            np.uint64
        )
    else:
        keys = rng.integers(0, 40, (n, bands)).astype(np.uint64)
    keys = np.asarray(keys, order=layout)  # type: ignore[call-overload]
    active = rng.random(n) < 0.9
    runs = keys.copy(order=layout)
    counts = KB.band_runs(runs, active, threads)
    for b in range(bands):
        assert runs[: counts[b], b].tolist() == _reference_runs(keys, active, b)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 300),
    bands=st.integers(1, 6),
    per_round=st.integers(1, 3),
    values=st.integers(1, 12),
    seed=st.integers(0, 2**32 - 1),
)
def test_pair_memo_reports_each_candidate_once_across_rounds(
    n: int, bands: int, per_round: int, values: int, seed: int
) -> None:
    """The pair memo (an open-addressing table the kernel grows from 16 slots)
    keeps each pair to the first band it collides in, over any number of rounds."""
    from neardup.kernels import _bandjoin as KB

    rng = np.random.default_rng(seed)
    keys = rng.integers(0, values, (n, bands)).astype(np.uint64)
    sig = np.zeros((n, 1), dtype=np.uint32)
    memo = KB.PairMemo(16)
    parent = np.arange(n, dtype=np.int64)
    got: dict[tuple[int, int], int] = {}
    for lo in range(0, bands, per_round):
        hi = min(bands, lo + per_round)
        a, b, band, *_ = KB.band_join(
            keys[:, lo:hi].copy(order="F"),  # consumed by the join
            lo,
            np.ones(n, dtype=np.bool_),
            sig,
            np.zeros(1, dtype=np.uint64),
            np.zeros(n + 1, dtype=np.int64),
            1.0,
            n + 1,
            KB.MODE_CANDIDATES,
            False,
            parent,
            memo,
        )
        for x, y, z in zip(a.tolist(), b.tolist(), band.tolist(), strict=True):
            assert (x, y) not in got
            got[(x, y)] = z
    want: dict[tuple[int, int], int] = {}
    for i in range(n):
        for j in range(i + 1, n):
            same = np.flatnonzero(keys[i] == keys[j])
            if same.size:
                want[(i, j)] = int(same[0])
    assert got == want
    assert len(memo) == len(want)
    assert memo.table.shape[0] >= 2 * len(memo)

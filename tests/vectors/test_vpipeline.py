"""Vector dedup end to end: exact verification against a brute-force oracle."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import InvalidConfig, VectorConfig, VectorIndex, ZeroVector, find_vector_duplicates
from neardup.vectors import HyperplaneHasher, vector_scores, weighted_bags, weighted_jaccard

SEED_VECTORS = np.array(
    [[1, 1, 1, 1], [1, 0.95, 1.05, 1], [0.98, 1.02, 1, 1.01], [0, 1, 0, 1]], dtype=np.float64
)


def _oracle(X: np.ndarray, metric: str, t: float) -> set[tuple[int, int]]:
    out = set()
    for a, b in itertools.combinations(range(len(X)), 2):
        x, y = X[a], X[b]
        if metric == "cosine":
            ok = float(x @ y) / (np.linalg.norm(x) * np.linalg.norm(y)) >= t
        elif metric == "l2":
            ok = float(np.linalg.norm(x - y)) <= t
        else:
            ok = float(np.abs(x - y).sum()) <= t
        if ok:
            out.add((a, b))
    return out


def _planted(n: int, dim: int, noise: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, dim))
    half = n // 2
    X[half:] = X[:half] + noise * rng.standard_normal((n - half, dim))
    return X


def test_seed_four_vector_example() -> None:
    # Three similar vectors are candidates and verify above 0.85 cosine exactly;
    # the fourth is neither.  A layout planned for a million items makes the
    # fourth's collisions improbable (P(far) per pair ~ 1e-5).
    cfg = VectorConfig(threshold=0.85, planned_items=1_000_000)
    res = find_vector_duplicates(SEED_VECTORS, cfg, all_edges=True)
    assert res.pairs() == {(0, 1), (0, 2), (1, 2)}
    for e in res.edges:
        exact = vector_scores(SEED_VECTORS, [e.a], [e.b])[0]
        assert e.score == pytest.approx(exact) and e.score >= 0.85
        assert e.method == "exact"
    assert [c.members for c in res.clusters] == [(0, 1, 2)]
    assert res.kept.tolist() == [0, 3]
    assert vector_scores(SEED_VECTORS, [0], [3])[0] < 0.85

    idx = VectorIndex(dim=4, config=cfg)
    got = {i: [m.key for m in idx.add(i, v)] for i, v in enumerate(SEED_VECTORS)}
    assert got == {0: [], 1: [0], 2: [0, 1], 3: []}


def test_precision_is_exact_and_recall_matches_oracle_cosine() -> None:
    X = _planted(600, 32, 0.25, 1)
    cfg = VectorConfig(threshold=0.9)
    res = find_vector_duplicates(X, cfg, all_edges=True)
    truth = _oracle(X, "cosine", 0.9)
    found = res.pairs()
    assert found <= truth  # nothing unverified
    assert len(found) >= 0.98 * len(truth)
    assert res.stats["predicted_recall_at_threshold"] >= 0.995


@pytest.mark.parametrize(("metric", "t"), [("l2", 3.0), ("l1", 16.0)])
def test_pstable_metrics_against_oracle(metric: str, t: float) -> None:
    X = _planted(400, 16, 0.3, 2)
    res = find_vector_duplicates(X, VectorConfig(metric=metric, threshold=t), all_edges=True)  # type: ignore[arg-type]
    truth = _oracle(X, metric, t)
    assert truth and res.pairs() <= truth
    assert len(res.pairs()) >= 0.98 * len(truth)
    for e in res.edges:
        assert e.score <= t


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 40))
def test_hamming_radius_mode_is_a_guarantee(seed: int, radius: int) -> None:
    # Every pair whose signatures differ in <= radius bits and whose exact cosine
    # passes is found — deterministically (pigeonhole), checked pair by pair.
    X = _planted(120, 8, 0.15, seed)
    cfg = VectorConfig(threshold=0.5, hamming_radius=radius, bits=128, max_candidates=10_000)
    res = find_vector_duplicates(X, cfg, all_edges=True)
    sigs = HyperplaneHasher(dim=8, bits=128, seed=cfg.seed).signatures(X).data
    want = {
        (a, b)
        for a, b in _oracle(X, "cosine", 0.5)
        if int(np.bitwise_count(sigs[a] ^ sigs[b]).sum()) <= radius
    }
    assert want <= res.pairs() <= _oracle(X, "cosine", 0.5)


def test_forest_mode_clusters_equal_all_edges_components() -> None:
    X = _planted(500, 24, 0.3, 3)
    forest = find_vector_duplicates(X, VectorConfig(threshold=0.85))
    full = find_vector_duplicates(X, VectorConfig(threshold=0.85), all_edges=True)
    assert [c.members for c in forest.clusters] == [c.members for c in full.clusters]
    assert np.array_equal(forest.representative, full.representative)
    for c in forest.clusters:
        assert len(c.edges) == len(c.members) - 1


def test_deterministic_same_bytes() -> None:
    X = _planted(300, 16, 0.2, 4).astype(np.float32)
    a = find_vector_duplicates(X, VectorConfig(threshold=0.9))
    b = find_vector_duplicates(X, VectorConfig(threshold=0.9))
    assert [c.to_dict() for c in a.clusters] == [c.to_dict() for c in b.clusters]
    assert a.stats["fingerprint"] == b.stats["fingerprint"]


def test_scale_is_ignored_and_zero_vectors_refused() -> None:
    X = np.array([[1.0, 1.0], [100.0, 100.0], [1.0, -1.0]])
    res = find_vector_duplicates(X, VectorConfig(threshold=0.99))
    assert res.pairs() == {(0, 1)}
    assert res.edges[0].score == pytest.approx(1.0)
    with pytest.raises(ZeroVector, match="vector 1"):
        find_vector_duplicates(np.array([[1.0, 0.0], [0.0, 0.0]]))
    with pytest.raises(ZeroVector, match="NaN"):
        find_vector_duplicates(np.array([[1.0, np.nan], [1.0, 0.0]]))
    # l2 has no angle to lose: a zero vector is an ordinary point
    res2 = find_vector_duplicates(
        np.array([[0.0, 0.0], [0.1, 0.0]]), VectorConfig(metric="l2", threshold=0.5)
    )
    assert res2.pairs() == {(0, 1)}


def test_weighted_bags_cosine_and_keyed_hashing() -> None:
    from neardup import HashKey

    bags = [
        {"red": 1.0, "shoe": 2.0, "size:42": 1.0},
        {"shoe": 2.0, "red": 1.1, "size:42": 1.0},
        {"blue": 3.0, "hat": 1.0},
    ]
    res = find_vector_duplicates(weighted_bags(bags), VectorConfig(threshold=0.9), all_edges=True)
    assert res.pairs() == {(0, 1)}
    key = HashKey.derive(b"master secret for the tests, 32+ bytes", "t")
    keyed = weighted_bags(bags, key=key)
    assert keyed.key_id == "t/v1"
    assert not np.array_equal(keyed.tokens, weighted_bags(bags).tokens)
    assert find_vector_duplicates(keyed, VectorConfig(threshold=0.9)).pairs() == {(0, 1)}
    with pytest.raises(ZeroVector):
        find_vector_duplicates(weighted_bags([{"a": 1.0}, {}]))
    with pytest.raises(InvalidConfig, match="cosine"):
        find_vector_duplicates(weighted_bags(bags), VectorConfig(metric="l2", threshold=1.0))
    assert weighted_jaccard(bags[0], bags[1]) == pytest.approx(4.0 / 4.1)


def test_vector_index_remove_and_limit() -> None:
    idx = VectorIndex(dim=4, config=VectorConfig(threshold=0.85, planned_items=1000))
    for i, v in enumerate(SEED_VECTORS):
        idx.add(f"k{i}", v)
    assert [m.key for m in idx.candidates([1, 1, 1, 1])] == ["k0", "k2", "k1"]
    idx.remove("k0")
    assert [m.key for m in idx.candidates([1, 1, 1, 1])] == ["k2", "k1"]
    assert len(idx) == 3
    with pytest.raises(InvalidConfig, match="already"):
        idx.add("k1", [1, 1, 1, 1])
    with pytest.raises(InvalidConfig, match="dimension"):
        idx.candidates([1, 1, 1])
    l2 = VectorIndex(dim=2, config=VectorConfig(metric="l2", threshold=0.5, planned_items=1000))
    l2.add("a", [0.0, 0.0])
    assert [m.key for m in l2.add("b", [0.3, 0.0])] == ["a"]
    assert l2.add("c", [5.0, 5.0]) == []


def test_weighted_jaccard_bags_against_oracle() -> None:
    rng = np.random.default_rng(8)
    base = [
        {f"w{j}": float(rng.exponential()) for j in rng.choice(200, 15, replace=False)}
        for _ in range(150)
    ]
    bags = list(base)
    for b in base[:60]:
        bags.append({k: v * float(rng.uniform(0.8, 1.2)) for k, v in b.items()})
    cfg = VectorConfig(metric="weighted_jaccard", threshold=0.7)
    res = find_vector_duplicates(weighted_bags(bags), cfg, all_edges=True)
    truth = {
        (a, b)
        for a, b in itertools.combinations(range(len(bags)), 2)
        if weighted_jaccard(bags[a], bags[b]) >= 0.7
    }
    assert truth and res.pairs() <= truth
    assert len(res.pairs()) >= 0.97 * len(truth)
    for e in res.edges:
        assert e.score == pytest.approx(weighted_jaccard(bags[e.a], bags[e.b]))
    with pytest.raises(InvalidConfig, match="weighted bags"):
        find_vector_duplicates(np.ones((3, 2)), cfg)
    with pytest.raises(InvalidConfig, match="dense"):
        VectorIndex(dim=2, config=cfg)


@pytest.mark.parametrize(("metric", "t"), [("cosine", 0.9), ("l2", 3.0)])
def test_prefilter_drops_far_candidates_but_no_verified_pair(metric: str, t: float) -> None:
    X = _planted(800, 24, 0.2 if metric == "cosine" else 0.3, 9)
    on = find_vector_duplicates(X, VectorConfig(metric=metric, threshold=t), all_edges=True)  # type: ignore[arg-type]
    off = find_vector_duplicates(
        X, VectorConfig(metric=metric, threshold=t, prefilter_miss=None), all_edges=True  # type: ignore[arg-type]
    )
    assert on.pairs() == off.pairs()
    assert on.stats["prefiltered"] > 0 and off.stats["prefiltered"] == 0
    assert on.stats["exact_scores"] < off.stats["exact_scores"]
    assert on.config.fingerprint != off.config.fingerprint

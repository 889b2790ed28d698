"""Signature families for vectors: collision laws, calculators, config validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import (
    InvalidConfig,
    NoFeasibleParameters,
    VectorConfig,
    ZeroVector,
    candidate_probability,
)
from neardup.vectors import (
    HyperplaneHasher,
    PStableHasher,
    VectorSignatures,
    angular_distance,
    cosine_from_hamming,
    hamming_distance,
    hyperplane_collision,
    normalize_vector,
    pick_width,
    pstable_collision,
    vector_layout,
)


def test_normalize_vector_unit_norm_and_zero_is_an_error() -> None:
    v = normalize_vector([3.0, 4.0])
    assert v.tolist() == pytest.approx([0.6, 0.8])
    with pytest.raises(ZeroVector, match="zero norm"):
        normalize_vector([0.0, 0.0, 0.0])
    with pytest.raises(ZeroVector):
        normalize_vector([1.0, float("nan")])


def test_hamming_distance_counts_differing_bits() -> None:
    a = np.array([0b1011, 0], dtype=np.uint64)
    b = np.array([0b0001, 1 << 63], dtype=np.uint64)
    assert hamming_distance(a, b) == 3
    assert hamming_distance(a, a) == 0


def test_cosine_from_hamming_endpoints() -> None:
    assert cosine_from_hamming(0, 256) == pytest.approx(1.0)
    assert cosine_from_hamming(128, 256) == pytest.approx(0.0, abs=1e-12)
    assert cosine_from_hamming(256, 256) == pytest.approx(-1.0)


@given(st.integers(64, 1024).map(lambda b: 64 * (b // 64)), st.data())
def test_hamming_to_cosine_is_monotone_decreasing(bits: int, data: st.DataObject) -> None:
    h1 = data.draw(st.integers(0, bits))
    h2 = data.draw(st.integers(0, bits))
    lo, hi = sorted((h1, h2))
    assert cosine_from_hamming(lo, bits) >= cosine_from_hamming(hi, bits)
    if lo < hi:
        assert cosine_from_hamming(lo, bits) > cosine_from_hamming(hi, bits)


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 96), st.floats(0.05, 3.1), st.integers(0, 2**32 - 1))
def test_hyperplane_agreement_matches_one_minus_theta_over_pi(
    dim: int, theta: float, seed: int
) -> None:
    # Many random pairs at a known angle: the agreement rate over all their bits is
    # within 3 standard errors of 1 - theta/pi.
    rng = np.random.default_rng(seed)
    pairs, bits = 64, 512
    x = rng.standard_normal((pairs, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    z = rng.standard_normal((pairs, dim))
    z -= (z * x).sum(axis=1, keepdims=True) * x
    z /= np.linalg.norm(z, axis=1, keepdims=True)
    y = math.cos(theta) * x + math.sin(theta) * z
    h = HyperplaneHasher(dim=dim, bits=bits, seed=seed)
    sx, sy = h.signatures(x).data, h.signatures(y).data
    differ = int(np.bitwise_count(sx ^ sy).sum())
    total = pairs * bits
    p = 1.0 - theta / math.pi
    rate = 1.0 - differ / total
    # Bits of one pair share x and y, so count pairs (not bits) as independent draws:
    # the variance of the mean over pairs is at most p(1-p)/pairs (bits add averaging).
    se = math.sqrt(p * (1 - p) / pairs)
    assert abs(rate - p) <= 3 * se
    assert hyperplane_collision(math.cos(theta)) == pytest.approx(p)


def test_scale_is_ignored_by_cosine_signatures() -> None:
    # (1, 1) and (100, 100) always collide: sign(r.x) = sign(r.cx) for c > 0.
    for seed in range(20):
        h = HyperplaneHasher(dim=2, bits=256, seed=seed)
        a, b = h.signatures(np.array([[1.0, 1.0], [100.0, 100.0]])).data
        assert hamming_distance(a, b) == 0


def test_hyperplanes_are_a_pure_function_of_scheme_seed_dim() -> None:
    a = HyperplaneHasher(dim=16, bits=128, seed=3)
    b = HyperplaneHasher(dim=16, bits=128, seed=3)
    c = HyperplaneHasher(dim=16, bits=128, seed=4)
    assert np.array_equal(a.planes, b.planes)
    assert not np.array_equal(a.planes, c.planes)
    assert a.fingerprint == b.fingerprint != c.fingerprint


def test_sparse_signatures_match_their_collision_law() -> None:
    from neardup.vectors import weighted_bags

    rng = np.random.default_rng(0)
    vocab = [f"f{i}" for i in range(300)]
    bags_a, bags_b = [], []
    for _ in range(60):
        w = rng.exponential(1.0, 300)
        w2 = w + rng.exponential(0.3, 300)
        bags_a.append(dict(zip(vocab, w.tolist(), strict=True)))
        bags_b.append(dict(zip(vocab, w2.tolist(), strict=True)))
    ba, bb = weighted_bags(bags_a), weighted_bags(bags_b)
    h = HyperplaneHasher(dim=1, bits=1024, seed=1)
    sa = h.sparse_signatures(ba.tokens, ba.weights, ba.indptr).data
    sb = h.sparse_signatures(bb.tokens, bb.weights, bb.indptr).data
    cos = np.array(
        [
            sum(a[k] * b[k] for k in a)
            / math.sqrt(sum(v * v for v in a.values()))
            / math.sqrt(sum(v * v for v in b.values()))
            for a, b in zip(bags_a, bags_b, strict=True)
        ]
    )
    p = 1 - np.arccos(np.clip(cos, -1, 1)) / math.pi
    rate = 1 - np.bitwise_count(sa ^ sb).sum(axis=1) / 1024
    assert abs(rate.mean() - p.mean()) <= 3 * math.sqrt(0.25 / (60 * 1024)) + 0.01


@given(
    st.floats(0.1, 10.0),
    st.floats(0.1, 10.0),
    st.floats(0.1, 10.0),
    st.sampled_from([1, 2]),
)
def test_pstable_collision_decreases_with_distance(c1: float, c2: float, w: float, p: int) -> None:
    lo, hi = sorted((c1, c2))
    assert pstable_collision(lo, w, p=p) >= pstable_collision(hi, w, p=p) - 1e-12
    assert 0.0 <= pstable_collision(hi, w, p=p) <= 1.0


@pytest.mark.parametrize("p", [1, 2])
def test_pstable_empirical_rate_follows_the_formula_and_decreases(p: int) -> None:
    rng = np.random.default_rng(5)
    dim, hashes, w = 24, 4000, 2.0
    h = PStableHasher(dim=dim, hashes=hashes, width=w, p=p, seed=9)
    x = rng.standard_normal(dim)
    rates = []
    for c in (0.25, 0.5, 1.0, 2.0, 4.0):
        d = rng.standard_normal(dim)
        d /= np.linalg.norm(d, ord=p)
        y = x + c * d
        s = h.signatures(np.vstack([x, y])).data
        rate = float(np.mean(s[0] == s[1]))
        pc = pstable_collision(c, w, p=p)
        assert abs(rate - pc) <= 4 * math.sqrt(pc * (1 - pc) / hashes) + 1e-3
        rates.append(rate)
    assert rates == sorted(rates, reverse=True)


def test_vector_layout_meets_recall_and_far_budget() -> None:
    lay = vector_layout("cosine", 0.9, far=0.0, n=100_000, far_budget=10)
    p1 = hyperplane_collision(0.9)
    p2 = hyperplane_collision(0.0)
    assert candidate_probability(p1, lay.bands, lay.rows) >= 0.995
    assert 100_000 * candidate_probability(p2, lay.bands, lay.rows) <= 10
    assert lay.rows <= 64


def test_vector_layout_strict_refuses_impossible_budget() -> None:
    with pytest.raises(NoFeasibleParameters, match="far_budget"):
        vector_layout("cosine", 0.9, far=0.89, n=10**9, far_budget=1e-3)
    lay = vector_layout("cosine", 0.9, far=0.89, n=10**9, far_budget=1e-3, strict=False)
    assert lay.p_near >= 0.995


def test_pick_width_around_radius() -> None:
    w = pick_width(1.0)
    assert 0.5 <= w <= 16
    assert pick_width(3.0) == pytest.approx(3 * pick_width(1.0))
    with pytest.raises(InvalidConfig):
        pick_width(0.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"metric": "hamming"}, "unknown metric"),
        ({"threshold": 1.0}, r"\(-1, 1\)"),
        ({"metric": "l2", "threshold": -1.0}, "radius"),
        ({"bands": 4}, "both or neither"),
        ({"bits": 100}, "multiple of 64"),
        ({"width": 2.0}, "p-stable"),
        ({"hamming_radius": 3, "metric": "l2", "threshold": 1.0}, "cosine"),
        ({"far": 0.95}, "below the threshold"),
        ({"seed": -1}, "seed"),
    ],
)
def test_vector_config_validation_says_what_and_how(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidConfig, match=match) as e:
        VectorConfig(**kwargs)  # type: ignore[arg-type]
    assert "fix:" in str(e.value)


def test_vector_config_is_frozen_keyword_only_with_stable_fingerprint() -> None:
    with pytest.raises(TypeError):
        VectorConfig("cosine")  # type: ignore[misc]
    cfg = VectorConfig(threshold=0.9, planned_items=10_000)
    with pytest.raises(AttributeError):
        cfg.threshold = 0.5  # type: ignore[misc]
    r = cfg.resolve()
    assert r.is_resolved and r.resolve() is r
    assert (
        r.fingerprint
        == cfg.fingerprint
        == VectorConfig(threshold=0.9, planned_items=10_000).fingerprint
    )
    assert VectorConfig(threshold=0.9, planned_items=10_000, seed=1).fingerprint != cfg.fingerprint
    assert VectorConfig(metric="l2", threshold=1.0).scheme == "pstable-l2-v1"
    assert r.predicted_recall() >= 0.995


def test_hamming_radius_predicted_recall_is_binomial() -> None:
    cfg = VectorConfig(threshold=0.9, hamming_radius=64, bits=256).resolve(1000)
    q = 1 - hyperplane_collision(0.9)
    want = sum(math.comb(256, h) * q**h * (1 - q) ** (256 - h) for h in range(65))
    assert cfg.predicted_recall() == pytest.approx(want)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_icws_collision_rate_is_the_weighted_jaccard(seed: int) -> None:
    from neardup.vectors import ICWSHasher, weighted_bags, weighted_jaccard

    rng = np.random.default_rng(seed)
    feats = [f"f{j}" for j in range(30)]
    w = rng.exponential(1.0, 30)
    w2 = w * rng.uniform(0.3, 1.7, 30)
    keep = rng.random(30) < 0.7
    a = dict(zip(feats, w.tolist(), strict=True))
    b = {f: float(x) for f, x, k in zip(feats, w2, keep, strict=True) if k}
    bags = weighted_bags([a, b])
    hashes = 1500
    s = ICWSHasher(hashes=hashes, seed=seed).signatures(bags.tokens, bags.weights, bags.indptr)
    rate = float(np.mean(s.data[0] == s.data[1]))
    j = weighted_jaccard(a, b)
    assert abs(rate - j) <= 3 * math.sqrt(max(j * (1 - j), 1e-4) / hashes) + 1e-3


def test_icws_scale_matters_and_negative_weights_are_refused() -> None:
    from neardup.vectors import ICWSHasher, weighted_bags

    bags = weighted_bags([{"a": 1.0, "b": 1.0}, {"a": 2.0, "b": 2.0}, {"a": -1.0}])
    h = ICWSHasher(hashes=400, seed=0)
    s = h.signatures(bags.tokens[:4], bags.weights[:4], bags.indptr[:3]).data
    # weighted Jaccard of x and 2x is 1/2 (unlike cosine, magnitude counts)
    assert abs(float(np.mean(s[0] == s[1])) - 0.5) < 0.1
    with pytest.raises(InvalidConfig, match=">= 0"):
        h.signatures(bags.tokens, bags.weights, bags.indptr)
    assert VectorConfig(metric="weighted_jaccard", threshold=0.8).scheme == "icws-v1"
    with pytest.raises(InvalidConfig, match=r"\(0, 1\]"):
        VectorConfig(metric="weighted_jaccard", threshold=1.5)


@given(st.integers(1, 120), st.floats(0.01, 0.99), st.sampled_from([1e-4, 1e-8, 1e-12]))
def test_binomial_cutoff_is_the_smallest_safe_count(m: int, q: float, miss: float) -> None:
    from neardup.vectors.vlayout import binomial_cutoff

    pmf = [math.comb(m, h) * q**h * (1 - q) ** (m - h) for h in range(m + 1)]

    def tail(h: int) -> float:  # P(X > h)
        return sum(pmf[h + 1 :])

    h = binomial_cutoff(m, q, miss)
    assert tail(h) <= miss * (1 + 1e-9) + 1e-300
    if h > 0:
        assert tail(h - 1) > miss * (1 - 1e-9)


def test_resolve_keeps_every_field_it_does_not_fill() -> None:
    from dataclasses import fields

    cfg = VectorConfig(
        threshold=0.8, far=0.1, far_budget=3.0, recall_target=0.99, seed=5,
        max_candidates=7, max_bucket_size=99, prefilter_miss=None, planned_items=500,
    )
    r = cfg.resolve()
    for f in fields(VectorConfig):
        if getattr(cfg, f.name) is not None and f.name != "bits":
            assert getattr(r, f.name) == getattr(cfg, f.name), f.name


# -- angular distance ------------------------------------------------------------


def test_angular_distance_endpoints_and_scale() -> None:
    assert angular_distance([1.0, 0.0], [3.0, 0.0]) == 0.0
    assert angular_distance([1.0, 0.0], [0.0, 2.0]) == pytest.approx(0.5)
    assert angular_distance([1.0, 0.0], [-1.0, 0.0]) == pytest.approx(1.0)
    assert angular_distance([1.0, 1.0], [100.0, 100.0]) == pytest.approx(0.0, abs=1e-7)
    with pytest.raises(ZeroVector):
        angular_distance([0.0, 0.0], [1.0, 0.0])
    with pytest.raises(InvalidConfig, match="dimensions differ"):
        angular_distance([1.0, 0.0], [1.0, 0.0, 0.0])


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), dim=st.integers(2, 12))
def test_differing_bits_over_bits_estimate_the_angular_distance(seed: int, dim: int) -> None:
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal(dim), rng.standard_normal(dim)
    bits = 4096
    a, b = HyperplaneHasher(dim=dim, bits=bits, seed=seed % 1000).signatures(np.stack([x, y])).data
    d = angular_distance(x, y)
    se = math.sqrt(max(d * (1 - d), 1e-9) / bits)
    assert abs(hamming_distance(a, b) / bits - d) <= 6 * se + 1e-9
    # and the cosine read back from the bits is the cosine of that angle
    est = cosine_from_hamming(hamming_distance(a, b), bits)
    assert est == pytest.approx(math.cos(math.pi * hamming_distance(a, b) / bits))


# -- signatures as hex and bytes -------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    words=st.lists(
        st.lists(st.integers(0, 2**64 - 1), min_size=2, max_size=2), min_size=1, max_size=5
    )
)
def test_vector_signature_hex_round_trips(words: list[list[int]]) -> None:
    sigs = VectorSignatures(np.array(words, dtype=np.uint64), "bits", 128, "fp")
    texts = [sigs.hex(i) for i in range(len(sigs))]
    assert all(len(t) == 32 for t in texts)
    back = VectorSignatures.from_hex(texts, like=sigs)
    assert back.data.tolist() == words and back.fingerprint == "fp" and back.kind == "bits"
    raw = [bytes.fromhex(t) for t in texts]
    assert VectorSignatures.from_hex(raw, like=sigs).data.tolist() == words
    for i in range(len(sigs)):
        for j in range(len(sigs)):
            want = hamming_distance(sigs.data[i], sigs.data[j])
            assert hamming_distance(texts[i], texts[j]) == want
            assert hamming_distance(bytes.fromhex(texts[i]), sigs.data[j]) == want


def test_hamming_distance_of_hex_strings() -> None:
    assert hamming_distance("9f3a", "9f2b") == 2
    assert hamming_distance("0x9f3a", b"\x9f\x3a") == 0
    with pytest.raises(InvalidConfig, match="lengths in bytes differ"):
        hamming_distance("9f3a", "9f3a00")
    with pytest.raises(InvalidConfig, match="not a hex string"):
        hamming_distance("9f3a", "9f3g")
    with pytest.raises(InvalidConfig, match="one signature"):
        hamming_distance("9f3a", np.zeros((2, 1), dtype=np.uint64))


def test_vector_signatures_hex_refuses_a_bad_row() -> None:
    sigs = VectorSignatures(np.zeros((2, 2), dtype=np.uint64), "bits", 128, "fp")
    with pytest.raises(InvalidConfig, match="out of range"):
        sigs.hex(2)
    with pytest.raises(InvalidConfig, match="2 words"):
        VectorSignatures.from_hex(["00" * 8], like=sigs)
    with pytest.raises(InvalidConfig, match="multiple of 8"):
        VectorSignatures.from_hex(["00" * 9], like=sigs)

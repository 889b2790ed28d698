from __future__ import annotations

import hashlib
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import (
    Config,
    EmptyDocument,
    InvalidConfig,
    MinHasher,
    SchemeMismatch,
    ShingleSpec,
    Signature,
    hash_documents,
)
from neardup.sketch.minhash import permutation_params


def _pair_sets(
    rng: np.random.Generator, inter: int, only_a: int, only_b: int
) -> tuple[np.ndarray, np.ndarray]:
    vals = rng.integers(0, 2**63, size=inter + only_a + only_b, dtype=np.int64).astype(np.uint64)
    vals = np.unique(vals)
    while vals.size < inter + only_a + only_b:  # pragma: no cover - 63-bit collisions
        vals = np.unique(
            np.r_[vals, rng.integers(0, 2**63, size=8, dtype=np.int64).astype(np.uint64)]
        )
    vals = vals[: inter + only_a + only_b]
    rng.shuffle(vals)
    common, a_only, b_only = vals[:inter], vals[inter : inter + only_a], vals[inter + only_a :]
    return np.r_[common, a_only], np.r_[common, b_only]


@pytest.mark.parametrize("signature", ["minhash", "oph"])
@settings(max_examples=8)
@given(seed=st.integers(0, 2**32 - 1))
def test_estimates_within_three_standard_errors(signature: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    mh = MinHasher(Config(num_perm=128, signature=signature, seed=seed))  # type: ignore[arg-type]
    inside = 0
    trials = 500
    for _ in range(trials):
        union = int(rng.integers(150, 600))
        inter = int(rng.integers(1, union + 1))
        a_only = int(rng.integers(0, union - inter + 1))
        a, b = _pair_sets(rng, inter, a_only, union - inter - a_only)
        j = inter / union
        est = mh.from_hashes(a).similarity(mh.from_hashes(b))
        se = math.sqrt(j * (1 - j) / 128)
        inside += abs(est - j) <= 3 * se + 1e-12
    assert inside >= 0.99 * trials


def test_identical_inputs_give_identical_signatures() -> None:
    mh = MinHasher(Config())
    a = mh.signature("the quick brown fox jumps over the lazy dog")
    b = mh.signature("The  QUICK brown fox jumps over the lazy dog")
    assert a.similarity(b) == 1.0
    assert a.to_bytes() == b.to_bytes()
    assert a.standard_error(b) == 0.0


def test_bytes_strings_and_prehashed_agree() -> None:
    cfg = Config(shingle=ShingleSpec(kind="byte", k=4), normalizer="raw")
    mh = MinHasher(cfg)
    sets = hash_documents(["hello world"], cfg)
    assert mh.signature(b"hello world").to_bytes() == mh.signature("hello world").to_bytes()
    assert mh.from_hashes(sets.get(0)).to_bytes() == mh.signature("hello world").to_bytes()
    with pytest.raises(EmptyDocument):
        mh.signature("")
    with pytest.raises(EmptyDocument):
        mh.from_hashes([])


def test_different_schemes_refuse_to_compare() -> None:
    a = MinHasher(Config(seed=1)).signature("a b c d e f")
    b = MinHasher(Config(seed=2)).signature("a b c d e f")
    with pytest.raises(SchemeMismatch, match="fix:"):
        a.similarity(b)
    c = MinHasher(Config(shingle=ShingleSpec(kind="char", k=5))).signature("a b c d e f")
    with pytest.raises(SchemeMismatch):
        a.similarity(c)
    sa = MinHasher(Config(seed=1)).signatures(["x y z"])
    sb = MinHasher(Config(seed=2)).signatures(["x y z"])
    with pytest.raises(SchemeMismatch):
        sa.concat(sb)
    with pytest.raises(SchemeMismatch):
        MinHasher(Config(seed=2)).from_sets(hash_documents(["x"], Config(seed=1)))


def test_permutations_are_a_pure_function_of_the_seed() -> None:
    a1, b1 = permutation_params(7, 64)
    a2, b2 = permutation_params(7, 64)
    assert np.array_equal(a1, a2) and np.array_equal(b1, b2)
    assert (a1 & np.uint64(1)).all()  # odd multipliers
    a3, _ = permutation_params(8, 64)
    assert not np.array_equal(a1, a3)


_SCRIPT = """
import hashlib, sys
from neardup import Config, MinHasher
from neardup.testing import synthetic_documents
for sig in ("minhash", "oph"):
    m = MinHasher(Config(seed=11, signature=sig)).signatures(synthetic_documents(50, seed=5))
    sys.stdout.write(hashlib.sha256(m.matrix.tobytes()).hexdigest() + "\\n")
"""


def test_same_seed_same_bytes_across_processes() -> None:
    outs = [
        subprocess.run(
            [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    ]
    assert outs[0] == outs[1]
    from neardup.testing import synthetic_documents

    here = [
        hashlib.sha256(
            MinHasher(Config(seed=11, signature=s))
            .signatures(  # type: ignore[arg-type]
                synthetic_documents(50, seed=5)
            )
            .matrix.tobytes()
        ).hexdigest()
        for s in ("minhash", "oph")
    ]
    assert outs[0].split() == here


def test_band_and_band_hash() -> None:
    mh = MinHasher(Config(num_perm=16, bands=4))
    s = mh.signature("a b c d e f g h")
    assert s.band(1).tolist() == s.values[4:8].tolist()
    assert s.band_hash(1) == mh.signature("a b c d e f g h").band_hash(1)
    with pytest.raises(InvalidConfig):
        s.band(4)


@pytest.mark.parametrize("b", [1, 2, 4, 8])
def test_bbit_debiased_estimate(b: int) -> None:
    rng = np.random.default_rng(b)
    mh = MinHasher(Config(num_perm=512))
    errors = []
    for j_target in (0.2, 0.5, 0.8):
        union = 400
        inter = int(j_target * union)
        a, c = _pair_sets(rng, inter, (union - inter) // 2, union - inter - (union - inter) // 2)
        sigs = mh.from_hashes(a), mh.from_hashes(c)
        from neardup import SignatureSet

        ss = SignatureSet(np.stack([sigs[0].values, sigs[1].values]), mh.scheme)
        bb = ss.to_bbit(b)
        assert bb.packed.nbytes == 2 * math.ceil(512 * b / 8)
        assert np.array_equal(bb.unpack(), (ss.matrix & ((1 << b) - 1)).astype(np.uint8))
        est, se = bb.estimate(0, 1)
        errors.append(abs(est - inter / union) <= 4 * se + 1e-9)
    assert all(errors)
    with pytest.raises(InvalidConfig):
        ss.to_bbit(3)


# -- signatures as hex and bytes -----------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(st.integers(0, 2**32 - 1), min_size=8, max_size=8),
    prefix=st.sampled_from(["", "0x", "0X", " "]),
    upper=st.booleans(),
)
def test_hex_round_trips(rows: list[int], prefix: str, upper: bool) -> None:
    scheme = MinHasher(Config(num_perm=8, bands=2)).scheme
    sig = Signature(np.array(rows, dtype=np.uint32), scheme)
    text = sig.hex()
    assert len(text) == 8 * 8 and text == text.lower()
    back = Signature.from_hex(prefix + (text.upper() if upper else text), scheme)
    assert back.values.tolist() == rows and back.scheme == scheme
    assert Signature.from_bytes(sig.to_bytes(), scheme).values.tolist() == rows
    assert bytes.fromhex(text) == sig.to_bytes()


def test_hex_of_a_computed_signature_keeps_its_estimates() -> None:
    mh = MinHasher(Config())
    a = mh.signature("the quick brown fox jumps over the lazy dog")
    b = mh.signature("the quick brown fox jumps over the lazy dog today")
    a2 = Signature.from_hex(a.hex(), mh.scheme)
    assert a2.similarity(b) == a.similarity(b)
    assert [a2.band_hash(i) for i in range(4)] == [a.band_hash(i) for i in range(4)]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("zz" * 32, "not a hex string"),
        ("abc", "not a hex string"),
        ("00" * 31, "not a multiple of 4"),
        ("00" * 28, "num_perm=8"),
        ("0000 0000" * 4, "spaces"),
    ],
)
def test_bad_hex_is_refused_with_the_fix(text: str, match: str) -> None:
    scheme = MinHasher(Config(num_perm=8, bands=2)).scheme
    with pytest.raises(InvalidConfig, match=match) as info:
        Signature.from_hex(text, scheme)
    assert "fix:" in str(info.value)
    with pytest.raises(InvalidConfig):
        Signature.from_bytes(b"\x00" * 12, scheme)


@settings(max_examples=25, deadline=None)
@given(
    n=st.sampled_from([0, 1, 5, 4095, 9000]),
    span=st.tuples(st.integers(0, 21), st.integers(0, 21)).map(sorted),
    seed=st.integers(0, 2**64 - 1),
)
def test_band_keys_are_the_same_in_either_memory_order(n: int, span: list[int], seed: int) -> None:
    from neardup.kernels.threads import limited_threads, max_threads
    from neardup.sketch.minhash import SignatureSet

    lo, hi = span
    scheme = MinHasher(Config(num_perm=126, bands=21, rows=6)).signatures(["x"]).scheme
    rng = np.random.default_rng(n)
    matrix = rng.integers(0, 2**32, size=(n, 126), dtype=np.uint64).astype(np.uint32)
    ss = SignatureSet(matrix, scheme)
    for threads in {1, min(2, max_threads())}:
        with limited_threads(threads):
            c = ss.band_keys(seed=seed, lo=lo, hi=hi)
            f = ss.band_keys(seed=seed, lo=lo, hi=hi, order="F")
        assert c.shape == f.shape == (n, hi - lo)
        assert f.flags.f_contiguous
        assert np.array_equal(c, f)

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup import Config, InvalidConfig, ShingleSpec, hash_documents, jaccard, verify_pairs

_sets = st.sets(st.integers(0, 2**64 - 1), max_size=40)


@given(a=_sets, b=_sets)
def test_exact_jaccard_equals_python_sets(a: set[int], b: set[int]) -> None:
    expected = len(a & b) / len(a | b) if a | b else 0.0
    assert jaccard(a, b) == expected
    assert jaccard(b, a) == expected
    assert 0.0 <= jaccard(a, b) <= 1.0


@given(a=_sets.filter(bool))
def test_identical_sets_score_one(a: set[int]) -> None:
    assert jaccard(a, a) == 1.0


@given(texts=st.lists(st.text(alphabet="abc ", max_size=30), min_size=2, max_size=8))
def test_verify_pairs_matches_python(texts: list[str]) -> None:
    spec = ShingleSpec(kind="char", k=3)
    sets = hash_documents(texts, Config(shingle=spec))
    n = len(texts)
    a = np.array([i for i in range(n) for j in range(i + 1, n)], dtype=np.int64)
    b = np.array([j for i in range(n) for j in range(i + 1, n)], dtype=np.int64)
    scores = verify_pairs(sets, a, b)
    for x, y, j in zip(a, b, scores.jaccard, strict=True):
        sx, sy = set(sets.get(int(x)).tolist()), set(sets.get(int(y)).tolist())
        ref = len(sx & sy) / len(sx | sy) if sx | sy else 0.0
        assert j == ref


@pytest.mark.parametrize("bad", [["a", "b"], [-1, 2], [[1, 2]], [1.5], None, "abc", [2**64]])
def test_jaccard_refuses_what_is_not_hashes(bad: object) -> None:
    with pytest.raises(InvalidConfig, match="64-bit hashes") as info:
        jaccard(bad, [1, 2])  # type: ignore[arg-type]
    assert "fix: pass shingle hashes" in str(info.value)


def test_jaccard_takes_hashes_past_2_to_the_63() -> None:
    big = 2**64 - 1
    assert jaccard({0, big}, [big, 0, 0]) == 1.0
    assert jaccard(iter([big, 3]), (3,)) == 0.5


def test_verify_pairs_refuses_positions_outside_the_sets() -> None:
    sets = hash_documents(["a b c d e f", "a b c d e f g"], Config())
    with pytest.raises(InvalidConfig, match=r"positions in \[0, 2\)"):
        verify_pairs(sets, [0], [2])
    with pytest.raises(InvalidConfig, match="lengths differ"):
        verify_pairs(sets, [0, 1], [1])
    with pytest.raises(InvalidConfig, match="ShingleSets"):
        verify_pairs([[1, 2]], [0], [0])  # type: ignore[arg-type]

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup import Config, InvalidConfig, ShingleSpec, hash_documents
from neardup.testing import plant_near_duplicates, synthetic_documents
from neardup.verify.oracle import allpairs_join, brute_force_pairs


def _python_pairs(sets, t):  # type: ignore[no-untyped-def]
    out = set()
    for i, j in itertools.combinations(range(len(sets)), 2):
        a, b = set(sets.get(i).tolist()), set(sets.get(j).tolist())
        if a and b and len(a & b) / len(a | b) >= t:
            out.add((i, j))
    return out


@given(
    texts=st.lists(st.text(alphabet="abcd ", max_size=25), min_size=0, max_size=12),
    t=st.sampled_from([0.2, 0.5, 0.75, 0.8, 1.0]),
)
def test_brute_force_and_allpairs_equal_python(texts: list[str], t: float) -> None:
    sets = hash_documents(texts, Config(shingle=ShingleSpec(kind="char", k=2)))
    ref = _python_pairs(sets, t)
    assert brute_force_pairs(sets, t).pairs() == ref
    assert allpairs_join(sets, t).pairs() == ref


@pytest.mark.parametrize("t", [0.5, 0.8, 0.9])
def test_allpairs_equals_brute_force_on_planted_corpus(t: float) -> None:
    base = synthetic_documents(400, seed=3, words=60)
    texts, _ = plant_near_duplicates(base, copies=300, edit_rate=[0.01, 0.03, 0.06, 0.1], seed=4)
    sets = hash_documents(texts, Config(shingle=ShingleSpec(kind="word", k=3)))
    bf = brute_force_pairs(sets, t)
    ap = allpairs_join(sets, t)
    assert ap.pairs() == bf.pairs()
    assert len(bf) > 50
    assert (ap.jaccard >= t).all()


def test_threshold_validated() -> None:
    sets = hash_documents(["a"], Config())
    with pytest.raises(InvalidConfig):
        allpairs_join(sets, 0.0)

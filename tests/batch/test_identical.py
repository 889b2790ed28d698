"""neardup.batch.identical: exact-content groups, confirmed byte for byte."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import Config, ShingleSpec
from neardup.batch.identical import exact_groups
from neardup.graph.cluster import Edge
from neardup.text.hashing import ShingleSets, hash_documents
from neardup.text.normalize import encode_text, get_normalizer

CFG = Config(shingle=ShingleSpec(kind="word", k=2))
_NORM = get_normalizer(CFG.normalizer)


def _normalized(texts: list[str]) -> list[bytes]:
    return [encode_text(_NORM(t)) for t in texts]


def _identical(a: int, b: int) -> Edge:
    return Edge(a=a, b=b, score=1.0, estimate=1.0, band=None, method="identical")


def _raw_equal(texts: list[str]) -> Any:
    """Equality of original texts, pair by pair, as TextColumn.equal_encoded gives it."""
    return lambda a, b: np.array([texts[x] == texts[y] for x, y in zip(a, b, strict=True)])


def _brute_force(keys: list[bytes], eligible: list[bool]) -> tuple[list[Edge], list[bool]]:
    """Each eligible document joined to the first eligible one with the same bytes."""
    first: dict[bytes, int] = {}
    edges, leaders = [], list(eligible)
    for i, k in enumerate(keys):
        if not eligible[i]:
            continue
        if k in first:
            edges.append(_identical(first[k], i))
            leaders[i] = False
        else:
            first[k] = i
    return sorted(edges, key=lambda e: (e.a, e.b)), leaders


_WORDS = st.sampled_from(["red", "Red", "RED", "fox", "fox ", " fox", "caf\u00e9", "CAF\u00c9"])
_TEXT = st.lists(_WORDS, min_size=0, max_size=3).map(" ".join)


@settings(max_examples=50, deadline=None)  # a hashing kernel call each
@given(texts=st.lists(_TEXT, max_size=12), data=st.data())
def test_groups_equal_a_brute_force_grouping(texts: list[str], data: st.DataObject) -> None:
    # Texts from a few words in several spellings: many normalize to the same
    # bytes.  Every eligible document joins the first one of its content.
    sets = hash_documents(texts, CFG)
    eligible = np.array(
        data.draw(st.lists(st.booleans(), min_size=len(texts), max_size=len(texts))), dtype=np.bool_
    )
    keys = _normalized(texts)
    text_of = keys.__getitem__
    want_edges, want_leaders = _brute_force(keys, eligible.tolist())
    edges, leaders = exact_groups(text_of, 0, sets, eligible)
    assert edges == want_edges
    assert leaders.tolist() == want_leaders
    # The same with the original texts at hand, and with no text at all (equal
    # shingle-hash sets decide, as for indexed documents).
    with_raw = exact_groups(text_of, 0, sets, eligible, _raw_equal(texts))
    assert with_raw[0] == edges and with_raw[1].tolist() == want_leaders
    no_text = exact_groups(None, 0, sets, eligible)
    assert no_text[0] == edges and no_text[1].tolist() == want_leaders


def _collide(sets: ShingleSets) -> ShingleSets:
    """The same sets with every content hash equal (as if they all collided)."""
    return dataclasses.replace(sets, content_hash=np.zeros(len(sets), dtype=np.uint64))


def test_equal_hashes_are_confirmed_byte_for_byte() -> None:
    texts = ["red fox", "blue fox", "Red  Fox", "blue fox", "green"]
    sets = _collide(hash_documents(texts, CFG))
    keys = _normalized(texts)
    edges, leaders = exact_groups(keys.__getitem__, 0, sets, np.ones(5, dtype=np.bool_))
    assert edges == [_identical(0, 2), _identical(1, 3)]
    assert leaders.tolist() == [True, True, False, False, True]


def test_indexed_documents_are_confirmed_by_their_sets() -> None:
    # Positions below n_prior come from a saved index: no text, so equal hashes
    # are confirmed by equal shingle-hash sets.
    texts = ["red fox", "blue fox", "red fox", "blue fox"]
    sets = _collide(hash_documents(texts, CFG))
    asked: list[int] = []

    def text_of(i: int) -> bytes:
        asked.append(i)
        return _normalized(texts[2:])[i]

    edges, leaders = exact_groups(text_of, 2, sets, np.ones(4, dtype=np.bool_))
    assert edges == [_identical(0, 2), _identical(1, 3)]
    assert leaders.tolist() == [True, True, False, False]
    assert set(asked) <= {0, 1}  # new document i is text_of(i - n_prior)


def test_texts_are_normalized_for_group_members_only() -> None:
    texts = ["alpha beta", "gamma delta", "Alpha  Beta", "epsilon", "alpha beta"]
    sets = hash_documents(texts, CFG)
    asked: list[int] = []

    def text_of(i: int) -> bytes:
        asked.append(i)
        return _normalized(texts)[i]

    edges, _ = exact_groups(text_of, 0, sets, np.ones(5, dtype=np.bool_))
    assert edges == [_identical(0, 2), _identical(0, 4)]
    assert set(asked) == {0, 2, 4}
    # Equal originals need no normalizing: only the one spelled differently is.
    asked.clear()
    every = np.ones(5, dtype=np.bool_)
    edges, _ = exact_groups(text_of, 0, sets, every, _raw_equal(texts))
    assert edges == [_identical(0, 2), _identical(0, 4)]
    assert set(asked) == {0, 2}


def test_ineligible_and_lone_documents() -> None:
    texts = ["same words", "same words", "same words"]
    sets = hash_documents(texts, CFG)
    keys = _normalized(texts)
    eligible = np.array([False, True, True])
    edges, leaders = exact_groups(keys.__getitem__, 0, sets, eligible)
    assert edges == [_identical(1, 2)] and leaders.tolist() == [False, True, False]
    assert eligible.tolist() == [False, True, True]  # the mask given is not changed
    one = np.array([False, False, True])
    edges, leaders = exact_groups(keys.__getitem__, 0, sets, one)
    assert edges == [] and leaders.tolist() == [False, False, True] and leaders is not one
    none = exact_groups(None, 0, sets.take([]), np.zeros(0, dtype=np.bool_))
    assert none[0] == [] and none[1].shape == (0,)

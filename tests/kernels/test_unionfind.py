"""The one union-find (neardup.kernels._unionfind) against a trivial reference: same
partition, and the documented root rule (the root of a set is its smallest
element, whatever the order and direction of the unions)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.kernels._unionfind import (
    UnionFind,
    component_roots,
    find,
    flatten,
    kruskal,
    roots,
    union,
    union_edges,
)


class QuickFind:
    """Reference: every element stores its set's smallest element; a union relabels
    the whole larger-labelled set."""

    def __init__(self, n: int) -> None:
        self.label = list(range(n))

    def union(self, a: int, b: int) -> bool:
        la, lb = self.label[a], self.label[b]
        if la == lb:
            return False
        lo, hi = min(la, lb), max(la, lb)
        self.label = [lo if x == hi else x for x in self.label]
        return True


def _i64(xs: list[int]) -> np.ndarray:
    return np.array(xs, dtype=np.int64)


@st.composite
def unions(draw: st.DrawFn, max_n: int = 40) -> tuple[int, list[tuple[int, int]]]:
    n = draw(st.integers(1, max_n))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=80))
    return n, pairs


def test_the_docstring_example_and_the_root_rule() -> None:
    uf = UnionFind(6)
    assert uf.union(5, 3) and uf.union(3, 4) and uf.union(1, 0)
    assert not uf.union(4, 5)
    assert uf.roots().tolist() == [0, 0, 2, 3, 3, 3]
    assert [uf.find(x) for x in range(6)] == [0, 0, 2, 3, 3, 3]
    assert uf.union(4, 2)  # 2 < 3: the set {3, 4, 5} now hangs under 2
    assert uf.roots().tolist() == [0, 0, 2, 2, 2, 2]


def test_find_halves_the_path_it_walks() -> None:
    parent = _i64([0, 0, 1, 2, 3, 4])  # a chain 5 -> 4 -> 3 -> 2 -> 1 -> 0
    assert find(parent, 5) == 0
    assert parent.tolist() == [0, 0, 1, 1, 3, 3]  # every other node skips a step


def test_roots_leave_the_sets_untouched_and_flatten_works_in_place() -> None:
    uf = UnionFind(5)
    uf.union(4, 3)
    uf.union(3, 2)
    before = uf.parent.copy()
    assert uf.roots().tolist() == [0, 1, 2, 2, 2]
    assert np.array_equal(uf.parent, before)
    assert roots(before).tolist() == [0, 1, 2, 2, 2]
    flatten(before)
    assert before.tolist() == [0, 1, 2, 2, 2]


def test_elements_out_of_range_are_refused_by_the_class() -> None:
    uf = UnionFind(3)
    with pytest.raises(IndexError, match=r"element 3 is not in 0\.\.2"):
        uf.union(0, 3)
    with pytest.raises(IndexError, match="element -1"):
        uf.find(-1)
    assert uf.parent.tolist() == [0, 1, 2]


def test_empty_inputs() -> None:
    e = np.zeros(0, dtype=np.int64)
    assert component_roots(0, e, e).tolist() == []
    assert component_roots(3, e, e).tolist() == [0, 1, 2]
    assert UnionFind(0).roots().tolist() == []
    kept = np.zeros(0, dtype=np.bool_)
    kruskal(np.arange(2, dtype=np.int64), e, e, e, kept)


@given(unions())
def test_unions_match_the_reference_step_by_step(case: tuple[int, list[tuple[int, int]]]) -> None:
    n, pairs = case
    uf, ref = UnionFind(n), QuickFind(n)
    for a, b in pairs:
        assert uf.union(a, b) == ref.union(a, b)
        # Every pointer goes to a smaller element (or itself): roots are minima.
        assert bool(np.all(uf.parent <= np.arange(n)))
    assert uf.roots().tolist() == ref.label
    assert [uf.find(x) for x in range(n)] == ref.label


@given(unions(), st.randoms(use_true_random=False))
def test_roots_depend_only_on_the_partition(
    case: tuple[int, list[tuple[int, int]]], rnd: random.Random
) -> None:
    """Shuffling the unions and swapping their ends changes no root, no kernel
    result: the batch kernels agree with the class and the reference."""
    n, pairs = case
    ref = QuickFind(n)
    for a, b in pairs:
        ref.union(a, b)
    shuffled = list(pairs)
    rnd.shuffle(shuffled)
    swapped = [(b, a) if rnd.random() < 0.5 else (a, b) for a, b in shuffled]
    for ps in (pairs, swapped):
        a, b = _i64([p[0] for p in ps]), _i64([p[1] for p in ps])
        assert component_roots(n, a, b).tolist() == ref.label
        parent = np.arange(n, dtype=np.int64)
        union_edges(parent, a, b)
        assert roots(parent).tolist() == ref.label
        uf = UnionFind(n)
        for x, y in ps:
            union(uf.parent, x, y)
        assert uf.roots().tolist() == ref.label


@given(unions(), st.randoms(use_true_random=False))
def test_kruskal_keeps_the_edges_that_join_two_sets(
    case: tuple[int, list[tuple[int, int]]], rnd: random.Random
) -> None:
    n, pairs = case
    order = list(range(len(pairs)))
    rnd.shuffle(order)
    ref = QuickFind(n)
    expect = [False] * len(pairs)
    for i in order:
        expect[i] = ref.union(*pairs[i])
    parent = np.arange(n, dtype=np.int64)
    kept = np.zeros(len(pairs), dtype=np.bool_)
    a, b = _i64([p[0] for p in pairs]), _i64([p[1] for p in pairs])
    kruskal(parent, a, b, _i64(order), kept)
    assert kept.tolist() == expect
    assert roots(parent).tolist() == ref.label
    # A spanning forest: as many edges as elements minus sets.
    assert int(kept.sum()) == n - len(set(ref.label))

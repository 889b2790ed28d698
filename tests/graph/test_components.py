"""Connected components by large-star/small-star and by union-find, and the
canonical spanning forest (no Ray needed)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.graph.components import (
    large_star_emit,
    large_star_reduce,
    small_star_emit,
    small_star_reduce,
    spanning_forest,
    star_components,
    union_find_labels,
)


def _reference(u: list[int], v: list[int]) -> dict[int, int]:
    """Each node's component minimum by relaxing labels along edges until stable
    (labels only decrease, so this ends)."""
    label = {x: x for x in set(u) | set(v)}
    changed = True
    while changed:
        changed = False
        for a, b in zip(u, v, strict=True):
            m = min(label[a], label[b])
            if label[a] != m or label[b] != m:
                label[a] = label[b] = m
                changed = True
    return label


edges = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), min_size=0, max_size=120)


@settings(max_examples=200, deadline=None)
@given(edges)
def test_star_components_equal_union_find(es: list[tuple[int, int]]) -> None:
    u = [a for a, _ in es]
    v = [b for _, b in es]
    ref = _reference(u, v)
    nodes, labels = star_components(np.array(u, dtype=np.int64), np.array(v, dtype=np.int64))
    assert dict(zip(nodes.tolist(), labels.tolist(), strict=True)) == ref
    nodes2, labels2 = union_find_labels(np.array(u, dtype=np.int64), np.array(v, dtype=np.int64))
    assert dict(zip(nodes2.tolist(), labels2.tolist(), strict=True)) == ref


def test_long_path_and_star_converge() -> None:
    rng = np.random.default_rng(7)
    perm = rng.permutation(5000).astype(np.int64)
    u, v = perm[:-1], perm[1:]  # one long path in random label order
    nodes, labels = star_components(u, v)
    assert nodes.size == 5000 and set(labels.tolist()) == {0}


@settings(max_examples=100, deadline=None)
@given(edges, st.integers(1, 5))
def test_reduces_work_on_any_partition_of_the_keys(es: list[tuple[int, int]], parts: int) -> None:
    """A reduce that sees all rows of its keys gives the same edges whichever
    partition those keys land in (what the distributed run relies on)."""
    u = np.array([a for a, _ in es], dtype=np.int64)
    v = np.array([b for _, b in es], dtype=np.int64)
    for emit, reduce in (
        (large_star_emit, large_star_reduce),
        (small_star_emit, small_star_reduce),
    ):
        key, other = emit(u, v)
        whole = set(zip(*(x.tolist() for x in reduce(key, other)), strict=True))
        pieces: set[tuple[int, int]] = set()
        for p in range(parts):
            m = key % parts == p
            pieces |= set(zip(*(x.tolist() for x in reduce(key[m], other[m])), strict=True))
        assert pieces == whole


@pytest.mark.parametrize("seed", range(5))
def test_spanning_forest_is_kruskal(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 30, 80).astype(np.int64)
    b = rng.integers(0, 30, 80).astype(np.int64)
    order = rng.permutation(80).astype(np.int64)
    keep = spanning_forest(a, b, order)
    # Kruskal by hand: an edge is kept iff its ends are not yet connected by the
    # edges kept before it (connectivity by the reference labels).
    expect = np.zeros(80, dtype=bool)
    ku: list[int] = []
    kv: list[int] = []
    for i in order.tolist():
        x, y = int(a[i]), int(b[i])
        labels = _reference([*ku, x, y], [*kv, x, y])
        if labels[x] != labels[y]:
            expect[i] = True
            ku.append(x)
            kv.append(y)
    assert np.array_equal(keep, expect)
    # A forest: as many edges as nodes minus components.
    labels = _reference(a.tolist(), b.tolist())
    assert int(keep.sum()) == len(labels) - len(set(labels.values()))

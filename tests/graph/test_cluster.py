from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup import Edge, InvalidConfig
from neardup.graph.cluster import Cluster, build_clusters, join_edges


@given(
    n=st.integers(1, 30),
    pairs=st.lists(st.tuples(st.integers(0, 29), st.integers(0, 29)), max_size=40),
)
def test_components_match_a_graph_search(n: int, pairs: list[tuple[int, int]]) -> None:
    edges = [
        Edge(a=min(a, b), b=max(a, b), score=1.0, estimate=1.0, band=0)
        for a, b in pairs
        if a < n and b < n and a != b
    ]
    clusters = build_clusters(n, edges)
    adj: dict[int, set[int]] = {i: set() for i in range(n)}
    for e in edges:
        adj[e.a].add(e.b)
        adj[e.b].add(e.a)
    seen: set[int] = set()
    comps = []
    for s in range(n):
        if s in seen or not adj[s]:
            continue
        stack, comp = [s], set()
        while stack:
            x = stack.pop()
            if x not in comp:
                comp.add(x)
                stack.extend(adj[x] - comp)
        seen |= comp
        comps.append(tuple(sorted(comp)))
    assert [c.members for c in clusters] == comps
    assert all(c.representative == c.members[0] for c in clusters)
    assert sum(len(c.edges) for c in clusters) == len(edges)


def test_representative_rules_and_errors() -> None:
    lengths = np.array([5, 9, 9, 1])
    edges = [
        Edge(a=0, b=1, score=0.9, estimate=0.9, band=0),
        Edge(a=1, b=2, score=0.9, estimate=0.9, band=1),
        Edge(a=2, b=3, score=0.9, estimate=0.9, band=2),
    ]
    assert build_clusters(4, edges, keep="longest", lengths=lengths)[0].representative == 1
    assert build_clusters(4, edges, keep="shortest", lengths=lengths)[0].representative == 3
    with pytest.raises(InvalidConfig, match="keep"):
        build_clusters(4, edges, keep="median")
    d = build_clusters(4, edges)[0].to_dict()
    assert d["members"] == [0, 1, 2, 3] and len(d["edges"]) == 3  # type: ignore[arg-type]


@given(
    a=st.lists(st.integers(0, 1000), max_size=20),
    inter=st.integers(-1, 50),
    union=st.integers(1, 60),
    band=st.integers(0, 30),
    matches=st.integers(0, 128),
)
def test_edges_made_in_bulk_equal_edges_made_one_by_one(
    a: list[int], inter: int, union: int, band: int, matches: int
) -> None:
    b = [x + 1 for x in a]
    bulk = Edge.identical_many(a, b)
    one_by_one = [Edge.identical(x, y) for x, y in zip(a, b, strict=True)]
    assert bulk == one_by_one
    assert [hash(e) for e in bulk] == [hash(e) for e in one_by_one]
    assert [repr(e) for e in bulk] == [repr(e) for e in one_by_one]
    n = len(a)
    arr = np.asarray(a, dtype=np.int64)
    joined = join_edges(
        arr, arr + 1, np.full(n, band, np.int64), np.full(n, inter, np.int64),
        np.full(n, union, np.int64), np.full(n, matches, np.int64), 128,
    )
    exact = inter >= 0
    assert joined == [
        Edge(
            a=x, b=x + 1, score=inter / union if exact else None, estimate=matches / 128, band=band,
            method="exact" if exact else "estimate", intersection=inter if exact else None,
            union=union if exact else None,
        )
        for x in a
    ]
    for e in bulk + joined:
        with pytest.raises(AttributeError):
            e.a = 5  # type: ignore[misc]


def test_clusters_equal_clusters_made_by_their_constructor() -> None:
    edges = [Edge.identical(0, 2), Edge(a=1, b=3, score=0.9, estimate=0.8, band=2)]
    got = build_clusters(4, edges)
    assert got == [
        Cluster(id=0, representative=0, members=(0, 2), edges=(edges[0],)),
        Cluster(id=1, representative=1, members=(1, 3), edges=(edges[1],)),
    ]
    assert hash(got[0]) == hash(Cluster(id=0, representative=0, members=(0, 2), edges=(edges[0],)))

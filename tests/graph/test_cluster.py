from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup import Edge, InvalidConfig
from neardup.graph.cluster import build_clusters


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

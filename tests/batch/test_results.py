"""neardup.batch.results: what a batch run returns (DedupResult) and Match."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import Config, DedupIndex, InvalidConfig, Match, ShingleSpec, find_duplicates
from neardup.batch.results import DedupResult
from neardup.graph.cluster import Edge, build_clusters
from neardup.testing import plant_near_duplicates, synthetic_documents
from neardup.text.hashing import SchemeDescriptor
from neardup.verify.oracle import brute_force_pairs


def _planted(n_base: int = 2000, copies: int = 1500, seed: int = 1) -> list[str]:
    base = synthetic_documents(n_base, seed=seed, words=120)
    texts, _ = plant_near_duplicates(
        base, copies=copies, edit_rate=[0.004, 0.008, 0.012, 0.02, 0.03, 0.05], seed=seed + 1
    )
    return texts


def test_pairs_expand_identical_groups_to_match_the_oracle() -> None:
    texts = _planted(300, 250)
    res = find_duplicates(texts, config=Config(), edges="all")
    assert res.sets is not None and res.stats["exact_duplicates"] > 0
    truth = brute_force_pairs(res.sets, 0.8).pairs()
    got = res.pairs()
    assert got <= truth
    assert len(got) / len(truth) >= 0.99
    assert res.pairs(expand_identical=False) <= got


def _edge(a: int, b: int, method: str = "exact") -> Edge:
    j = 1.0 if method == "identical" else 0.9
    return Edge(
        a=a, b=b, score=j, estimate=j, band=None if method == "identical" else 0, method=method
    )


def _result(n: int, edges: list[Edge], n_prior: int = 0) -> DedupResult:
    clusters = build_clusters(n, edges)
    duplicate_of = np.full(n, -1, dtype=np.int64)
    for c in clusters:
        for m in c.members:
            if m != c.representative:
                duplicate_of[m] = c.representative
    empty = np.zeros(0, dtype=np.int64)
    return DedupResult(
        clusters=clusters,
        duplicate_of=duplicate_of,
        empty=empty,
        too_large=empty,
        truncated=empty,
        stats={},
        scheme=SchemeDescriptor.from_config(Config()),
        config_fingerprint="f",
        n_prior=n_prior,
    )


def test_pairs_of_a_known_result() -> None:
    # Identical groups {0, 2, 5} and {7, 8}; near edges 2-7 and 3-4.
    edges = [
        _edge(0, 2, "identical"),
        _edge(0, 5, "identical"),
        _edge(7, 8, "identical"),
        _edge(2, 7),
        _edge(3, 4),
    ]
    r = _result(10, edges)
    assert r.pairs(expand_identical=False) == {(0, 2), (0, 5), (7, 8), (2, 7), (3, 4)}
    group = [0, 2, 5]
    within = {*itertools.combinations(group, 2), (7, 8)}
    across = {(x, y) for x in group for y in (7, 8)}
    assert r.pairs() == within | across | {(3, 4)}
    assert r.near_pairs() == {(2, 7), (3, 4)}
    assert sorted((e.a, e.b) for e in r.edges) == sorted((e.a, e.b) for e in edges)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 12),
    data=st.data(),
)
def test_expanded_pairs_are_the_pairs_of_equal_content_or_a_near_edge(
    n: int, data: st.DataObject
) -> None:
    # Contents: each document a label; documents with one label are identical
    # (edges from the first to each other one, as exact_groups gives them), and
    # near edges join labels.  pairs() is every pair of documents whose labels
    # are equal or joined by a near edge.
    labels = data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    first = {}
    edges = []
    for i, lab in enumerate(labels):
        if lab in first:
            edges.append(_edge(first[lab], i, "identical"))
        else:
            first[lab] = i
    leaders = sorted(first.values())
    near = data.draw(st.sets(st.tuples(st.sampled_from(leaders), st.sampled_from(leaders))))
    near_labels = {(labels[a], labels[b]) for a, b in near if a < b}
    edges += [_edge(a, b) for a, b in near if a < b]
    r = _result(n, edges)
    want = {
        (x, y)
        for x, y in itertools.combinations(range(n), 2)
        if labels[x] == labels[y]
        or (labels[x], labels[y]) in near_labels
        or (labels[y], labels[x]) in near_labels
    }
    assert r.pairs() == want
    assert r.near_pairs() == {(a, b) for a, b in near if a < b}
    assert r.pairs(expand_identical=False) == {(e.a, e.b) for e in edges}


def test_kept_and_duplicates_count_the_new_documents_only() -> None:
    r = _result(6, [_edge(0, 1), _edge(1, 4), _edge(2, 5)], n_prior=2)
    assert r.duplicate_of.tolist() == [-1, 0, -1, -1, 0, 2]
    assert r.kept.tolist() == [2, 3] and r.duplicates.tolist() == [4, 5]
    assert r.kept.dtype == r.duplicates.dtype == np.int64
    whole = _result(6, [_edge(0, 1), _edge(1, 4), _edge(2, 5)])
    assert whole.kept.tolist() == [0, 2, 3] and whole.duplicates.tolist() == [1, 4, 5]


def test_to_index_needs_one_id_per_document() -> None:
    cfg = Config(threshold=0.6, shingle=ShingleSpec(kind="word", k=1))
    r = find_duplicates(["a b c", "a b c", "d e"], config=cfg)
    with pytest.raises(InvalidConfig) as err:
        r.to_index(["x", "y"])
    assert str(err.value) == (
        "invalid ids=2: need one id per document (3); "
        "fix: pass the prior ids followed by this run's ids"
    )
    index = r.to_index(["x", "y", "z"])
    assert isinstance(index, DedupIndex) and index.ids == ["x", "y", "z"]
    assert index.sets is r.sets and index.edges == r.edges
    assert (index.config_fingerprint, index.config) == (cfg.fingerprint, cfg.result_fields())
    # A result against an index covers the indexed documents too.
    later = find_duplicates(["d e", "f g"], config=cfg, prior=index)
    assert later.n_prior == 3 and len(later.to_index(list("xyzuv"))) == 5
    with pytest.raises(InvalidConfig, match=r"need one id per document \(5\)"):
        later.to_index(["u", "v"])


def test_results_and_matches_are_frozen() -> None:
    r = _result(2, [_edge(0, 1)])
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.n_prior = 1  # type: ignore[misc]
    m = Match("a", 0.8, 0.75, "exact", True)
    assert m == Match("a", 0.8, 0.75, "exact", True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.duplicate = False  # type: ignore[misc]

"""Splits over families (neardup.lineage.splits), on families built by hand."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import InvalidConfig
from neardup.lineage.families import Family, FamilyResult, Provenance
from neardup.lineage.splits import cross_split_leakage, family_split


def _result(groups: list[list[int]], prov: list[Provenance]) -> FamilyResult:
    """Families of ``groups`` (each a list of record positions; singletons allowed)."""
    n = len(prov)
    family_of = np.empty(n, dtype=np.int64)
    families = []
    multi = [g for g in groups if len(g) > 1]
    for fid, members in enumerate(multi):
        family_of[members] = fid
        families.append(
            Family(id=fid, members=tuple(members), edges=(), splits={}, flags=(), confirmed=False)
        )
    nxt = len(multi)
    for g in groups:
        if len(g) == 1:
            family_of[g[0]] = nxt
            nxt += 1
    return FamilyResult(n, families, family_of, prov, [], [], [], 0)


@st.composite
def _partitions(draw: st.DrawFn) -> list[list[int]]:
    n = draw(st.integers(1, 40))
    labels = draw(st.lists(st.integers(0, 9), min_size=n, max_size=n))
    groups: dict[int, list[int]] = defaultdict(list)
    for i, g in enumerate(labels):
        groups[g].append(i)
    return sorted(groups.values())


@settings(max_examples=60, deadline=None)
@given(
    _partitions(),
    st.lists(st.floats(0.01, 10.0), min_size=1, max_size=4),
    st.integers(0, 2**32),
)
def test_family_split_keeps_families_whole_and_shares_close(
    groups: list[list[int]], weights: list[float], seed: int
) -> None:
    n = sum(len(g) for g in groups)
    result = _result(groups, [Provenance()] * n)
    ratios = {f"s{i}": w for i, w in enumerate(weights)}
    out, rep = family_split(result, ratios, seed=seed)
    assert (out, rep) == family_split(result, ratios, seed=seed)
    assert set(out) <= set(ratios)
    for g in groups:
        assert len({out[m] for m in g}) == 1
    assert sum(rep["records"].values()) == n
    assert rep["families"] == len(groups)
    assert rep["largest_family"] == max(len(g) for g in groups)
    total = sum(weights)
    for name, w in ratios.items():
        assert rep["target"][name] == round(w / total, 6)
        # a split gets a family only while it is furthest below its target
        assert rep["records"][name] - w / total * n < rep["largest_family"] + 1e-9


def test_family_split_stratifies_by_the_most_common_value_of_a_family() -> None:
    groups = [[0, 1, 2], [3], [4], [5], [6, 7]]
    strat = ["a", "a", "b", "b", "b", "b", "b", "b"]
    result = _result(groups, [Provenance()] * 8)
    out, rep = family_split(result, {"x": 0.5, "y": 0.5}, seed=0, stratify=strat)
    assert rep["stratified"] and len({out[0], out[1], out[2]}) == 1
    # stratum a is the one family {0, 1, 2}; stratum b (5 records) is split 3/2 or 2/3
    b = [out[i] for i in (3, 4, 5, 6, 7)]
    assert sorted((b.count("x"), b.count("y"))) == [2, 3]


@pytest.mark.parametrize("ratios", [{}, {"train": 0.0}, {"train": 1.0, "test": -0.1}])
def test_family_split_needs_positive_shares(ratios: dict[str, float]) -> None:
    with pytest.raises(InvalidConfig, match="positive shares"):
        family_split(_result([[0]], [Provenance()]), ratios)


def test_cross_split_leakage_counts_records_with_a_relative_elsewhere() -> None:
    prov = [
        Provenance(split="train", source="web", captured_at="2026-01-05"),
        Provenance(split="test", source="forum", captured_at="2026-02-01"),
        Provenance(split="train", source="web"),
        Provenance(split="train"),
        Provenance(split="train"),
        Provenance(split="test"),
        Provenance(),  # no split: counted nowhere
    ]
    result = _result([[0, 1, 2], [3, 4], [5], [6]], prov)
    leak = cross_split_leakage(result)
    assert leak["splits"] == {"test": 2, "train": 4}
    assert leak["pairs"] == {"test->train": 1, "train->test": 2}
    assert leak["leaking_records"] == 3 and leak["leaking_families"] == 1
    assert leak["by"] == {
        "captured_month": {"2026-01": 1, "2026-02": 1},
        "source": {"forum": 1, "web": 2},
    }
    assert cross_split_leakage(result, slices=())["by"] == {
        "captured_month": {"2026-01": 1, "2026-02": 1}
    }


def test_no_family_across_splits_is_no_leakage() -> None:
    prov = [Provenance(split=s) for s in ("a", "a", "b", "b")]
    leak = cross_split_leakage(_result([[0, 1], [2, 3]], prov))
    assert leak["leaking_records"] == 0 and leak["pairs"] == {} and leak["by"] == {}

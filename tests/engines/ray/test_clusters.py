"""A component's record in the Ray engine: the local keep rule, the spanning forest
of the local band join, and the local clusters.jsonl line without its number."""

from __future__ import annotations

import json

import numpy as np

from neardup.batch.outputs import ClusterLines
from neardup.engines.ray.clusters import component_line


def test_component_line_keeps_the_local_rule_forest_and_line() -> None:
    # Documents 3, 5 and 9 are ids 1..3 of the partition ("w" is another component's).
    lines = ClusterLines(["w", "x", "y", "z"])
    members = np.array([3, 5, 9], dtype=np.int64)
    nbytes = np.array([5, 9, 9], dtype=np.int64)
    edges = {
        # 3-9 identical; near edges 3-5 and 5-9 in band 0, 3-9 in band 1 (its ends
        # are already connected when Kruskal reaches it: dropped).
        "a": np.array([3, 3, 5, 3], dtype=np.int64),
        "b": np.array([9, 5, 9, 9], dtype=np.int64),
        "band": np.array([-1, 0, 0, 1], dtype=np.int64),
        "key": np.zeros(4, dtype=np.uint64),
        "inter": np.array([-1, 8, 6, 9], dtype=np.int64),
        "union": np.array([-1, 10, 8, 10], dtype=np.int64),
        "matches": np.array([-1, 96, 80, 120], dtype=np.int64),
        "method": np.array([0, 1, 1, 1], dtype=np.int8),
    }
    rep, line = component_line(lines, "longest", 128, 1, members, nbytes, edges)
    assert rep == 2  # the longest, the earlier of two equal lengths: id "y"
    want = {
        "representative": "y",
        "members": ["x", "y", "z"],
        "edges": [
            {
                "a": "x",
                "b": "z",
                "jaccard": 1.0,
                "estimate": 1.0,
                "band": None,
                "method": "identical",
            },
            {"a": "x", "b": "y", "jaccard": 0.8, "estimate": 0.75, "band": 0, "method": "exact"},
            {"a": "y", "b": "z", "jaccard": 0.75, "estimate": 0.625, "band": 0, "method": "exact"},
        ],
    }
    assert line == json.dumps(want, ensure_ascii=False, sort_keys=True)
    first, _ = component_line(lines, "first", 128, 1, members, nbytes, edges)
    short, _ = component_line(lines, "shortest", 128, 1, members, nbytes, edges)
    assert (first, short) == (1, 1)

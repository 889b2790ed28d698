"""Unit tests of the batch job's own helpers (the job end to end is in test_cli)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.batch.outputs import ClusterLines
from neardup.graph.cluster import Cluster, Edge

_ids = st.one_of(
    st.integers(-(2**70), 2**70),
    st.text(max_size=8),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
)
# Equal values that encode differently (1, 1.0, True; 0.0, -0.0) must never share
# an encoding memo.
_score = st.one_of(
    st.none(), st.floats(0, 1), st.sampled_from([1.0, 1, True, 0.0, -0.0, 0]), st.integers(0, 1)
)


@settings(max_examples=200, deadline=None)
@given(
    ids=st.lists(_ids, min_size=2, max_size=6),
    data=st.data(),
    new_id=st.integers(0, 10**6),
)
def test_cluster_lines_equal_json_dumps(
    ids: list[object], data: st.DataObject, new_id: int
) -> None:
    n = len(ids)
    pos = st.integers(0, n - 1)
    edges = data.draw(
        st.lists(
            st.builds(
                Edge,
                a=pos,
                b=pos,
                score=_score,
                estimate=_score,
                band=st.one_of(st.none(), st.integers(0, 40)),
                method=st.sampled_from(["exact", "estimate", "identical", 'odd "é"', "{a} {{b}}"]),
            ),
            max_size=4,
        )
    )
    members = tuple(sorted(set(data.draw(st.lists(pos, min_size=1, max_size=n)))))
    c = Cluster(id=0, representative=members[0], members=members, edges=tuple(edges))
    lines = ClusterLines(ids)
    assert lines.line(new_id, c) == _expected(c, ids, new_id)
    # The same writer again, one edge per cluster: what it memoized from the
    # edges before must not leak into a later line.
    for e in reversed(edges):
        one = Cluster(id=0, representative=e.a, members=(e.a,), edges=(e,))
        assert lines.line(new_id, one) == _expected(one, ids, new_id)


def _expected(c: Cluster, ids: list[object], new_id: int) -> str:
    rec = {
        "cluster": new_id,
        "representative": ids[c.representative],
        "members": [ids[m] for m in c.members],
        "edges": [
            {
                "a": ids[e.a],
                "b": ids[e.b],
                "jaccard": e.jaccard,
                "estimate": e.estimate,
                "band": e.band,
                "method": e.method,
            }
            for e in c.edges
        ],
    }
    return json.dumps(rec, ensure_ascii=False, sort_keys=True)

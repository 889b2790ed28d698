"""neardup.batch.outputs: an output folder appears whole or not at all."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import NeardupIOError
from neardup.batch.outputs import commit_output, finish_output, writing


def _folder(path: Path, content: str) -> None:
    path.mkdir()
    (path / "kept.jsonl").write_text(content)


def test_commit_replaces_an_old_output_whole(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _folder(out, "old\n")
    tmp = tmp_path / ".neardup-tmp-1"
    _folder(tmp, "new\n")
    commit_output(str(tmp), str(out))
    assert (out / "kept.jsonl").read_text() == "new\n"
    assert not tmp.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # the old folder is gone


def test_finish_writes_stats_with_total_time_then_commits(tmp_path: Path) -> None:
    tmp = tmp_path / ".neardup-tmp-2"
    _folder(tmp, "")
    stats: dict[str, object] = {"timings_s": {"read": 0.1}, "documents": 3}
    finish_output(str(tmp), str(tmp_path / "out"), stats, time.perf_counter())
    got = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert got["documents"] == 3 and got["timings_s"]["total"] >= 0
    assert "peak_memory_bytes" in got


def test_writing_names_the_path_of_an_os_error(tmp_path: Path) -> None:
    target = str(tmp_path / "nowhere" / "stats.json")
    with pytest.raises(NeardupIOError) as info, writing(target):
        open(target, "w").close()
    assert os.path.basename(target) in str(info.value)


_ids = st.one_of(
    st.text(max_size=6),
    st.integers(-(2**70), 2**70),
    st.none(),
    st.floats(allow_nan=False),
    st.booleans(),
)
_scores = st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False))


@settings(max_examples=200, deadline=None)
@given(
    ids=st.lists(_ids, min_size=2, max_size=6),
    metric=st.sampled_from(["jaccard", "cosine", "l2", "l1", "weighted_jaccard"]),
    score=_scores,
    estimate=_scores,
    band=st.one_of(st.none(), st.integers(0, 500)),
    method=st.sampled_from(["exact", "estimate", "identical"]),
    number=st.integers(0, 10**9),
)
def test_cluster_lines_are_json_dumps_sorted_of_the_record(
    ids: list[object],
    metric: str,
    score: float | None,
    estimate: float | None,
    band: int | None,
    method: str,
    number: int,
) -> None:
    from neardup.batch.outputs import ClusterLines
    from neardup.graph.cluster import Cluster, Edge

    n = len(ids)
    edges = tuple(
        Edge(a=i, b=i + 1, score=score, estimate=estimate, band=band, method=method, metric=metric)
        for i in range(n - 1)
    )
    c = Cluster(id=0, representative=n - 1, members=tuple(range(n)), edges=edges)
    rec = {
        "cluster": number,
        "representative": ids[n - 1],
        "members": ids,
        "edges": [
            {
                "a": ids[e.a],
                "b": ids[e.b],
                "band": band,
                "estimate": estimate,
                metric: score,
                "method": method,
            }
            for e in edges
        ],
    }
    lines = ClusterLines(ids)
    assert lines.line(number, c) == json.dumps(rec, ensure_ascii=False, sort_keys=True)
    assert lines.line(number, c) == lines.line(number, c)  # the memo changes nothing

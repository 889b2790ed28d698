"""neardup.batch.jobwrite: what the dedup job writes into its temporary folder."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import Config, ShingleSpec, find_duplicates
from neardup.batch.jobwrite import (
    in_background,
    report_positions,
    touching_clusters,
    write_outputs,
)
from neardup.graph.cluster import Cluster, Edge
from neardup.io.corpus import read_corpus

CFG = Config(threshold=0.6, shingle=ShingleSpec(kind="word", k=2))
BASE = "the north gateway rejected the retry for request {} after a long timeout"


def test_touching_clusters_number_the_clusters_with_a_new_member() -> None:
    prior_texts = [BASE.format(1), BASE.format(1) + " again", "alpha beta gamma delta epsilon zeta"]
    prior_texts += ["alpha beta gamma delta epsilon zeta eta", "solo words nobody else has here"]
    prior = find_duplicates(prior_texts, config=CFG).to_index([f"p{i}" for i in range(5)])
    new = [BASE.format(1) + " once more", "fresh pair of words one two three", "unrelated text"]
    new.append("fresh pair of words one two three four")
    result = find_duplicates(new, config=CFG, prior=prior)
    assert result.n_prior == 5
    touching, cluster_of = touching_clusters(result)
    assert [c for c in result.clusters if max(c.members) >= 5] == touching
    assert len(touching) == 2 and len(result.clusters) == 3  # alpha/beta stays prior-only
    for number, c in enumerate(touching):
        assert cluster_of[list(c.members)].tolist() == [number] * len(c)
    in_none = set(range(len(cluster_of))) - {m for c in touching for m in c.members}
    assert in_none and all(cluster_of[i] == -1 for i in in_none)


def _cluster(cid: int, members: tuple[int, ...], methods: list[str]) -> Cluster:
    edges = tuple(
        Edge(a=members[0], b=members[i % (len(members) - 1) + 1], score=0.9, estimate=None,
             band=0, method=m)
        for i, m in enumerate(methods)
    )
    return Cluster(id=cid, representative=members[0], members=members, edges=edges)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(2, 6), st.lists(st.sampled_from(["exact", "identical"]), max_size=5)),
        max_size=120,
    )
)
def test_report_positions_are_the_near_edges_the_report_shows(
    shapes: list[tuple[int, list[str]]],
) -> None:
    clusters, start = [], 0
    for cid, (size, methods) in enumerate(shapes):
        clusters.append(_cluster(cid, tuple(range(start, start + size)), methods))
        start += size
    want = report_positions(clusters)
    near = [e for c in clusters for e in c.edges if e.method != "identical"]
    assert want <= {p for e in near for p in (e.a, e.b)}  # identical pairs are not shown
    assert {p for e in near[:300] for p in (e.a, e.b)} <= want
    assert len(want) <= 2 * (8 * 3 + 300)


def test_in_background_runs_in_a_thread_and_reraises_in_wait() -> None:
    seen: list[str] = []
    wait = in_background(lambda x: seen.append(threading.current_thread().name + x), "!")
    wait()
    assert seen == ["neardup-write!"]

    def fail() -> None:
        raise KeyboardInterrupt

    wait = in_background(fail)
    with pytest.raises(KeyboardInterrupt):
        wait()


@pytest.mark.parametrize("with_report", [True, False])
def test_write_outputs_writes_kept_duplicates_clusters_and_the_report(
    tmp_path: Path, with_report: bool
) -> None:
    src = tmp_path / "in.jsonl"
    texts = [BASE.format(7), "something else entirely here", BASE.format(7) + " again", "x y"]
    lines = [json.dumps({"id": f"r{i}", "text": t}) + "\n" for i, t in enumerate(texts)]
    src.write_text("".join(lines))
    corpus = read_corpus([str(src)], id_field="id")
    result = find_duplicates(corpus.texts, config=CFG)
    out = tmp_path / "out"
    out.mkdir()
    write_outputs(str(out), corpus, result, list(corpus.ids), CFG, dict(result.stats), with_report)
    kept = [json.loads(x) for x in (out / "kept.jsonl").read_text().splitlines()]
    dups = [json.loads(x) for x in (out / "duplicates.jsonl").read_text().splitlines()]
    clusters = [json.loads(x) for x in (out / "clusters.jsonl").read_text().splitlines()]
    assert [r["id"] for r in kept] == ["r0", "r1", "r3"]
    assert dups == [{"id": "r2", "text": texts[2], "cluster": 0, "representative": "r0"}]
    assert [(c["cluster"], c["members"]) for c in clusters] == [(0, ["r0", "r2"])]
    assert (out / "report.html").exists() == with_report
    if with_report:
        assert BASE.format(7) in (out / "report.html").read_text()

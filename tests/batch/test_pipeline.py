"""End-to-end batch pipeline against the brute-force oracle.

The modules it drives have test modules of their own: test_feeder (hashing),
test_identical, test_index, test_online and test_results."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from batch.corpora import LIMITED, MIXED_DOCS
from neardup import (
    Config,
    Deduplicator,
    HashKey,
    InvalidConfig,
    MemoryLimitExceeded,
    ShingleSpec,
    find_duplicates,
)
from neardup.core.config import SCRATCH_BYTES
from neardup.graph.cluster import Edge, build_clusters
from neardup.sketch.lsh import candidate_pairs
from neardup.testing import plant_near_duplicates, stdlib_paragraphs, synthetic_documents
from neardup.verify.oracle import allpairs_join, brute_force_pairs


def test_worked_example() -> None:
    docs = [
        "red fox runs very fast",
        "red fox runs very fast today",
        "database backup completed nightly",
    ]
    cfg = Config(threshold=0.75, shingle=ShingleSpec(kind="word", k=2))
    r = find_duplicates(docs, config=cfg)
    assert len(r.clusters) == 1
    c = r.clusters[0]
    assert c.members == (0, 1) and c.representative == 0
    (edge,) = c.edges
    assert (edge.a, edge.b, edge.jaccard, edge.method) == (0, 1, 0.8, "exact")
    assert (edge.intersection, edge.union) == (4, 5)
    assert edge.band is not None and 0 <= edge.band < cfg.layout[0]
    assert r.kept.tolist() == [0, 2] and r.duplicate_of.tolist() == [-1, 0, -1]
    d = Deduplicator(cfg)
    assert d.add("A", docs[0]) == []
    (m,) = d.add("B", docs[1])
    assert (m.key, m.jaccard, m.duplicate) == ("A", 0.8, True)
    assert d.add("C", docs[2]) == []


def _planted(n_base: int = 2000, copies: int = 1500, seed: int = 1) -> list[str]:
    base = synthetic_documents(n_base, seed=seed, words=120)
    texts, _ = plant_near_duplicates(
        base, copies=copies, edit_rate=[0.004, 0.008, 0.012, 0.02, 0.03, 0.05], seed=seed + 1
    )
    return texts


@pytest.mark.slow
def test_differential_against_brute_force_oracle() -> None:
    texts = _planted()
    cfg = Config(threshold=0.8)
    res = find_duplicates(texts, config=cfg, edges="all")
    sets = res.sets
    assert sets is not None
    # Exact-content copies are collapsed before LSH: compare among the survivors.
    copies = {e.b for e in res.edges if e.method == "identical"}
    assert len(copies) == res.stats["exact_duplicates"] > 0
    oracle = brute_force_pairs(sets, 0.8)
    truth = {
        (int(a), int(b)): float(j)
        for a, b, j in zip(oracle.a, oracle.b, oracle.jaccard, strict=True)
        if int(a) not in copies and int(b) not in copies
    }
    high = {p for p, j in truth.items() if j >= 0.85}
    assert len(high) > 500
    found = res.near_pairs()
    # Zero false edges, and each reported score is the exact one.
    assert found <= set(truth)
    for e in res.edges:
        if e.method != "identical":
            assert e.method == "exact" and e.jaccard == truth[(e.a, e.b)]
    # Candidate recall >= 99.5% for J >= 0.85, and overall recall at the threshold.
    assert res.signatures is not None
    cands = candidate_pairs(res.signatures).pairs()
    assert len(high & cands) / len(high) >= 0.995
    assert len(high & found) / len(high) >= 0.995
    assert len(found) / len(truth) >= 0.99
    assert res.stats["candidate_overflow"] == 0
    # Forest mode gives the same clusters as the all-edges mode.
    forest = find_duplicates(texts, config=cfg)
    assert [c.members for c in forest.clusters] == [c.members for c in res.clusters]
    assert forest.stats["verified_pairs"] <= res.stats["verified_pairs"]
    # The exact method reproduces the oracle's clusters exactly.
    exact = find_duplicates(texts, config=cfg, method="exact")
    ref = build_clusters(
        len(texts),
        [Edge(a=a, b=b, score=j, estimate=None, band=None) for (a, b), j in sorted(truth.items())]
        + [e for e in res.edges if e.method == "identical"],
    )
    assert [c.members for c in exact.clusters] == [c.members for c in ref]
    assert exact.stats["predicted_recall_at_threshold"] == 1.0


def test_recall_on_real_text_at_default_settings() -> None:
    base = stdlib_paragraphs(limit=2500)
    texts, _ = plant_near_duplicates(base, copies=1200, edit_rate=[0.005, 0.01, 0.02, 0.04], seed=3)
    res = find_duplicates(texts, config=Config(threshold=0.8), edges="all")
    assert res.sets is not None
    leaders = np.flatnonzero((res.duplicate_of < 0) | np.isin(np.arange(len(texts)), []))
    truth = allpairs_join(res.sets, 0.85)
    same = res.duplicate_of.copy()
    same[same < 0] = np.flatnonzero(same < 0)
    pairs = [(int(a), int(b)) for a, b in zip(truth.a, truth.b, strict=True)]
    assert len(pairs) > 500
    recall = sum(same[a] == same[b] for a, b in pairs) / len(pairs)
    assert recall >= 0.995, recall
    assert leaders.size == res.stats["documents_out"]


def test_exact_duplicates_empties_and_limits_are_reported() -> None:
    docs = list(MIXED_DOCS)
    cfg = LIMITED
    r = find_duplicates(docs, config=cfg)
    assert r.empty.tolist() == [2, 3]
    assert r.too_large.tolist() == [4]
    assert r.stats["exact_duplicates"] == 1
    (c,) = r.clusters
    assert c.members == (0, 1) and c.edges[0].method == "identical"
    assert r.duplicate_of.tolist() == [-1, 0, -1, -1, -1, -1]
    # The online Deduplicator on the same documents: tests/batch/test_online.py.


def test_representative_rules() -> None:
    docs = ["a b c d e f g h i j", "a b c d e f g h i j k", "a b c d e f g h i"]
    cfg = Config(threshold=0.7, shingle=ShingleSpec(kind="word", k=1))
    assert find_duplicates(docs, config=cfg, keep="longest").clusters[0].representative == 1
    assert find_duplicates(docs, config=cfg, keep="shortest").clusters[0].representative == 2
    assert find_duplicates(docs, config=cfg).clusters[0].representative == 0
    with pytest.raises(InvalidConfig):
        find_duplicates(docs, config=cfg, keep="random")


def test_estimate_verification_is_labelled() -> None:
    texts = _planted(200, 100)
    r = find_duplicates(texts, config=Config(verify="estimate"))
    near = [e for e in r.edges if e.method != "identical"]
    assert near and all(e.method == "estimate" and e.jaccard is None for e in near)


def test_memory_limit_checked_before_allocating() -> None:
    cfg, limit = Config(), 64 << 20
    per = cfg.estimated_memory_per_document(avg_bytes=1000)
    assert per > 4 * cfg.num_perm
    assert Config().max_documents_in_memory(avg_bytes=300) > 1_000_000
    assert cfg.max_documents_in_memory(limit, avg_bytes=1000) == (limit - SCRATCH_BYTES) // per
    with pytest.raises(MemoryLimitExceeded, match="fix:"):
        find_duplicates(["word " * 200] * 20_000, config=cfg, memory_limit=limit)
    same = find_duplicates(["a b c d e f"] * 10, config=cfg, memory_limit=limit)
    assert same.stats["exact_duplicates"] == 9


def test_keyed_scheme_end_to_end() -> None:
    texts = _planted(300, 200)
    key = HashKey.derive(b"s" * 32, "tenant-1")
    cfg = Config(hash_algorithm="siphash24")
    keyed = find_duplicates(texts, config=cfg, key=key)
    plain = find_duplicates(texts, config=Config())
    assert keyed.stats["scheme"]["key_id"] == "tenant-1/v1"
    assert keyed.stats["scheme"]["seed"] is None
    # Different hash functions, same verified truth on clear cases: the clusters agree
    # except possibly at pairs right at the threshold.
    a = {c.members for c in keyed.clusters}
    b = {c.members for c in plain.clusters}
    assert len(a & b) >= 0.9 * max(len(a), len(b))


_DETERMINISM = """
import json, sys
from neardup import Config, find_duplicates
from neardup.testing import plant_near_duplicates, synthetic_documents
base = synthetic_documents(300, seed=9, words=80)
texts, _ = plant_near_duplicates(base, copies=200, edit_rate=[0.01, 0.03], seed=10)
r = find_duplicates(texts, config=Config(threshold=0.8))
sys.stdout.write(json.dumps([c.to_dict() for c in r.clusters], sort_keys=True))
"""


@pytest.mark.slow
def test_same_input_same_bytes_across_processes_and_threads() -> None:
    outs = []
    for threads in ("1", "2", "2"):
        env = {**os.environ, "NUMBA_NUM_THREADS": threads}
        outs.append(
            subprocess.run(
                [sys.executable, "-c", _DETERMINISM],
                capture_output=True,
                text=True,
                check=True,
                env=env,
            ).stdout
        )
    assert outs[0] == outs[1] == outs[2]
    assert len(json.loads(outs[0])) > 10


@pytest.mark.slow
def test_progress_reports_every_stage_and_band_rounds_are_equivalent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import neardup.batch.pipeline as P

    texts = _planted(300, 200)
    seen: list[tuple[str, int, int]] = []
    r = find_duplicates(texts, config=Config(), progress=lambda *a: seen.append(a))
    assert {"shingle_hash", "candidates_verify"} <= {s for s, _, _ in seen}
    assert seen[-1] == ("candidates_verify", r.stats["bands"], r.stats["bands"])
    assert r.stats["candidate_pairs"] > 0
    # One band per round (as for a huge corpus) gives exactly the same result.
    monkeypatch.setattr(P, "_BAND_ROUND_BYTES", 1)
    rounds: list[tuple[str, int, int]] = []
    again = find_duplicates(texts, config=Config(), progress=lambda *a: rounds.append(a))
    assert [x for x in rounds if x[0] == "candidates_verify"] == [
        ("candidates_verify", i + 1, r.stats["bands"]) for i in range(r.stats["bands"])
    ]
    assert [e.to_dict() for e in again.edges] == [e.to_dict() for e in r.edges]
    assert again.stats["candidate_pairs"] == r.stats["candidate_pairs"]

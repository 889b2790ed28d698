"""Recall and precision of the LSH pipeline measured against the exact join.

:func:`evaluate` runs :func:`~neardup.find_duplicates` with every verified edge
recorded and the exact AllPairs join on the same shingle sets, and reports pair
recall and precision at the threshold, by similarity bucket, next to the recall the
S-curve predicts for that bucket.  Pairs between exact-content copies are counted
as found (the exact stage joins them); the pairs compared are among the
documents that reach the near-duplicate stage.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from neardup.batch.pipeline import find_duplicates
from neardup.core.config import DEFAULT_MEMORY_LIMIT, Config
from neardup.sketch.lsh import candidate_probability
from neardup.verify.oracle import allpairs_join

__all__ = ["evaluate"]


def evaluate(
    texts: Sequence[str],
    *,
    config: Config | None = None,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
) -> dict[str, Any]:
    """Pair recall/precision of LSH + exact verification against the exact join
    (``memory_limit`` as for :func:`neardup.find_duplicates`)."""
    cfg = config or Config()
    res = find_duplicates(texts, config=cfg, edges="all", memory_limit=memory_limit)
    if res.sets is None:  # pragma: no cover - find_duplicates always returns sets
        raise RuntimeError("no sets")
    truth = allpairs_join(res.sets, cfg.threshold)
    label = res.duplicate_of.copy()
    roots = np.flatnonzero(label < 0)
    label[roots] = roots
    found_edges = res.near_pairs()
    same_cluster = label[truth.a] == label[truth.b]
    direct = np.array(
        [(int(a), int(b)) in found_edges for a, b in zip(truth.a, truth.b, strict=True)], dtype=bool
    )
    copies = {e.b for e in res.edges if e.method == "identical"}
    involved = np.array(
        [int(a) in copies or int(b) in copies for a, b in zip(truth.a, truth.b, strict=True)],
        dtype=bool,
    )
    found = direct | (involved & same_cluster)
    truth_set = truth.pairs()
    false = [p for p in found_edges if p not in truth_set]
    bands, rows = cfg.layout
    edges_b = [cfg.threshold + i * (1 - cfg.threshold) / 4 for i in range(5)]
    buckets = []
    j = truth.jaccard
    for lo, hi in itertools.pairwise(edges_b):
        m = (j >= lo) & ((j < hi) if hi < 1 else (j <= 1.0))
        pairs = int(m.sum())
        hit = int(found[m].sum())
        mid = (lo + hi) / 2
        buckets.append(
            {
                "bucket": f"[{lo:.3f},{hi:.3f}{')' if hi < 1 else ']'}",
                "pairs": pairs,
                "found": hit,
                "recall": hit / pairs if pairs else 1.0,
                "predicted": candidate_probability(mid, bands, rows),
            }
        )
    return {
        "documents": len(texts),
        "threshold": cfg.threshold,
        "truth_pairs": len(truth),
        "found_pairs": int(found.sum()),
        "recall": float(found.mean()) if len(truth) else 1.0,
        "precision": 1.0 - len(false) / len(found_edges) if found_edges else 1.0,
        "false_edges": len(false),
        "candidate_pairs": res.stats["candidate_pairs"],
        "verified_pairs": res.stats["verified_pairs"],
        "candidate_overflow": res.stats["candidate_overflow"],
        "buckets": buckets,
        "config_fingerprint": cfg.fingerprint,
    }

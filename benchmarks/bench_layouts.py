"""One band layout tuned for 0.5 vs two layouts (0.5 and 0.9) in one LSHIndex.

Corpus (generated, exact similarities by construction): ``--families`` families of
shingle-hash sets of 200 hashes each.  The index holds every family's anchor and
four relatives at exact Jaccard 0.4, 0.4, 0.3 and 0.3 with the anchor (the
"related but not near" mass that costs candidates); the queries are each family's
planted copies of the anchor at exact Jaccard 0.95 and 0.6, never inserted.

Indexes (128-row MinHash signatures, seed 42, ``LSHIndex`` with
``max_candidates`` high enough to cut nothing):

* ``one_layout``: ``ranges={"related": 0.5}`` — the layout ``default_layout(0.5)``;
  near queries (threshold 0.9) use it too and verify at 0.9;
* ``two_layouts``: ``ranges={"related": 0.5, "near": 0.9}``; near queries use the
  0.9 layout.

Measured per index and query kind: recall (the anchor among the candidates),
candidates per query (mean, p50, p99), verified matches at the kind's threshold,
µs per query (candidates + exact verification; wall time, so only as good as the
machine is quiet: no ratio of it is taken); and memory per stored item: the
layouts' band keys as a compact store holds them (8 bytes per band), the bucket
tables as this process holds them (``LSHIndex.stats().ranges[*].table_bytes``),
and the signature (4 bytes per row), which both indexes hold once.

Usage::

    python benchmarks/bench_layouts.py            # 1000 families: 5000 items, 2000 queries
    python benchmarks/bench_layouts.py --quick    # smoke test
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import NUM_PERM, SEED, finish, machine_info, run_in_snapshot, write_json

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "layouts.json"
SET_SIZE = 200
RELATIVES = (0.4, 0.4, 0.3, 0.3)
QUERIES = {"near": 0.95, "related": 0.6}
THRESHOLDS = {"near": 0.9, "related": 0.5}
CORPUS_SEED = 20261207


def relative(anchor: np.ndarray, s: float, rng: np.random.Generator) -> np.ndarray:
    """A set of ``len(anchor)`` hashes with exact Jaccard ``s`` to ``anchor``:
    keep i anchor hashes and add n - i new ones, i / (2n - i) = s."""
    n = anchor.size
    keep = round(2 * n * s / (1 + s))
    kept = rng.choice(anchor, size=keep, replace=False)
    fresh = rng.integers(0, 2**63, size=n - keep, dtype=np.int64).astype(np.uint64)
    return np.unique(np.concatenate([kept, fresh]))


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    inter = np.intersect1d(a, b, assume_unique=True).size
    return inter / (a.size + b.size - inter)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--families", type=int, default=1000)
    p.add_argument("--quick", action="store_true", help="100 families, in place")
    p.add_argument("--no-snapshot", action="store_true")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if not (a.no_snapshot or a.quick):
        rc = run_in_snapshot(__file__, sys.argv[1:] if argv is None else argv)
        if rc is not None:
            return rc
    from neardup import Config, LSHIndex, MinHasher

    families = 100 if a.quick else a.families
    machine = machine_info()
    rng = np.random.default_rng(CORPUS_SEED)
    mh = MinHasher(Config(threshold=0.9, num_perm=NUM_PERM, seed=SEED))
    stored: list[tuple[str, np.ndarray]] = []
    queries: dict[str, list[tuple[str, np.ndarray]]] = {k: [] for k in QUERIES}
    exact: dict[str, list[float]] = {k: [] for k in QUERIES}
    for f in range(families):
        anchor = np.unique(rng.integers(0, 2**63, size=SET_SIZE, dtype=np.int64).astype(np.uint64))
        stored.append((f"a{f}", anchor))
        stored += [(f"r{f}-{i}", relative(anchor, s, rng)) for i, s in enumerate(RELATIVES)]
        for kind, s in QUERIES.items():
            q = relative(anchor, s, rng)
            queries[kind].append((f"a{f}", q))
            exact[kind].append(jaccard(anchor, q))
    sigs = {key: mh.from_hashes(h) for key, h in stored}
    qsigs = {kind: [mh.from_hashes(h) for _, h in qs] for kind, qs in queries.items()}
    print(f"{len(stored)} stored items, {families} queries of each kind", file=sys.stderr)

    # Warm-up outside any timing: a snapshot has no numba cache yet.
    warm = LSHIndex(mh.scheme, ranges={"related": 0.5, "near": 0.9})
    for key, h in stored[:5]:
        warm.insert(key, sigs[key], h)
        warm.query_verified(sigs[key], h, range="near")

    setups = {
        "one_layout": ({"related": 0.5}, {"near": "related", "related": "related"}),
        "two_layouts": ({"related": 0.5, "near": 0.9}, {"near": "near", "related": "related"}),
    }
    results: dict[str, Any] = {}
    for name, (ranges, use) in setups.items():
        index = LSHIndex(mh.scheme, ranges=ranges, max_candidates=1 << 30)
        t0 = time.perf_counter()
        for key, h in stored:
            index.insert(key, sigs[key], h)
        t_build = time.perf_counter() - t0
        st = index.stats()
        n = st.documents
        out: dict[str, Any] = {
            "ranges": [
                {"name": r.name, "threshold": r.threshold, "bands": r.bands, "rows": r.rows}
                for r in index.ranges
            ],
            "build_s": round(t_build, 3),
            "memory_per_item": {
                "signature_bytes": 4 * NUM_PERM,
                "band_key_bytes": sum(r.band_key_bytes for r in st.ranges) / n,
                "table_bytes": round(sum(r.table_bytes for r in st.ranges) / n, 1),
                "table_bytes_by_range": {r.name: round(r.table_bytes / n, 1) for r in st.ranges},
            },
            "queries": {},
        }
        for kind in QUERIES:
            rng_name = use[kind]
            counts, found, matches = [], 0, 0
            t0 = time.perf_counter()
            for (anchor_key, h), sig in zip(queries[kind], qsigs[kind], strict=True):
                cands = index.query(sig, range=rng_name)
                counts.append(len(cands))
                found += anchor_key in cands
                verified = index.query_verified(sig, h, range=rng_name)
                matches += sum(e.jaccard is not None and e.jaccard >= THRESHOLDS[kind]
                               for _, e in verified)
            elapsed = time.perf_counter() - t0
            c = np.array(counts)
            out["queries"][kind] = {
                "threshold": THRESHOLDS[kind],
                "layout_used": rng_name,
                "planted_jaccard_min": round(min(exact[kind]), 4),
                "recall": found / families,
                "candidates_mean": round(float(c.mean()), 3),
                "candidates_p50": float(np.percentile(c, 50)),
                "candidates_p99": float(np.percentile(c, 99)),
                "matches_at_threshold_per_query": round(matches / families, 3),
                "us_per_query": round(1e6 * elapsed / families, 1),
            }
        results[name] = out
        print(name, out, file=sys.stderr)

    one, two = results["one_layout"], results["two_layouts"]
    data: dict[str, Any] = {
        "machine": machine,
        "families": families,
        "stored_items": len(stored),
        "relatives_jaccard": list(RELATIVES),
        "query_jaccard": QUERIES,
        "num_perm": NUM_PERM,
        "results": results,
        "ratios_two_over_one": {
            "table_bytes_per_item": round(
                two["memory_per_item"]["table_bytes"] / one["memory_per_item"]["table_bytes"], 3
            ),
            "near_candidates_mean": round(
                two["queries"]["near"]["candidates_mean"]
                / one["queries"]["near"]["candidates_mean"],
                3,
            ),
        },
    }
    finish(data, machine["neardup_source_at_start"])
    write_json(a.out, data)
    print(f"wrote {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

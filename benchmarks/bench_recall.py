"""Pair recall and precision at the threshold on real text: neardup vs peers' defaults.

Corpus: 3000 paragraphs of the Python standard library's sources plus 1500 planted
near duplicates (copies edited at word rates 1-8 %).  Ground truth is the exact
Jaccard self-join at t = 0.8:

* ``truth_neardup``: :func:`neardup.verify.oracle.allpairs_join` over neardup's word-5-gram
  shingle-hash sets (what neardup promises to find);
* ``truth_python``: an exact prefix-filter self-join over Python ``set``\\ s of the
  shingle strings the peers are fed.  The two truths are compared (they differ
  only by NFKC/whitespace normalization and 64-bit hash collisions).

Each method is scored against the truth of its own shingle scheme (neardup against
``truth_neardup``, peers against ``truth_python``; the other truth is reported too):

* recall of pairs with J >= 0.85 and with J in [0.8, 0.85), counting a truth pair
  as found when it is a reported pair ("direct") or when both documents end up in
  one connected component of the reported pairs ("same cluster": for neardup the
  clusters it returns, for the peers a union-find over the pairs they accept);
* precision: the fraction of reported pairs whose true J >= 0.8.

Methods: neardup ``find_duplicates`` (MinHash and OPH; exact verification),
datasketch ``MinHashLSH(threshold=0.8, num_perm=128)`` (its default layout) with
(a) the usual estimate check ``m1.jaccard(m2) >= 0.8``, (b) candidates only and
(c) candidates verified exactly; rensa ``RMinHashLSH(threshold=0.8, num_perm=128,
num_bands=B)`` (``num_bands`` has no default: B = 8 as in rensa's own benchmarks
and B = 16) with the same three acceptance rules.

Usage::

    python benchmarks/bench_recall.py            # 3000 + 1500 docs
    python benchmarks/bench_recall.py --quick    # smoke test
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
from _common import (
    NUM_PERM,
    SEED,
    machine_info,
    py_shingles,
    run_in_snapshot,
    write_results,
)

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "recall.json"
THRESHOLD = 0.8
HIGH = 0.85
EDIT_RATES = [0.01, 0.02, 0.03, 0.05, 0.08]
PLANT_SEED = 7

Pair = tuple[int, int]


# --------------------------------------------------------------------------- truth


def python_truth(sets: list[frozenset[str]], t: float) -> dict[Pair, float]:
    """Exact Jaccard self-join (all pairs with J >= t) by prefix filtering."""
    df = Counter(tok for s in sets for tok in s)
    rank = {tok: i for i, tok in enumerate(sorted(df, key=lambda x: (df[x], x)))}
    index: dict[int, list[int]] = defaultdict(list)
    out: dict[Pair, float] = {}
    for i, s in enumerate(sets):
        if not s:
            continue
        toks = sorted(rank[x] for x in s)
        prefix = toks[: len(s) - math.ceil(t * len(s) - 1e-9) + 1]
        cands: set[int] = set()
        for tok in prefix:
            cands.update(index[tok])
        for j in cands:
            o = sets[j]
            if not (t * len(s) <= len(o) + 1e-9 and t * len(o) <= len(s) + 1e-9):
                continue
            inter = len(s & o)
            jac = inter / (len(s) + len(o) - inter)
            if jac >= t:
                out[(j, i)] = jac
        for tok in prefix:
            index[tok].append(i)
    return out


def python_jaccard(sets: list[frozenset[str]], a: int, b: int) -> float:
    x, y = sets[a], sets[b]
    if not x and not y:
        return 0.0
    inter = len(x & y)
    return inter / (len(x) + len(y) - inter)


def compare_truths(nd: dict[Pair, float], py: dict[Pair, float]) -> dict[str, Any]:
    both = nd.keys() & py.keys()
    diffs = [abs(nd[p] - py[p]) for p in both]
    return {
        "pairs_truth_neardup": len(nd),
        "pairs_truth_python": len(py),
        "pairs_in_both": len(both),
        "only_in_neardup_truth": len(nd.keys() - py.keys()),
        "only_in_python_truth": len(py.keys() - nd.keys()),
        "agreement_jaccard_of_pair_sets": round(len(both) / len(nd.keys() | py.keys()), 6)
        if nd or py else 1.0,
        "max_abs_jaccard_diff_on_common_pairs": round(max(diffs), 6) if diffs else 0.0,
        "common_pairs_with_different_jaccard": sum(d > 1e-12 for d in diffs),
    }


# --------------------------------------------------------------------------- scoring


def components(n: int, pairs: Iterable[Pair]) -> np.ndarray:
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return np.array([find(i) for i in range(n)], dtype=np.int64)


def score(
    reported: set[Pair],
    truth: dict[Pair, float],
    true_j: Callable[[int, int], float],
    n: int,
    comp: np.ndarray | None = None,
) -> dict[str, Any]:
    """Recall by J bin (direct pair / same component) and precision of ``reported``."""
    if comp is None:
        comp = components(n, reported)
    out: dict[str, Any] = {"reported_pairs": len(reported)}
    bins = {
        "j_ge_0.85": [p for p, j in truth.items() if j >= HIGH],
        "j_0.80_0.85": [p for p, j in truth.items() if THRESHOLD <= j < HIGH],
        "all_j_ge_0.80": list(truth),
    }
    for name, ps in bins.items():
        direct = sum(p in reported for p in ps)
        same = sum(comp[a] == comp[b] for a, b in ps)
        out[f"truth_pairs_{name}"] = len(ps)
        out[f"recall_direct_{name}"] = round(direct / len(ps), 6) if ps else None
        out[f"recall_same_cluster_{name}"] = round(same / len(ps), 6) if ps else None
        out[f"missed_direct_{name}"] = len(ps) - direct
    fp = [p for p in reported if p not in truth]
    # A reported pair that is not a truth pair has J < t (truth lists every pair >= t);
    # its J is recomputed to report how far below the threshold the false positives are.
    fp_j = [true_j(a, b) for a, b in fp]
    out["false_positive_pairs"] = len(fp)
    out["precision"] = round(1 - len(fp) / len(reported), 6) if reported else None
    out["false_positive_min_true_j"] = round(min(fp_j), 6) if fp_j else None
    out["false_positive_mean_true_j"] = round(float(np.mean(fp_j)), 6) if fp_j else None
    return out


def same_cluster_pair_stats(comp: np.ndarray, truth: dict[Pair, float], cap: int) -> dict[str, Any]:
    """How many pairs inside the clusters have J < t (transitive closure), up to ``cap``."""
    groups: dict[int, list[int]] = defaultdict(list)
    for i, c in enumerate(comp.tolist()):
        groups[c].append(i)
    n_pairs = sum(len(g) * (len(g) - 1) // 2 for g in groups.values())
    below = sum(
        (a, b) not in truth
        for g in groups.values() if len(g) > 1
        for x, a in enumerate(g) for b in g[x + 1 :]
    ) if n_pairs <= cap else None
    return {
        "same_cluster_pairs": n_pairs,
        "same_cluster_pairs_below_threshold": below,
        "largest_cluster": max((len(g) for g in groups.values()), default=0),
    }


# --------------------------------------------------------------------------- methods


def run_neardup(
    texts: list[str], signature: str
) -> tuple[dict[str, Any], set[Pair], set[Pair], np.ndarray]:
    from neardup import Config, ShingleSpec, find_duplicates

    cfg = Config(threshold=THRESHOLD, shingle=ShingleSpec(kind="word", k=5), num_perm=NUM_PERM,
                 seed=SEED, signature=signature)  # type: ignore[arg-type]
    find_duplicates(texts[:20], config=cfg, edges="all")  # warm-up (numba cache)
    t0 = time.perf_counter()
    res = find_duplicates(texts, config=cfg, edges="all")
    wall = time.perf_counter() - t0
    edges = res.edges
    direct = {(e.a, e.b) for e in edges}
    # Exact-content copies are collapsed before the near-duplicate search; a verified
    # edge between two group leaders stands for every pair across their groups (the
    # shingle sets are identical), so the "expanded" set spells those pairs out.
    ident = components(len(texts), ((e.a, e.b) for e in edges if e.method == "identical"))
    groups: dict[int, list[int]] = defaultdict(list)
    for i, g in enumerate(ident.tolist()):
        groups[g].append(i)
    expanded = set(direct)
    for g in groups.values():
        expanded.update((x, y) for k, x in enumerate(g) for y in g[k + 1 :])
    for e in edges:
        if e.method != "identical":
            for x in groups[int(ident[e.a])]:
                for y in groups[int(ident[e.b])]:
                    expanded.add((min(x, y), max(x, y)))
    comp = np.arange(len(texts), dtype=np.int64)
    for c in res.clusters:
        for m in c.members:
            comp[m] = c.representative
    # duplicate_of and clusters must tell the same story.
    consistent = all(
        (res.duplicate_of[m] == -1) == (m == c.representative)
        for c in res.clusters for m in c.members
    )
    st = res.stats
    info = {
        "api": f"find_duplicates(texts, config=Config(threshold=0.8, word:5, num_perm=128, "
               f"signature={signature!r}), edges='all')",
        "layout_bands_rows": [st["bands"], st["rows"]],
        "predicted_candidate_probability_at_t": round(st["predicted_recall_at_threshold"], 6),
        "candidate_pairs": st["candidate_pairs"],
        "verified_pairs": st["verified_pairs"],
        "candidate_overflow": st["candidate_overflow"],
        "near_edges": len(res.near_pairs()),
        "identical_edges": sum(e.method == "identical" for e in edges),
        "exact_duplicates_stat": st["exact_duplicates"],
        "clusters": st["clusters"],
        "duplicate_of_consistent_with_clusters": bool(consistent),
        "time_s": round(wall, 4),
        "timings_s": st["timings_s"],
    }
    info["_cfg"] = cfg
    return info, direct, expanded, comp


def explain_misses(
    cfg: Any, sets: Any, truth: dict[Pair, float], comp: np.ndarray, limit: int = 20
) -> list[dict[str, Any]]:
    """Truth pairs that neardup left in different clusters: score, agreement, band hits."""
    from neardup import MinHasher, candidate_probability

    missed = [p for p in truth if comp[p[0]] != comp[p[1]]][:limit]
    if not missed:
        return []
    sig = MinHasher(cfg).from_sets(sets).matrix
    bands, rows = cfg.layout
    out = []
    for x, y in missed:
        agree = sig[x] == sig[y]
        hits = sum(bool(agree[i * rows : (i + 1) * rows].all()) for i in range(bands))
        out.append({
            "a": x, "b": y, "jaccard": round(truth[(x, y)], 6),
            "signature_agreement": round(float(agree.mean()), 6), "band_collisions": hits,
            "candidate_probability_at_j": round(
                candidate_probability(truth[(x, y)], bands, rows), 6
            ),
        })
    return out


def run_datasketch(
    shingle_lists: list[list[str]], exact: Callable[[int, int], float]
) -> tuple[dict[str, Any], dict[str, set[Pair]]]:
    import datasketch

    t0 = time.perf_counter()
    mhs = datasketch.MinHash.bulk(
        [[s.encode("utf-8") for s in sh] for sh in shingle_lists], num_perm=NUM_PERM, seed=SEED
    )
    t_sig = time.perf_counter() - t0
    t1 = time.perf_counter()
    lsh = datasketch.MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM)
    with lsh.insertion_session() as session:
        for i, m in enumerate(mhs):
            session.insert(i, m)
    cand: set[Pair] = set()
    for i, m in enumerate(mhs):
        for j in lsh.query(m):
            if j != i:
                cand.add((min(i, j), max(i, j)))
    t_lsh = time.perf_counter() - t1
    t2 = time.perf_counter()
    est = {p for p in cand if mhs[p[0]].jaccard(mhs[p[1]]) >= THRESHOLD}
    t_est = time.perf_counter() - t2
    t3 = time.perf_counter()
    ver = {p for p in cand if exact(*p) >= THRESHOLD}
    t_ver = time.perf_counter() - t3
    b, r = lsh.b, lsh.r
    info = {
        "api": "MinHash.bulk(..., num_perm=128, seed=42); MinHashLSH(threshold=0.8, num_perm=128)",
        "layout_bands_rows": [b, r],
        "predicted_candidate_probability_at_t": round(1 - (1 - THRESHOLD**r) ** b, 6),
        "candidate_pairs": len(cand),
        "time_signatures_s": round(t_sig, 4),
        "time_index_query_s": round(t_lsh, 4),
        "time_estimate_check_s": round(t_est, 4),
        "time_exact_check_s": round(t_ver, 4),
    }
    return info, {"estimate": est, "candidates": cand, "exact_verify": ver}


def run_rensa(
    shingle_lists: list[list[str]], exact: Callable[[int, int], float], num_bands: int
) -> tuple[dict[str, Any], dict[str, set[Pair]]]:
    import rensa

    t0 = time.perf_counter()
    mhs = rensa.RMinHash.from_token_sets(shingle_lists, NUM_PERM, SEED)
    t_sig = time.perf_counter() - t0
    t1 = time.perf_counter()
    lsh = rensa.RMinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM, num_bands=num_bands)
    for i, m in enumerate(mhs):
        lsh.insert(i, m)
    cand: set[Pair] = set()
    for i, m in enumerate(mhs):
        for j in lsh.query(m):
            if j != i:
                cand.add((min(i, j), max(i, j)))
    t_lsh = time.perf_counter() - t1
    t2 = time.perf_counter()
    est = {p for p in cand if mhs[p[0]].jaccard(mhs[p[1]]) >= THRESHOLD}
    t_est = time.perf_counter() - t2
    t3 = time.perf_counter()
    ver = {p for p in cand if exact(*p) >= THRESHOLD}
    t_ver = time.perf_counter() - t3
    r = NUM_PERM // num_bands
    info = {
        "api": f"RMinHash.from_token_sets(..., 128, 42); RMinHashLSH(threshold=0.8, "
               f"num_perm=128, num_bands={num_bands}); insert + query",
        "layout_bands_rows": [num_bands, r],
        "predicted_candidate_probability_at_t": round(1 - (1 - THRESHOLD**r) ** num_bands, 6),
        "candidate_pairs": len(cand),
        "time_signatures_s": round(t_sig, 4),
        "time_index_query_s": round(t_lsh, 4),
        "time_estimate_check_s": round(t_est, 4),
        "time_exact_check_s": round(t_ver, 4),
    }
    return info, {"estimate": est, "candidates": cand, "exact_verify": ver}


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", type=int, default=3000, help="stdlib paragraphs (default 3000)")
    p.add_argument("--copies", type=int, default=1500, help="planted copies (default 1500)")
    p.add_argument(
        "--no-snapshot", action="store_true",
        help="measure the installed neardup in place (default: a frozen copy of its source;"
        " --quick implies this)",
    )
    p.add_argument("--quick", action="store_true", help="tiny corpus for a CI smoke test")
    p.add_argument("--cluster-pair-cap", type=int, default=2_000_000,
                   help="skip counting below-threshold same-cluster pairs past this many pairs")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help=f"JSON output (default {DEFAULT_OUT})")
    a = p.parse_args(argv)
    if a.quick:
        a.base, a.copies = min(a.base, 300), min(a.copies, 150)
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    rc = run_in_snapshot(
        __file__, argv, skip=bool(a.no_snapshot or a.quick or getattr(a, "worker", None))
    )
    if rc is not None:
        return rc
    import neardup
    import neardup.testing
    from neardup import Config, ShingleSpec
    from neardup.text.hashing import hash_documents
    from neardup.verify.oracle import allpairs_join

    t_start = time.perf_counter()
    base = neardup.testing.stdlib_paragraphs(limit=a.base)
    texts, parents = neardup.testing.plant_near_duplicates(
        base, copies=a.copies, edit_rate=EDIT_RATES, seed=PLANT_SEED
    )
    n = len(texts)
    print(f"{n} docs ({len(base)} base + {n - len(base)} planted)", file=sys.stderr, flush=True)

    # Truths.
    cfg = Config(threshold=THRESHOLD, shingle=ShingleSpec(kind="word", k=5))
    allpairs_join(hash_documents(texts[:20], cfg), THRESHOLD)  # warm-up (numba cache)
    t0 = time.perf_counter()
    sets = hash_documents(texts, cfg)
    tj = allpairs_join(sets, THRESHOLD)
    t_truth_nd = time.perf_counter() - t0
    truth_nd = {
        (int(x), int(y)): float(j) for x, y, j in zip(tj.a, tj.b, tj.jaccard, strict=True)
    }
    t_sh = time.perf_counter()
    lists = [py_shingles(t) for t in texts]
    t_shingles = time.perf_counter() - t_sh
    psets = [frozenset(s) for s in lists]
    t1 = time.perf_counter()
    truth_py = python_truth(psets, THRESHOLD)
    t_truth_py = time.perf_counter() - t1

    def nd_j(x: int, y: int) -> float:
        return sets.jaccard(x, y)

    def py_j(x: int, y: int) -> float:
        return python_jaccard(psets, x, y)

    own_truth = {"neardup": (truth_nd, nd_j), "python": (truth_py, py_j)}
    planted = sum(1 for p in parents if p >= 0)
    planted_found = sum(
        (p, i) in truth_nd for i, p in enumerate(parents) if p >= 0
    )

    results: dict[str, Any] = {
        "benchmark": "recall",
        "machine": machine_info(),
        "params": {
            "threshold": THRESHOLD,
            "high_bin": HIGH,
            "num_perm": NUM_PERM,
            "seed": SEED,
            "shingles": "word 5-grams",
            "base_docs": len(base),
            "planted_copies": a.copies,
            "edit_rates": EDIT_RATES,
            "plant_seed": PLANT_SEED,
            "quick": a.quick,
        },
        "corpus": {
            "n_docs": n,
            "bytes": sum(len(t.encode("utf-8")) for t in texts),
            "empty_docs_neardup": int(np.count_nonzero(sets.raw_counts == 0)),
            "empty_docs_python": sum(not s for s in psets),
            "planted_pairs": planted,
            "planted_pairs_with_true_j_ge_t": planted_found,
            "time_python_shingles_s": round(t_shingles, 4),
        },
        "truth": {
            **compare_truths(truth_nd, truth_py),
            "time_neardup_allpairs_join_s": round(t_truth_nd, 4),
            "time_python_prefix_join_s": round(t_truth_py, 4),
            "pairs_j_ge_0.85_neardup": sum(j >= HIGH for j in truth_nd.values()),
            "pairs_j_0.80_0.85_neardup": sum(j < HIGH for j in truth_nd.values()),
        },
        "methods": {},
    }

    def record(name: str, info: dict[str, Any], reported: set[Pair], scheme: str,
               comp: np.ndarray | None = None, expanded: set[Pair] | None = None) -> None:
        own, other = scheme, "python" if scheme == "neardup" else "neardup"
        truth, jf = own_truth[own]
        comp = components(n, reported) if comp is None else comp
        entry = {
            **info,
            "truth_scheme": own,
            **score(reported, truth, jf, n, comp),
            **same_cluster_pair_stats(comp, truth, a.cluster_pair_cap),
            "vs_other_truth": {"truth_scheme": other,
                               **score(reported, own_truth[other][0], own_truth[other][1], n,
                                       comp)},
        }
        if expanded is not None:
            ex = score(expanded, truth, jf, n, comp)
            entry["expanded_over_identical"] = {
                k: v for k, v in ex.items()
                if k.startswith(("recall_direct", "missed_direct", "precision", "reported"))
            }
        results["methods"][name] = entry
        print(f"  {name:26s} recall direct/cluster  J>=.85 {entry['recall_direct_j_ge_0.85']}"
              f"/{entry['recall_same_cluster_j_ge_0.85']}  [.80,.85) "
              f"{entry['recall_direct_j_0.80_0.85']}/{entry['recall_same_cluster_j_0.80_0.85']}"
              f"  precision {entry['precision']}", file=sys.stderr, flush=True)

    for sig in ("minhash", "oph"):
        info, direct, expanded, comp = run_neardup(texts, sig)
        ncfg = info.pop("_cfg")
        info["missed_pairs_same_cluster"] = explain_misses(ncfg, sets, truth_nd, comp)
        record(f"neardup_{sig}", info, direct, "neardup", comp, expanded)

    info, acc = run_datasketch(lists, py_j)
    for rule, pairs in acc.items():
        record(f"datasketch_{rule}", {**info, "accept": rule}, pairs, "python")
    for bands in (8, 16):
        info, acc = run_rensa(lists, py_j, bands)
        for rule, pairs in acc.items():
            record(f"rensa_b{bands}_{rule}", {**info, "accept": rule}, pairs, "python")

    write_results(a.out, results, t_start)
    return 0


if __name__ == "__main__":
    sys.exit(main())

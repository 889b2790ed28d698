"""Vector dedup at scale: neardup (random hyperplanes + bands + exact cosine) vs FAISS.

Corpus (generated, not committed): ``n`` vectors of dimension ``d`` drawn from an
anisotropic Gaussian (a random rotation of a decaying spectrum, so unrelated
vectors have a realistic spread of cosines rather than the ±0.05 of isotropic
noise), plus planted near duplicates at **known exact cosines**: copy =
c·x̂ + sqrt(1 − c²)·ẑ with ẑ ⟂ x̂, for c in ``PLANTED_COSINES`` (some below the
threshold, as negatives), and triples whose members are mutually ≈ 0.95² apart.

Methods, same vectors, same run, threshold t (default 0.9), each timed end to end
(signatures + index + candidates + exact cosine verification, single process):

* ``neardup``: :func:`neardup.find_vector_duplicates` with its default layout
  (chosen for recall 0.995 at t and ~10 far candidates per item);
* ``faiss_lsh_<bits>``: ``faiss.IndexLSH(d, bits)`` (random rotation + sign bits,
  the same family), ``add`` all vectors, ``search`` every vector for its ``k``
  nearest codes by Hamming distance (IndexLSH scans all codes: brute force over
  bits), then the exact cosine of every returned pair, kept when >= t.  With
  ``--faiss-queries Q`` < n only Q queries are searched and the search time is
  scaled by n / Q (the scan costs the same for every query; marked
  ``extrapolated``);
* ``faiss_multihash``: ``faiss.IndexBinaryMultiHash`` forced onto neardup's layout;
* ``faiss_ivf``: FAISS's own setting for threshold dedup, ``IndexIVFFlat`` with
  inner product on L2-normalized vectors (nlist = 4·sqrt(n), k-means on a sample),
  ``range_search`` at radius t of the recall sample plus random others
  (``--ivf-queries``, default 50,000; search and verify times scaled to all n, marked
  ``extrapolated``), exact cosine of the returned pairs; ``nprobe`` is the smallest of a sweep whose
  recall on the sample reaches neardup's target 0.995 (the largest when none does).

Recall is measured against exact brute-force cosine search (``faiss.IndexFlatIP``
range search over normalized vectors) for a sample of query vectors: a truth pair
(q, j) with cos >= t is found by neardup when q and j end up in one cluster (the
dedup outcome) and by FAISS when j is among q's verified neighbours.  Precision of
both is 1 by construction (every reported pair was re-scored exactly); the script
checks neardup's edges against a float64 recomputation.

Usage::

    python benchmarks/bench_vectors.py                   # 1,000,000 x 384
    python benchmarks/bench_vectors.py --quick           # smoke test
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import machine_info, neardup_source, run_in_snapshot, write_results

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "vectors.json"
PLANTED_COSINES = (0.80, 0.85, 0.88, 0.90, 0.92, 0.95, 0.98)
SEED = 20261203


def make_corpus(
    n: int, d: int, planted_frac: float, seed: int
) -> tuple[np.ndarray, dict[str, Any]]:
    """Vectors (float32) and what was planted (pairs with their exact cosine)."""
    rng = np.random.default_rng(seed)
    spectrum = (1.0 / np.sqrt(1.0 + np.arange(d) / 8.0)).astype(np.float32)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    rot = (spectrum[:, None] * q.T).astype(np.float32)
    X = np.empty((n, d), dtype=np.float32)
    step = 65536
    for s in range(0, n, step):
        e = min(n, s + step)
        X[s:e] = rng.standard_normal((e - s, d), dtype=np.float32) @ rot
    n_planted = int(n * planted_frac)
    n_triple = n_planted // 10  # items that are the 2nd/3rd copy of a triple
    n_pair = n_planted - n_triple
    base_idx = rng.choice(n - n_planted, size=n_pair + (n_triple + 1) // 2, replace=False)
    slots = np.arange(n - n_planted, n)
    cos = np.empty(n_planted)
    parent = np.empty(n_planted, dtype=np.int64)
    cos[:n_pair] = rng.choice(PLANTED_COSINES, size=n_pair)
    parent[:n_pair] = base_idx[:n_pair]
    tri_base = base_idx[n_pair:]
    cos[n_pair:] = 0.95
    parent[n_pair:] = np.repeat(tri_base, 2)[:n_triple]
    for s in range(0, n_planted, step):
        e = min(n_planted, s + step)
        x = X[parent[s:e]].astype(np.float64)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        z = rng.standard_normal(x.shape) @ rot.astype(np.float64)
        z -= (z * x).sum(axis=1, keepdims=True) * x
        z /= np.linalg.norm(z, axis=1, keepdims=True)
        c = cos[s:e, None]
        X[slots[s:e]] = (c * x + np.sqrt(1 - c * c) * z).astype(np.float32)
    return X, {
        "planted": n_planted,
        "pairs": n_pair,
        "triple_copies": n_triple,
        "cosines": list(PLANTED_COSINES),
        "parent": parent,
        "slots": slots,
        "cos": cos,
    }


def exact_cos(X: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine in float64 from the stored float32 values (what neardup verifies)."""
    xa, xb = X[a].astype(np.float64), X[b].astype(np.float64)
    num = np.einsum("ij,ij->i", xa, xb)
    return num / np.sqrt(np.einsum("ij,ij->i", xa, xa) * np.einsum("ij,ij->i", xb, xb))


def truth_for_sample(
    X: np.ndarray, Xn: np.ndarray, queries: np.ndarray, t: float
) -> list[np.ndarray]:
    """All j with exact cos(q, j) >= t: a float32 range search with a margin, then
    the float64 cosine decides (pairs planted at t sit within 1e-7 of it)."""
    import faiss

    index = faiss.IndexFlatIP(Xn.shape[1])
    index.add(Xn)
    lims, _dist, labels = index.range_search(Xn[queries], t - 1e-3)
    out = []
    for i, q in enumerate(queries.tolist()):
        js = labels[lims[i] : lims[i + 1]]
        js = js[js != q]
        js = js[exact_cos(X, np.full(len(js), q), js) >= t]
        out.append(np.sort(js))
    return out


def run_neardup(X: np.ndarray, t: float) -> tuple[dict[str, Any], Any]:
    import neardup
    import neardup.vectors

    cfg = neardup.VectorConfig(metric="cosine", threshold=t)
    # Compile the kernels first (a snapshot run has a cold numba cache); the
    # compile time is reported separately, as for the text benchmarks' first call.
    tw = time.perf_counter()
    neardup.find_vector_duplicates(X[:2000], cfg)
    warm = time.perf_counter() - tw
    t0 = time.perf_counter()
    res = neardup.find_vector_duplicates(X, cfg)
    total = time.perf_counter() - t0
    st = dict(res.stats)
    return {
        "seconds": round(total, 3),
        "vectors_per_second": round(X.shape[0] / total),
        "first_call_on_2000_vectors_s": round(warm, 3),
        "prefiltered": st["prefiltered"],
        "exact_scores": st["exact_scores"],
        "layout": {"bands": st["bands"], "rows": st["rows"], "bits": st["bits"]},
        "predicted_recall_at_threshold": st["predicted_recall_at_threshold"],
        "candidate_checks": st["candidate_checks"],
        "verified_edges": st["verified_edges"],
        "candidate_cap_cut": st["candidate_cap_cut"],
        "bucket_overflow": st["bucket_overflow"],
        "clusters": st["clusters"],
        "duplicates": st["duplicates"],
        "timings_s": {k: round(v, 3) for k, v in st["timings"].items()},
    }, res


def _verify(
    X: np.ndarray, cand_a: list[np.ndarray], cand_b: list[np.ndarray], t: float
) -> tuple[np.ndarray, np.ndarray, float]:
    """Exact cosine of the candidates with neardup's own compiled verifier (one call),
    so the peers are not charged for a slower numpy verification."""
    import neardup
    import neardup.vectors

    a = np.concatenate(cand_a) if cand_a else np.zeros(0, dtype=np.int64)
    b = np.concatenate(cand_b) if cand_b else np.zeros(0, dtype=np.int64)
    tv = time.perf_counter()
    # Only the rows involved are passed, so the cost is proportional to the pairs
    # (and scales with the number of queries), not to the corpus.
    rows, inv = np.unique(np.concatenate([a, b]), return_inverse=True)
    keep = neardup.vectors.vector_scores(X[rows], inv[: len(a)], inv[len(a) :], metric="cosine") >= t
    return a[keep], b[keep], time.perf_counter() - tv


def _found_on_sample(
    kept_a: np.ndarray, kept_b: np.ndarray, sample: np.ndarray
) -> dict[int, set[int]]:
    want = set(sample.tolist())
    found: dict[int, set[int]] = {}
    for qa, jb in zip(kept_a.tolist(), kept_b.tolist(), strict=True):
        if qa in want:
            found.setdefault(qa, set()).add(jb)
        if jb in want:
            found.setdefault(jb, set()).add(qa)
    return found


def run_faiss_multihash(
    X: np.ndarray,
    t: float,
    bands: int,
    rows: int,
    queries: int,
    must: np.ndarray,
    seed: int,
) -> tuple[dict[str, Any], dict[int, set[int]]]:
    """The same banding as neardup's layout, in FAISS: random-rotation sign codes
    (``IndexLSH.sa_encode``), ``IndexBinaryMultiHash`` with ``bands`` tables of
    ``rows`` bits, ``range_search`` with the Hamming radius a pair at t stays within
    except with probability 1e-12, then exact cosine."""
    import faiss

    from neardup.vectors.vlayout import binomial_cutoff, hyperplane_collision

    n, d = X.shape
    bits = 8 * -(-(bands * rows) // 8)
    t0 = time.perf_counter()
    enc = faiss.IndexLSH(d, bits, True, False)
    enc.train(X[: min(n, 100_000)])
    codes = enc.sa_encode(X)
    index = faiss.IndexBinaryMultiHash(bits, bands, rows)
    index.add(codes)
    t_add = time.perf_counter() - t0
    radius = binomial_cutoff(bits, 1.0 - hyperplane_collision(t), 1e-12)
    rng = np.random.default_rng(seed)
    if queries >= n:
        qs = np.arange(n)
    else:
        extra = rng.choice(n, size=max(0, queries - len(must)), replace=False)
        qs = np.union1d(must, extra)
    t1 = time.perf_counter()
    cand_a: list[np.ndarray] = []
    cand_b: list[np.ndarray] = []
    for s in range(0, len(qs), 16384):
        q = qs[s : s + 16384]
        lims, _dist, labels = index.range_search(codes[q], radius)
        a = np.repeat(q, np.diff(lims.astype(np.int64)))
        ok = labels != a
        cand_a.append(a[ok])
        cand_b.append(labels[ok])
    t_search = time.perf_counter() - t1
    kept_a, kept_b, t_verify = _verify(X, cand_a, cand_b, t)
    scale = n / len(qs)
    total = t_add + (t_search + t_verify) * scale
    return {
        "bits": bits,
        "tables": bands,
        "bits_per_table": rows,
        "hamming_radius": radius,
        "queries_searched": len(qs),
        "extrapolated": bool(len(qs) < n),
        "candidates_per_query": round(sum(len(x) for x in cand_a) / len(qs), 2),
        "seconds": round(total, 3),
        "vectors_per_second": round(n / total),
        "timings_s": {
            "train_add": round(t_add, 3),
            "search": round(t_search * scale, 3),
            "verify": round(t_verify * scale, 3),
        },
    }, _found_on_sample(kept_a, kept_b, must)


def _same_cluster_recall(
    n: int, a: np.ndarray, b: np.ndarray, sample: np.ndarray, truth: list[np.ndarray]
) -> tuple[float | None, int]:
    """Pair recall when the verified pairs are merged into clusters (connected
    components), as neardup's outcome is scored; scoring only, not timed."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    g = coo_matrix((np.ones(len(a), dtype=np.int8), (a, b)), shape=(n, n))
    _k, label = connected_components(g, directed=False)
    tot = sum(len(js) for js in truth)
    hit = sum(
        int((label[js] == label[q]).sum()) for q, js in zip(sample.tolist(), truth, strict=True)
    )
    return (round(hit / tot, 5) if tot else None), tot


def _direct_recall(
    found: dict[int, set[int]], sample: np.ndarray, truth: list[np.ndarray]
) -> float | None:
    tot = sum(len(js) for js in truth)
    hits = sum(
        sum(1 for j in js.tolist() if j in found.get(q, set()))
        for q, js in zip(sample.tolist(), truth, strict=True)
    )
    return round(hits / tot, 5) if tot else None


def run_faiss_ivf(
    X: np.ndarray,
    Xn: np.ndarray,
    t: float,
    sample: np.ndarray,
    truth: list[np.ndarray],
    target: float,
    nprobes: list[int],
    train_size: int,
    seed: int,
    queries: int,
) -> dict[str, Any]:
    """FAISS's own setting for threshold dedup: ``IndexIVFFlat`` with inner product
    on L2-normalized vectors (nlist = 4·sqrt(n), k-means on a sample), ``add`` all,
    ``range_search`` of the vectors (batched) at radius t, then the exact cosine of
    each returned pair (kept when >= t).  ``nprobe`` is the smallest of ``nprobes``
    whose direct-neighbour recall on the recall sample reaches ``target`` (the
    recall neardup's layout is chosen for).  With ``queries`` < n, the recall
    sample plus random others are searched and the search and verify times are
    scaled by n / queries (each query probes ``nprobe`` lists of about n / nlist
    vectors, so its cost does not depend on which vector it is; marked
    ``extrapolated``); the same-cluster recall then needs every pair and is not
    reported."""
    import faiss

    n, d = X.shape
    nlist = max(1, round(4 * float(np.sqrt(n))))
    # float32 inner products of normalized vectors move pairs at exactly t by ~1e-7:
    # a hair below t, and the float64 cosine decides.
    radius = t - 1e-4
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    tr = np.sort(rng.choice(n, size=min(n, train_size), replace=False))
    quantizer = faiss.IndexFlatIP(d)
    index = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
    index.train(Xn[tr])
    t_train = time.perf_counter() - t0
    t1 = time.perf_counter()
    index.add(Xn)
    t_add = time.perf_counter() - t1

    sweep = []
    chosen = None
    for p in nprobes:
        index.nprobe = p
        ts = time.perf_counter()
        lims, _dist, labels = index.range_search(Xn[sample], radius)
        t_s = time.perf_counter() - ts
        a = np.repeat(sample, np.diff(lims.astype(np.int64)))
        ok = labels != a
        a, b = a[ok], labels[ok]
        keep = exact_cos(X, a, b) >= t
        rec = _direct_recall(_found_on_sample(a[keep], b[keep], sample), sample, truth)
        sweep.append({"nprobe": p, "recall_on_sample": rec, "search_s_on_sample": round(t_s, 3)})
        print(f"  ivf nprobe={p}: recall {rec} ({t_s:.2f}s)", file=sys.stderr, flush=True)
        if rec is None or rec >= target:
            chosen = p
            break
    if chosen is None:
        chosen = nprobes[-1]
    index.nprobe = chosen

    rng_q = np.random.default_rng(seed + 1)
    if queries >= n:
        qs = np.arange(n)
    else:
        extra = rng_q.choice(n, size=max(0, queries - len(sample)), replace=False)
        qs = np.union1d(sample, extra)
    scale = n / len(qs)
    t2 = time.perf_counter()
    step = 16384
    cand_a: list[np.ndarray] = []
    cand_b: list[np.ndarray] = []
    n_returned = 0
    for s in range(0, len(qs), step):
        q = qs[s : s + step]
        lims, _dist, labels = index.range_search(Xn[q], radius)
        a = np.repeat(q, np.diff(lims.astype(np.int64)))
        n_returned += len(a)
        ok = labels != a
        a, b = a[ok], labels[ok]
        cand_a.append(np.minimum(a, b))
        cand_b.append(np.maximum(a, b))
    # Each pair once (it is usually found from both ends; a pair seen from one end
    # only, when a probe missed the other's list, is kept too).
    key = np.unique(np.concatenate(cand_a) * n + np.concatenate(cand_b))
    cand_a, cand_b = [key // n], [key % n]
    t_search = (time.perf_counter() - t2) * scale
    kept_a, kept_b, t_verify = _verify(X, cand_a, cand_b, t)
    t_verify *= scale
    total = t_train + t_add + t_search + t_verify
    found = _found_on_sample(kept_a, kept_b, sample)  # scoring only (not timed)
    same, _tot = (
        _same_cluster_recall(n, kept_a, kept_b, sample, truth) if len(qs) == n else (None, 0)
    )
    return {
        "index": f"IndexIVFFlat(IndexFlatIP, nlist={nlist}, METRIC_INNER_PRODUCT)",
        "nlist": nlist,
        "trained_on": len(tr),
        "range_search_radius": radius,
        "recall_target": target,
        "nprobe_sweep": sweep,
        "nprobe": chosen,
        "queries_searched": len(qs),
        "extrapolated": len(qs) < n,
        "returned_per_query": round(n_returned / len(qs), 2),
        "verified_pairs": len(kept_a),
        "seconds": round(total, 3),
        "vectors_per_second": round(n / total),
        "timings_s": {
            "train": round(t_train, 3),
            "add": round(t_add, 3),
            "search": round(t_search, 3),
            "verify": round(t_verify, 3),
        },
        "recall_on_sample": _direct_recall(found, sample, truth),
        "recall_on_sample_counts": "direct: j among q's verified neighbours",
        "recall_same_cluster": same,
        "recall_same_cluster_counts": "q and j in one connected component of verified pairs",
        "sample_pairs_scored": _tot,
    }


def run_faiss_lsh(
    X: np.ndarray,
    Xn: np.ndarray,
    t: float,
    bits: int,
    k: int,
    queries: int,
    must: np.ndarray,
    seed: int,
) -> tuple[dict[str, Any], dict[int, set[int]]]:
    import faiss

    n, d = X.shape
    t0 = time.perf_counter()
    index = faiss.IndexLSH(d, bits, True, False)  # rotate_data, no trained thresholds
    index.train(X[: min(n, 100_000)])
    index.add(X)
    t_add = time.perf_counter() - t0
    rng = np.random.default_rng(seed)
    if queries >= n:
        qs = np.arange(n)
    else:  # the recall sample plus random others (the scan costs the same per query)
        extra = rng.choice(n, size=max(0, queries - len(must)), replace=False)
        qs = np.union1d(must, extra)
    t1 = time.perf_counter()
    step = 16384
    cand_a: list[np.ndarray] = []
    cand_b: list[np.ndarray] = []
    for s in range(0, len(qs), step):
        q = qs[s : s + step]
        _dist, labels = index.search(X[q], k + 1)
        a = np.repeat(q, k + 1)
        b = labels.reshape(-1)
        ok = (b >= 0) & (b != a)
        cand_a.append(a[ok])
        cand_b.append(b[ok])
    t_search = time.perf_counter() - t1
    kept_a, kept_b, t_verify = _verify(X, cand_a, cand_b, t)
    scale = n / len(qs)
    total = t_add + (t_search + t_verify) * scale
    found = _found_on_sample(kept_a, kept_b, must)  # scoring only (not timed)
    return {
        "bits": bits,
        "k": k,
        "queries_searched": len(qs),
        "extrapolated": bool(len(qs) < n),
        "seconds": round(total, 3),
        "vectors_per_second": round(n / total),
        "timings_s": {
            "train_add": round(t_add, 3),
            "search": round(t_search * scale, 3),
            "verify": round(t_verify * scale, 3),
        },
    }, found


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-n", type=int, default=1_000_000)
    p.add_argument("-d", type=int, default=384)
    p.add_argument("--threshold", type=float, default=0.9)
    p.add_argument("--planted", type=float, default=0.05, help="fraction of planted copies")
    p.add_argument("--sample", type=int, default=2000, help="recall query sample")
    p.add_argument("--faiss-bits", type=int, nargs="+", default=[256, 1024])
    p.add_argument("--faiss-k", type=int, default=10)
    p.add_argument(
        "--faiss-queries",
        type=int,
        default=20_000,
        help="queries searched by IndexLSH (its scan is linear per query)",
    )
    p.add_argument("--ivf-nprobe", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 128])
    p.add_argument("--ivf-train", type=int, default=50_000, help="IVF k-means sample")
    p.add_argument(
        "--ivf-queries",
        type=int,
        default=50_000,
        help="queries range-searched by IndexIVFFlat (times scaled to all n)",
    )
    p.add_argument(
        "--ivf-recall-target",
        type=float,
        default=0.995,
        help="nprobe is the smallest reaching this recall on the sample (neardup's target)",
    )
    p.add_argument("--no-snapshot", action="store_true")
    p.add_argument("--quick", action="store_true", help="tiny corpus for a CI smoke test")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    a = p.parse_args(argv)
    if a.quick:
        a.n, a.d, a.sample, a.faiss_queries = 5000, 32, 200, 5000
        a.faiss_bits = [128]
        a.ivf_train = 5000
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    rc = run_in_snapshot(__file__, argv, skip=a.no_snapshot or a.quick)
    if rc is not None:
        return rc
    import faiss

    results: dict[str, Any] = {"machine": machine_info()}
    results["machine"]["neardup_source_at_start"] = neardup_source()
    results["machine"]["faiss_threads"] = faiss.omp_get_max_threads()
    t_gen = time.perf_counter()
    X, planted = make_corpus(a.n, a.d, a.planted, SEED)
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    print(
        f"{a.n} x {a.d} vectors ({planted['planted']} planted) in "
        f"{time.perf_counter() - t_gen:.1f}s",
        file=sys.stderr,
        flush=True,
    )
    results["corpus"] = {
        "n": a.n,
        "dim": a.d,
        "threshold": a.threshold,
        "seed": SEED,
        **{k: v for k, v in planted.items() if k not in ("parent", "slots", "cos")},
    }
    # Sample: half planted copies (where the duplicates are), half anything.
    rng = np.random.default_rng(SEED + 1)
    half = a.sample // 2
    sample = np.unique(
        np.concatenate(
            [
                rng.choice(planted["slots"], size=min(half, len(planted["slots"])), replace=False),
                rng.choice(a.n, size=a.sample - half, replace=False),
            ]
        )
    )
    truth = truth_for_sample(X, Xn, sample, a.threshold)
    n_truth = sum(len(x) for x in truth)
    print(
        f"truth: {n_truth} pairs with cos >= {a.threshold} for {len(sample)} queries",
        file=sys.stderr,
        flush=True,
    )

    nd, res = run_neardup(X, a.threshold)
    print(f"neardup: {nd['seconds']}s", file=sys.stderr, flush=True)
    roots = res.representative
    hit = sum(
        int((roots[js] == roots[q]).sum()) for q, js in zip(sample.tolist(), truth, strict=True)
    )
    nd["recall_same_cluster"] = round(hit / n_truth, 5) if n_truth else None
    edges = res.edges[:5000]
    if edges:
        ea = np.array([e.a for e in edges])
        eb = np.array([e.b for e in edges])
        exact = exact_cos(X, ea, eb)
        got = np.array([e.score for e in edges])
        nd["edge_check"] = {
            "checked": len(edges),
            "max_abs_error": float(np.abs(exact - got).max()),
            "precision": float(np.mean(exact >= a.threshold)),
        }
    # recall by planted cosine (pairs copy -> parent)
    by_cos = {}
    for c in PLANTED_COSINES:
        if c < a.threshold:
            continue
        s_all, p_all = planted["slots"], planted["parent"]
        exact = exact_cos(X, s_all, p_all)
        # float32 storage moves a pair planted exactly at t to either side of it:
        # only pairs whose exact cosine passes count.
        m = np.isclose(planted["cos"], c) & (exact >= a.threshold)
        s, p = s_all[m], p_all[m]
        by_cos[f"{c:.2f}"] = round(float(np.mean(roots[s] == roots[p])), 5) if m.any() else None
    nd["recall_planted_by_cosine"] = by_cos
    results["neardup"] = nd
    del res

    for bits in a.faiss_bits:
        fr, found = run_faiss_lsh(
            X, Xn, a.threshold, bits, a.faiss_k, a.faiss_queries, sample, SEED + 2
        )
        tot = hits = 0
        for q, js in zip(sample.tolist(), truth, strict=True):
            tot += len(js)
            f = found.get(q, set())
            hits += sum(1 for j in js.tolist() if j in f)
        fr["recall_on_sample"] = round(hits / tot, 5) if tot else None
        fr["sample_pairs_scored"] = tot
        results[f"faiss_lsh_{bits}"] = fr
        print(
            f"faiss IndexLSH {bits}: {fr['seconds']}s "
            f"{'(extrapolated)' if fr['extrapolated'] else ''}",
            file=sys.stderr,
            flush=True,
        )

    lay = nd["layout"]
    fr, found = run_faiss_multihash(
        X, a.threshold, lay["bands"], lay["rows"], a.faiss_queries, sample, SEED + 3
    )
    tot = sum(len(js) for js in truth)
    hits = sum(
        sum(1 for j in js.tolist() if j in found.get(q, set()))
        for q, js in zip(sample.tolist(), truth, strict=True)
    )
    fr["recall_on_sample"] = round(hits / tot, 5) if tot else None
    results["faiss_multihash"] = fr
    print(f"faiss IndexBinaryMultiHash: {fr['seconds']}s", file=sys.stderr, flush=True)

    fr = run_faiss_ivf(
        X,
        Xn,
        a.threshold,
        sample,
        truth,
        a.ivf_recall_target,
        a.ivf_nprobe,
        a.ivf_train,
        SEED + 4,
        a.ivf_queries,
    )
    results["faiss_ivf"] = fr
    print(
        f"faiss IndexIVFFlat nprobe={fr['nprobe']}: {fr['seconds']}s", file=sys.stderr, flush=True
    )

    ratios = {
        "faiss_multihash_seconds_over_neardup": round(
            results["faiss_multihash"]["seconds"] / nd["seconds"], 2
        )
    }
    ratios["faiss_ivf_seconds_over_neardup"] = round(
        results["faiss_ivf"]["seconds"] / nd["seconds"], 2
    )
    for b in a.faiss_bits:
        ratios[f"faiss_lsh_{b}_seconds_over_neardup"] = round(
            results[f"faiss_lsh_{b}"]["seconds"] / nd["seconds"], 2
        )
    results["ratios"] = ratios
    write_results(a.out, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

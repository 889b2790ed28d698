"""A numpy-only k-permutation MinHash vs neardup's numba kernel, on the same hashed sets.

Why numba is a dependency: this is the best plain-numpy implementation of the very
same signatures — the same permutation family (``neardup.sketch.minhash.permutation_params``:
row ``p`` is ``((a[p] * x + b[p]) mod 2**64) >> 32`` in uint64 wrap-around
arithmetic), the minimum per document by ``np.minimum.reduceat`` over the CSR
``ShingleSets.indptr``, documents processed in chunks of at most ``--chunk`` /
``--outer-chunk`` shingles so that the scratch memory stays bounded.  Two numpy
layouts are timed (chunk sizes are the fastest found on this machine):

* ``numpy_outer_chunked`` — one (k × m) uint64 matrix per chunk of documents
  (``np.multiply.outer(a, x) + b >> 32``), reduced per document along the shingles;
* ``numpy_per_permutation`` — the whole data array once per permutation row
  (k passes of a length-m vector), reduced per document.

Both must give byte-identical signatures to ``MinHasher(cfg).from_sets(sets).matrix``
(checked; the script fails otherwise).  numba is timed with its default threads and
with one thread (numpy's ufuncs are single-threaded).  Only the signature stage is
compared: the sets are hashed once by neardup beforehand (``hash_documents``).

Usage::

    python benchmarks/bench_numpy_minhash.py            # 20000 stdlib + 20000 synthetic docs
    python benchmarks/bench_numpy_minhash.py --quick --out /tmp/numpy.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from _common import (
    NUM_PERM,
    SEED,
    machine_info,
    run_in_snapshot,
    summarize,
    timed,
    write_results,
)

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "numpy_baseline.json"
SYNTH_SEED = 20240601
SYNTH_WORDS = 120
U32MAX = np.uint64(0xFFFFFFFF)
SHIFT = np.uint64(32)


def _chunks(indptr: npt.NDArray[np.int64], chunk: int) -> list[tuple[int, int]]:
    """Consecutive document ranges [d0, d1) holding at most ``chunk`` shingles each
    (a single larger document is a chunk of its own)."""
    n = indptr.shape[0] - 1
    out: list[tuple[int, int]] = []
    d0 = 0
    while d0 < n:
        d1 = int(np.searchsorted(indptr, indptr[d0] + chunk, side="right")) - 1
        d1 = min(max(d1, d0 + 1), n)
        out.append((d0, d1))
        d0 = d1
    return out


def _reduce_rows(h: npt.NDArray[np.uint64], sizes: npt.NDArray[np.int64],
                 out: npt.NDArray[np.uint32]) -> None:
    """``out[d, p] = min over doc d's columns of h[p]`` (empty docs keep 0xFFFFFFFF)."""
    nonempty = sizes > 0
    if not nonempty.any():
        return
    starts = (np.cumsum(sizes) - sizes)[nonempty]
    # Empty documents add no columns, so the segments of the non-empty ones are exact.
    red = np.minimum.reduceat(h, starts, axis=1)
    out[nonempty] = red.T.astype(np.uint32)


def numpy_minhash_outer(data: npt.NDArray[np.uint64], indptr: npt.NDArray[np.int64],
                        a: npt.NDArray[np.uint64], b: npt.NDArray[np.uint64],
                        chunk: int) -> npt.NDArray[np.uint32]:
    n, k = indptr.shape[0] - 1, a.shape[0]
    out = np.full((n, k), 0xFFFFFFFF, dtype=np.uint32)
    b2 = b[:, None]
    for d0, d1 in _chunks(indptr, chunk):
        x = data[indptr[d0] : indptr[d1]]
        if x.size == 0:
            continue
        h = np.multiply.outer(a, x)  # uint64: wraps mod 2**64
        h += b2
        h >>= SHIFT
        _reduce_rows(h, np.diff(indptr[d0 : d1 + 1]), out[d0:d1])
    return out


def numpy_minhash_per_perm(data: npt.NDArray[np.uint64], indptr: npt.NDArray[np.int64],
                           a: npt.NDArray[np.uint64], b: npt.NDArray[np.uint64],
                           chunk: int) -> npt.NDArray[np.uint32]:
    n, k = indptr.shape[0] - 1, a.shape[0]
    out = np.full((n, k), 0xFFFFFFFF, dtype=np.uint32)
    for d0, d1 in _chunks(indptr, chunk):
        x = data[indptr[d0] : indptr[d1]]
        if x.size == 0:
            continue
        sizes = np.diff(indptr[d0 : d1 + 1])
        nonempty = sizes > 0
        starts = (np.cumsum(sizes) - sizes)[nonempty]
        block = out[d0:d1]
        v = np.empty_like(x)
        for p in range(k):
            np.multiply(x, a[p], out=v)
            v += b[p]
            v >>= SHIFT
            block[nonempty, p] = np.minimum.reduceat(v, starts).astype(np.uint32)
    return out


def load_sets(n_docs: int) -> dict[str, Any]:
    import neardup
    import neardup.testing
    from neardup import Config, ShingleSpec
    from neardup.text.hashing import hash_documents

    cfg = Config(shingle=ShingleSpec(kind="word", k=5), num_perm=NUM_PERM, seed=SEED)
    corpora = {
        "stdlib": neardup.testing.stdlib_paragraphs(limit=n_docs),
        "synthetic": neardup.testing.synthetic_documents(n_docs, seed=SYNTH_SEED, words=SYNTH_WORDS),
    }
    return {name: (hash_documents(texts, cfg), texts) for name, texts in corpora.items()} | {
        "_cfg": cfg}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--docs", type=int, default=20_000, help="documents per corpus (20000)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per method (5)")
    p.add_argument("--chunk", type=int, default=1 << 16,
                   help="numpy_per_permutation: at most this many shingles per chunk (65536)")
    p.add_argument("--outer-chunk", type=int, default=1 << 14,
                   help="numpy_outer_chunked: shingles per chunk (16384: a 16 MiB matrix)")
    p.add_argument("--no-snapshot", action="store_true",
                   help="measure the installed neardup in place (--quick implies this)")
    p.add_argument("--quick", action="store_true", help="tiny corpora for a CI smoke test")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help=f"JSON output (default {DEFAULT_OUT})")
    a = p.parse_args(argv)
    if a.quick:
        a.docs, a.repeats = min(a.docs, 500), 1
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    rc = run_in_snapshot(__file__, argv, skip=a.no_snapshot or a.quick)
    if rc is not None:
        return rc
    import numba

    from neardup import MinHasher
    from neardup.sketch.minhash import permutation_params

    t_start = time.perf_counter()
    loaded = load_sets(a.docs)
    cfg = loaded.pop("_cfg")
    mh = MinHasher(cfg)
    pa, pb = permutation_params(cfg.seed, cfg.num_perm)
    threads = numba.get_num_threads()
    results: dict[str, Any] = {
        "benchmark": "numpy_baseline",
        "machine": machine_info(),
        "params": {"num_perm": NUM_PERM, "seed": SEED, "shingles": "word 5-grams",
                   "docs": a.docs, "repeats": a.repeats, "numpy_chunk_shingles": a.chunk,
                   "numpy_outer_chunk_shingles": a.outer_chunk,
                   "quick": a.quick},
        "corpora": {},
    }
    for name, (sets, texts) in loaded.items():
        data, indptr = sets.data, sets.indptr
        n, n_bytes = len(sets), sum(len(t.encode("utf-8")) for t in texts)
        mh.from_sets(sets.take(np.arange(min(5, n))))  # warm-up (numba cache)
        ref = mh.from_sets(sets).matrix
        methods = {
            "numba_from_sets": lambda s=sets: mh.from_sets(s),
            "numpy_outer_chunked": lambda d=data, ip=indptr: numpy_minhash_outer(
                d, ip, pa, pb, a.outer_chunk),
            "numpy_per_permutation": lambda d=data, ip=indptr: numpy_minhash_per_perm(
                d, ip, pa, pb, a.chunk),
        }
        identical = {}
        for mname in ("numpy_outer_chunked", "numpy_per_permutation"):
            got = methods[mname]()
            identical[mname] = bool(got.shape == ref.shape and got.tobytes() == ref.tobytes())
            if not identical[mname]:
                raise SystemExit(f"{mname} differs from MinHasher.from_sets on {name}")
        runs: dict[str, list[float]] = {m: [] for m in methods}
        runs["numba_from_sets_1_thread"] = []
        for _ in range(a.repeats):  # round robin
            for mname, fn in methods.items():
                runs[mname].append(timed(fn))
            numba.set_num_threads(1)
            try:
                runs["numba_from_sets_1_thread"].append(timed(methods["numba_from_sets"]))
            finally:
                numba.set_num_threads(threads)
        summ = {m: summarize(r, n, n_bytes) for m, r in runs.items()}
        nb, nb1 = summ["numba_from_sets"]["best_s"], summ["numba_from_sets_1_thread"]["best_s"]
        for m in ("numpy_outer_chunked", "numpy_per_permutation"):
            summ[m]["byte_identical_to_minhasher"] = identical[m]
            summ[m]["numba_speedup"] = round(summ[m]["best_s"] / nb, 2) if nb else None
            summ[m]["numba_1_thread_speedup"] = round(summ[m]["best_s"] / nb1, 2) if nb1 else None
        results["corpora"][name] = {
            "info": {"n_docs": n, "bytes": n_bytes, "shingles": int(data.shape[0]),
                     "mean_shingles_per_doc": round(data.shape[0] / n, 1) if n else 0.0,
                     "empty_docs": int(np.count_nonzero(sets.raw_counts == 0))},
            "methods": summ,
        }
        print(f"{name}: numba {nb * 1e3:.1f} ms ({threads} threads), {nb1 * 1e3:.1f} ms "
              f"(1 thread); numpy outer {summ['numpy_outer_chunked']['best_s'] * 1e3:.0f} ms, "
              f"per-permutation {summ['numpy_per_permutation']['best_s'] * 1e3:.0f} ms",
              file=sys.stderr, flush=True)
    results["machine"]["numba_threads_default"] = threads
    write_results(a.out, results, t_start)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Signature throughput from raw text: neardup vs rensa vs datasketch, same texts, one run.

Every "end-to-end" method starts from the raw ``str`` documents and ends with 128
32-bit MinHash values per document, so shingling is included:

* neardup normalizes (NFKC + casefold + whitespace collapse), builds word 5-grams,
  hashes them (xxh64) and computes the signatures in numba kernels;
* the peers are fed the usual Python-built shingle lists
  (``re.findall(r"\\w+", text.casefold())``, 5 consecutive tokens joined by a space).

``*_sketch_only`` methods time the peers on shingle lists built beforehand, and the
``neardup_stage_*`` methods time neardup's two stages separately, so the cost of
shingling can be told apart from the cost of sketching.

Each timing is repeated (round robin over the methods, so that background load
spreads over all of them) and the best and the median are kept.  neardup is warmed
up first (numba compiles on first use and caches on disk); its first-call cost is
measured in fresh subprocesses, with the on-disk cache warm and cold.  A second
subprocess reruns neardup and rensa's batch APIs with ``NUMBA_NUM_THREADS=1`` and
``RAYON_NUM_THREADS=1`` for single-thread ratios.

Usage::

    python benchmarks/bench_signatures.py            # 20000 stdlib + 20000 synthetic docs
    python benchmarks/bench_signatures.py --quick    # smoke test (seconds)
    python benchmarks/bench_signatures.py --docs 5000 --out /tmp/sig.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import (
    NUM_PERM,
    SEED,
    machine_info,
    py_shingles,
    run_in_snapshot,
    summarize,
    timed,
    utf8_bytes,
    write_results,
)

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "signatures.json"
SYNTH_SEED = 20240601
SYNTH_WORDS = 120

Method = Callable[[], object]


# --------------------------------------------------------------------------- corpora


def load_corpora(n_docs: int) -> dict[str, list[str]]:
    import neardup
    import neardup.testing

    return {
        "stdlib": neardup.testing.stdlib_paragraphs(limit=n_docs),
        "synthetic": neardup.testing.synthetic_documents(n_docs, seed=SYNTH_SEED, words=SYNTH_WORDS),
    }


def corpus_info(texts: list[str], lists: list[list[str]]) -> dict[str, Any]:
    n = len(texts)
    n_bytes = utf8_bytes(texts)
    n_sh = sum(len(s) for s in lists)
    return {
        "n_docs": n,
        "bytes": n_bytes,
        "mean_bytes_per_doc": round(n_bytes / n, 1) if n else 0.0,
        "mean_shingles_per_doc": round(n_sh / n, 1) if n else 0.0,
    }


# --------------------------------------------------------------------------- methods


def neardup_methods(texts: list[str]) -> dict[str, tuple[Method, dict[str, Any]]]:
    from neardup import Config, MinHasher, ShingleSpec
    from neardup.text.hashing import hash_documents

    spec = ShingleSpec(kind="word", k=5)
    cfg = Config(shingle=spec, num_perm=NUM_PERM, seed=SEED)
    cfg_oph = Config(shingle=spec, num_perm=NUM_PERM, seed=SEED, signature="oph")
    mh, mh_oph = MinHasher(cfg), MinHasher(cfg_oph)
    # Warm-up: compile (or load from the numba cache) every kernel used below.
    mh.signatures(texts[:5])
    mh_oph.signatures(texts[:5])
    sets = hash_documents(texts, cfg)
    sets_oph = hash_documents(texts, cfg_oph)
    assert mh.signatures(texts[:50]).matrix.shape == (min(50, len(texts)), NUM_PERM)

    e2e = {"includes_shingling": True, "input": "raw str"}
    stage = {"includes_shingling": False, "input": "ShingleSets (hashed)"}
    return {
        "neardup_minhash": (lambda: mh.signatures(texts), e2e),
        "neardup_oph": (lambda: mh_oph.signatures(texts), e2e),
        "neardup_stage_hash_documents": (
            lambda: hash_documents(texts, cfg),
            {"includes_shingling": True, "input": "raw str", "note": "normalize+shingle+hash only"},
        ),
        "neardup_stage_from_sets_minhash": (lambda: mh.from_sets(sets), stage),
        "neardup_stage_from_sets_oph": (lambda: mh_oph.from_sets(sets_oph), stage),
    }


def rensa_methods(
    texts: list[str], lists: list[list[str]], *, batch_only: bool = False
) -> dict[str, tuple[Method, dict[str, Any]]]:
    import rensa

    def loop(cls: Any, src: list[str] | list[list[str]], prebuilt: bool) -> Method:
        def run() -> None:
            for item in src:
                m = cls(num_perm=NUM_PERM, seed=SEED)
                m.update(item if prebuilt else py_shingles(item))  # type: ignore[arg-type]
                m.digest()

        return run

    def batch(fn: Callable[..., object], prebuilt: bool, **kw: Any) -> Method:
        def run() -> None:
            src = lists if prebuilt else [py_shingles(t) for t in texts]
            fn(src, NUM_PERM, SEED, **kw)

        return run

    R, C = rensa.RMinHash, rensa.CMinHash
    batches: dict[str, tuple[Callable[..., object], str]] = {
        "rensa_rminhash_digest_matrix": (
            R.digest_matrix_from_token_sets, "RMinHash.digest_matrix_from_token_sets (batch, Rayon)"
        ),
        "rensa_cminhash_digests_batch": (
            C.digests_from_token_sets, "CMinHash.digests_from_token_sets (batch)"
        ),
        "rensa_rminhash_rho_matrix": (
            R.digest_matrix_from_token_sets_rho,
            "RMinHash.digest_matrix_from_token_sets_rho: samples token positions, NOT full-set "
            "MinHash (different estimator); listed for completeness, excluded from ratios",
        ),
    }
    out: dict[str, tuple[Method, dict[str, Any]]] = {}
    if not batch_only:
        for name, cls in (("rensa_rminhash_update", R), ("rensa_cminhash_update", C)):
            desc = f"{cls.__name__}(num_perm=128, seed=42).update(list[str]); .digest() per doc"
            out[name] = (loop(cls, texts, False), {"includes_shingling": True, "api": desc})
            out[name + "_sketch_only"] = (
                loop(cls, lists, True), {"includes_shingling": False, "api": desc}
            )
    for name, (fn, desc) in batches.items():
        out[name] = (batch(fn, False), {"includes_shingling": True, "api": desc})
        if not batch_only:
            out[name + "_sketch_only"] = (
                batch(fn, True), {"includes_shingling": False, "api": desc}
            )
    # Sanity: every batch API returns one signature per document.
    m = R.digest_matrix_from_token_sets(lists[:20], NUM_PERM, SEED)
    assert m.len() == min(20, len(lists))
    return out


def datasketch_methods(
    texts: list[str], lists: list[list[str]]
) -> dict[str, tuple[Method, dict[str, Any]]]:
    import datasketch

    blists = [[s.encode("utf-8") for s in sh] for sh in lists]

    def update_batch(prebuilt: bool) -> Method:
        def run() -> None:
            for i, t in enumerate(texts):
                m = datasketch.MinHash(num_perm=NUM_PERM, seed=SEED)
                src = blists[i] if prebuilt else [s.encode("utf-8") for s in py_shingles(t)]
                m.update_batch(src)
                m.digest()

        return run

    def bulk(prebuilt: bool) -> Method:
        def run() -> None:
            src = blists if prebuilt else [
                [s.encode("utf-8") for s in py_shingles(t)] for t in texts
            ]
            datasketch.MinHash.bulk(src, num_perm=NUM_PERM, seed=SEED)

        return run

    ub = "MinHash(num_perm=128, seed=42).update_batch(list[bytes]) per doc"
    bk = "MinHash.bulk(list[list[bytes]], num_perm=128, seed=42)"
    out: dict[str, tuple[Method, dict[str, Any]]] = {
        "datasketch_update_batch": (update_batch(False), {"includes_shingling": True, "api": ub}),
        "datasketch_update_batch_sketch_only": (
            update_batch(True), {"includes_shingling": False, "api": ub}
        ),
    }
    if hasattr(datasketch.MinHash, "bulk"):
        out["datasketch_bulk"] = (bulk(False), {"includes_shingling": True, "api": bk})
        out["datasketch_bulk_sketch_only"] = (bulk(True), {"includes_shingling": False, "api": bk})
    return out


def python_shingle_method(texts: list[str]) -> dict[str, tuple[Method, dict[str, Any]]]:
    return {
        "python_shingles_only": (
            lambda: [py_shingles(t) for t in texts],
            {"includes_shingling": True, "api": "peer shingle lists alone (no sketch)"},
        )
    }


def run_methods(
    methods: dict[str, tuple[Method, dict[str, Any]]],
    n_docs: int,
    n_bytes: int,
    repeats: int,
) -> dict[str, dict[str, Any]]:
    runs: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(repeats):
        for name, (fn, _meta) in methods.items():
            runs[name].append(timed(fn))
    return {
        name: {**summarize(runs[name], n_docs, n_bytes), **meta}
        for name, (_fn, meta) in methods.items()
    }


# --------------------------------------------------------------------------- ratios

# Methods that compute a full-set MinHash of the same shingles from raw text.
_PEERS_E2E = (
    "rensa_rminhash_update",
    "rensa_cminhash_update",
    "rensa_rminhash_digest_matrix",
    "rensa_cminhash_digests_batch",
    "datasketch_update_batch",
    "datasketch_bulk",
)


def ratios(res: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Throughput of neardup divided by that of each peer (best of the repeats).

    Computed on MB/s of raw text: on the same texts this equals the docs/s ratio, and
    it stays fair for datasketch, which is timed on a subset of the corpus.
    """
    out: dict[str, Any] = {}
    for nd in ("neardup_minhash", "neardup_oph"):
        if nd not in res:
            continue
        nd_rate = res[nd]["mb_per_s"]
        for peer in _PEERS_E2E:
            if peer in res and res[peer]["mb_per_s"]:
                out[f"{nd}_speedup_vs_{peer}"] = round(nd_rate / res[peer]["mb_per_s"], 3)
        for family in ("rensa", "datasketch"):
            cands = [p for p in _PEERS_E2E if p.startswith(family) and p in res]
            if cands:
                fastest = max(cands, key=lambda p: res[p]["mb_per_s"])
                key = f"{nd}_speedup_vs_{family}" if nd != "neardup_minhash" else \
                    f"neardup_speedup_vs_{family}"
                out[key] = round(nd_rate / res[fastest]["mb_per_s"], 3)
                out[key + "_fastest_method"] = fastest
    return out


# --------------------------------------------------------------------------- subprocesses


def _run_worker(args: list[str], env_extra: dict[str, str]) -> dict[str, Any]:
    env = {**os.environ, **env_extra}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "worker.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), *args, "--worker-out", str(out)]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            return {"error": proc.stderr[-2000:], "returncode": proc.returncode}
        data: dict[str, Any] = json.loads(out.read_text())
    data["subprocess_wall_s"] = round(wall, 3)
    data["env"] = env_extra
    return data


def worker_first_call() -> dict[str, Any]:
    """Import and first-call cost of neardup in this (fresh) process."""
    t0 = time.perf_counter()
    import neardup
    import neardup.testing
    from neardup import Config, MinHasher, ShingleSpec

    t_import = time.perf_counter() - t0
    texts = neardup.testing.synthetic_documents(5, seed=1, words=50)
    spec = ShingleSpec(kind="word", k=5)
    mh = MinHasher(Config(shingle=spec, num_perm=NUM_PERM, seed=SEED))
    mh_oph = MinHasher(Config(shingle=spec, num_perm=NUM_PERM, seed=SEED, signature="oph"))
    t1 = time.perf_counter()
    mh.signatures(texts)
    t_first = time.perf_counter() - t1
    t2 = time.perf_counter()
    mh.signatures(texts)
    t_second = time.perf_counter() - t2
    t3 = time.perf_counter()
    mh_oph.signatures(texts)
    t_first_oph = time.perf_counter() - t3
    return {
        "import_s": round(t_import, 4),
        "first_call_s": round(t_first, 4),
        "second_call_s": round(t_second, 4),
        "first_call_oph_after_minhash_s": round(t_first_oph, 4),
        "n_docs": len(texts),
    }


def worker_single_thread(n_docs: int, repeats: int) -> dict[str, Any]:
    import numba

    corpora = load_corpora(n_docs)
    out: dict[str, Any] = {"numba_num_threads": numba.get_num_threads(), "corpora": {}}
    for cname, texts in corpora.items():
        lists = [py_shingles(t) for t in texts]
        methods = {
            **neardup_methods(texts),
            **rensa_methods(texts, lists, batch_only=True),
        }
        res = run_methods(methods, len(texts), utf8_bytes(texts), repeats)
        out["corpora"][cname] = {"methods": res}
    try:
        out["numba_threading_layer"] = numba.threading_layer()
    except ValueError:
        out["numba_threading_layer"] = None
    return out


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--docs", type=int, default=20_000, help="documents per corpus (default 20000)")
    p.add_argument(
        "--datasketch-docs", type=int, default=5_000,
        help="datasketch is timed on N docs (every k-th) of each corpus (default 5000)",
    )
    p.add_argument("--repeats", type=int, default=3, help="timings per method (default 3)")
    p.add_argument(
        "--no-snapshot", action="store_true",
        help="measure the installed neardup in place (default: a frozen copy of its source;"
        " --quick implies this)",
    )
    p.add_argument("--quick", action="store_true", help="tiny sizes for a CI smoke test")
    p.add_argument("--no-cold-jit", action="store_true",
                   help="skip the cold numba-cache subprocess")
    p.add_argument("--no-single-thread", action="store_true",
                   help="skip the 1-thread subprocess")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help=f"JSON output (default {DEFAULT_OUT})")
    p.add_argument("--worker", choices=("first-call", "single-thread"), help=argparse.SUPPRESS)
    p.add_argument("--worker-out", type=Path, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.quick:
        a.docs = min(a.docs, 400)
        a.datasketch_docs = min(a.datasketch_docs, 100)
        a.repeats = min(a.repeats, 2)
        a.no_cold_jit = True
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    rc = run_in_snapshot(
        __file__, argv, skip=bool(a.no_snapshot or a.quick or getattr(a, "worker", None))
    )
    if rc is not None:
        return rc
    if a.worker:
        data = worker_first_call() if a.worker == "first-call" else \
            worker_single_thread(a.docs, a.repeats)
        a.worker_out.write_text(json.dumps(data, sort_keys=True))
        return 0

    t_start = time.perf_counter()
    results: dict[str, Any] = {
        "benchmark": "signatures",
        "machine": machine_info(),
        "params": {
            "num_perm": NUM_PERM,
            "seed": SEED,
            "shingles": "word 5-grams",
            "neardup_normalizer": "nfkc-casefold (NFKC + casefold + whitespace collapse)",
            "peer_shingles": "re.findall(r'\\w+', text.casefold()), 5 tokens joined by ' '",
            "docs_per_corpus": a.docs,
            "datasketch_docs_per_corpus": a.datasketch_docs,
            "repeats": a.repeats,
            "quick": a.quick,
            "synthetic": {"seed": SYNTH_SEED, "words": SYNTH_WORDS},
            "mb": "1e6 bytes of UTF-8 raw text",
            "timing": "perf_counter, gc disabled during each call, round robin over methods",
        },
        "corpora": {},
    }

    corpora = load_corpora(a.docs)
    for cname, texts in corpora.items():
        print(f"[{cname}] {len(texts)} docs", file=sys.stderr, flush=True)
        lists = [py_shingles(t) for t in texts]
        n_bytes = utf8_bytes(texts)
        methods = {
            **neardup_methods(texts),
            **python_shingle_method(texts),
            **rensa_methods(texts, lists),
        }
        res = run_methods(methods, len(texts), n_bytes, a.repeats)
        # datasketch: an evenly strided subset, so that its documents are like the corpus.
        step = max(1, len(texts) // max(1, a.datasketch_docs))
        idx = list(range(0, len(texts), step))[: a.datasketch_docs]
        sub, sub_lists = [texts[i] for i in idx], [lists[i] for i in idx]
        sub_n = len(sub)
        res.update(run_methods(
            datasketch_methods(sub, sub_lists), sub_n, utf8_bytes(sub), a.repeats
        ))
        results["corpora"][cname] = {
            "info": corpus_info(texts, lists),
            "datasketch_subset": {**corpus_info(sub, sub_lists), "stride": step},
            "methods": res,
            "ratios": ratios(res),
        }
        for name in sorted(res):
            print(f"  {name:48s} {res[name]['docs_per_s']:>12,.0f} docs/s", file=sys.stderr)

    # First-call cost in fresh processes: with the on-disk numba cache that the runs
    # above have just filled, and with an empty cache (a true cold compile).
    print("[first-call subprocesses]", file=sys.stderr, flush=True)
    first: dict[str, Any] = {"warm_numba_cache": _run_worker(["--worker", "first-call"], {})}
    if not a.no_cold_jit:
        with tempfile.TemporaryDirectory(prefix="neardup-numba-cold-") as cache:
            first["cold_numba_cache"] = _run_worker(
                ["--worker", "first-call"], {"NUMBA_CACHE_DIR": cache}
            )
    results["first_call"] = first
    results["first_call_s"] = first["warm_numba_cache"].get("first_call_s")
    results["first_call_cold_numba_cache_s"] = first.get("cold_numba_cache", {}).get("first_call_s")

    if not a.no_single_thread:
        print("[single-thread subprocess]", file=sys.stderr, flush=True)
        st = _run_worker(
            ["--worker", "single-thread", "--docs", str(a.docs), "--repeats", str(a.repeats)],
            {"NUMBA_NUM_THREADS": "1", "RAYON_NUM_THREADS": "1"},
        )
        if "corpora" in st:
            for cname, block in st["corpora"].items():
                full = results["corpora"][cname]["methods"]
                # Single-threaded peers (per-doc loops, datasketch) are shared with the
                # main run: they use one thread there too.
                merged = {**{k: full[k] for k in _PEERS_E2E if k in full}, **block["methods"]}
                block["ratios"] = ratios(merged)
                for nd in ("neardup_minhash", "neardup_oph"):
                    block[f"{nd}_parallel_speedup"] = round(
                        full[nd]["docs_per_s"] / block["methods"][nd]["docs_per_s"], 3
                    )
        results["single_thread"] = st

    write_results(a.out, results, t_start)
    return 0


if __name__ == "__main__":
    sys.exit(main())

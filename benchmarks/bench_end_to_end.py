"""End-to-end batch dedup, input file → all outputs written: neardup vs rensa vs datasketch.

Every pipeline reads the same JSONL corpus (``{"id": ..., "text": ...}`` lines) and
writes ``kept.jsonl`` (unique documents and one representative per cluster, the
original lines) and ``duplicates.jsonl`` (removed documents with ``cluster`` and
``representative``), at the same parameters: exact Jaccard threshold 0.8 on word
5-grams, 128 permutations, seed 42.  Each runs in its own subprocess, timed from
the parent (interpreter start and imports included) with its peak RSS from
``os.wait4``:

* ``neardup_lsh`` — the real CLI, ``neardup dedup corpus.jsonl --output OUT --id-field
  id --quiet`` (also writes ``clusters.jsonl``, ``stats.json`` and ``report.html``);
  ``neardup_lsh_no_report`` adds ``--no-report``; ``neardup_exact`` adds ``--method
  exact`` (the exact similarity join, recall 1).  A tiny run of each first warms
  the numba cache (not timed).
* ``rensa`` — how rensa is used for dedup: ``json.loads`` per line, Python word
  5-grams (``re.findall(r"\\w+", text.casefold())``), ``RMinHash.from_token_sets``
  (its fastest full-set API, in chunks), ``RMinHashLSH(threshold=0.8, num_perm=128,
  num_bands=8)`` (8 bands × 16 rows as in rensa's own benchmarks), insert all,
  query all, accept a candidate when ``m1.jaccard(m2) >= 0.8``, union-find, keep
  the first document of each cluster.
* ``datasketch`` — the same with ``MinHash.bulk`` and ``MinHashLSH(threshold=0.8,
  num_perm=128)`` at its defaults.

Documents without any word 5-gram are kept and never compared by the peers (they
would all share one signature).  Pipelines are repeated round robin; the best and
the median wall time are kept.

Quality: the ground truth is the exact Jaccard self-join at 0.8
(:func:`neardup.verify.oracle.allpairs_join`) over neardup's shingle-hash sets, and the same join
over 64-bit hashes of the peers' Python shingle strings (the two schemes differ only
by NFKC and whitespace normalization; they are compared).  For every pipeline:
recall of truth pairs with J >= 0.85 and with J in [0.8, 0.85), a pair counting as
found when both documents end up in one cluster of the written outputs; precision
of the reported duplicate edges (neardup: every edge of ``clusters.jsonl`` is
recomputed; peers: every accepted pair).

Scale: ``neardup dedup`` at default settings on 1,000,000 synthetic 50-word
documents (10 % planted near duplicates, ~300 MB), with its per-stage timings and
peak memory against the default 4 GiB limit, and the rensa pipeline when it
finishes within ``--peer-timeout``.

Usage::

    python benchmarks/bench_end_to_end.py                 # full run (~15 min)
    python benchmarks/bench_end_to_end.py --quick --out /tmp/e2e.json   # smoke test
    python benchmarks/bench_end_to_end.py --docs 20000 --skip-scale
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import (
    NUM_PERM,
    SEED,
    machine_info,
    py_shingles,
    ratios,
    run_in_snapshot,
    write_results,
)

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "end_to_end.json"
THRESHOLD = 0.8
HIGH = 0.85
RENSA_BANDS = 8
CHUNK = 20_000  # documents per peer signature batch (bounds the shingle lists in memory)
SCALE_DOCS = 1_000_000
MEMORY_LIMIT = 4 * 1024**3  # neardup's default --memory-limit

Pair = tuple[int, int]


# --------------------------------------------------------------------------- peer pipelines
# These run in a subprocess (``--worker NAME``) and import neither neardup nor numba.


def _read_jsonl(path: str) -> tuple[list[bytes], list[Any], list[str]]:
    raw: list[bytes] = []
    ids: list[Any] = []
    texts: list[str] = []
    with open(path, "rb") as fh:
        for line in fh:
            if not line.strip():
                continue
            rec = json.loads(line)
            raw.append(line if line.endswith(b"\n") else line + b"\n")
            ids.append(rec["id"])
            texts.append(rec["text"])
    return raw, ids, texts


def _find(parent: list[int], x: int) -> int:
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


def _write_peer_outputs(
    out: Path, raw: list[bytes], ids: list[Any], pairs: list[tuple[int, int, float]]
) -> dict[str, int]:
    """Union-find over the accepted pairs, keep the first of each cluster, write files."""
    n = len(raw)
    parent = list(range(n))
    for a, b, _ in pairs:
        ra, rb = _find(parent, a), _find(parent, b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    rep = [_find(parent, i) for i in range(n)]
    in_cluster = [False] * n
    for i in range(n):
        if rep[i] != i:
            in_cluster[i] = in_cluster[rep[i]] = True
    cluster_no: dict[int, int] = {}
    for i in range(n):
        if in_cluster[i] and rep[i] == i:
            cluster_no[i] = len(cluster_no)
    out.mkdir(parents=True, exist_ok=True)
    n_dup = 0
    with open(out / "kept.jsonl", "wb") as kept, open(out / "duplicates.jsonl", "wb") as dups:
        for i in range(n):
            if rep[i] == i:
                kept.write(raw[i])
            else:
                rec = json.loads(raw[i])
                rec["cluster"] = cluster_no[rep[i]]
                rec["representative"] = ids[rep[i]]
                dups.write(json.dumps(rec, ensure_ascii=False).encode("utf-8") + b"\n")
                n_dup += 1
    with open(out / "pairs.jsonl", "w", encoding="utf-8") as fh:
        for a, b, est in pairs:
            fh.write(json.dumps({"a": ids[a], "b": ids[b], "estimate": est}) + "\n")
    return {"documents_out": n - n_dup, "duplicates": n_dup, "clusters": len(cluster_no)}


def peer_pipeline(kind: str, inp: str, out: Path) -> dict[str, Any]:
    """The whole rensa or datasketch dedup job; returns per-stage timings and counts."""
    clock = time.perf_counter
    tm: dict[str, float] = {"shingle": 0.0, "signatures": 0.0}
    t0 = clock()
    raw, ids, texts = _read_jsonl(inp)
    tm["read"] = clock() - t0
    n = len(texts)
    keys: list[int] = []  # index key -> document position (documents with shingles)
    sigs: list[Any] = []
    for s in range(0, n, CHUNK):
        t1 = clock()
        lists = [py_shingles(t) for t in texts[s : s + CHUNK]]
        pos = [s + i for i, sh in enumerate(lists) if sh]
        if kind == "datasketch":
            batch: list[Any] = [[x.encode("utf-8") for x in lists[p - s]] for p in pos]
        else:
            batch = [lists[p - s] for p in pos]
        del lists
        t2 = clock()
        tm["shingle"] += t2 - t1
        if kind == "rensa":
            import rensa

            sigs.extend(rensa.RMinHash.from_token_sets(batch, NUM_PERM, SEED))
        else:
            import datasketch

            sigs.extend(datasketch.MinHash.bulk(batch, num_perm=NUM_PERM, seed=SEED))
        keys.extend(pos)
        tm["signatures"] += clock() - t2
    t3 = clock()
    cands: list[list[int]]
    if kind == "rensa":
        import rensa

        lsh = rensa.RMinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM, num_bands=RENSA_BANDS)
        lsh.insert_many(sigs, 0)
        tm["index_insert"] = clock() - t3
        t4 = clock()
        cands = lsh.query_all(sigs)
        layout = [RENSA_BANDS, NUM_PERM // RENSA_BANDS]
    else:
        import datasketch

        dlsh = datasketch.MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM)
        with dlsh.insertion_session() as session:
            for k, m in enumerate(sigs):
                session.insert(k, m)
        tm["index_insert"] = clock() - t3
        t4 = clock()
        cands = [dlsh.query(m) for m in sigs]
        layout = [dlsh.b, dlsh.r]
    tm["query"] = clock() - t4
    t5 = clock()
    pairs: list[tuple[int, int, float]] = []
    n_cand = 0
    for k, found in enumerate(cands):
        m = sigs[k]
        for j in found:
            if j > k:  # each unordered pair once (LSH candidates are symmetric)
                n_cand += 1
                est = float(m.jaccard(sigs[j]))
                if est >= THRESHOLD:
                    pairs.append((keys[k], keys[j], est))
    del cands
    tm["estimate_check"] = clock() - t5
    t6 = clock()
    counts = _write_peer_outputs(out, raw, ids, pairs)
    tm["cluster_write"] = clock() - t6
    tm["total"] = clock() - t0
    return {
        "timings_s": {k: round(v, 6) for k, v in tm.items()},
        "documents_in": n,
        "documents_without_shingles": n - len(keys),
        "candidate_pairs": n_cand,
        "accepted_pairs": len(pairs),
        "layout_bands_rows": layout,
        **counts,
    }


def worker_main(a: argparse.Namespace) -> int:
    """Run one peer pipeline and end the process the way ``neardup dedup`` ends
    (its outputs written and closed, no interpreter teardown), so that both sides
    of a timing pay for the same things."""
    info = peer_pipeline(a.worker, a.input, Path(a.output))
    Path(a.report_json).write_text(json.dumps(info))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# --------------------------------------------------------------------------- running


TIME_BIN = "/usr/bin/time"


def run_measured(cmd: Sequence[str], *, timeout: float | None = None,
                 log: Path | None = None) -> dict[str, Any]:
    """Run ``cmd``; wall seconds (from the parent), peak RSS and CPU times of the child.

    The peak RSS comes from GNU time (``/usr/bin/time -f %M``) run between this
    process and ``cmd``: Linux folds the RSS of the process that forks into the
    ``ru_maxrss`` of the child it execs, so ``os.wait4`` on a child of this (large)
    process would report at least this process's size.  Without GNU time it falls
    back to ``os.wait4`` and says so (``peak_rss_source``).
    """
    use_time = os.path.exists(TIME_BIN)
    tfile = Path(tempfile.mkstemp(prefix="e2e-time-")[1]) if use_time else None
    full = [TIME_BIN, "-f", "%M %U %S", "-o", str(tfile), *cmd] if use_time else list(cmd)
    out = open(log, "wb") if log is not None else subprocess.DEVNULL  # noqa: SIM115
    try:
        t0 = time.perf_counter()
        proc = subprocess.Popen(full, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            os.killpg(proc.pid, 9)

        timer = threading.Timer(timeout, kill) if timeout else None
        if timer is not None:
            timer.start()
        try:
            _, status, ru = os.wait4(proc.pid, 0)
        finally:
            if timer is not None:
                timer.cancel()
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        if log is not None:
            out.close()  # type: ignore[union-attr]
    peak, user, system, source = int(ru.ru_maxrss) * 1024, ru.ru_utime, ru.ru_stime, "os.wait4"
    if tfile is not None:
        fields = tfile.read_text().split()
        tfile.unlink()
        if len(fields) >= 3 and fields[-3].isdigit():  # GNU time may prepend a status line
            peak, user, system = int(fields[-3]) * 1024, float(fields[-2]), float(fields[-1])
            source = "/usr/bin/time %M"
    res = {
        "wall_s": round(wall, 4),
        "returncode": proc.returncode,
        "peak_rss_bytes": peak,
        "peak_rss_source": source,
        "user_s": round(user, 3),
        "sys_s": round(system, 3),
        "timed_out": timed_out.is_set(),
    }
    if proc.returncode != 0 and log is not None and log.exists():
        res["log_tail"] = log.read_text(errors="replace")[-2000:]
    return res


def _neardup_bin() -> str:
    cand = Path(sys.executable).parent / "neardup"
    return str(cand) if cand.exists() else (shutil.which("neardup") or "neardup")


def neardup_cmd(inp: Path, out: Path, extra: Sequence[str] = ()) -> list[str]:
    return [_neardup_bin(), "dedup", str(inp), "--output", str(out), "--id-field", "id",
            "--quiet", *extra]


def peer_cmd(kind: str, inp: Path, out: Path, report: Path) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--worker", kind, "--input", str(inp),
            "--output", str(out), "--report-json", str(report)]


NEARDUP_VARIANTS: dict[str, list[str]] = {
    "neardup_lsh": [],
    "neardup_lsh_no_report": ["--no-report"],
    "neardup_exact": ["--method", "exact"],
}
CMD_TEXT = {
    "neardup_lsh": "neardup dedup corpus.jsonl --output OUT --id-field id --quiet",
    "neardup_lsh_no_report": "neardup dedup corpus.jsonl --output OUT --id-field id --quiet "
                             "--no-report",
    "neardup_exact": "neardup dedup corpus.jsonl --output OUT --id-field id --quiet "
                     "--method exact",
    "rensa": "json.loads; py word 5-grams; RMinHash.from_token_sets(chunk, 128, 42); "
             "RMinHashLSH(threshold=0.8, num_perm=128, num_bands=8).insert_many + query_all; "
             "accept m1.jaccard(m2) >= 0.8; union-find; keep first",
    "datasketch": "json.loads; py word 5-grams (bytes); MinHash.bulk(chunk, num_perm=128, "
                  "seed=42); MinHashLSH(threshold=0.8, num_perm=128) insertion_session + "
                  "query each; accept m1.jaccard(m2) >= 0.8; union-find; keep first",
}


def _file_digest(path: Path) -> str | None:
    if not path.exists():
        return None
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def run_pipeline(name: str, inp: Path, out: Path, work: Path,
                 timeout: float | None) -> dict[str, Any]:
    log = work / f"{out.name}.log"
    if name.startswith("neardup"):
        res = run_measured(neardup_cmd(inp, out, NEARDUP_VARIANTS[name]), timeout=timeout,
                           log=log)
        stats_path = out / "stats.json"
        if res["returncode"] == 0 and stats_path.exists():
            st = json.loads(stats_path.read_text())
            res["internal"] = {k: st.get(k) for k in (
                "timings_s", "peak_memory_bytes", "documents_out", "exact_duplicates",
                "near_duplicates", "clusters", "candidate_pairs", "verified_pairs",
                "candidate_overflow", "skipped_connected", "bands", "rows",
                "predicted_recall_at_threshold", "empty", "too_large", "truncated", "bytes_in",
            )}
    else:
        report = work / f"{out.name}.report.json"
        res = run_measured(peer_cmd(name, inp, out, report), timeout=timeout, log=log)
        if res["returncode"] == 0 and report.exists():
            res["internal"] = json.loads(report.read_text())
    res["outputs_sha256"] = {f: _file_digest(out / f) for f in ("kept.jsonl", "duplicates.jsonl")}
    res["output_files"] = sorted(p.name for p in out.iterdir()) if out.exists() else []
    return res


def warm_up(work: Path, corpus_path: Path) -> dict[str, Any]:
    """Tiny neardup runs (lsh and exact) so that the kernel cache is warm, and the
    bytecode of the neardup the runs import; not timed."""
    tiny = work / "warmup.jsonl"
    with open(corpus_path, "rb") as src, open(tiny, "wb") as dst:
        for _, line in zip(range(300), src, strict=False):
            dst.write(line)
    out: dict[str, Any] = {}
    for name, extra in (("lsh", []), ("exact", ["--method", "exact"])):
        o = work / f"warmup-{name}"
        r = run_measured(neardup_cmd(tiny, o, extra), log=work / f"warmup-{name}.log")
        if r["returncode"] != 0:
            raise SystemExit(f"neardup warm-up failed: {r.get('log_tail')}")
        out[name] = {"wall_s": r["wall_s"]}
        shutil.rmtree(o, ignore_errors=True)
    # Which neardup the CLI subprocesses import (a snapshot copy in a full run).
    probe = subprocess.run([sys.executable, "-c", "import neardup; print(neardup.__file__)"],
                           capture_output=True, text=True, check=False)
    out["cli_imports_neardup_from"] = probe.stdout.strip()
    # Warm includes the bytecode cache: an installed neardup has its .pyc files
    # (pip writes them), but an edited or copied source tree run with
    # PYTHONDONTWRITEBYTECODE would compile every module again in each timed run.
    if out["cli_imports_neardup_from"]:
        import compileall

        compileall.compile_dir(str(Path(out["cli_imports_neardup_from"]).parent), quiet=1)
    return out


def summarize_runs(runs: list[dict[str, Any]], n_docs: int, n_bytes: int) -> dict[str, Any]:
    ok = [r for r in runs if r["returncode"] == 0]
    if not ok:
        return {"failed": True, "runs": runs}
    walls = [r["wall_s"] for r in ok]
    best = min(walls)
    med = statistics.median(walls)
    best_run = ok[walls.index(best)]
    digests = {json.dumps(r["outputs_sha256"], sort_keys=True) for r in ok}
    return {
        "n_docs": n_docs,
        "text_bytes": n_bytes,
        "best_s": round(best, 4),
        "median_s": round(med, 4),
        "runs_s": walls,
        "docs_per_s": round(n_docs / best, 1),
        "docs_per_s_median": round(n_docs / med, 1),
        "mb_per_s": round(n_bytes / best / 1e6, 3),
        "mb_per_s_median": round(n_bytes / med / 1e6, 3),
        "peak_rss_bytes": max(r["peak_rss_bytes"] for r in ok),
        "peak_rss_bytes_best_run": best_run["peak_rss_bytes"],
        "cpu_s_best_run": round(best_run["user_s"] + best_run["sys_s"], 3),
        "outputs_identical_across_repeats": len(digests) == 1,
        "outputs_sha256": ok[0]["outputs_sha256"],
        "output_files": ok[0]["output_files"],
        "internal_best_run": best_run.get("internal"),
        "failed_runs": len(runs) - len(ok),
    }


def time_pipelines(names: list[str], inp: Path, work: Path, repeats: int, n_docs: int,
                   n_bytes: int, keep: Path, timeout: float | None,
                   label: str) -> dict[str, dict[str, Any]]:
    """Round robin over ``names``; the first run's outputs are kept in ``keep``/NAME."""
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in names}
    for rep in range(repeats):
        for name in names:
            out = work / f"{label}-{name}-{rep}"
            r = run_pipeline(name, inp, out, work, timeout)
            runs[name].append(r)
            print(f"  [{label} {rep + 1}/{repeats}] {name:24s} {r['wall_s']:8.2f} s  "
                  f"peak {r['peak_rss_bytes'] / 2**20:7.0f} MiB  rc {r['returncode']}",
                  file=sys.stderr, flush=True)
            if rep == 0 and out.exists():
                shutil.move(str(out), str(keep / name))
            else:
                shutil.rmtree(out, ignore_errors=True)
    return {k: {"command": CMD_TEXT[k], **summarize_runs(v, n_docs, n_bytes)}
            for k, v in runs.items()}


# --------------------------------------------------------------------------- quality


def neardup_sets(texts: list[str]) -> Any:
    from neardup import Config, ShingleSpec
    from neardup.text.hashing import hash_documents

    cfg = Config(threshold=THRESHOLD, shingle=ShingleSpec(kind="word", k=5), num_perm=NUM_PERM,
                 seed=SEED)
    return hash_documents(texts, cfg)


def python_sets(texts: list[str]) -> Any:
    """ShingleSets over 64-bit hashes of the peers' shingle strings (built-in ``hash``,
    stable within this process), so that neardup's exact join computes their truth."""
    import numpy as np

    from neardup import Config
    from neardup.text.hashing import SchemeDescriptor, ShingleSets

    n = len(texts)
    parts: list[Any] = []
    sizes = np.zeros(n, dtype=np.int64)
    raw = np.zeros(n, dtype=np.int64)
    for i, t in enumerate(texts):
        sh = py_shingles(t)
        raw[i] = len(sh)
        u = np.unique(np.fromiter(map(hash, sh), dtype=np.int64, count=len(sh)).view(np.uint64))
        parts.append(u)
        sizes[i] = u.shape[0]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=indptr[1:])
    data = np.concatenate(parts) if parts else np.empty(0, np.uint64)
    z = np.zeros(n, dtype=np.uint64)
    return ShingleSets(data, indptr, raw, np.zeros(n, dtype=np.bool_), z,
                       np.zeros(n, dtype=np.int64), SchemeDescriptor.from_config(Config()))


def exact_truth(sets: Any) -> dict[Pair, float]:
    from neardup.verify.oracle import allpairs_join

    tj = allpairs_join(sets, THRESHOLD)
    return {(int(a), int(b)): float(j) for a, b, j in zip(tj.a, tj.b, tj.jaccard, strict=True)}


def compare_truths(nd: dict[Pair, float], py: dict[Pair, float]) -> dict[str, Any]:
    both = nd.keys() & py.keys()
    diffs = [abs(nd[p] - py[p]) for p in both]
    return {
        "pairs_truth_neardup": len(nd),
        "pairs_truth_python": len(py),
        "pairs_in_both": len(both),
        "only_in_neardup_truth": len(nd.keys() - py.keys()),
        "only_in_python_truth": len(py.keys() - nd.keys()),
        "common_pairs_with_different_jaccard": sum(d > 1e-12 for d in diffs),
        "max_abs_jaccard_diff_on_common_pairs": round(max(diffs), 6) if diffs else 0.0,
    }


def read_neardup_output(out: Path, n: int) -> tuple[list[int], list[dict[str, Any]], bool]:
    """Cluster label per document (its representative), the edges, and whether
    duplicates.jsonl agrees with clusters.jsonl."""
    comp = list(range(n))
    edges: list[dict[str, Any]] = []
    with open(out / "clusters.jsonl", encoding="utf-8") as fh:
        for line in fh:
            c = json.loads(line)
            for m in c["members"]:
                comp[int(m)] = int(c["representative"])
            edges.extend(c["edges"])
    consistent = True
    dup_path = out / "duplicates.jsonl"
    with open(dup_path, encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            i = int(rec["id"])
            consistent &= comp[i] == int(rec["representative"]) and comp[i] != i
    return comp, edges, consistent


def read_peer_output(out: Path, n: int) -> tuple[list[int], list[Pair]]:
    comp = list(range(n))
    with open(out / "duplicates.jsonl", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            comp[int(rec["id"])] = int(rec["representative"])
    pairs: list[Pair] = []
    with open(out / "pairs.jsonl", encoding="utf-8") as fh:
        for line in fh:
            p = json.loads(line)
            a, b = int(p["a"]), int(p["b"])
            pairs.append((min(a, b), max(a, b)))
    return comp, pairs


def recall(comp: list[int], truth: dict[Pair, float]) -> dict[str, Any]:
    bins = {
        "j_ge_0.85": [p for p, j in truth.items() if j >= HIGH],
        "j_0.80_0.85": [p for p, j in truth.items() if THRESHOLD <= j < HIGH],
        "all_j_ge_0.80": list(truth),
    }
    out: dict[str, Any] = {}
    for name, ps in bins.items():
        found = sum(comp[a] == comp[b] for a, b in ps)
        out[f"truth_pairs_{name}"] = len(ps)
        out[f"recall_same_cluster_{name}"] = round(found / len(ps), 6) if ps else None
        out[f"missed_{name}"] = len(ps) - found
    return out


def pair_precision(pairs: list[Pair], sets: Any) -> dict[str, Any]:
    js = [sets.jaccard(a, b) for a, b in pairs]
    fp = [j for j in js if j < THRESHOLD - 1e-12]
    return {
        "reported_pairs": len(pairs),
        "false_positive_pairs": len(fp),
        "precision": round(1 - len(fp) / len(pairs), 6) if pairs else None,
        "false_positive_min_true_j": round(min(fp), 6) if fp else None,
        "false_positive_mean_true_j": round(sum(fp) / len(fp), 6) if fp else None,
    }


def neardup_edge_check(edges: list[dict[str, Any]], sets: Any) -> dict[str, Any]:
    """Recompute every edge of clusters.jsonl: near edges must report the exact J
    (>= t); identical edges must join documents with equal content hash and set."""
    import numpy as np

    bad_reported = mismatched = below = ident_bad = 0
    for e in edges:
        a, b = int(e["a"]), int(e["b"])
        j = sets.jaccard(a, b)
        if e["method"] == "identical":
            same = (sets.content_hash[a] == sets.content_hash[b]
                    and np.array_equal(sets.get(a), sets.get(b)))
            ident_bad += not same
            continue
        rep = e["jaccard"]
        bad_reported += rep is None or rep < THRESHOLD
        mismatched += rep is None or abs(rep - j) > 1e-9
        below += j < THRESHOLD - 1e-12
    near = sum(e["method"] != "identical" for e in edges)
    return {
        "edges": len(edges),
        "near_edges": near,
        "identical_edges": len(edges) - near,
        "near_edges_reported_j_below_t": bad_reported,
        "near_edges_reported_j_not_reproduced": mismatched,
        "near_edges_true_j_below_t": below,
        "identical_edges_not_identical": ident_bad,
        "precision": round(1 - (below + ident_bad) / len(edges), 6) if edges else None,
        "all_edges_verified": bad_reported == mismatched == below == ident_bad == 0,
    }


def score_outputs(keep: Path, names: list[str], n: int, nd_sets: Any, py_sets: Any | None,
                  truth_nd: dict[Pair, float], truth_py: dict[Pair, float] | None
                  ) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        d = keep / name
        if not (d / "duplicates.jsonl").exists():
            continue
        if name.startswith("neardup"):
            comp, edges, consistent = read_neardup_output(d, n)
            entry = {"truth_scheme": "neardup", **recall(comp, truth_nd),
                     "edge_check": neardup_edge_check(edges, nd_sets),
                     "duplicates_consistent_with_clusters": consistent}
            if truth_py is not None:
                entry["vs_python_truth"] = recall(comp, truth_py)
        else:
            comp, pairs = read_peer_output(d, n)
            own_sets, own_truth = (py_sets, truth_py) if truth_py is not None else (
                nd_sets, truth_nd)
            entry = {"truth_scheme": "python" if truth_py is not None else "neardup",
                     **recall(comp, own_truth), **pair_precision(pairs, own_sets),
                     "vs_neardup_truth": {**recall(comp, truth_nd),
                                          **pair_precision(pairs, nd_sets)}}
        out[name] = entry
        print(f"  {name:24s} recall J>=.85 {entry['recall_same_cluster_j_ge_0.85']}  "
              f"[.80,.85) {entry['recall_same_cluster_j_0.80_0.85']}  precision "
              f"{entry.get('precision', entry.get('edge_check', {}).get('precision'))}",
              file=sys.stderr, flush=True)
    return out


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--docs", type=int, default=None,
                   help="base paragraphs of the real corpus (default: all found, ~280k); "
                        "10%% planted copies are added")
    p.add_argument("--repeats", type=int, default=2, help="runs per pipeline (default 2)")
    p.add_argument("--scale-docs", type=int, default=SCALE_DOCS,
                   help=f"documents of the scale corpus (default {SCALE_DOCS:,})")
    p.add_argument("--skip-scale", action="store_true", help="skip the 1M-document run")
    p.add_argument("--scale-repeats", type=int, default=3,
                   help="runs per pipeline at scale (default 3: one run of 2 GiB in a VM "
                        "that has just freed another's memory can take 1.5x as long)")
    p.add_argument("--datasketch-docs", type=int, default=0,
                   help="time datasketch (and neardup, rensa) on the first N documents "
                        "instead of the full corpus (default 0: the full corpus)")
    p.add_argument("--peer-timeout", type=float, default=600.0,
                   help="kill a peer run after this many seconds (default 600)")
    p.add_argument("--no-scale-peers", action="store_true", help="scale: neardup only")
    p.add_argument("--no-snapshot", action="store_true",
                   help="measure the installed neardup in place (--quick implies this)")
    p.add_argument("--quick", action="store_true", help="tiny corpora for a CI smoke test")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help=f"JSON output (default {DEFAULT_OUT})")
    p.add_argument("--worker", choices=["rensa", "datasketch"], help=argparse.SUPPRESS)
    p.add_argument("--input", help=argparse.SUPPRESS)
    p.add_argument("--output", help=argparse.SUPPRESS)
    p.add_argument("--report-json", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.quick:
        a.docs = min(a.docs or 2000, 2000)
        a.repeats = 1
        a.scale_repeats = 1
        a.scale_docs = min(a.scale_docs, 20_000)
    return a


def _subset(src: Path, dst: Path, n: int) -> None:
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        for _, line in zip(range(n), fi, strict=False):
            fo.write(line)


def _carry_scale_over(out: Path, results: dict[str, Any]) -> None:
    """Keep an earlier run's scale section, marked with the commit it measured."""
    try:
        earlier = json.loads(out.read_text())
    except (OSError, ValueError):
        return
    scale = earlier.get("scale")
    if not isinstance(scale, dict):
        return
    if "carried_over_from" not in scale:
        src = earlier.get("machine", {}).get("neardup_source_at_start", {})
        scale["carried_over_from"] = {"git": src.get("git_commit"), "sha256": src.get("sha256")}
    results["scale"] = scale


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if a.worker:
        return worker_main(a)
    rc = run_in_snapshot(__file__, argv, skip=a.no_snapshot or a.quick)
    if rc is not None:
        return rc
    import corpus as corpus_mod

    t_start = time.perf_counter()
    cache = corpus_mod.CACHE_DIR
    name = f"quick-{a.docs}" if a.quick else None
    meta = corpus_mod.build_real_corpus(a.docs, name=name)
    cpath = Path(meta["path"])
    print(f"corpus {cpath}: {meta['n_docs']:,} docs, {meta['text_mb']} MB "
          f"({'cached' if meta['reused_cached_file'] else 'built'})", file=sys.stderr, flush=True)
    results: dict[str, Any] = {
        "benchmark": "end_to_end",
        "machine": machine_info(),
        "params": {"threshold": THRESHOLD, "high_bin": HIGH, "shingles": "word 5-grams",
                   "num_perm": NUM_PERM, "seed": SEED, "rensa_num_bands": RENSA_BANDS,
                   "repeats": a.repeats, "scale_repeats": a.scale_repeats,
                   "peer_chunk_docs": CHUNK, "quick": a.quick,
                   "docs_arg": a.docs, "datasketch_docs": a.datasketch_docs},
        "corpus": {k: v for k, v in meta.items() if k not in ("path", "parents_path")},
    }
    work = Path(tempfile.mkdtemp(prefix="e2e-", dir=cache))
    keep = work / "kept-outputs"
    keep.mkdir()
    try:
        results["warmup"] = warm_up(work, cpath)
        n, n_bytes = meta["n_docs"], meta["text_bytes"]
        names = [*NEARDUP_VARIANTS, "rensa"]
        if not a.datasketch_docs:
            names.append("datasketch")
        print(f"[timing: {', '.join(names)}; {a.repeats} round(s)]", file=sys.stderr, flush=True)
        timing = time_pipelines(names, cpath, work, a.repeats, n, n_bytes, keep,
                                a.peer_timeout, "main")
        results["pipelines"] = timing
        results["ratios"] = ratios(timing, "neardup_lsh")
        if "neardup_exact" in timing and "neardup_lsh" in timing:
            results["exact_over_lsh"] = results["ratios"].get("neardup_exact_over_neardup_lsh")
            results["report_cost_s"] = round(
                timing["neardup_lsh"]["best_s"] - timing["neardup_lsh_no_report"]["best_s"], 4)
        if a.datasketch_docs:
            sub = work / "subset.jsonl"
            _subset(cpath, sub, a.datasketch_docs)
            sub_texts = corpus_mod.read_texts(sub)
            sb = sum(len(t.encode("utf-8", "surrogatepass")) for t in sub_texts)
            print(f"[subset timing: first {len(sub_texts):,} docs]", file=sys.stderr, flush=True)
            keep_sub = work / "kept-subset"
            keep_sub.mkdir()
            st = time_pipelines(["neardup_lsh", "rensa", "datasketch"], sub, work, a.repeats,
                                len(sub_texts), sb, keep_sub, a.peer_timeout, "subset")
            results["subset"] = {"n_docs": len(sub_texts), "text_bytes": sb,
                                 "selection": f"first {len(sub_texts)} lines of the corpus file",
                                 "pipelines": st, "ratios": ratios(st, "neardup_lsh")}

        print("[quality: exact truths]", file=sys.stderr, flush=True)
        texts = corpus_mod.read_texts(cpath)
        t0 = time.perf_counter()
        nd_sets = neardup_sets(texts)
        truth_nd = exact_truth(nd_sets)
        t1 = time.perf_counter()
        py_sets = python_sets(texts)
        truth_py = exact_truth(py_sets)
        t2 = time.perf_counter()
        parents = json.loads(Path(meta["parents_path"]).read_text())
        results["truth"] = {
            **compare_truths(truth_nd, truth_py),
            "time_neardup_hash_and_allpairs_join_s": round(t1 - t0, 3),
            "time_python_shingles_hash_and_join_s": round(t2 - t1, 3),
            "pairs_j_ge_0.85_neardup": sum(j >= HIGH for j in truth_nd.values()),
            "pairs_j_0.80_0.85_neardup": sum(j < HIGH for j in truth_nd.values()),
            "planted_pairs": sum(p >= 0 for p in parents),
            "planted_pairs_with_true_j_ge_t": sum(
                (p, i) in truth_nd for i, p in enumerate(parents) if p >= 0),
            "empty_docs_neardup": int((nd_sets.raw_counts == 0).sum()),
            "empty_docs_python": int((py_sets.raw_counts == 0).sum()),
        }
        results["quality"] = score_outputs(keep, names, n, nd_sets, py_sets, truth_nd, truth_py)
        if "subset" in results:
            # The self-join of the first m documents is the full join restricted to them.
            m = results["subset"]["n_docs"]
            results["subset"]["quality"] = score_outputs(
                work / "kept-subset", ["neardup_lsh", "rensa", "datasketch"], m, nd_sets,
                py_sets, {p: j for p, j in truth_nd.items() if p[1] < m},
                {p: j for p, j in truth_py.items() if p[1] < m})
        del texts, nd_sets, py_sets, truth_nd, truth_py
        for d in keep.iterdir():
            shutil.rmtree(d, ignore_errors=True)

        if not a.skip_scale:
            results["scale"] = run_scale(a, work)
        else:
            _carry_scale_over(a.out, results)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    write_results(a.out, results, t_start)
    return 0


def run_scale(a: argparse.Namespace, work: Path) -> dict[str, Any]:
    import corpus as corpus_mod

    meta = corpus_mod.build_scale_corpus(a.scale_docs,
                                         name=f"quick-scale-{a.scale_docs}" if a.quick else None)
    spath = Path(meta["path"])
    print(f"[scale: {meta['n_docs']:,} docs, {meta['text_mb']} MB "
          f"({'cached' if meta['reused_cached_file'] else 'built'})]", file=sys.stderr, flush=True)
    keep = work / "kept-scale"
    keep.mkdir()
    names = ["neardup_lsh"] + ([] if a.no_scale_peers else ["rensa"])
    timing = time_pipelines(names, spath, work, a.scale_repeats, meta["n_docs"],
                            meta["text_bytes"], keep, a.peer_timeout, "scale")
    out: dict[str, Any] = {
        "corpus": {k: v for k, v in meta.items() if k != "path"},
        "construction": f"neardup.testing.synthetic_documents({meta['base_docs']}, seed="
                        f"{corpus_mod.SCALE_SEED}, words={corpus_mod.SCALE_WORDS}) + "
                        f"plant_near_duplicates(copies={meta['planted_copies']}, edit_rate="
                        f"{corpus_mod.EDIT_RATES}, seed={corpus_mod.PLANT_SEED})",
        "pipelines": timing,
        "ratios": ratios(timing, "neardup_lsh"),
        "memory_limit_bytes": MEMORY_LIMIT,
    }
    nd = timing.get("neardup_lsh", {})
    if not nd.get("failed"):
        internal = nd.get("internal_best_run") or {}
        out["neardup_timings_s"] = internal.get("timings_s")
        out["neardup_stats_peak_memory_bytes"] = internal.get("peak_memory_bytes")
        out["neardup_within_memory_limit"] = nd["peak_rss_bytes"] <= MEMORY_LIMIT
    r = timing.get("rensa", {})
    if r.get("failed"):
        out["rensa_note"] = (f"rensa did not finish within --peer-timeout {a.peer_timeout} s"
                             if any(x.get("timed_out") for x in r["runs"]) else "rensa failed")
    print("[scale quality: neardup exact truth]", file=sys.stderr, flush=True)
    texts = corpus_mod.read_texts(spath)
    t0 = time.perf_counter()
    sets = neardup_sets(texts)
    truth = exact_truth(sets)
    out["truth"] = {"pairs": len(truth), "time_s": round(time.perf_counter() - t0, 3),
                    "note": "synthetic words are lowercase ASCII separated by single spaces: "
                            "neardup's and the Python shingle sets coincide, so every "
                            "pipeline is scored against neardup's exact join"}
    del texts
    out["quality"] = score_outputs(keep, names, meta["n_docs"], sets, None, truth, None)
    return out


if __name__ == "__main__":
    sys.exit(main())

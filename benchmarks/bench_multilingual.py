"""Planted near duplicates in 13 languages: neardup's defaults vs rensa and datasketch.

The corpus is ``multilingual_corpus.py``'s: paragraphs of real translated text (the
gettext catalogues of pip packages and of the machine's Debian packages) in Chinese
(simplified and traditional), Japanese, Thai, Khmer, Myanmar, Korean, Russian,
Arabic, Hindi, German, Vietnamese and English, and one planted copy of each with
0.5–1 % of its characters (scripts without spaces) or words (the others) edited.

Pipelines, all on the same JSONL file, at their defaults (as ``bench_end_to_end.py``
runs them, whose subprocess pipelines this script reuses):

* ``neardup_lsh`` — ``neardup dedup corpus.jsonl --output OUT --id-field id --quiet``
  (default settings: word 5-grams, threshold 0.8), so it measures whichever
  tokenizer the imported neardup has;
* ``rensa`` and ``datasketch`` — their usual pipelines: Python word 5-grams of
  ``re.findall(r"\\w+", text.casefold())``, MinHash (128 permutations), MinHashLSH at
  0.8, a candidate accepted when the signatures estimate J >= 0.8.

Reported per language: the planted copies, how many of them still have exact
Jaccard >= 0.8 with their original under neardup's default scheme and under the
peers' Python shingles, and the fraction of planted copies each pipeline puts in
the same cluster as their original.  Every edge of neardup's ``clusters.jsonl`` is
verified twice: against the exact Jaccard of neardup's shingle-hash sets
(:func:`neardup.hash_documents`, the reported score must be reproduced and >= the
threshold) and against the Jaccard of the shingle *strings* of the Python reference
(:func:`neardup.shingles`, no hashing).  Speed: the CLI wall time per pipeline (best
of ``--repeats``, interpreter start included), and neardup's library throughput
(:func:`neardup.find_duplicates` at defaults, in process, warm, best of
``--repeats``) on the whole corpus, on its Chinese + Japanese part, and per language.

Usage::

    python benchmarks/bench_multilingual.py --pip-download --source /usr/share/locale \\
        --max-docs-per-lang 2000 --label "after: script-aware tokens"
    python benchmarks/bench_multilingual.py --corpus /tmp/ml.jsonl --quick --out /tmp/ml.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import bench_end_to_end as e2e
import multilingual_corpus as mc
from _common import (
    machine_info,
    py_shingles,
    ratios,
    run_in_snapshot,
    timed,
    write_results,
)

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "multilingual.json"
CJK = ("zh_Hans", "zh_Hant", "ja")
PIPELINES = ("neardup_lsh", "rensa", "datasketch")
QUICK_DOCS_PER_LANG = 100


def read_corpus(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        recs = [json.loads(line) for line in fh if line.strip()]
    for i, r in enumerate(recs):
        if r["id"] != i:
            raise SystemExit(f"{path}: line {i + 1} has id {r['id']}; ids must be line numbers")
    return recs


def write_subset(recs: list[dict[str, Any]], langs: tuple[str, ...], path: Path) -> tuple[int, int]:
    """The records of ``langs``, renumbered, as a JSONL file; (documents, text bytes)."""
    n = nbytes = 0
    with open(path, "w", encoding="utf-8") as fh:
        for r in recs:
            if r["lang"] in langs:
                fh.write(json.dumps({"id": n, "text": r["text"]}, ensure_ascii=False) + "\n")
                n += 1
                nbytes += len(r["text"].encode("utf-8"))
    return n, nbytes


# --------------------------------------------------------------------------- quality


def reference_check(edges: list[dict[str, Any]], texts: list[str], cfg: Any) -> dict[str, Any]:
    """Every near edge against the Jaccard of the Python reference's shingle strings."""
    from neardup import shingles

    cache: dict[int, set[str]] = {}

    def sset(i: int) -> set[str]:
        if i not in cache:
            cache[i] = set(shingles(texts[i], cfg.shingle, normalizer=cfg.normalizer))
        return cache[i]

    below = checked = 0
    worst = 0.0
    for e in edges:
        if e["method"] == "identical":
            continue
        a, b = sset(int(e["a"])), sset(int(e["b"]))
        j = len(a & b) / len(a | b)
        checked += 1
        below += j < cfg.threshold - 1e-12
        if e.get("jaccard") is not None:
            worst = max(worst, abs(j - e["jaccard"]))
    return {"near_edges_checked": checked, "string_jaccard_below_t": below,
            "max_abs_diff_string_vs_reported": round(worst, 9)}


def per_language(recs: list[dict[str, Any]], comps: dict[str, list[int]], nd_sets: Any,
                 threshold: float) -> dict[str, dict[str, Any]]:
    py_cache: dict[int, set[str]] = {}

    def py_set(i: int) -> set[str]:
        if i not in py_cache:
            py_cache[i] = set(py_shingles(recs[i]["text"]))
        return py_cache[i]

    out: dict[str, dict[str, Any]] = {}
    for r in recs:
        d = out.setdefault(r["lang"], {"base": 0, "planted": 0, "text_bytes": 0,
                                       "true_j_ge_t_neardup_scheme": 0,
                                       "true_j_ge_t_python_scheme": 0, "_jsum": 0.0,
                                       **{f"coclustered_{p}": 0 for p in comps}})
        d["text_bytes"] += len(r["text"].encode("utf-8"))
        if r["orig"] is None:
            d["base"] += 1
            continue
        i, o = r["id"], r["orig"]
        d["planted"] += 1
        j = nd_sets.jaccard(o, i)
        d["_jsum"] += j
        d["true_j_ge_t_neardup_scheme"] += j >= threshold
        a, b = py_set(i), py_set(o)
        d["true_j_ge_t_python_scheme"] += bool(a | b) and len(a & b) / len(a | b) >= threshold
        for p, comp in comps.items():
            d[f"coclustered_{p}"] += comp[i] == comp[o]
    for d in out.values():
        n = d["planted"]
        d["mean_true_j_neardup_scheme"] = round(d.pop("_jsum") / n, 4) if n else None
        for p in comps:
            d[f"recall_{p}"] = round(d[f"coclustered_{p}"] / n, 4) if n else None
    return dict(sorted(out.items(), key=lambda kv: mc.LANGS.index(kv[0])
                       if kv[0] in mc.LANGS else 99))


def library_throughput(recs: list[dict[str, Any]], repeats: int) -> dict[str, Any]:
    """In-process ``find_duplicates(texts)`` at defaults: whole corpus, CJK, per language."""
    from neardup import find_duplicates

    groups: dict[str, list[str]] = {"all": [r["text"] for r in recs],
                                    "cjk": [r["text"] for r in recs if r["lang"] in CJK]}
    for r in recs:
        groups.setdefault(r["lang"], []).append(r["text"])
    find_duplicates(groups["all"][:200])  # compile / load the kernels
    out: dict[str, Any] = {}
    for name, texts in groups.items():
        if not texts:
            continue
        runs = [timed(lambda t=texts: find_duplicates(t)) for _ in range(repeats)]
        nbytes = sum(len(t.encode("utf-8")) for t in texts)
        best = min(runs)
        out[name] = {"n_docs": len(texts), "text_bytes": nbytes, "best_s": round(best, 4),
                     "runs_s": [round(x, 4) for x in runs],
                     "mb_per_s": round(nbytes / best / 1e6, 3) if best > 0 else None}
    return out


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, default=None,
                   help="a corpus written by multilingual_corpus.py (default: build one "
                        "from --source / --pip-download into benchmarks/.corpus/)")
    mc.add_source_args(p)
    p.add_argument("--repeats", type=int, default=3, help="runs per pipeline (default 3)")
    p.add_argument("--label", default="",
                   help="what this run measures (e.g. which tokenizer), kept in the JSON")
    p.add_argument("--peer-timeout", type=float, default=1800.0,
                   help="kill a peer run after this many seconds (default 1800)")
    p.add_argument("--no-snapshot", action="store_true",
                   help="measure the installed neardup in place (--quick implies this)")
    p.add_argument("--quick", action="store_true",
                   help=f"one repeat, and at most {QUICK_DOCS_PER_LANG} paragraphs per "
                        "language when the corpus is built here (a smoke test)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help=f"JSON output (default {DEFAULT_OUT})")
    a = p.parse_args(argv)
    if a.quick:
        a.repeats = 1
        if a.max_docs_per_lang is None:
            a.max_docs_per_lang = QUICK_DOCS_PER_LANG
    return a


def corpus_path(a: argparse.Namespace, tmp: Path) -> tuple[Path, dict[str, Any] | None]:
    if a.corpus is not None:
        meta_file = Path(str(a.corpus) + ".meta.json")
        return a.corpus, json.loads(meta_file.read_text()) if meta_file.exists() else None
    sources = mc.sources_from_args(a, tmp)
    key = json.dumps([mc.FORMAT, [str(s) for s in sources], a.max_docs_per_lang, a.copies,
                      a.seed])
    path = mc.CACHE_DIR / f"multilingual-{hashlib.sha256(key.encode()).hexdigest()[:12]}.jsonl"
    meta = mc.build(sources, path, max_docs_per_lang=a.max_docs_per_lang, copies=a.copies,
                    seed=a.seed)
    return path, meta


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    rc = run_in_snapshot(__file__, argv, skip=a.no_snapshot or a.quick)
    if rc is not None:
        return rc
    from neardup import Config, hash_documents

    t_start = time.perf_counter()
    mc.CACHE_DIR.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="ml-", dir=mc.CACHE_DIR))
    try:
        cpath, meta = corpus_path(a, work)
        recs = read_corpus(cpath)
        texts = [r["text"] for r in recs]
        n, n_bytes = len(recs), sum(len(t.encode("utf-8")) for t in texts)
        print(f"corpus {cpath}: {n:,} docs, {n_bytes / 1e6:.1f} MB", file=sys.stderr, flush=True)
        cfg = Config()
        results: dict[str, Any] = {
            "benchmark": "multilingual",
            "label": a.label,
            "machine": machine_info(),
            "params": {"repeats": a.repeats, "quick": a.quick, "neardup_config": repr(cfg),
                       "peers": {k: e2e.CMD_TEXT[k] for k in ("rensa", "datasketch")}},
            "corpus": {"file": cpath.name, "n_docs": n, "text_bytes": n_bytes,
                       "sha256": hashlib.sha256(cpath.read_bytes()).hexdigest()[:16],
                       "meta": {k: v for k, v in (meta or {}).items() if k != "path"}},
        }
        results["warmup"] = e2e.warm_up(work, cpath)
        keep = work / "kept"
        keep.mkdir()
        print(f"[timing: {', '.join(PIPELINES)}; {a.repeats} round(s)]", file=sys.stderr,
              flush=True)
        timing = e2e.time_pipelines(list(PIPELINES), cpath, work, a.repeats, n, n_bytes, keep,
                                    a.peer_timeout, "all")
        results["pipelines"] = timing
        results["ratios"] = ratios(timing, "neardup_lsh")
        cjk_path = work / "cjk.jsonl"
        cn, cb = write_subset(recs, CJK, cjk_path)
        if cn:
            keep_cjk = work / "kept-cjk"
            keep_cjk.mkdir()
            ct = e2e.time_pipelines(list(PIPELINES), cjk_path, work, a.repeats, cn, cb,
                                    keep_cjk, a.peer_timeout, "cjk")
            results["cjk_pipelines"] = {"langs": list(CJK), "pipelines": ct,
                                        "ratios": ratios(ct, "neardup_lsh")}
        print("[library throughput]", file=sys.stderr, flush=True)
        results["library_throughput"] = library_throughput(recs, a.repeats)

        print("[quality]", file=sys.stderr, flush=True)
        nd_sets = hash_documents(texts, cfg)
        comps: dict[str, list[int]] = {}
        py_sets = None
        for name in PIPELINES:
            d = keep / name
            if not (d / "duplicates.jsonl").exists():
                continue
            if name == "neardup_lsh":
                comp, edges, consistent = e2e.read_neardup_output(d, n)
                st = json.loads((d / "stats.json").read_text())
                results["neardup_edges"] = {
                    **e2e.neardup_edge_check(edges, nd_sets),
                    "python_reference": reference_check(edges, texts, cfg),
                    "duplicates_consistent_with_clusters": consistent,
                    "cli_threshold": st.get("threshold"),
                    "cross_language_edges": sum(
                        recs[int(e["a"])]["lang"] != recs[int(e["b"])]["lang"] for e in edges),
                }
                if st.get("threshold") != cfg.threshold:
                    raise SystemExit(f"the CLI ran at threshold {st.get('threshold')}, "
                                     f"Config() has {cfg.threshold}")
            else:
                comp, pairs = e2e.read_peer_output(d, n)
                if py_sets is None:
                    py_sets = e2e.python_sets(texts)
                results.setdefault("peer_pairs", {})[name] = {
                    "own_scheme": e2e.pair_precision(pairs, py_sets),
                    "neardup_scheme": e2e.pair_precision(pairs, nd_sets)}
            comps[name] = comp
        results["per_lang"] = per_language(recs, comps, nd_sets, cfg.threshold)
        results["planted_total"] = {
            k: sum(d[k] for d in results["per_lang"].values())
            for k in ("planted", "true_j_ge_t_neardup_scheme", "true_j_ge_t_python_scheme",
                      *(f"coclustered_{p}" for p in comps))}
        for lang, d in results["per_lang"].items():
            print(f"  {lang:8s} planted {d['planted']:5d}  " + "  ".join(
                f"{p} {d[f'recall_{p}']}" for p in comps), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_results(a.out, results, t_start)
    return 0


if __name__ == "__main__":
    sys.exit(main())

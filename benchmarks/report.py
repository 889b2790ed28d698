"""Print the Markdown tables of benchmarks/README.md from the raw JSON results.

Usage::

    python benchmarks/report.py                       # reads benchmarks/results/*.json
    python benchmarks/report.py --signatures A.json --recall B.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

_E2E_ORDER = (
    "neardup_minhash",
    "neardup_oph",
    "rensa_rminhash_update",
    "rensa_rminhash_digest_matrix",
    "rensa_cminhash_update",
    "rensa_cminhash_digests_batch",
    "rensa_rminhash_rho_matrix",
    "datasketch_bulk",
    "datasketch_update_batch",
    "python_shingles_only",
)
_STAGE_ORDER = (
    "neardup_stage_hash_documents",
    "neardup_stage_from_sets_minhash",
    "neardup_stage_from_sets_oph",
    "rensa_rminhash_update_sketch_only",
    "rensa_rminhash_digest_matrix_sketch_only",
    "rensa_cminhash_update_sketch_only",
    "rensa_cminhash_digests_batch_sketch_only",
    "rensa_rminhash_rho_matrix_sketch_only",
    "datasketch_bulk_sketch_only",
    "datasketch_update_batch_sketch_only",
)


def _fmt(x: float | None, spec: str = ",.0f") -> str:
    return "–" if x is None else format(x, spec)


def _threads(name: str) -> str:
    if name.startswith("neardup"):
        return "numba, 2"
    if name.startswith(("rensa_rminhash_digest_matrix", "rensa_rminhash_rho_matrix",
                        "rensa_cminhash_digests_batch")):
        return "Rayon pool, ≤ 2"
    return "1"


def signature_tables(d: dict[str, Any]) -> str:
    out: list[str] = []
    st = d.get("single_thread", {}).get("corpora", {})
    for cname, block in d["corpora"].items():
        res, info, sub = block["methods"], block["info"], block["datasketch_subset"]
        nd = res["neardup_minhash"]["mb_per_s"]
        out.append(
            f"**{cname}** — {info['n_docs']:,} docs, {info['bytes'] / 1e6:.1f} MB, "
            f"{info['mean_bytes_per_doc']:.0f} B and {info['mean_shingles_per_doc']:.0f} "
            f"shingles per doc (datasketch: {sub['n_docs']:,} docs, every {sub['stride']}th)\n"
        )
        out.append("| method (raw text → signature) | threads | docs/s best | docs/s median "
                   "| MB/s | neardup (minhash) speedup |")
        out.append("|---|---|---:|---:|---:|---:|")
        for name in _E2E_ORDER:
            if name not in res:
                continue
            r = res[name]
            out.append(
                f"| `{name}` | {_threads(name)} | {_fmt(r['docs_per_s'])} | "
                f"{_fmt(r['docs_per_s_median'])} | {_fmt(r['mb_per_s'], '.1f')} | "
                f"{nd / r['mb_per_s']:.2f}× |"
            )
        out.append("")
        out.append("| stage / sketch only (input prepared beforehand) | docs/s best | MB/s |")
        out.append("|---|---:|---:|")
        for name in _STAGE_ORDER:
            if name in res:
                r = res[name]
                out.append(f"| `{name}` | {_fmt(r['docs_per_s'])} | {_fmt(r['mb_per_s'], '.1f')} |")
        out.append("")
        if cname in st:
            sres = st[cname]["methods"]
            snd = sres["neardup_minhash"]["mb_per_s"]
            out.append("| single thread (`NUMBA_NUM_THREADS=1 RAYON_NUM_THREADS=1`) "
                       "| docs/s best | docs/s median | neardup (minhash, 1 thread) speedup |")
            out.append("|---|---:|---:|---:|")
            merged = {**{k: v for k, v in res.items() if k in (
                "rensa_rminhash_update", "rensa_cminhash_update", "datasketch_bulk",
                "datasketch_update_batch")}, **sres}
            for name in _E2E_ORDER:
                if name in merged:
                    r = merged[name]
                    note = "" if name in sres else " (main run; single-threaded anyway)"
                    out.append(
                        f"| `{name}`{note} | {_fmt(r['docs_per_s'])} | "
                        f"{_fmt(r['docs_per_s_median'])} | {snd / r['mb_per_s']:.2f}× |"
                    )
            out.append("")
    fc = d.get("first_call", {})
    if fc:
        out.append("| first call in a fresh process (5 docs) | import s | first call s "
                   "| second call s | first OPH call s |")
        out.append("|---|---:|---:|---:|---:|")
        for key, label in (("warm_numba_cache", "numba cache warm"),
                           ("cold_numba_cache", "numba cache empty (compiles)")):
            if key in fc and "first_call_s" in fc[key]:
                r = fc[key]
                out.append(
                    f"| {label} | {r['import_s']:.2f} | {r['first_call_s']:.2f} | "
                    f"{r['second_call_s']:.3f} | {r['first_call_oph_after_minhash_s']:.2f} |"
                )
        out.append("")
    return "\n".join(out)


def recall_table(d: dict[str, Any]) -> str:
    t = d["truth"]
    out = [
        f"{d['corpus']['n_docs']:,} docs; truth: {t['pairs_truth_neardup']} pairs with J ≥ 0.8 "
        f"({t['pairs_j_ge_0.85_neardup']} with J ≥ 0.85, {t['pairs_j_0.80_0.85_neardup']} in "
        f"[0.8, 0.85)); neardup and Python-set truths agree on "
        f"{t['pairs_in_both']}/{max(t['pairs_truth_neardup'], t['pairs_truth_python'])} pairs "
        f"({t['only_in_neardup_truth']} only in neardup's, {t['only_in_python_truth']} only in "
        f"the Python one).\n",
        "| method | b × r | P(cand) at 0.8 | candidates | reported | recall J≥0.85 direct / "
        "cluster | recall [0.8,0.85) direct / cluster | precision | time s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, m in d["methods"].items():
        b, r = m["layout_bands_rows"]
        if name.startswith("neardup"):
            ex = m["expanded_over_identical"]
            hi = (f"{m['recall_direct_j_ge_0.85']:.3f} ({ex['recall_direct_j_ge_0.85']:.3f}) / "
                  f"{m['recall_same_cluster_j_ge_0.85']:.3f}")
            lo = (f"{m['recall_direct_j_0.80_0.85']:.3f} ({ex['recall_direct_j_0.80_0.85']:.3f}) / "
                  f"{m['recall_same_cluster_j_0.80_0.85']:.3f}")
            time_s = m["time_s"]
        else:
            hi = f"{m['recall_direct_j_ge_0.85']:.3f} / {m['recall_same_cluster_j_ge_0.85']:.3f}"
            lo = (f"{m['recall_direct_j_0.80_0.85']:.3f} / "
                  f"{m['recall_same_cluster_j_0.80_0.85']:.3f}")
            # peers: Python shingle lists + signatures + index/query (+ the check)
            time_s = d["corpus"]["time_python_shingles_s"] + m["time_signatures_s"] + \
                m["time_index_query_s"]
            if m.get("accept") == "estimate":
                time_s += m["time_estimate_check_s"]
            elif m.get("accept") == "exact_verify":
                time_s += m["time_exact_check_s"]
        out.append(
            f"| `{name}` | {b} × {r} | {m['predicted_candidate_probability_at_t']:.3f} | "
            f"{m['candidate_pairs']:,} | {m['reported_pairs']:,} | {hi} | {lo} | "
            f"{m['precision']:.3f} | {time_s:.2f} |"
        )
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--signatures", type=Path, default=HERE / "results" / "signatures.json")
    p.add_argument("--recall", type=Path, default=HERE / "results" / "recall.json")
    a = p.parse_args(argv)
    if a.signatures.exists():
        print(signature_tables(json.loads(a.signatures.read_text())))
    if a.recall.exists():
        print(recall_table(json.loads(a.recall.read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())

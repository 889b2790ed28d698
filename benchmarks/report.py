"""Print the Markdown tables of benchmarks/README.md from the raw JSON results.

Usage::

    python benchmarks/report.py                       # reads benchmarks/results/*.json
    python benchmarks/report.py --signatures A.json --recall B.json
    python benchmarks/report.py --only end_to_end,numpy --end-to-end C.json --numpy D.json
"""

from __future__ import annotations

import argparse
import json
import statistics
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


_E2E_PIPELINES = ("neardup_lsh", "neardup_lsh_no_report", "neardup_exact", "rensa", "datasketch")
_MiB = 2**20


def _pipeline_rows(timing: dict[str, Any], base: str = "neardup_lsh") -> list[str]:
    out = ["| pipeline (file in → outputs written) | wall s best | wall s median | docs/s | MB/s "
           "| peak RSS MiB | CPU s | time / neardup_lsh |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    b = timing.get(base, {}).get("best_s")
    for name in _E2E_PIPELINES:
        r = timing.get(name)
        if r is None:
            continue
        if r.get("failed"):
            note = "timed out" if any(x.get("timed_out") for x in r["runs"]) else "failed"
            out.append(f"| `{name}` | {note} | | | | | | |")
            continue
        ratio = f"{r['best_s'] / b:.2f}×" if b else "–"
        out.append(
            f"| `{name}` | {r['best_s']:.2f} | {r['median_s']:.2f} | {_fmt(r['docs_per_s'])} | "
            f"{r['mb_per_s']:.1f} | {r['peak_rss_bytes'] / _MiB:,.0f} | "
            f"{r['cpu_s_best_run']:.1f} | "
            f"{ratio} |"
        )
    return out


def _stage_rows(timing: dict[str, Any]) -> list[str]:
    out = []
    for name in _E2E_PIPELINES:
        r = timing.get(name, {})
        st = (r.get("internal_best_run") or {}).get("timings_s")
        if not st:
            continue
        parts = ", ".join(f"{k} {v:.2f}" for k, v in st.items() if k != "total")
        out.append(f"| `{name}` | {st.get('total', 0):.2f} | {parts} |")
    if out:
        out = ["| pipeline | in-process total s | stages (s, best run) |", "|---|---:|---|", *out]
    return out


def _quality_rows(q: dict[str, Any], timing: dict[str, Any]) -> list[str]:
    out = ["| pipeline | truth | recall J≥0.85 | recall [0.8,0.85) | precision | reported "
           "edges / pairs | docs kept |", "|---|---|---:|---:|---:|---:|---:|"]
    for name in _E2E_PIPELINES:
        m = q.get(name)
        if m is None:
            continue
        if "edge_check" in m:
            ec = m["edge_check"]
            prec, rep = ec["precision"], f"{ec['edges']:,} ({ec['near_edges']:,} near)"
            prec_s = f"{prec:.3f}" + (" (all verified)" if ec["all_edges_verified"] else "")
        else:
            prec, rep = m["precision"], f"{m['reported_pairs']:,}"
            prec_s = "–" if prec is None else f"{prec:.3f}"
        internal = timing.get(name, {}).get("internal_best_run") or {}
        kept = internal.get("documents_out")
        out.append(
            f"| `{name}` | {m['truth_scheme']} | {m['recall_same_cluster_j_ge_0.85']:.4f} | "
            f"{m['recall_same_cluster_j_0.80_0.85']:.4f} | {prec_s} | {rep} | {_fmt(kept)} |"
        )
    return out


def end_to_end_tables(d: dict[str, Any]) -> str:
    c = d["corpus"]
    src = "; ".join(f"{k}: {v['paragraphs']:,} paragraphs from {v['files']:,} files"
                    for k, v in c.get("sources", {}).items())
    out = [
        f"**Real corpus** — {c['n_docs']:,} docs ({c['base_docs']:,} distinct paragraphs + "
        f"{c['planted_copies']:,} planted copies), {c['text_bytes'] / 1e6:.1f} MB of text "
        f"({c['file_bytes'] / 1e6:.1f} MB JSONL), {c['mean_bytes_per_doc']:.0f} B per doc. "
        f"Sources: {src}.\n",
        *_pipeline_rows(d["pipelines"]),
        "",
    ]
    if d.get("exact_over_lsh") is not None:
        out.append(f"`--method exact` / LSH: **{d['exact_over_lsh']:.2f}×**; report.html costs "
                   f"{d['report_cost_s']:.2f} s (`neardup_lsh` − `neardup_lsh_no_report`).\n")
    out += [*_stage_rows(d["pipelines"]), ""]
    t = d["truth"]
    out.append(
        f"Truth (exact join at 0.8): {t['pairs_truth_neardup']:,} pairs over neardup's sets "
        f"({t['pairs_j_ge_0.85_neardup']:,} with J ≥ 0.85, {t['pairs_j_0.80_0.85_neardup']:,} "
        f"in [0.8, 0.85)), {t['pairs_truth_python']:,} over the peers' Python shingle sets; "
        f"{t['pairs_in_both']:,} in both ({t['only_in_neardup_truth']} only in neardup's, "
        f"{t['only_in_python_truth']} only in the Python one). Recall counts a truth pair as "
        f"found when both documents are in one output cluster.\n")
    out += [*_quality_rows(d["quality"], d["pipelines"]), ""]
    sub = d.get("subset")
    if sub:
        out.append(f"**Subset** — {sub['selection']} ({sub['n_docs']:,} docs, "
                   f"{sub['text_bytes'] / 1e6:.1f} MB): datasketch is timed here only.\n")
        out += [*_pipeline_rows(sub["pipelines"]), ""]
        if sub.get("quality"):
            out += [*_quality_rows(sub["quality"], sub["pipelines"]), ""]
    sc = d.get("scale")
    if sc:
        cc = sc["corpus"]
        out.append(f"**Scale** — {cc['n_docs']:,} docs, {cc['text_bytes'] / 1e6:.1f} MB "
                   f"({cc['mean_bytes_per_doc']:.0f} B per doc): {sc['construction']}.\n")
        if sc.get("carried_over_from"):
            src = sc["carried_over_from"]
            out.append(f"(Scale results carried over from an earlier run, git "
                       f"`{src.get('git')}`; `--skip-scale` runs keep them.)\n")
        out += [*_pipeline_rows(sc["pipelines"]), ""]
        out += [*_stage_rows(sc["pipelines"]), ""]
        if sc.get("neardup_stats_peak_memory_bytes") is not None:
            nd = sc["pipelines"]["neardup_lsh"]
            out.append(
                f"neardup peak memory: {nd['peak_rss_bytes'] / 2**30:.2f} GiB (GNU time), "
                f"stats.json `peak_memory_bytes` "
                f"{sc['neardup_stats_peak_memory_bytes'] / 2**30:.2f} GiB; default limit "
                f"{sc['memory_limit_bytes'] / 2**30:.0f} GiB: "
                f"{'within' if sc['neardup_within_memory_limit'] else 'EXCEEDED'}.\n")
        if sc.get("quality"):
            out.append(f"Truth: {sc['truth']['pairs']:,} pairs (exact join, "
                       f"{sc['truth']['time_s']:.0f} s).\n")
            out += [*_quality_rows(sc["quality"], sc["pipelines"]), ""]
    return "\n".join(out)


def numpy_table(d: dict[str, Any]) -> str:
    out = ["| corpus | method | ms best | ms median | docs/s | numba (2 threads) speedup | "
           "numba (1 thread) speedup | byte-identical |", "|---|---|---:|---:|---:|---:|---:|---|"]
    for cname, block in d["corpora"].items():
        for m, r in block["methods"].items():
            ident = r.get("byte_identical_to_minhasher")
            out.append(
                f"| {cname} ({block['info']['n_docs']:,} docs, "
                f"{block['info']['mean_shingles_per_doc']:.0f} shingles/doc) | `{m}` | "
                f"{r['best_s'] * 1e3:.1f} | {r['median_s'] * 1e3:.1f} | {_fmt(r['docs_per_s'])} | "
                f"{_fmt(r.get('numba_speedup'), '.1f')}{'×' if 'numba_speedup' in r else ''} | "
                f"{_fmt(r.get('numba_1_thread_speedup'), '.1f')}"
                f"{'×' if 'numba_1_thread_speedup' in r else ''} | "
                f"{'' if ident is None else ('yes' if ident else 'NO')} |"
            )
    return "\n".join(out) + "\n"


def vectors_table(d: dict[str, Any]) -> str:
    c = d["corpus"]
    nd = d["neardup"]
    head = (
        f"**Vectors** — {c['n']:,} × {c['dim']} float32 ({c['planted']:,} planted copies at "
        f"cosines {', '.join(f'{x:g}' for x in c['cosines'])}), threshold {c['threshold']}; "
        f"every method ends with the exact cosine of its candidates.\n\n"
        "| method | layout | s (end to end) | vectors/s | time / neardup | recall on sample | "
        "stages (s) |\n|---|---|---:|---:|---:|---:|---|"
    )
    rows = []

    def stages(t: dict[str, float]) -> str:
        return ", ".join(f"{k} {v:.1f}" for k, v in t.items())

    lay = nd["layout"]
    rows.append(
        f"| `neardup` | {lay['bands']} bands × {lay['rows']} rows ({lay['bits']} bits) | "
        f"{nd['seconds']:.1f} | {_fmt(nd['vectors_per_second'])} | 1.00× | "
        f"{nd['recall_same_cluster']:.4f} (same cluster) | {stages(nd['timings_s'])} |"
    )
    for key in sorted(k for k in d if k.startswith("faiss_")):
        f = d[key]
        if key == "faiss_multihash":
            lay_s = (f"IndexBinaryMultiHash {f['tables']} × {f['bits_per_table']} bits, radius "
                     f"{f['hamming_radius']}")
        elif key == "faiss_ivf":
            lay_s = (f"IndexIVFFlat inner product, nlist {f['nlist']:,}, nprobe {f['nprobe']} "
                     f"(smallest reaching recall {f['recall_target']} on the sample), "
                     f"range search of {f['queries_searched']:,} queries")
        else:
            lay_s = f"IndexLSH {f['bits']} bits, k = {f['k']}"
        ext = " (extrapolated)" if f.get("extrapolated") else ""
        rows.append(
            f"| `{key}` | {lay_s} | {f['seconds']:.1f}{ext} | {_fmt(f['vectors_per_second'])} | "
            f"{f['seconds'] / nd['seconds']:.1f}× | {f['recall_on_sample']:.4f} (direct) | "
            f"{stages(f['timings_s'])} |"
        )
    ivf = d.get("faiss_ivf")
    ivf_s = ""
    if ivf:
        same = ivf.get("recall_same_cluster")
        ivf_s = (
            "\n`faiss_ivf` nprobe sweep on the recall sample: "
            + "; ".join(f"nprobe {x['nprobe']}: recall {x['recall_on_sample']:.4f} "
                        f"({x['search_s_on_sample']:.2f} s)" for x in ivf["nprobe_sweep"])
            + f"; chosen nprobe {ivf['nprobe']}; "
            + (f"recall counted same-cluster {same:.4f}; " if same is not None else "")
            + f"trained on {ivf['trained_on']:,} vectors; "
            f"{ivf['verified_pairs']:,} verified pairs among "
            f"{ivf['queries_searched']:,} queries searched.\n"
        )
    tail = ivf_s + (
        f"\nneardup: {nd['candidate_checks']:,} candidate checks, {nd['prefiltered']:,} "
        f"dropped by the sketch prefilter, {nd['exact_scores']:,} exact cosines, "
        f"{nd['duplicates']:,} duplicates in {nd['clusters']:,} clusters; predicted recall "
        f"at t {nd['predicted_recall_at_threshold']:.4f}; recall of planted pairs by cosine "
        + ", ".join(f"{k}: {v:.4f}" for k, v in nd["recall_planted_by_cosine"].items())
        + f"; edge check precision {nd['edge_check']['precision']:.3f}; first call (kernel "
        f"compilation, 2,000 vectors) {nd['first_call_on_2000_vectors_s']:.1f} s, not counted.\n"
    )
    return head + "\n" + "\n".join(rows) + "\n" + tail


def service_table(d: dict[str, Any]) -> str:
    c = d["corpus"]
    head = (
        f"**Service** — one tenant preloaded with {c['items']:,} items ({c['words_per_item']} "
        "words each), then a real server driven over loopback HTTP by an asyncio load generator "
        "(closed loop: 16 clients; open loop: scheduled upserts and queries, latency from the "
        "scheduled time).  Server CPU from /proc; both servers and the generator share the "
        "2 cores.\n\n"
        "| system | upserts/s | per server CPU-s | upsert p50 / p99 ms | candidates/s | "
        "per server CPU-s | candidates p50 / p99 ms | open loop upsert p99 / query p99 ms "
        "(achieved upserts/s) | recall of planted J ≥ 0.8 | RSS at end / peak (VmHWM) |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    rows = []
    for name in ("neardup", "datasketch"):
        r = d.get(name)
        if not r:
            continue
        u, q, o = r["upsert_closed"], r["candidates_closed"], r["mixed_open"]
        rows.append(
            f"| {name} | {_fmt(u['per_s'])} | {_fmt(u['per_server_cpu_s'])} | "
            f"{u['p50_ms']:.1f} / {u['p99_ms']:.1f} | {_fmt(q['per_s'])} | "
            f"{_fmt(q['per_server_cpu_s'])} | {q['p50_ms']:.1f} / {q['p99_ms']:.1f} | "
            f"{o['upsert']['p99_ms']:.1f} / {o['candidates']['p99_ms']:.1f} "
            f"({o['achieved_upserts_per_s']:.0f}) | {r['recall']['recall']:.3f} | "
            f"{r['memory']['VmRSS'] / 2**30:.2f} / {r['memory']['VmHWM'] / 2**30:.2f} GiB |"
        )
    nd = d["neardup"]["preload"]
    cost = d.get("cost_per_million_items", {})
    tail = (
        f"\nneardup: index {nd.get('index_bytes_per_item', '?')} B/item, disk "
        f"{nd['disk_bytes_per_item']:,.0f} B/item, server start (index rebuilt from the store) "
        f"{nd.get('startup_s', '?')} s; cost per million items: "
        + ", ".join(f"{k} {v:,}" for k, v in cost.items() if v is not None)
        + ".\n"
    )
    if "ratios" in d:
        named = {"rss_datasketch_over_neardup": "rss_datasketch_over_neardup (VmRSS at end)"}
        tail += (
            "Ratios: "
            + ", ".join(f"{named.get(k, k)} {v}" for k, v in d["ratios"].items())
            + ".\n"
        )
    if "datasketch" in d and "peak_rss_datasketch_over_neardup" not in d.get("ratios", {}):
        peak = d["datasketch"]["memory"]["VmHWM"] / d["neardup"]["memory"]["VmHWM"]
        tail += f"Peak RSS (VmHWM), datasketch / neardup: {peak:.1f}×.\n"
    return head + "\n" + "\n".join(rows) + "\n" + tail


def service_locust_table(d: dict[str, Any]) -> str:
    c = d["data"]
    per = ", ".join(f"{t}: {n:,}" for t, n in c["items_per_tenant"].items())
    head = (
        f"**Service under Locust** — {c['items']:,} items ({c['words_per_item']} words each) "
        f"in {len(c['tenants'])} tenants ({per}); Locust {d['params'].get('seconds', '?'):.0f} s "
        "per row (headless, one process, `FastHttpUser`, users spread over the tenants). "
        "Closed loop: each user sends when its answer came; open loop: requests sent on a "
        "schedule at the target rate, latency from the scheduled time (queueing counted). "
        "Server CPU (front + workers) and Locust's own CPU from /proc; Locust, the server and "
        "other jobs share the 2 cores (load average after each row).\n\n"
        "| workers | request | loop | users | req/s | p50 ms | p95 ms | p99 ms | "
        "server CPU ms/req | Locust CPU ms/req | load |\n"
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    rows = []
    order = {"candidates": 0, "decide": 1, "upsert": 2}
    for r in sorted(d["runs"], key=lambda r: (-r["workers"], order[r["kind"]], r["loop"],
                                               r["users"])):
        lat = r.get("from_schedule") or r
        loop = (
            f"open {r['target_per_s']:.0f}/s" if r["loop"] == "open" else "closed"
        )
        rows.append(
            f"| {r['workers']} | {r['kind']} | {loop} | {r['users']} | {_fmt(r['per_s'])} | "
            f"{lat['p50_ms']:.1f} | {lat['p95_ms']:.1f} | {lat['p99_ms']:.1f} | "
            f"{r['server_cpu_ms_per_request']:.2f} | {r['locust_cpu_ms_per_request']:.2f} | "
            f"{r.get('loadavg_1m_after', '?')} |"
        )
    return head + "\n" + "\n".join(rows) + "\n"


def sizes_table(d: dict[str, Any]) -> str:
    """Ratio to the rensa pipeline by corpus shape and size (``bench_sizes.py``)."""
    m = d["machine"]
    out = [
        f"Machine: {m.get('cpu_model')}, {m.get('nproc')} cores; load "
        f"{m.get('loadavg_at_start', ['?'])[0]} at start, {m.get('loadavg_at_end', ['?'])[0]} "
        f"at end; {d['params']['repeats']} runs each, round robin.",
        "",
        "| shape | documents | MB | neardup best (median) s | rensa best (median) s "
        "| ratio best (median) | ratio per round: median (range) | neardup candidate pairs |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in d["runs"]:
        out.append(
            f"| {r['shape']} | {r['n_docs']:,} | {r['text_mb']} "
            f"| {r['neardup_best_s']:.2f} ({r['neardup_median_s']:.2f}) "
            f"| {r['rensa_best_s']:.2f} ({r['rensa_median_s']:.2f}) "
            f"| **{r['ratio_best']:.2f}×** ({r['ratio_median']:.2f}×) "
            f"| {_paired(r)} "
            f"| {_fmt(r['neardup_candidate_pairs'])} |"
        )
    return "\n".join(out) + "\n"


def _paired(row: dict[str, Any]) -> str:
    """The ratio within each round (rensa's run over neardup's, run one after the
    other): a host whose speed drifts from minute to minute moves both runs of a
    round alike, so these vary less than best over best."""
    nd, rs = row["pipelines"]["neardup_lsh"], row["pipelines"]["rensa"]
    if nd.get("failed_runs") or rs.get("failed_runs") or not nd["runs_s"]:
        return "–"  # runs_s holds the successful runs only: the rounds would not pair
    ratios = sorted(b / a for a, b in zip(nd["runs_s"], rs["runs_s"], strict=True))
    return f"{statistics.median(ratios):.2f}× ({ratios[0]:.2f}–{ratios[-1]:.2f})"


_LANG_NAMES = {
    "zh_Hans": "Chinese (simplified)", "zh_Hant": "Chinese (traditional)", "ja": "Japanese",
    "th": "Thai", "km": "Khmer", "my": "Myanmar", "ko": "Korean", "ru": "Russian",
    "ar": "Arabic", "hi": "Hindi", "de": "German", "vi": "Vietnamese", "en": "English",
}


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.1%}".replace("%", " %")


def multilingual_table(d: dict[str, Any]) -> str:
    """Per language: planted copies, how many keep J >= 0.8, the share each pipeline
    co-clusters with its original, and neardup's library throughput."""
    thr = d.get("library_throughput", {})
    pipes = [p for p in ("neardup_lsh", "rensa", "datasketch")
             if any(f"recall_{p}" in v for v in d["per_lang"].values())]
    out = [
        "| language | paragraphs + planted copies | copies with J ≥ 0.8 (neardup's scheme / "
        "peers' `\\w+` 5-grams) | " + " | ".join(f"co-clustered: {p}" for p in pipes)
        + " | neardup library MB/s |",
        "|---|---:|---:|" + "---:|" * len(pipes) + "---:|",
    ]
    order = [k for k in _LANG_NAMES if k in d["per_lang"]]
    for lang in order + sorted(set(d["per_lang"]) - set(order)):
        v = d["per_lang"][lang]
        n = v["planted"]
        out.append(
            f"| {_LANG_NAMES.get(lang, lang)} (`{lang}`) | {v['base']:,} + {n:,} | "
            f"{_pct(v['true_j_ge_t_neardup_scheme'] / n if n else None)} / "
            f"{_pct(v['true_j_ge_t_python_scheme'] / n if n else None)} | "
            + " | ".join(_pct(v[f"recall_{p}"]) for p in pipes)
            + f" | {_fmt(thr.get(lang, {}).get('mb_per_s'), '.1f')} |")
    tot = d["planted_total"]
    n = tot["planted"]
    out.append(
        f"| **all** | {sum(v['base'] for v in d['per_lang'].values()):,} + {n:,} | "
        f"{_pct(tot['true_j_ge_t_neardup_scheme'] / n)} / "
        f"{_pct(tot['true_j_ge_t_python_scheme'] / n)} | "
        + " | ".join(_pct(tot[f"coclustered_{p}"] / n) for p in pipes)
        + f" | {_fmt(thr.get('all', {}).get('mb_per_s'), '.1f')} |")
    e = d["neardup_edges"]
    cjk = thr.get("cjk", {})
    out.append(
        f"\nneardup reported {e['edges']:,} edges; "
        f"{'all' if e['all_edges_verified'] else 'NOT all'} reproduce the exact Jaccard of the "
        f"shingle-hash sets (>= 0.8), and {e['python_reference']['string_jaccard_below_t']} "
        f"fall below 0.8 on the Python reference's shingle strings.  Library throughput on "
        f"the Chinese + Japanese part: {_fmt(cjk.get('mb_per_s'), '.1f')} MB/s "
        f"({_fmt(cjk.get('text_bytes', 0) / 1e6, '.1f')} MB); whole corpus "
        f"{_fmt(thr.get('all', {}).get('mb_per_s'), '.1f')} MB/s.")
    rows = ["\n| CLI run (best of "
            f"{d['params']['repeats']}, interpreter start included) | all: s | all: MB/s | "
            "Chinese + Japanese: s | Chinese + Japanese: MB/s |", "|---|---:|---:|---:|---:|"]
    cj = d.get("cjk_pipelines", {}).get("pipelines", {})
    for p in pipes:
        t, c = d["pipelines"].get(p, {}), cj.get(p, {})
        rows.append(f"| `{p}` | {_fmt(t.get('best_s'), '.2f')} | {_fmt(t.get('mb_per_s'), '.2f')} "
                    f"| {_fmt(c.get('best_s'), '.2f')} | {_fmt(c.get('mb_per_s'), '.2f')} |")
    return "\n".join(out + rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--signatures", type=Path, default=HERE / "results" / "signatures.json")
    p.add_argument("--recall", type=Path, default=HERE / "results" / "recall.json")
    p.add_argument("--end-to-end", type=Path, default=HERE / "results" / "end_to_end.json")
    p.add_argument("--numpy", type=Path, default=HERE / "results" / "numpy_baseline.json")
    p.add_argument("--vectors", type=Path, default=HERE / "results" / "vectors.json")
    p.add_argument("--service", type=Path, default=HERE / "results" / "service.json")
    p.add_argument(
        "--service-locust", type=Path, default=HERE / "results" / "service_locust.json"
    )
    p.add_argument("--sizes", type=Path, default=HERE / "results" / "sizes.json")
    p.add_argument("--multilingual", type=Path, default=HERE / "results" / "multilingual.json")
    p.add_argument("--only",
                   default="signatures,recall,end_to_end,numpy,vectors,service,service_locust,sizes,"
                           "multilingual",
                   help="comma-separated tables to print (default: all)")
    a = p.parse_args(argv)
    only = set(a.only.split(","))
    if "signatures" in only and a.signatures.exists():
        print(signature_tables(json.loads(a.signatures.read_text())))
    if "recall" in only and a.recall.exists():
        print(recall_table(json.loads(a.recall.read_text())))
    if "end_to_end" in only and a.end_to_end.exists():
        print(end_to_end_tables(json.loads(a.end_to_end.read_text())))
    if "numpy" in only and a.numpy.exists():
        print(numpy_table(json.loads(a.numpy.read_text())))
    if "vectors" in only and a.vectors.exists():
        print(vectors_table(json.loads(a.vectors.read_text())))
    if "service" in only and a.service.exists():
        print(service_table(json.loads(a.service.read_text())))
    if "service_locust" in only and a.service_locust.exists():
        print(service_locust_table(json.loads(a.service_locust.read_text())))
    if "sizes" in only and a.sizes.exists():
        print(sizes_table(json.loads(a.sizes.read_text())))
    if "multilingual" in only and a.multilingual.exists():
        print(multilingual_table(json.loads(a.multilingual.read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())

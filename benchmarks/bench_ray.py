"""Local engine vs Ray engine on the same sharded corpus, plus a projection to 1B documents.

Runs ``neardup dedup`` three times as subprocesses (so each has its own peak memory):
``--engine local``, ``--engine ray`` (driver union-find) and ``--engine ray
--cc-threshold 0`` (distributed large-star/small-star components), checks that
``clusters.jsonl`` and the kept records are byte-identical, and records per-stage
timings and every shuffle's rows and bytes (from ``stats.json``).  The projection
scales the measured per-document CPU cost of each stage and the measured shuffle
bytes per document to 1B documents on a stated cluster (see ``project``).

Usage: python benchmarks/bench_ray.py [--docs 100000] [--cpus 2] [--quick] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import finish, machine_info, neardup_source, write_json

HERE = Path(__file__).resolve().parent
EXE = str(Path(sys.executable).parent / "neardup")

# The cluster of the projection: 32 nodes x 32 vCPU (e.g. AWS c6i.8xlarge: 64 GiB,
# 12.5 Gbit/s), i.e. 1024 workers.  Shuffle bytes cross the network once; we assume
# half the nominal per-node bandwidth is achieved (Ray object transfers, TCP).
CLUSTER = {"nodes": 32, "vcpus_per_node": 32, "ram_gib_per_node": 64, "net_gbit_per_node": 12.5}
TARGET_DOCS = 1_000_000_000
# Average size of a web document after extraction (C4/FineWeb-like, ~3 KB of text).
WEB_DOC_BYTES = 3000


def build_corpus(folder: Path, n: int, shards: int) -> dict[str, Any]:
    import neardup
    import neardup.testing

    copies = n // 10
    base = neardup.testing.synthetic_documents(n - copies, seed=20240601, words=50)
    texts, _ = neardup.testing.plant_near_duplicates(
        base, copies=copies, edit_rate=[0.0, 0.02, 0.05, 0.1, 0.2], seed=20240602
    )
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    per = (len(texts) + shards - 1) // shards
    for s in range(shards):
        p = folder / f"part-{s:03d}.jsonl"
        with open(p, "w", encoding="utf-8") as fh:
            for i in range(s * per, min(len(texts), (s + 1) * per)):
                fh.write(json.dumps({"id": f"doc-{i}", "text": texts[i]}) + "\n")
        paths.append(str(p))
    return {
        "docs": len(texts),
        "planted_copies": copies,
        "shards": shards,
        "bytes": sum(os.path.getsize(p) for p in paths),
        "paths": paths,
    }


def run(args: list[str]) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([EXE, "dedup", *args], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"neardup dedup failed:\n{proc.stderr[-4000:]}")
    return {
        "wall_s": round(wall, 3),
        "cpu_s_children": round(
            (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 3
        ),
        # ru_maxrss of children is the largest single child (the driver here; Ray
        # workers are not our children): the driver's peak, not the cluster's.
        "driver_peak_rss_bytes": after.ru_maxrss * 1024,
    }


def concat(folder: Path) -> bytes:
    return b"".join((folder / f).read_bytes() for f in sorted(os.listdir(folder)))


# Stages whose cost follows the text bytes (reading, normalizing, hashing, signing,
# verification over shingle sets, writing) rather than the document count.
BYTE_STAGES = ("features", "verify", "write")
BYTE_SHUFFLES = ("verify_a", "verify_b")


def project(
    n: int,
    cpus: int,
    ray_stats: dict[str, Any],
    wall: float,
    *,
    avg_bytes: float | None = None,
    measured_avg_bytes: float = 1.0,
) -> dict[str, Any]:
    """Wall time and memory for TARGET_DOCS on CLUSTER from the measured run.

    Each stage's measured wall time on ``cpus`` workers is turned into CPU-seconds
    per document (wall x cpus / n, an upper bound: it includes Ray's per-stage
    scheduling overhead, which does not grow with n), scaled to TARGET_DOCS and
    divided over the cluster's vCPUs.  Shuffle time is the measured bytes per
    document x TARGET_DOCS over half the cluster's aggregate bandwidth.  Memory per
    node is the largest single shuffle (its input must be held in the object
    store, spilled to disk beyond it) divided over the nodes; the band shuffle is
    held one round (one band at this scale) at a time.

    With ``avg_bytes`` the stages that follow text bytes (``BYTE_STAGES``) and the
    shingle-set shuffles (``BYTE_SHUFFLES``) are scaled by ``avg_bytes /
    measured_avg_bytes`` — a linear model, for documents longer than the measured
    ones; the per-document stages (band keys, buckets, components, clusters) are not.
    """
    workers = CLUSTER["nodes"] * CLUSTER["vcpus_per_node"]
    scale = TARGET_DOCS / n
    # With ``avg_bytes``, byte-driven stages and shuffles grow by avg/measured bytes.
    grow = (avg_bytes / measured_avg_bytes) if avg_bytes else 1.0
    stages = {}
    compute_s = 0.0
    for stage, secs in ray_stats["timings_s"].items():
        if stage == "total":
            continue
        cpu_per_doc = secs * cpus / n * (grow if stage in BYTE_STAGES else 1.0)
        t = cpu_per_doc * TARGET_DOCS / workers
        stages[stage] = {"cpu_us_per_doc": round(cpu_per_doc * 1e6, 2), "projected_s": round(t)}
        compute_s += t
    shuffles = {
        k: v["bytes"] * (grow if k in BYTE_SHUFFLES else 1.0)
        for k, v in ray_stats["engine"]["shuffles"].items()
    }
    # Band rounds: at 1B documents a round holds one band (256 MiB / 42 bytes per
    # document and band < 1 band), so the band shuffle is held one band at a time.
    bands = ray_stats["bands"]
    rounds = ray_stats["engine"]["band_rounds"]
    held = dict(shuffles)
    if "bands" in held:
        held["bands"] = held["bands"] * rounds / bands
    total_bytes = sum(shuffles.values())
    largest = max(held.values(), default=0)
    bw = CLUSTER["nodes"] * CLUSTER["net_gbit_per_node"] / 8 * 1e9 / 2
    shuffle_s = total_bytes * scale / bw
    return {
        "avg_doc_bytes": avg_bytes or measured_avg_bytes,
        "target_docs": TARGET_DOCS,
        "cluster": CLUSTER,
        "workers": workers,
        "stages": stages,
        "shuffle_bytes_per_doc": round(total_bytes / n, 1),
        "shuffle_bytes_per_doc_by_shuffle": {k: round(v / n, 1) for k, v in shuffles.items()},
        "shuffle_bytes_total": int(total_bytes * scale),
        "largest_shuffle_bytes": int(largest * scale),
        "largest_shuffle_gib_per_node": round(largest * scale / CLUSTER["nodes"] / 2**30, 1),
        "compute_s": round(compute_s),
        "shuffle_s": round(shuffle_s),
        "projected_wall_h": round((compute_s + shuffle_s) / 3600, 2),
        "measured_wall_s": wall,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="5,000 documents (smoke test)")
    ap.add_argument("--out", default=str(HERE / "results" / "ray.json"))
    a = ap.parse_args()
    n = 5_000 if a.quick else a.docs
    src = neardup_source()
    results: dict[str, Any] = {"machine": machine_info(), "params": vars(a)}
    results["machine"]["neardup_source_at_start"] = src
    tmp = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    try:
        corpus = build_corpus(tmp / "in", n, a.shards)
        paths = corpus.pop("paths")
        results["corpus"] = corpus
        common = [*paths, "--id-field", "id", "--quiet", "--no-report", "--threshold", "0.8"]
        runs: dict[str, Any] = {}
        runs["local"] = run([*common, "-o", str(tmp / "local")])
        ray_common = [*common, "--engine", "ray", "--ray-cpus", str(a.cpus)]
        runs["ray"] = run([*ray_common, "-o", str(tmp / "ray")])
        runs["ray_distributed_cc"] = run(
            [*ray_common, "-o", str(tmp / "ray_cc"), "--cc-threshold", "0"]
        )
        local_clusters = (tmp / "local" / "clusters.jsonl").read_bytes()
        local_kept = (tmp / "local" / "kept.jsonl").read_bytes()
        for name, out in (("ray", "ray"), ("ray_distributed_cc", "ray_cc")):
            st = json.loads((tmp / out / "stats.json").read_text())
            runs[name]["timings_s"] = st["timings_s"]
            runs[name]["engine"] = st["engine"]
            runs[name]["bands"] = st["bands"]
            runs[name]["clusters_identical"] = (
                tmp / out / "clusters.jsonl"
            ).read_bytes() == local_clusters
            runs[name]["kept_identical"] = concat(tmp / out / "kept") == local_kept
            runs[name]["stats_counts"] = {
                k: st[k] for k in ("documents_out", "clusters", "exact_duplicates", "near_duplicates")
            }
        st_local = json.loads((tmp / "local" / "stats.json").read_text())
        runs["local"]["timings_s"] = st_local["timings_s"]
        runs["local"]["stats_counts"] = {
            k: st_local[k]
            for k in ("documents_out", "clusters", "exact_duplicates", "near_duplicates")
        }
        results["runs"] = runs
        measured = corpus["bytes"] / corpus["docs"]
        base = runs["ray_distributed_cc"]
        results["projection"] = project(
            n, a.cpus, base, base["wall_s"], measured_avg_bytes=measured
        )
        results["projection_web_docs"] = project(
            n, a.cpus, base, base["wall_s"], avg_bytes=WEB_DOC_BYTES, measured_avg_bytes=measured
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    finish(results, src)
    write_json(Path(a.out), results)
    keys = ("runs", "projection", "projection_web_docs")
    print(json.dumps({k: results[k] for k in keys}, indent=1)[:8000])


if __name__ == "__main__":
    main()

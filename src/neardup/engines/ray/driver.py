"""The entry point of ``neardup dedup --engine ray``: :func:`run_dedup_ray` checks
the options, starts (or joins) Ray, runs the stages of :mod:`neardup.engines.ray`
in order and commits the output folder whole; it also gathers ``stats.json``."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Sequence
from typing import Any, TypedDict

from neardup.batch.languages import language_counts
from neardup.batch.results import search_stats
from neardup.batch.runs import DedupRun
from neardup.core._errors import InputError, InvalidConfig
from neardup.core.config import Config
from neardup.engines.ray.candidates import run_bands, run_exact
from neardup.engines.ray.clusters import run_clusters
from neardup.engines.ray.common import Job
from neardup.engines.ray.components import run_components
from neardup.engines.ray.features import expand_inputs, run_features, shard_format
from neardup.engines.ray.manifest import Manifest
from neardup.engines.ray.outputs import count_clusters, write_outputs
from neardup.engines.ray.runner import Run, data_context, restore_data_context, start_ray
from neardup.engines.ray.verify import run_verify
from neardup.text.hashing import HashKey, SchemeDescriptor

__all__ = ["DEFAULT_CC_THRESHOLD", "run_dedup_ray"]

DEFAULT_CC_THRESHOLD = 20_000_000
"""Edges up to which components are labelled by one union-find on the driver."""


def run_dedup_ray(
    inputs: Sequence[str],
    output: str,
    *,
    config: Config | None = None,
    key: HashKey | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    keep: str = "first",
    skip_bad: bool = False,
    overwrite: bool = False,
    dry_run: bool = False,
    ray_address: str | None = None,
    num_cpus: int | None = None,
    work_dir: str | None = None,
    resume: bool = False,
    cc_threshold: int = DEFAULT_CC_THRESHOLD,
    partitions: int | None = None,
    round_bytes: int = 256 << 20,
    progress: Callable[[str, int, int], None] | None = None,
) -> DedupRun:
    """Deduplicate ``inputs`` on Ray Data into the folder ``output``; returns the
    :class:`~neardup.batch.runs.DedupRun` (its ``stats`` are ``stats.json``'s).

    Same clusters, representatives, edges and kept set as :func:`neardup.run_dedup`
    (``clusters.jsonl`` is byte-identical), with ``kept/`` and ``duplicates/``
    written per input shard (``part-NNNNN`` in input order; concatenated they equal
    the local ``kept.*`` / ``duplicates.*``).  ``inputs`` are JSONL or Parquet paths,
    globs or fsspec URLs.  ``ray_address`` joins a running cluster; without it a
    local Ray with ``num_cpus`` CPUs is started (and stopped) for the run — or an
    already initialized Ray is used as is.  Working files go to ``work_dir``
    (default ``<output>.neardup-work`` beside the output; every node must see it);
    with ``resume`` the stages a crashed run recorded there are reused, after
    checking that inputs and options are the same.  Components are labelled on
    the driver up to ``cc_threshold`` edges, by distributed large-star/small-star
    rounds above it.  Bands are shuffled a few at a time so that one round moves
    about ``round_bytes`` (42 bytes per document and band).
    """
    from neardup.batch.job import check_writable
    from neardup.batch.outputs import commit_output, staged_output, write_json
    from neardup.graph.cluster import check_keep

    cfg = config or Config()
    check_keep(keep)
    if cc_threshold < 0:
        raise InvalidConfig("cc-threshold", cc_threshold, "must be >= 0", "use e.g. 20000000")
    if num_cpus is not None and num_cpus < 1:
        raise InvalidConfig("ray-cpus", num_cpus, "must be >= 1", "use e.g. 2")
    shards = expand_inputs(inputs)
    formats = [shard_format(p) for p in shards]
    if any(f not in ("jsonl", "parquet") for f in formats) or len(set(formats)) > 1:
        raise InputError(
            ", ".join(shards[:5]),
            None,
            f"the ray engine reads JSONL or Parquet shards of one format, got "
            f"{sorted(set(formats))}",
            "convert the inputs to JSONL or Parquet, or use --engine local",
        )
    t_start = time.perf_counter()
    work = work_dir or os.path.abspath(output).rstrip("/") + ".neardup-work"
    if "://" not in work:
        check_writable(work)
    scheme = SchemeDescriptor.from_config(cfg, key)
    # How records are read and clusters represented: part of the run's identity
    # (a resumed run must match) and of what every task is told.
    reading = _Reading(text_field=text_field, id_field=id_field, skip_bad=skip_bad, keep=keep)
    run_desc = {
        "inputs": [os.path.abspath(p) if "://" not in p else p for p in shards],
        "input_sizes": [os.path.getsize(p) if os.path.isfile(p) else -1 for p in shards],
        "input_mtimes": [int(os.path.getmtime(p)) if os.path.isfile(p) else -1 for p in shards],
        "config_fingerprint": cfg.fingerprint,
        "scheme_fingerprint": scheme.fingerprint,
        **reading,
    }
    with staged_output(None if dry_run else output, overwrite, list(inputs)) as tmp:
        ray, started = start_ray(ray_address, num_cpus)
        saved = data_context(ray)
        try:
            cpus = int(ray.cluster_resources().get("CPU", 1))
            parts = partitions or max(2, 2 * cpus)
            manifest = Manifest(work, run_desc, resume)
            job = Job(
                cfg, key, **reading, work=work, parts=parts, shards=tuple(shards),
                formats=tuple(formats), cap=cfg.max_candidates,
            )
            r = Run(ray=ray, job=job, manifest=manifest, progress=progress)
            stats, per_script = _pipeline(r, cc_threshold, cpus, round_bytes)
            stats["engine"]["reused_stages"] = list(manifest.reused)
            stats["inputs"] = list(inputs)
            stats["format"] = formats[0]
            if tmp is None:
                count_clusters(r, stats)
                stats["timings_s"]["total"] = round(time.perf_counter() - t_start, 6)
                shutil.rmtree(work, ignore_errors=True)
                return DedupRun.from_stats(stats, None)
            t1 = time.perf_counter()
            removed = write_outputs(r, tmp, stats)
            stats.update(language_counts(per_script, removed))
            stats["timings_s"]["write"] = round(time.perf_counter() - t1, 6)
            stats["timings_s"]["total"] = round(time.perf_counter() - t_start, 6)
            write_json(os.path.join(tmp, "stats.json"), stats)
            commit_output(tmp, output)
            shutil.rmtree(work, ignore_errors=True)
            return DedupRun.from_stats(stats, output)
        finally:
            restore_data_context(ray, saved)
            if started:
                ray.shutdown()


class _Reading(TypedDict):
    text_field: str
    id_field: str | None
    skip_bad: bool
    keep: str


def _pipeline(
    r: Run, cc_threshold: int, cpus: int, round_bytes: int
) -> tuple[dict[str, Any], dict[str, int]]:
    """Stages 1-6 (each recorded in the manifest); returns the stats known so far
    and the documents per detected script."""
    feats = run_features(r)  # 1
    per_script: dict[str, int] = {}
    for i in sorted(feats):
        for name, c in feats[i]["scripts"].items():
            per_script[name] = per_script.get(name, 0) + int(c)
    job = r.job
    cfg = job.config
    n = sum(int(feats[i]["rows"]) for i in range(len(job.shards)))
    eligible = sum(int(feats[i]["eligible"]) for i in feats)
    exact_info = run_exact(r)  # 2
    bands = run_bands(r, eligible, round_bytes)  # 3
    ver_info = run_verify(r, bands.files)  # 4
    cc_info = run_components(r, exact_info, ver_info, cc_threshold)  # 5
    run_clusters(r)  # 6

    scheme = SchemeDescriptor.from_config(cfg, job.key)
    # The Ray engine scores every candidate pair: no union-find skips joined ones.
    counters = {
        "candidate_pairs": int(ver_info["candidate_pairs"]),
        "verified_pairs": int(ver_info["candidate_pairs"]),
        "candidate_overflow": bands.overflow,
        "skipped_connected": 0,
    }
    stats: dict[str, Any] = {
        "documents_in": n,
        "indexed_documents": 0,
        "bytes_in": sum(int(feats[i]["bytes_in"]) for i in feats),
        "exact_duplicates": int(exact_info["identical_edges"]),
        "empty": sum(int(feats[i]["empty"]) for i in feats),
        "too_large": sum(int(feats[i]["too_large"]) for i in feats),
        "truncated": sum(int(feats[i]["truncated"]) for i in feats),
        **search_stats(cfg, scheme, "lsh", counters),
        "bad_records": sum(len(feats[i]["bad"]) for i in feats),
        "bad_record_examples": [b for i in sorted(feats) for b in feats[i]["bad"]][:20],
        "engine": {
            "name": "ray",
            "cpus": cpus,
            "partitions": job.parts,
            "band_rounds": bands.rounds,
            "components": cc_info,
            "cc_threshold": cc_threshold,
            "shuffles": r.shuffles,
        },
        "timings_s": {k: round(v, 6) for k, v in r.timings.items()},
    }
    return stats, per_script

"""Stages 7 and 8 of the Ray engine: the output files.

7. ``cluster_ids`` — the driver streams clusters sorted by smallest member into
   ``clusters.jsonl``, numbering them as the local engine does, and records the
   numbers for the next shuffle.
8. write — the assignments of removed members meet their cluster numbers, then
   per input shard ``kept/part-NNNNN.*`` and ``duplicates/part-NNNNN.*`` are
   written by the local writer (:func:`neardup.io.corpus.write_subset`), and the
   removed members are counted per detected script (the ``script`` column of the
   shard's feature file) for ``by_language``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import TYPE_CHECKING, Any

import numpy as np

from neardup.batch.results import size_histogram
from neardup.core._errors import NeardupIOError
from neardup.engines.ray.common import Job, column, feature_path, part_key
from neardup.engines.ray.features import local_copy
from neardup.engines.ray.runner import Run, expr_col
from neardup.text.scripts import SCRIPTS

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["assign_reduce", "assign_rows", "count_clusters", "write_outputs", "write_shard"]


def assign_rows(job: Job, t: pa.Table) -> pa.Table:
    """Assignments (kind 1) and cluster numbers (kind 2) keyed by root."""
    import pyarrow as pa

    root = column(t, "root")
    return pa.table(
        {
            "kind": t.column("kind"),
            "root": pa.array(root),
            "pos": t.column("pos"),
            "text": t.column("text"),
            "_part": pa.array(part_key(root)),
        }
    )


def assign_reduce(job: Job, t: pa.Table) -> pa.Table:
    """Attach the cluster number to each assignment; re-key by input shard."""
    import pyarrow as pa

    kind, root, pos = column(t, "kind"), column(t, "root"), column(t, "pos")
    num = kind == 2
    cr, cn = root[num], pos[num]
    o = np.argsort(cr, kind="stable")
    cr, cn = cr[o], cn[o]
    asg = np.flatnonzero(kind == 1)
    cid = cn[np.searchsorted(cr, root[asg])] if asg.size else np.empty(0, np.int64)
    p = pos[asg]
    shard = np.searchsorted(np.asarray(job.offsets, dtype=np.int64), p, side="right") - 1
    return pa.table(
        {
            "shard": pa.array(shard.astype(np.int64)),
            "pos": pa.array(p),
            "cluster": pa.array(cid),
            "rep": t.column("text").take(pa.array(asg)),
            "_part": pa.array(shard.astype(np.int64)),
        }
    )


def write_shard(job: Job, out: str, t: pa.Table) -> pa.Table:
    """Write kept/ and duplicates/ of one input shard (rows: its assignments + a marker)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from neardup.io.corpus import read_corpus, write_subset

    shard = int(column(t, "_part")[0])
    pos = column(t, "pos")
    real = pos >= 0
    order = np.argsort(pos[real], kind="stable")
    rows = pos[real][order] - job.offsets[shard]
    cluster = column(t, "cluster")[real][order]
    reps = [
        json.loads(x) for x in np.asarray(t.column("rep").to_pylist(), dtype=object)[real][order]
    ]
    with tempfile.TemporaryDirectory(prefix="neardup-shard-") as scratch:
        corpus = read_corpus(
            [local_copy(job.shards[shard], scratch)],
            text_field=job.text_field,
            id_field=job.id_field,
            skip_bad=job.skip_bad,
        )
    dup = np.zeros(len(corpus.texts), dtype=bool)
    dup[rows] = True
    os.makedirs(os.path.join(out, "kept"), exist_ok=True)
    os.makedirs(os.path.join(out, "duplicates"), exist_ok=True)
    write_subset(
        corpus, np.flatnonzero(~dup).tolist(), os.path.join(out, "kept", f"part-{shard:05d}")
    )
    write_subset(
        corpus,
        rows.tolist(),
        os.path.join(out, "duplicates", f"part-{shard:05d}"),
        extra={"cluster": cluster.tolist(), "representative": reps},
    )
    scripts = pq.read_table(feature_path(job.work, shard), columns=["script"])
    removed = np.bincount(
        scripts.column("script").to_numpy()[rows].astype(np.int64), minlength=len(SCRIPTS)
    )
    return pa.table(
        {
            "shard": [shard],
            "kept": [int((~dup).sum())],
            "dups": [int(dup.sum())],
            "dup_scripts": [json.dumps(removed.tolist())],
        }
    )


def _cluster_counts(stats: dict[str, Any], ncl: int, dups: int, hist: dict[int, int]) -> None:
    stats["clusters"] = ncl
    stats["cluster_size_histogram"] = size_histogram(hist)
    stats["documents_out"] = stats["documents_in"] - dups
    stats["near_duplicates"] = dups - stats["exact_duplicates"]


def count_clusters(r: Run, stats: dict[str, Any]) -> None:
    """The cluster counts of a dry run (nothing is written)."""
    cl = r.read("clusters", ["kind", "size"])
    hist: dict[int, int] = {}
    ncl = dups = 0
    if cl is not None:
        for b in cl.iter_batches(batch_format="numpy", batch_size=65536):
            sizes = b["size"][b["kind"] == 0]
            for v, c in zip(*np.unique(sizes, return_counts=True), strict=True):
                hist[int(v)] = hist.get(int(v), 0) + int(c)
            ncl += int(sizes.size)
            dups += int(sizes.sum()) - int(sizes.size)
    _cluster_counts(stats, ncl, dups, hist)


def write_outputs(r: Run, tmp: str, stats: dict[str, Any]) -> dict[str, int]:
    """clusters.jsonl (driver stream, sorted by smallest member), then per shard
    kept/ and duplicates/; returns the removed documents per detected script."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    job = r.job
    rd = r.rd
    cl = r.read("clusters")
    numbers_dir = os.path.join(job.work, "cluster_ids")
    if os.path.isdir(numbers_dir):
        shutil.rmtree(numbers_dir)
    os.makedirs(numbers_dir)
    hist: dict[int, int] = {}
    ncl = 0
    dups = 0
    with open(os.path.join(tmp, "clusters.jsonl"), "w", encoding="utf-8") as fh:
        if cl is not None:
            ordered = cl.filter(expr=expr_col("kind") == 0).sort("root")
            batches = ordered.iter_batches(batch_format="pyarrow", batch_size=65536)
            for chunk, b in enumerate(batches):
                roots = b.column("root").to_numpy()
                sizes = b.column("size").to_numpy()
                cids = np.arange(ncl, ncl + roots.size, dtype=np.int64)
                for cid, line in zip(cids.tolist(), b.column("text").to_pylist(), strict=True):
                    fh.write('{"cluster": ' + str(cid) + ", " + line[1:] + "\n")
                for s in sizes.tolist():
                    hist[s] = hist.get(s, 0) + 1
                dups += int(sizes.sum()) - roots.size
                ncl += roots.size
                pq.write_table(
                    pa.table(
                        {
                            "kind": pa.array(np.full(roots.size, 2, np.int8)),
                            "root": pa.array(roots),
                            "pos": pa.array(cids),
                            "text": pa.nulls(roots.size, pa.string()),
                        }
                    ),
                    os.path.join(numbers_dir, f"ids-{chunk:05d}.parquet"),
                )
    _cluster_counts(stats, ncl, dups, hist)
    # Every shard gets a marker row so that shards without duplicates are written too.
    markers = pa.table(
        {
            "shard": pa.array(np.arange(len(job.shards), dtype=np.int64)),
            "pos": pa.array(np.full(len(job.shards), -1, dtype=np.int64)),
            "cluster": pa.array(np.full(len(job.shards), -1, dtype=np.int64)),
            "rep": pa.array(["null"] * len(job.shards), type=pa.string()),
            "_part": pa.array(np.arange(len(job.shards), dtype=np.int64)),
        }
    )
    parts = [rd.from_arrow(markers)]
    if cl is not None and ncl:
        asg = cl.filter(expr=expr_col("kind") == 1).select_columns(["kind", "root", "pos", "text"])
        nums = r.read_files(sorted(os.path.join(numbers_dir, f) for f in os.listdir(numbers_dir)))
        joined = r.shuffle(
            "assign",
            asg.union(nums).map_batches(lambda t: assign_rows(job, t), batch_format="pyarrow"),
            lambda t: assign_reduce(job, t),
        )
        parts.append(joined)
    allrows = parts[0].union(*parts[1:]) if len(parts) > 1 else parts[0]
    res = r.shuffle("write", allrows, lambda t: write_shard(job, tmp, t), exact=True).take_all()
    if len(res) != len(job.shards):  # pragma: no cover - every shard has a marker row
        raise NeardupIOError(tmp, OSError("not every shard was written"))
    removed = np.sum([json.loads(row["dup_scripts"]) for row in res], axis=0)
    return {name: int(c) for name, c in zip(SCRIPTS, removed, strict=True) if c}

"""``neardup dedup --vectors FIELD``: the batch job for embeddings and feature bags.

:func:`run_vector_dedup` reads vectors from NumPy ``.npy`` files (2-D float arrays;
never unpickled), Parquet (a list/fixed-size-list column of numbers, or a map
column of feature → weight) or JSONL (a list of numbers, or an object of feature →
weight), runs :func:`~neardup.find_vector_duplicates` and writes, like the text
job (:mod:`neardup.batch.job`) and with the same write-temp-then-rename commit:

* ``kept.*`` / ``duplicates.*`` — in the input's format (``.npy`` inputs give
  ``kept.npy`` + ``kept_ids.npy`` and ``duplicates.npy`` + ``duplicates.jsonl``
  with each removed row's cluster and representative);
* ``clusters.jsonl`` — members and the exactly scored edges that joined them
  (``{"a", "b", "cosine"|"l2"|"l1", "estimate", "band", "method"}``);
* ``stats.json`` and ``report.html``.

Guarantees: every edge is re-scored exactly in float64; a pair at the threshold is
a candidate with probability ``predicted_recall_at_threshold`` (in the stats).
Zero vectors (cosine: no angle), NaN/inf components, wrong dimensions and missing
fields are bad records: refused with the path and line, or counted and left out
with ``skip_bad``.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.batch.job import set_workers
from neardup.batch.outputs import finish_output, staged_output, write_clusters
from neardup.batch.runs import DedupRun
from neardup.core._errors import InputError, InvalidConfig, NeardupIOError
from neardup.io.corpus import write_subset
from neardup.text.hashing import HashKey
from neardup.vectors.reading import VectorCorpus, count_identical, read_vectors
from neardup.vectors.sketches import VectorConfig
from neardup.vectors.vpipeline import (
    SparseBags,
    VectorDedupResult,
    find_vector_duplicates,
    weighted_bags,
)

__all__ = ["VectorCorpus", "read_vectors", "run_vector_dedup"]


def run_vector_dedup(
    inputs: Sequence[str],
    output: str,
    *,
    vectors_field: str,
    config: VectorConfig | None = None,
    key: HashKey | None = None,
    id_field: str | None = None,
    text_field: str | None = "text",
    skip_bad: bool = False,
    overwrite: bool = False,
    dry_run: bool = False,
    workers: int | None = None,
    report: bool = True,
) -> DedupRun:
    """Deduplicate the vectors of ``inputs`` into ``output``; returns the
    :class:`~neardup.batch.runs.DedupRun` (its ``stats`` are ``stats.json``'s).

    Feature bags are hashed with ``key`` (keyed SipHash) when given — pass one
    whenever feature names come from untrusted input.

    >>> import numpy as np, tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> np.save(os.path.join(d, "v.npy"), np.array([[1, 1, 1, 1], [1, .95, 1.05, 1],
    ...     [.98, 1.02, 1, 1.01], [0, 1, 0, 1]]))
    >>> st = run_vector_dedup([os.path.join(d, "v.npy")], os.path.join(d, "out"),
    ...     vectors_field="-", config=VectorConfig(threshold=0.85))
    >>> st.documents_in, st.documents_out, st.clusters
    (4, 2, 1)
    """
    cfg0 = config or VectorConfig()
    set_workers(workers)
    t_start = time.perf_counter()
    with staged_output(None if dry_run else output, overwrite, list(inputs)) as tmp:
        t0 = time.perf_counter()
        vc = read_vectors(
            inputs,
            field_name=vectors_field,
            metric=cfg0.metric,
            id_field=id_field,
            text_field=text_field,
            skip_bad=skip_bad,
        )
        read_s = time.perf_counter() - t0
        if vc.bags is not None:
            data: npt.NDArray[Any] | SparseBags = weighted_bags(vc.bags, key=key)
            identical = 0
        else:
            if vc.dense is None:  # pragma: no cover - read_vectors refuses empty input
                raise InputError(inputs[0], None, "no vectors", "check the inputs")
            data = vc.dense
            identical = count_identical(vc.dense)
        result = find_vector_duplicates(data, cfg0)
        stats = _stats(result, vc, inputs, identical, read_s, t_start)
        if tmp is None:
            return DedupRun.from_stats(stats, None)
        t1 = time.perf_counter()
        _write_outputs(tmp, vc, result, stats, report)
        stats["timings_s"]["write"] = round(time.perf_counter() - t1, 6)
        finish_output(tmp, output, stats, t_start)
        return DedupRun.from_stats(stats, output)


def _stats(
    result: VectorDedupResult,
    vc: VectorCorpus,
    inputs: Sequence[str],
    identical: int,
    read_s: float,
    t_start: float,
) -> dict[str, Any]:
    from neardup.core._posix import peak_rss_bytes

    rs = dict(result.stats)
    timings = rs.pop("timings")
    cfg = result.config
    sizes = Counter(len(c) for c in result.clusters)
    dups = int(rs["duplicates"])
    return {
        "kind": "vectors" if vc.bags is None else "weighted-bags",
        "inputs": list(inputs),
        "format": vc.format,
        "documents_in": len(vc) + len(vc.bad),
        "compared": len(vc),
        "documents_out": len(vc) - dups,
        "exact_duplicates": identical,
        "near_duplicates": dups,
        "clusters": len(result.clusters),
        "cluster_sizes": {str(k): v for k, v in sorted(sizes.items())},
        "bad_records": len(vc.bad),
        "bad_record_examples": [
            {"path": b.path, "line": b.line, "reason": b.reason} for b in vc.bad[:20]
        ],
        "metric": cfg.metric,
        "threshold": cfg.threshold,
        "dimension": None if vc.dense is None else int(vc.dense.shape[1]),
        "config": cfg.to_dict(),
        "scheme": cfg.scheme,
        "config_fingerprint": cfg.fingerprint,
        **{k: v for k, v in rs.items() if k not in ("items", "metric", "scheme", "fingerprint")},
        "timings_s": {
            "read": round(read_s, 6),
            **{k: round(v, 6) for k, v in timings.items()},
            "total": round(time.perf_counter() - t_start, 6),
        },
        "peak_memory_bytes": peak_rss_bytes(),
    }


def _write_outputs(
    tmp: str,
    vc: VectorCorpus,
    result: VectorDedupResult,
    stats: dict[str, Any],
    with_report: bool,
) -> None:
    ids = vc.ids
    kept = result.kept.tolist()
    dups = result.duplicates.tolist()
    cluster_of = np.full(result.n, -1, dtype=np.int64)
    for c in result.clusters:
        cluster_of[list(c.members)] = c.id
    rep = result.representative
    extra = {
        "cluster": [int(cluster_of[i]) for i in dups],
        "representative": [ids[int(rep[i])] for i in dups],
    }
    try:
        if vc.format == "npy":
            if vc.dense is None:  # pragma: no cover - npy is always dense
                raise InvalidConfig("format", "npy", "no dense vectors", "re-read the input")
            _save_npy(os.path.join(tmp, "kept.npy"), vc.dense[kept])
            _save_npy(os.path.join(tmp, "kept_ids.npy"), np.asarray(ids, np.int64)[kept])
            _save_npy(os.path.join(tmp, "duplicates.npy"), vc.dense[dups])
            with open(os.path.join(tmp, "duplicates.jsonl"), "w", encoding="utf-8") as fh:
                for t, i in enumerate(dups):
                    rec = {"id": ids[i], "cluster": extra["cluster"][t]}
                    rec["representative"] = extra["representative"][t]
                    fh.write(json.dumps(rec, sort_keys=True) + "\n")
        else:
            write_subset(vc.records, kept, os.path.join(tmp, "kept"))
            write_subset(vc.records, dups, os.path.join(tmp, "duplicates"), extra=extra)
        write_clusters(tmp, result.clusters, ids, [c.id for c in result.clusters])
        if with_report:
            from neardup.batch.report import render_vector_report

            page = render_vector_report(result, ids, vc.text_of, stats)
            with open(os.path.join(tmp, "report.html"), "w", encoding="utf-8") as fh:
                fh.write(page)
    except OSError as exc:
        raise NeardupIOError(tmp, exc) from exc


def _save_npy(path: str, a: npt.NDArray[Any]) -> None:
    with open(path, "wb") as fh:
        np.save(fh, np.ascontiguousarray(a), allow_pickle=False)

"""Writing a dedup job's outputs into its temporary folder: ``kept.*`` and
``duplicates.*`` (records intact), ``clusters.jsonl`` and ``report.html``.

:func:`write_outputs` writes those of an in-memory run (``kept.*`` on a thread of its
own while the rest is encoded); an out-of-core run streams its records
(:func:`neardup.batch.external.write_streamed`) and shares the cluster numbering
(:func:`touching_clusters`) and the report (:func:`write_report`,
:func:`report_positions`).  ``stats.json`` and the commit are
:func:`neardup.batch.outputs.finish_output`'s.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.batch.outputs import write_clusters, writing
from neardup.batch.pipeline import DedupResult
from neardup.core.config import Config
from neardup.graph.cluster import Cluster
from neardup.io.corpus import Corpus, prepare_subset, write_subset

__all__ = [
    "in_background",
    "report_positions",
    "touching_clusters",
    "write_outputs",
    "write_report",
]


def touching_clusters(result: DedupResult) -> tuple[list[Cluster], npt.NDArray[np.int64]]:
    """The clusters with a member from this run (not only prior documents), and each
    position's number among them (-1: in none), as ``clusters.jsonl`` numbers them."""
    n_prior = result.n_prior
    touching = [c for c in result.clusters if c.members[-1] >= n_prior]
    cluster_of = np.full(len(result.duplicate_of), -1, dtype=np.int64)
    if touching:
        sizes = np.fromiter((len(c.members) for c in touching), dtype=np.int64, count=len(touching))
        members = np.fromiter(
            itertools.chain.from_iterable(c.members for c in touching),
            dtype=np.int64,
            count=int(sizes.sum()),
        )
        cluster_of[members] = np.repeat(np.arange(len(touching), dtype=np.int64), sizes)
    return touching, cluster_of


def write_report(
    tmp: str,
    result: DedupResult,
    touching: Sequence[Cluster],
    ids: Sequence[Any],
    texts: dict[int, str],
    cfg: Config,
    stats: dict[str, Any],
) -> None:
    """Write ``tmp/report.html`` (``texts``: the documents it shows, by position)."""
    from neardup.batch.report import render_report

    html = render_report(result, touching, ids, texts, cfg, stats)
    path = os.path.join(tmp, "report.html")
    with writing(path), open(path, "w", encoding="utf-8") as fh:
        fh.write(html)


def report_positions(touching: Sequence[Cluster]) -> set[int]:
    """Documents whose text the report shows (the choice render_report makes)."""
    from neardup.batch.report import SHINGLE_EDGES, largest_clusters, near_edges, shown_edges

    want: set[int] = set()
    for c in largest_clusters(touching):
        for e in shown_edges(c):
            want.update((e.a, e.b))
    for e in near_edges(touching)[:SHINGLE_EDGES]:
        want.update((e.a, e.b))
    return want


def in_background(fn: Callable[..., Any], *args: Any) -> Callable[[], None]:
    """Start ``fn(*args)`` in a thread; the returned function waits for it and
    re-raises what it raised.  The caller must call it, also on its own errors
    (the thread is a daemon only so that an interpreter exit never hangs on it)."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            fn(*args)
        except BaseException as exc:  # re-raised in the caller
            failure.append(exc)

    thread = threading.Thread(target=run, name="neardup-write", daemon=True)
    thread.start()

    def wait() -> None:
        thread.join()
        if failure:
            raise failure[0]

    return wait


def write_outputs(
    tmp: str,
    corpus: Corpus,
    result: DedupResult,
    ids: list[Any],
    cfg: Config,
    stats: dict[str, Any],
    with_report: bool,
) -> None:
    """Write an in-memory run's ``kept.*``, ``duplicates.*``, ``clusters.jsonl`` and
    (``with_report``) ``report.html`` into ``tmp``."""
    n_prior = result.n_prior
    kept = result.kept - n_prior
    dup_pos = result.duplicates
    dups = (dup_pos - n_prior).tolist()
    touching, cluster_of = touching_clusters(result)
    # kept.* is most of the output and its writes wait on the disk with the GIL
    # released: it goes out while this thread encodes the other files.
    wait_kept = in_background(prepare_subset(corpus, kept, os.path.join(tmp, "kept")))
    try:
        write_subset(
            corpus,
            dups,
            os.path.join(tmp, "duplicates"),
            extra={
                "cluster": cluster_of[dup_pos].tolist(),
                "representative": [ids[r] for r in result.duplicate_of[dup_pos].tolist()],
            },
        )
        write_clusters(tmp, touching, ids)
        if with_report:
            # Only the texts the report shows (a few hundred), not a map of all of them.
            texts: dict[int, str] = {
                p: corpus.texts[p - n_prior] for p in report_positions(touching) if p >= n_prior
            }
            write_report(tmp, result, touching, ids, texts, cfg, stats)
    except BaseException:
        # The writer must be done before the caller removes the temporary folder.
        with contextlib.suppress(BaseException):
            wait_kept()
        raise
    wait_kept()

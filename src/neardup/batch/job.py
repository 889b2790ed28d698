"""The ``neardup dedup`` job as a library call: files in, an output folder out.

:func:`run_dedup` reads the inputs (:mod:`neardup.io.corpus`), runs
:func:`~neardup.find_duplicates` (optionally against a saved :class:`DedupIndex`),
and writes, into a temporary folder beside ``output`` that is renamed into place
only once everything is complete:

* ``kept.*`` — unique documents and one representative per cluster, every
  original field intact, in input order;
* ``duplicates.*`` — removed documents plus ``cluster`` and ``representative``;
* ``clusters.jsonl`` — one line per cluster touching this run's documents, with the
  (exactly verified) edges that joined it;
* ``stats.json`` — counts, parameters, fingerprints, predicted recall, overflows,
  per-language counts (:mod:`neardup.batch.languages`), per-stage timings and peak
  memory;
* ``report.html`` — a self-contained page (:mod:`neardup.batch.report`).

An interrupted run never leaves a partial ``output``: SIGINT/SIGTERM under the
command line remove its ``.neardup-tmp-*``/``.neardup-work-*`` folders
(:mod:`neardup.core.leftovers`); a run killed outright leaves them, with a locked owner
file, and the next run beside them removes them and says so.  Output bytes depend
only on the inputs and the config (not on ``workers``), except the two measured
fields of ``stats.json``: ``timings_s`` and ``peak_memory_bytes``.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

from neardup.batch.jobwrite import (
    report_positions,
    touching_clusters,
    write_outputs,
    write_report,
)
from neardup.batch.languages import language_stats
from neardup.batch.outputs import (
    check_output,
    check_writable,
    finish_output,
    prepare_output,
    staged_output,
    write_clusters,
    writing,
)
from neardup.batch.pipeline import DedupIndex, DedupResult, HashFeeder, find_duplicates
from neardup.batch.plan import in_memory_plan
from neardup.batch.runs import DedupRun
from neardup.core._errors import InputError, InvalidConfig, MemoryLimitExceeded, NeardupIOError
from neardup.core._posix import peak_rss_bytes
from neardup.core.config import Config, RunOptions
from neardup.core.ids import JSON_SCALARS, describe, json_id, unique_ids
from neardup.core.leftovers import (
    owned_folder,
    release,
    sweep,
)
from neardup.io.corpus import (
    BadRecord,
    Corpus,
    Prefetch,
    detect_format,
    input_bytes,
    read_corpus,
    record_fields,
    streamable,
)
from neardup.text.hashing import HashKey, SchemeDescriptor

__all__ = [
    "batch_process_tuning",
    "check_output",
    "check_writable",
    "prepare_output",
    "run_dedup",
    "set_workers",
]

INDEX_FILE = "index.ndx"


def set_workers(workers: int | None) -> None:
    """Use ``workers`` threads in the compiled kernels (results do not depend on it)."""
    if workers is None:
        return
    from neardup.kernels.threads import max_threads, set_threads

    limit = max_threads()
    if not 1 <= workers <= limit:
        raise InvalidConfig(
            "workers",
            workers,
            f"must be in [1, {limit}] on this machine",
            f"use --workers between 1 and {limit}",
        )
    set_threads(workers)



def _feeder(cfg: Config, key: HashKey | None, inputs: Sequence[str]) -> HashFeeder | None:
    """A worker hashing the texts while they are read, unless the config is invalid
    (then hashing is left to find_duplicates, which reports the error as usual)."""
    try:
        scheme = SchemeDescriptor.from_config(cfg, key)
    except InvalidConfig:
        return None
    # A document has at most one shingle per byte of its (normalized) text, and
    # text is rarely larger than the files holding it: room for that many hashes.
    return HashFeeder(cfg, key, scheme, capacity=input_bytes(inputs))


def _numpy_hugepage_switch() -> Callable[[bool], bool] | None:
    # numpy 2 moved its private core module; the switch exists on Linux builds only.
    for mod in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            module = __import__(mod, fromlist=["_set_madvise_hugepage"])
        except ImportError:
            continue
        fn = getattr(module, "_set_madvise_hugepage", None)
        if fn is not None:
            return fn  # type: ignore[no-any-return]
    return None


@contextlib.contextmanager
def batch_process_tuning() -> Iterator[None]:
    """Process-wide settings a large batch run is fastest with, restored on exit.

    Opt-in, for programs that own their process (``neardup dedup`` runs every job
    inside it); :func:`run_dedup` itself changes nothing process-wide.  Results do
    not depend on it.  Inside the block:

    * Python's cyclic garbage collector is paused.  A batch run allocates millions
      of container objects (records, ids, edges) and makes no reference cycles of
      note; reference counting still frees everything.
    * numpy's transparent-huge-page advice is off.  With the kernel's usual
      ``defrag=madvise`` setting, huge pages are compacted synchronously on first
      touch, which after the reading stage cost more system time than the kernels'
      own work (see benchmarks/README.md).

    >>> with batch_process_tuning():
    ...     pass
    """
    switch = _numpy_hugepage_switch()
    previous = switch(False) if switch is not None else None
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        if switch is not None and previous is not None:
            switch(previous)


def run_dedup(
    inputs: Sequence[str],
    output: str,
    *,
    config: Config | None = None,
    key: HashKey | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    keep: str = "first",
    method: Literal["lsh", "exact"] = "lsh",
    against: str | None = None,
    save_index: str | None = None,
    skip_bad: bool = False,
    overwrite: bool = False,
    dry_run: bool = False,
    options: RunOptions | None = None,
    report: bool = True,
    progress: Callable[[str, int, int], None] | None = None,
    prefetch: Prefetch | None = None,
    on_finished: Callable[[DedupRun], None] | None = None,
    detect_id: bool = False,
    rename_duplicate_ids: bool = False,
    language_field: str | None = None,
) -> DedupRun:
    """Deduplicate ``inputs`` into the folder ``output``; returns the
    :class:`~neardup.batch.runs.DedupRun` (its ``stats`` are ``stats.json``'s).

    With ``detect_id`` and no ``id_field``, a field ``id`` of the inputs gives the
    ids when every record has a usable one (:mod:`neardup.io._ids`); ``stats``
    reports the choice (``id_field``, ``id_field_detected``, ``id_field_fallback``).

    With ``dry_run`` nothing is written (the run's ``output`` is None).  With
    ``against`` the documents of that saved index count as earlier input; with
    ``save_index`` the index of everything seen (prior + this run) is written there.

    ``options`` (:class:`~neardup.core.config.RunOptions`) say how the run works,
    never what it finds: the kernels use ``options.workers`` threads; when the
    in-memory plan (:func:`neardup.batch.plan.in_memory_plan`) exceeds
    ``options.memory_limit`` — or with ``options.spill`` — JSONL inputs are processed
    out of core (:mod:`neardup.batch.external`) with working files under
    ``options.work_dir`` (default: a temporary folder beside ``output``), removed at
    the end.

    ``prefetch``, a :class:`~neardup.io.corpus.Prefetch` the caller started on
    ``inputs`` (and closes), lets an in-memory run take the bytes it has read; an
    out-of-core run stops it and streams the files.

    Two records with the same id are refused (:class:`InputError`, naming the id and
    both records) unless ``rename_duplicate_ids``: then the second record with id
    ``X`` is ``X#2`` in ``clusters.jsonl`` and the ``representative`` field (a warning
    on stderr says so; the records are written unchanged).

    ``stats["by_language"]`` counts documents, duplicates and kept ones per detected
    script, or per value of the records' ``language_field`` where they have one
    (:mod:`neardup.batch.languages`).

    ``on_finished(run)``, if given, is called with the answer once every output of an in-memory
    run is written and in place, before the run's memory (about 3x the input) is
    released: a program that ends there may skip releasing it.
    """
    cfg = config or Config()
    run = options or RunOptions()
    set_workers(run.workers)
    t_start = time.perf_counter()
    protect = [*inputs, *([against] if against else [])]
    if save_index and not dry_run:
        check_writable(save_index)
    with staged_output(None if dry_run else output, overwrite, protect) as tmp:
        t0 = time.perf_counter()
        # With --spill the plan may be shown (_refuse_out_of_core): the estimate then.
        plan = in_memory_plan(inputs, cfg, limit=None if run.spill else run.memory_limit)
        if run.spill or plan > run.memory_limit:
            if not streamable(inputs):
                _refuse_out_of_core(inputs, plan, run.memory_limit, run.spill)
            if against or save_index:
                raise InvalidConfig(
                    "against/save-index",
                    against or save_index,
                    "not available in an out-of-core run",
                    "raise --memory-limit, or dedup the shards separately",
                )
            if prefetch is not None:
                prefetch.close()
            stats = _run_spilled(
                inputs,
                output,
                tmp,
                cfg,
                key,
                text_field,
                id_field,
                skip_bad,
                keep,
                method,
                progress,
                report,
                run,
                t_start,
                rename_duplicate_ids,
                detect_id,
                language_field,
            )
            return DedupRun.from_stats(stats, None if tmp is None else output)
        if progress is not None:
            progress("read", 0, 1)
        feeder = _feeder(cfg, key, inputs)
        try:
            corpus = read_corpus(
                inputs,
                text_field=text_field,
                id_field=id_field,
                skip_bad=skip_bad,
                on_texts=None if feeder is None else feeder.feed,
                on_block=None if feeder is None else feeder.feed_block,
                prefetch=prefetch,
                detect_id=detect_id,
            )
            read_s = time.perf_counter() - t0
            # What needs only the ids and the saved index is done while the hash
            # threads finish the last blocks, not after them.
            prior = DedupIndex.load(os.path.join(against, INDEX_FILE)) if against else None
            if prior is not None and corpus.id_choice.field is None:
                corpus.ids = [len(prior) + i for i in range(len(corpus))]
            ids = corpus.ids
            if not set(map(type, ids)) <= set(JSON_SCALARS):  # a C-level pass: ids are ints
                ids = [i if isinstance(i, JSON_SCALARS) else str(i) for i in ids]
            ids_all = (prior.ids if prior is not None else []) + list(ids)
            renames = unique_ids(
                ids_all, len(prior or ()), _locator(corpus), rename=rename_duplicate_ids
            )
            hashed = None if feeder is None else feeder.finish()
        finally:
            if feeder is not None:
                feeder.close()
        if progress is not None:
            progress("read", 1, 1)
        if renames:
            _warn(describe(renames))
        result = find_duplicates(
            corpus.texts,
            hashed=hashed,
            config=cfg,
            key=key,
            keep=keep,
            method=method,
            prior=prior,
            progress=progress,
            memory_limit=run.memory_limit,
        )
        stats = _stats(result, corpus.format, corpus.bad, read_s, inputs, t_start)
        stats.update(corpus.id_choice.stats())
        stats["renamed_ids"] = len(renames)
        stats.update(_languages(result, corpus, language_field))
        if feeder is not None:
            # Normalizing and hashing ran while the input was read; this is how long
            # the run waited for it after reading ended and the ids were checked.
            stats["timings_s"]["hash_after_read"] = round(feeder.wait_s, 6)
        if tmp is None:
            return DedupRun.from_stats(stats, None)
        t1 = time.perf_counter()
        if progress is not None:
            progress("write", 0, 1)
        with writing(tmp):
            write_outputs(tmp, corpus, result, ids_all, cfg, stats, report)
        if progress is not None:
            progress("write", 1, 1)
        if save_index:
            try:
                os.makedirs(save_index, exist_ok=True)
            except OSError as exc:
                raise NeardupIOError(save_index, exc) from exc
            result.to_index(ids_all).save(os.path.join(save_index, INDEX_FILE))
        stats["timings_s"]["write"] = round(time.perf_counter() - t1, 6)
        finish_output(tmp, output, stats, t_start)
        run_result = DedupRun.from_stats(stats, output)
        if on_finished is not None:
            on_finished(run_result)
        return run_result


def _refuse_out_of_core(inputs: Sequence[str], plan: int, limit: int, spill: bool) -> None:
    """Raise the error for an out-of-core run over inputs that are not all JSONL files:
    InvalidConfig (exit 2) for ``--spill`` when the run fits in memory anyway,
    MemoryLimitExceeded (exit 5) when it does not."""
    other = next(p for p in inputs if not streamable([p]))
    try:
        fmt = detect_format(other)
    except InputError:
        fmt = "not a file"
    what = f"{other} is {fmt}: only JSONL files are read out of core"
    if spill and plan <= limit:
        raise InvalidConfig(
            "spill",
            True,
            what,
            f"drop --spill (this run fits in memory: about {plan:,} bytes of "
            f"memory_limit={limit:,}), or convert the input to JSONL",
        )
    raise MemoryLimitExceeded(plan, limit, f"an in-memory run ({what}; convert it to JSONL)")


def _stats(
    result: DedupResult,
    fmt: str,
    bad: list[BadRecord],
    read_s: float,
    inputs: Sequence[str],
    t_start: float,
) -> dict[str, Any]:
    st = dict(result.stats)
    st["inputs"] = list(inputs)
    st["format"] = fmt
    st["bad_records"] = len(bad)
    st["bad_record_examples"] = [
        {"path": b.path, "line": b.line, "reason": b.reason} for b in bad[:20]
    ]
    st["timings_s"] = {"read": round(read_s, 6), **st["timings_s"]}
    st["timings_s"]["total"] = round(time.perf_counter() - t_start, 6)
    st["peak_memory_bytes"] = peak_rss_bytes()
    return st



def _run_spilled(
    inputs: Sequence[str],
    output: str,
    tmp: str | None,
    cfg: Config,
    key: HashKey | None,
    text_field: str,
    id_field: str | None,
    skip_bad: bool,
    keep: str,
    method: str,
    progress: Callable[[str, int, int], None] | None,
    with_report: bool,
    run: RunOptions,
    t_start: float,
    rename_ids: bool,
    detect_id: bool = False,
    language_field: str | None = None,
) -> dict[str, Any]:
    from neardup.batch.external import WORK_ELSEWHERE, spilled_dedup, write_streamed

    work_dir = run.work_dir
    base = work_dir or os.path.dirname(os.path.abspath(output)) or "."
    renames: list[tuple[Any, int, int, str]] = []
    try:
        os.makedirs(base, exist_ok=True)
        if work_dir is not None:
            sweep(base)  # beside the output, prepare_output did
        work = owned_folder(".neardup-work-", base, "the working folder {path}")
    except OSError as exc:
        raise NeardupIOError(base, exc) from exc
    try:
        t0 = time.perf_counter()
        with writing(work, WORK_ELSEWHERE):
            result, ids, bad = spilled_dedup(
                inputs,
                work,
                config=cfg,
                key=key,
                text_field=text_field,
                id_field=id_field,
                skip_bad=skip_bad,
                keep=keep,
                method=method,
                progress=progress,
                detect_id=detect_id,
                check_ids=functools.partial(_check_spilled_ids, inputs, rename_ids, renames),
                memory_limit=run.memory_limit,
                language_field=language_field,
            )
        ids = [json_id(i) for i in ids]
        stats = _stats(result, "jsonl", bad, time.perf_counter() - t0, inputs, t_start)
        stats["renamed_ids"] = len(renames)
        if tmp is None:
            return stats
        t1 = time.perf_counter()
        touching, cluster_of = touching_clusters(result)
        want = report_positions(touching) if with_report else set()
        with writing(tmp):
            texts = write_streamed(
                tmp,
                inputs,
                result,
                ids,
                cluster_of,
                text_field=text_field,
                id_field=id_field,
                skip_bad=skip_bad,
                want_texts=want,
            )
        write_clusters(tmp, touching, ids)
        if with_report:
            write_report(tmp, result, touching, ids, texts, cfg, stats)
        stats["timings_s"]["write"] = round(time.perf_counter() - t1, 6)
        finish_output(tmp, output, stats, t_start)
        return stats
    finally:
        release(work)


def _check_spilled_ids(
    inputs: Sequence[str], rename: bool, renames: list[tuple[Any, int, int, str]], ids: list[Any]
) -> None:
    """The id check of an out-of-core run, after its first pass (records are counted,
    not located: no line numbers are kept)."""
    ids[:] = [json_id(i) for i in ids]
    one = inputs[0] if len(inputs) == 1 else ", ".join(inputs)
    renames.extend(unique_ids(ids, 0, lambda _k: (one, None), rename=rename))
    if renames:
        _warn(describe(renames))


def _languages(result: DedupResult, corpus: Corpus, language_field: str | None) -> dict[str, Any]:
    """The per-language counts of an in-memory run (its new documents)."""
    values = None
    if language_field is not None:
        values = [r.get(language_field) for r in record_fields(corpus, [language_field])]
    scripts = result.scripts
    if scripts is None:  # pragma: no cover - a job's texts are always hashed with scripts
        raise InvalidConfig("scripts", None, "the run detected no scripts", "rerun")
    removed = result.duplicate_of[result.n_prior :] >= 0
    return language_stats(scripts, removed, values, language_field)


def _locator(corpus: Corpus) -> Callable[[int], tuple[str, int | None]]:
    """File and line (row, for tables) of a corpus's k-th record."""
    lines = corpus.format in ("jsonl", "csv")

    def where(k: int) -> tuple[str, int | None]:
        fi, n = corpus.origins[k]
        return corpus.inputs[fi], n if lines else n + 1

    return where


def _warn(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()

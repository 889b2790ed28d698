"""``neardup dedup`` (text, vectors, the Ray engine) and ``neardup compile``."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from neardup.cli._clihelp import (
    DEDUP_SECTIONS,
    SectionedCommand,
)
from neardup.cli.common import (
    METHOD_OPTION,
    OVERWRITE_OPTION,
    RAY_OPTIONS,
    Main,
    Progress,
    choice_option,
    common_options,
    config_from,
    errors,
    exit_now,
    input_args,
    ready_kernels,
    resolved_inputs,
    run_options_from,
)
from neardup.core._errors import InvalidConfig
from neardup.core.config import Config, RunOptions
from neardup.kernels._manifest import kernel_groups

if TYPE_CHECKING:
    from neardup.batch.runs import DedupRun
    from neardup.io.corpus import Prefetch

__all__ = ["compile_cmd", "dedup"]


@click.command(cls=SectionedCommand, sections=DEDUP_SECTIONS)
@click.argument("inputs", nargs=-1, required=True)
@click.option("--output", "-o", required=True, help="Output folder (must not exist).")
@METHOD_OPTION
@choice_option("--keep", ["first", "longest", "shortest"], "Which member of a cluster is kept.")
@click.option(
    "--row-ids",
    is_flag=True,
    help="Ids are row numbers, even when the records have a field 'id'.",
)
@click.option("--against", default=None, help="Dedup against the index saved in this folder.")
@click.option("--save-index", default=None, help="Save the index of all documents here.")
@OVERWRITE_OPTION
@click.option("--dry-run", is_flag=True, help="Compute and print stats, write nothing.")
@click.option("--no-report", is_flag=True, help="Skip report.html.")
@click.option(
    "--spill",
    is_flag=True,
    help="Work out of core even if the input fits (JSONL inputs; automatic when "
    "the in-memory plan exceeds --memory-limit).",
)
@click.option(
    "--work-dir",
    default=None,
    help="Folder for out-of-core working files (default: beside --output).",
)
@click.option(
    "--rename-duplicate-ids",
    is_flag=True,
    help="Records sharing an id get id#2, id#3 in the outputs (with a warning) instead "
    "of stopping the run (exit 3).",
)
@click.option(
    "--language-field",
    default=None,
    metavar="FIELD",
    help="stats.json and report.html count duplicates per value of FIELD; records "
    "without it count under their detected script (default: detected scripts only).",
)
@click.option(
    "--vectors",
    "vectors_field",
    default=None,
    metavar="FIELD",
    help="Dedup the vectors in FIELD (a list of numbers, or an object of feature: weight) "
    "instead of text; .npy inputs take any FIELD name.",
)
@choice_option(
    "--metric",
    ["cosine", "l2", "l1", "weighted_jaccard"],
    "With --vectors: cosine (random hyperplanes; --threshold is the cosine), "
    "l2/l1 (p-stable; --threshold is the distance radius) or weighted_jaccard "
    "(feature bags; consistent weighted sampling).",
)
@click.option(
    "--hamming-radius",
    type=int,
    default=None,
    help="With --vectors --metric cosine: every pair whose --bits signatures differ in at "
    "most this many bits is a candidate (permuted blocks).",
)
@click.option(
    "--bits",
    type=int,
    default=256,
    show_default=True,
    help="Signature bits for --hamming-radius.",
)
@choice_option(
    "--engine",
    ["local", "ray"],
    "local (this process), or ray (Ray Data, the ray extra): same clusters and kept set.",
)
@RAY_OPTIONS
@click.option(
    "--resume",
    is_flag=True,
    help="With --engine ray: reuse the stages a crashed run finished in --work-dir.",
)
@click.option(
    "--cc-threshold",
    type=int,
    default=None,
    help="With --engine ray: most edges for driver union-find; above it, distributed "
    "large-star/small-star components (default 20000000).",
)
@common_options
def dedup(
    inputs: tuple[str, ...],
    output: str,
    method: str,
    keep: str,
    row_ids: bool,
    against: str | None,
    save_index: str | None,
    overwrite: bool,
    dry_run: bool,
    no_report: bool,
    spill: bool,
    work_dir: str | None,
    vectors_field: str | None,
    metric: str,
    hamming_radius: int | None,
    bits: int,
    engine: str,
    ray_address: str | None,
    ray_cpus: int | None,
    resume: bool,
    cc_threshold: int | None,
    **opts: Any,
) -> None:
    """Deduplicate a corpus: kept.*, duplicates.*, clusters.jsonl, stats.json, report.html.

    INPUTS are JSONL (.jsonl/.json/.ndjson, optionally .gz/.zst), Parquet, CSV files, a
    folder of .txt files, or a dataset saved with datasets' save_to_disk.

    Example: neardup dedup corpus.jsonl --output out/ --threshold 0.8 --shingle word:5

    Vectors (embeddings in Parquet/.npy/JSONL): neardup dedup emb.parquet --output out/
    --vectors embedding --metric cosine --threshold 0.9

    On Ray (JSONL/Parquet shards, paths or globs): neardup dedup 'shards/*.jsonl'
    --output out/ --engine ray --ray-address auto --resume
    """
    if Main.standalone and sys.stderr is sys.__stderr__:
        from neardup.core.leftovers import install_signal_handlers

        install_signal_handlers()  # SIGINT/SIGTERM: remove this run's folders, exit 130/143
    inputs = resolved_inputs(inputs)
    from neardup.kernels._jit import start_numba

    quiet = opts.pop("quiet")
    if row_ids and opts["id_field"] is not None:
        with errors():
            raise InvalidConfig(
                "row-ids", True, "conflicts with --id-field", "pass one of them, not both"
            )
    # Without --id-field or --row-ids a field "id" gives the ids (local text runs).
    detect_id = not row_ids and opts["id_field"] is None
    rename_ids = opts.pop("rename_duplicate_ids")
    language_field = opts.pop("language_field")
    for name, value in (
        ("rename-duplicate-ids", rename_ids or None),
        ("language-field", language_field),
    ):
        if value is not None and (engine == "ray" or vectors_field is not None):
            with errors():
                raise InvalidConfig(name, value, "only for text with --engine local", "drop it")
    if engine == "ray" or vectors_field is not None:
        start_numba()
    if engine == "ray":
        with errors():
            _dedup_ray(
                inputs,
                output,
                method,
                keep,
                against,
                save_index,
                overwrite,
                dry_run,
                spill,
                work_dir,
                vectors_field,
                ray_address,
                ray_cpus,
                resume,
                cc_threshold,
                quiet,
                opts,
            )
        return
    for name, value in (
        ("ray-address", ray_address),
        ("ray-cpus", ray_cpus),
        ("resume", resume or None),
        ("cc-threshold", cc_threshold),
    ):
        if value is not None:
            with errors():
                raise InvalidConfig(name, value, "only used with --engine ray", "add --engine ray")
    if vectors_field is not None:
        _dedup_vectors(
            inputs,
            output,
            vectors_field,
            metric,
            hamming_radius,
            bits,
            method,
            keep,
            against,
            save_index,
            spill,
            overwrite,
            dry_run,
            no_report,
            quiet,
            opts,
        )
        return
    progress = Progress(quiet)
    with errors():
        cfg = config_from(opts)
        run = run_options_from(opts, spill=spill, work_dir=work_dir)
    summarized = False

    def summarize(run_result: DedupRun) -> None:
        nonlocal summarized
        summarized = True
        stats, r = run_result.stats, run_result
        if stats.get("id_field_fallback"):
            click.echo(
                f"note: ids are row numbers: {stats['id_field_fallback']} "
                "(pass --id-field or --row-ids to choose)",
                err=True,
            )
        ids = stats.get("id_field")
        click.echo(
            f"{r.documents_in} documents: kept {r.documents_out}, exact "
            f"duplicates {r.exact_duplicates}, near duplicates "
            f"{r.near_duplicates}, clusters {r.clusters}, empty "
            f"{stats['empty']}, too large {stats['too_large']}, bad records "
            f"{r.bad_records}; predicted recall at {stats['threshold']}: "
            f"{stats['predicted_recall_at_threshold']:.4f}; ids: "
            + (f"field {ids!r}" if ids else "row numbers")
            + (" (detected)" if stats.get("id_field_detected") else "")
            + ("" if dry_run else f"; wrote {output}")
        )
        if not progress.bars:
            # Every output is in place: end here, before the run's memory is freed.
            exit_now()

    with errors():
        prefetch = _prefetch(list(inputs), cfg, run)
    try:
        # Kernels come from the native modules; should a call need numba's JIT,
        # it starts the way start_numba arranges (this process is the CLI's).
        start_numba()
        ready_kernels(
            "dedup",
            *(["dedup-index"] if save_index or against else []),
            *(["dedup-exact"] if method == "exact" else []),
        )
        from neardup.batch.job import batch_process_tuning, run_dedup

        with errors(corrupt=3), batch_process_tuning():
            result = run_dedup(
                list(inputs),
                output,
                config=cfg,
                **input_args(opts),
                keep=keep,
                method=method,  # type: ignore[arg-type]
                against=against,
                save_index=save_index,
                overwrite=overwrite,
                dry_run=dry_run,
                options=run,
                report=not no_report,
                progress=progress,
                prefetch=prefetch,
                on_finished=summarize,
                detect_id=detect_id,
                rename_duplicate_ids=rename_ids,
                language_field=language_field,
            )
    finally:
        if prefetch is not None:
            prefetch.close()
    if not summarized:
        summarize(result)


def _prefetch(inputs: list[str], cfg: Config, run: RunOptions) -> Prefetch | None:
    """A :class:`~neardup.io.corpus.Prefetch` of the inputs when the run will read them
    whole into memory, else None."""
    from neardup.batch.plan import in_memory_plan
    from neardup.io.corpus import Prefetch

    try:
        limit = run.memory_limit
        in_memory = not run.spill and in_memory_plan(inputs, cfg, limit=limit) <= limit
    except OSError:
        return None  # the reader words the error
    return Prefetch(inputs) if in_memory else None


def _dedup_ray(
    inputs: tuple[str, ...],
    output: str,
    method: str,
    keep: str,
    against: str | None,
    save_index: str | None,
    overwrite: bool,
    dry_run: bool,
    spill: bool,
    work_dir: str | None,
    vectors_field: str | None,
    ray_address: str | None,
    ray_cpus: int | None,
    resume: bool,
    cc_threshold: int | None,
    quiet: bool,
    opts: dict[str, Any],
) -> None:
    from neardup.engines.ray import DEFAULT_CC_THRESHOLD, run_dedup_ray

    for name, value in (
        ("method", None if method == "lsh" else method),
        ("against", against),
        ("save-index", save_index),
        ("spill", spill or None),
        ("vectors", vectors_field),
    ):
        if value is not None:
            raise InvalidConfig(
                name, value, "not available with --engine ray", "drop it or use --engine local"
            )
    cfg = config_from(opts)
    run_options_from(opts)  # --memory-limit is checked; Ray plans its own memory
    r = run_dedup_ray(
        list(inputs),
        output,
        config=cfg,
        **input_args(opts),
        keep=keep,
        overwrite=overwrite,
        dry_run=dry_run,
        ray_address=ray_address,
        num_cpus=ray_cpus,
        work_dir=work_dir,
        resume=resume,
        cc_threshold=DEFAULT_CC_THRESHOLD if cc_threshold is None else cc_threshold,
        progress=Progress(quiet),
    )
    click.echo(
        f"{r.documents_in} documents: kept {_known(r.documents_out)}, exact "
        f"duplicates {r.exact_duplicates}, near duplicates "
        f"{_known(r.near_duplicates)}, clusters {_known(r.clusters)} "
        f"(engine ray, reused stages: {len(r.stats['engine']['reused_stages'])})"
        + ("" if dry_run else f"; wrote {output}")
    )


def _known(count: int | None) -> int | str:
    """A count of the Ray engine's summary line, ``?`` when the run did not count it."""
    return "?" if count is None else count


def _dedup_vectors(
    inputs: tuple[str, ...],
    output: str,
    vectors_field: str,
    metric: str,
    hamming_radius: int | None,
    bits: int,
    method: str,
    keep: str,
    against: str | None,
    save_index: str | None,
    spill: bool,
    overwrite: bool,
    dry_run: bool,
    no_report: bool,
    quiet: bool,
    opts: dict[str, Any],
) -> None:
    from neardup.batch.vjob import run_vector_dedup
    from neardup.vectors.sketches import VectorConfig

    ready_kernels("vectors")

    with errors():
        for name, value, ok in (
            ("--method", method, "lsh"),
            ("--keep", keep, "first"),
            ("--against", against, None),
            ("--save-index", save_index, None),
            ("--spill", spill, False),
        ):
            if value != ok:
                raise InvalidConfig(
                    name, value, "is not available with --vectors", f"drop {name} for vectors"
                )
        cfg = VectorConfig(
            metric=metric,  # type: ignore[arg-type]
            threshold=opts["threshold"],
            bands=opts["bands"],
            rows=opts["rows"],
            hamming_radius=hamming_radius,
            bits=bits,
            seed=opts["seed"],
        )
        r = run_vector_dedup(
            list(inputs),
            output,
            vectors_field=vectors_field,
            config=cfg,
            **input_args(opts),
            overwrite=overwrite,
            dry_run=dry_run,
            workers=opts["workers"],
            report=not no_report,
        )
    click.echo(
        f"{r.documents_in} vectors: kept {r.documents_out}, identical "
        f"{r.exact_duplicates}, near duplicates {r.near_duplicates}, clusters "
        f"{r.clusters}, bad records {r.bad_records}; predicted recall at "
        f"{r.stats['metric']} {r.stats['threshold']}: "
        f"{r.stats['predicted_recall_at_threshold']:.4f}"
        + ("" if dry_run else f"; wrote {output}")
    )


@click.command("compile")
@click.option(
    "--group",
    "groups",
    multiple=True,
    type=click.Choice(sorted(kernel_groups())),
    help="Kernel group to compile (repeatable) [default: all groups].",
)
@click.option(
    "--processes",
    type=click.IntRange(min=1),
    default=None,
    help="Worker processes compiling in parallel [default: the usable cores].",
)
def compile_cmd(groups: tuple[str, ...], processes: int | None) -> None:
    """Compile the kernels for this machine ahead of the first run.

    The first run of each kind (text dedup, library calls, vectors, the service)
    compiles its kernels once per machine and caches them; this does it up front,
    for example in a container image build.  Prints what it compiled.

    Example: neardup compile --group dedup --group service
    """
    from neardup.kernels._warm import compile_kernels

    chosen = list(groups) or sorted(kernel_groups())
    with errors():
        out = compile_kernels(
            chosen, processes=processes, progress=lambda line: click.echo(line, err=True)
        )
    click.echo(
        f"{out['kernels']} kernels of {', '.join(chosen)}: {out['missing']} compiled "
        f"in {out['seconds']:.1f} s, the rest already cached"
    )

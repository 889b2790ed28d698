"""``neardup tune``: LSH layouts calibrated on the user's corpus, as a one-page memo
(``memo.json``, ``memo.html``; see :mod:`neardup.batch.tune`), gated like
``audit --fail-on-leakage`` (exit 8 on a refusal with ``--fail-on-refusal``)."""

from __future__ import annotations

import sys
from typing import Any

import click

from neardup.cli._clihelp import TUNE_SECTIONS, SectionedCommand
from neardup.cli.common import (
    common_options,
    config_from,
    errors,
    input_args,
    resolved_inputs,
    run_options_from,
)

__all__ = ["REFUSAL_EXIT", "tune_cmd"]

REFUSAL_EXIT = 8
"""Exit status of ``--fail-on-refusal`` when no layout meets every segment's bound."""


@click.command(name="tune", cls=SectionedCommand, sections=TUNE_SECTIONS)
@click.argument("inputs", nargs=-1)
@click.option(
    "--labels",
    default=None,
    help='Labelled pairs, JSONL {"a": ID, "b": ID, "duplicate": true|false}; default: '
    "the exact join is the truth.",
)
@click.option(
    "--segment-field",
    "segment_fields",
    multiple=True,
    help="Field whose values are segments that must each reach --recall; repeat for more.",
)
@click.option("--far", type=float, default=0.3, show_default=True, help="Similarity to keep out.")
@click.option(
    "--recall",
    type=float,
    default=0.95,
    show_default=True,
    help="Candidate recall whose lower bound must clear this in every segment.",
)
@click.option(
    "--budget",
    type=float,
    default=20_000,
    show_default=True,
    help="Candidates per query allowed at -n items (expected far and measured p99).",
)
@click.option(
    "-n", "n", type=int, default=None, help="Items of the index; default: the corpus size."
)
@click.option(
    "--max-perm", type=int, default=256, show_default=True, help="Largest signature proposed."
)
@click.option(
    "--confidence",
    type=float,
    default=0.95,
    show_default=True,
    help="Level of the two-sided Wilson intervals.",
)
@click.option(
    "--seeds", type=int, default=3, show_default=True, help="Seeds of the sensitivity check."
)
@click.option(
    "--ranges",
    type=(float, float),
    default=(0.5, 0.9),
    show_default=True,
    help="Two similarity ranges for the one-versus-two-layouts comparison.",
)
@click.option(
    "--max-pairs",
    type=int,
    default=20_000_000,
    show_default=True,
    help="Colliding pairs a layout may enumerate (more: reported unmeasured).",
)
@click.option("--output", "-o", required=True, help="Folder for memo.json and memo.html.")
@click.option("--overwrite", is_flag=True, help="Replace an existing output folder.")
@click.option(
    "--fail-on-refusal",
    is_flag=True,
    help="Exit with status 8 when the recommendation is refused.",
)
@common_options
def tune_cmd(
    inputs: tuple[str, ...],
    labels: str | None,
    segment_fields: tuple[str, ...],
    far: float,
    recall: float,
    budget: float,
    n: int | None,
    max_perm: int,
    confidence: float,
    seeds: int,
    ranges: tuple[float, float],
    max_pairs: int,
    output: str,
    overwrite: bool,
    fail_on_refusal: bool,
    **opts: Any,
) -> None:
    """Calibrate (bands, rows) on a corpus: recall per segment with Wilson lower
    bounds, candidates per query, the recommended layout or a refusal.

    With no INPUT the memo is theory only (the S-curve).

    Example: neardup tune corpus.jsonl --segment-field source --threshold 0.8 --far 0.3
    --recall 0.95 --budget 20000 -n 1000000 -o memo/
    """
    inputs = resolved_inputs(inputs) if inputs else ()
    from neardup.batch.job import set_workers
    from neardup.batch.outputs import commit_output, staged_output
    from neardup.batch.tune import TuneConfig
    from neardup.batch.tune_report import memo_files

    with errors():
        base = config_from(opts)
        run = run_options_from(opts)
        cfg = TuneConfig(
            threshold=base.threshold,
            far=far,
            recall=recall,
            budget=budget,
            n=n,
            max_perm=max_perm,
            confidence=confidence,
            seeds=seeds,
            ranges=ranges,
            max_pairs=max_pairs,
        )
        set_workers(run.workers)
        # The output folder is checked (and staged) before the corpus is read.
        with staged_output(output, overwrite, [*inputs, *([labels] if labels else [])]) as tmp:
            memo = _memo(inputs, opts, cfg, base, run.memory_limit, segment_fields, labels)
            memo_files(memo, str(tmp))
            commit_output(str(tmp), output)
    rec = memo["recommendation"]
    if rec["status"] == "recommended":
        lay = rec["layout"]
        click.echo(
            f"recommended {lay['bands']} bands x {lay['rows']} rows ({lay['hashes']} hashes); "
            f"wrote {output}/memo.json and memo.html"
        )
        return
    click.echo(f"refused: {rec['reasons'][0] if rec['reasons'] else 'no layout'}; wrote {output}")
    if fail_on_refusal:
        click.echo("error: no layout meets every segment's recall bound (see memo)", err=True)
        sys.exit(8)  # REFUSAL_EXIT, literal for the exit-code docs check


def _memo(
    inputs: tuple[str, ...],
    opts: dict[str, Any],
    cfg: Any,
    base: Any,
    memory_limit: int,
    segment_fields: tuple[str, ...],
    labels: str | None,
) -> dict[str, Any]:
    from neardup.batch.plan import in_memory_plan
    from neardup.batch.tune import read_labels, tune
    from neardup.core._errors import MemoryLimitExceeded
    from neardup.io.corpus import read_corpus, record_fields

    texts: Any = []
    ids: list[Any] = []
    segments: dict[str, list[Any]] = {}
    pairs = None
    if inputs:
        # The corpus is held like an in-memory dedup run's (pairs and band keys
        # of the grid come on top and are bounded by --max-pairs).
        plan = in_memory_plan(inputs, base)
        if plan > memory_limit:
            raise MemoryLimitExceeded(plan, memory_limit, "neardup tune (in memory)")
        corpus = read_corpus(list(inputs), **input_args(opts))
        texts, ids = corpus.texts, list(corpus.ids)
        values = record_fields(corpus, segment_fields)
        segments = {f: [v.get(f) for v in values] for f in segment_fields}
        if labels is not None:
            pairs = read_labels(labels, ids)
    return tune(texts, config=cfg, base=base, ids=ids, segments=segments, labels=pairs)

"""``neardup eval``: pair recall and precision of LSH dedup against the exact
join.
"""

from __future__ import annotations

import json
from typing import Any

import click

from neardup.cli._clihelp import (
    EVAL_SECTIONS,
    SectionedCommand,
)
from neardup.cli.common import (
    common_options,
    config_from,
    errors,
    input_args,
    resolved_inputs,
    run_options_from,
)

__all__ = ["eval_cmd"]


@click.command(name="eval", cls=SectionedCommand, sections=EVAL_SECTIONS)
@click.argument("inputs", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@common_options
def eval_cmd(inputs: tuple[str, ...], as_json: bool, **opts: Any) -> None:
    """Measure pair recall and precision of LSH dedup against the exact join.

    Example: neardup eval corpus.jsonl --threshold 0.8
    """
    inputs = resolved_inputs(inputs)
    from neardup.batch.evaluate import evaluate
    from neardup.batch.job import set_workers
    from neardup.io.corpus import read_corpus

    with errors():
        cfg = config_from(opts)
        run = run_options_from(opts)
        set_workers(run.workers)
        corpus = read_corpus(list(inputs), **input_args(opts))
        report = evaluate(corpus.texts, config=cfg, memory_limit=run.memory_limit)
    if as_json:
        click.echo(json.dumps(report, sort_keys=True))
        return
    click.echo(
        f"documents {report['documents']}, truth pairs (J >= {cfg.threshold}) "
        f"{report['truth_pairs']}, candidate pairs {report['candidate_pairs']}, "
        f"verified {report['verified_pairs']}"
    )
    click.echo(f"pair recall {report['recall']:.4f}, precision {report['precision']:.4f}")
    click.echo(f"{'bucket':>13}  {'pairs':>7}  {'found':>7}  {'recall':>7}  {'predicted':>9}")
    for row in report["buckets"]:
        click.echo(
            f"{row['bucket']:>13}  {row['pairs']:7d}  {row['found']:7d}  "
            f"{row['recall']:7.4f}  {row['predicted']:9.4f}"
        )

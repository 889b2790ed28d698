"""``neardup decontaminate``: remove the training records that contain items of
evaluation sets, and gate on it (exit 7)."""

from __future__ import annotations

import sys
from typing import Any

import click

from neardup.cli._clihelp import SectionedCommand
from neardup.cli.common import (
    OVERWRITE_OPTION,
    RAY_OPTIONS,
    Progress,
    choice_option,
    errors,
    resolved_inputs,
)
from neardup.core._errors import InvalidConfig

__all__ = ["CONTAMINATION_EXIT", "decontaminate"]

CONTAMINATION_EXIT = 7
"""Exit status of ``--fail-on-contamination`` when an item was found (6 is
``audit``'s leakage inside one dataset; a CI job running both can tell them apart)."""

_SECTIONS = (
    (
        "Input",
        (
            "against",
            "text_field",
            "id_field",
            "eval_text_field",
            "eval_id_field",
            "source_field",
            "skip_bad",
        ),
    ),
    ("What is contamination", ("ngram", "min_containment", "normalizer", "hash_algorithm")),
    ("Outputs", ("output", "overwrite", "fail_on_contamination", "quiet")),
    ("Performance", ("batch_bytes",)),
    ("Engines", ("engine", "ray_address", "ray_cpus")),
)


@click.command(cls=SectionedCommand, sections=_SECTIONS)
@click.argument("inputs", nargs=-1, required=True)
@click.option(
    "--against",
    "against",
    multiple=True,
    required=True,
    help="Evaluation set, NAME=PATH or PATH (named by its file name); repeat for more.",
)
@click.option("--output", "-o", default=None, help="Output folder (omit to report only).")
@OVERWRITE_OPTION
@click.option(
    "--fail-on-contamination",
    is_flag=True,
    help="Exit with status 7 when a training record contains an evaluation item.",
)
@click.option(
    "--ngram",
    type=int,
    default=13,
    show_default=True,
    help="Word n-gram length (GPT-3's 13-gram rule).",
)
@click.option(
    "--min-containment",
    type=float,
    default=0.5,
    show_default=True,
    help="Share of an item's distinct n-grams a training record must hold.",
)
@click.option(
    "--normalizer",
    default="nfkc-casefold",
    show_default=True,
    help="Normalizer: nfkc-casefold, nfkc or raw.",
)
@click.option(
    "--hash-algorithm",
    type=click.Choice(["siphash24", "xxh64"]),
    default="siphash24",
    show_default=True,
    help="Hash of the candidate lookup (siphash24: a fresh key per run); results do not "
    "depend on it.",
)
@click.option(
    "--text-field",
    default="text",
    show_default=True,
    help="Field/column holding the training text.",
)
@click.option("--id-field", default=None, help="Field/column of training record ids.")
@click.option(
    "--eval-text-field",
    default=None,
    help="Field/column holding the evaluation text; default: --text-field.",
)
@click.option(
    "--eval-id-field",
    default=None,
    help="Field/column of evaluation item ids; default: 'id' when present, else row numbers.",
)
@click.option(
    "--source-field",
    default=None,
    help="Field naming a training record's source (for top sources); default: its input.",
)
@click.option(
    "--skip-bad", is_flag=True, help="Count and skip malformed records instead of stopping."
)
@click.option(
    "--batch-bytes",
    type=int,
    default=8 << 20,
    show_default=True,
    help="Training text checked at a time (bounds memory).",
)
@choice_option(
    "--engine",
    ["local", "ray"],
    "local (this process, inputs in turn), or ray (one task per input, the ray extra): "
    "same outputs.",
)
@RAY_OPTIONS
@click.option("--quiet", is_flag=True, help="No progress on stderr (the summary line stays).")
def decontaminate(
    inputs: tuple[str, ...],
    against: tuple[str, ...],
    output: str | None,
    overwrite: bool,
    fail_on_contamination: bool,
    ngram: int,
    min_containment: float,
    normalizer: str,
    hash_algorithm: str,
    text_field: str,
    id_field: str | None,
    eval_text_field: str | None,
    eval_id_field: str | None,
    source_field: str | None,
    skip_bad: bool,
    batch_bytes: int,
    engine: str,
    ray_address: str | None,
    ray_cpus: int | None,
    quiet: bool,
) -> None:
    """Find evaluation items inside training records (exact containment and
    Jaccard, spans in both texts): clean/, removed.jsonl, report.json, report.html.

    Example: neardup decontaminate shards/ --against mmlu=mmlu_test.jsonl -o decon/

    On Ray: neardup decontaminate shards/ --against mmlu=mmlu_test.jsonl -o decon/
    --engine ray --ray-address auto
    """
    inputs = resolved_inputs(inputs)
    from neardup.lineage.decontam import DecontamConfig
    from neardup.lineage.decontam_job import eval_set_name, run_decontaminate

    bars = Progress(quiet)

    def progress(docs: int, nbytes: int) -> None:
        if bars.enabled:
            click.echo(f"\r{docs} records, {nbytes / 1e6:.0f} MB", err=True, nl=False)

    with errors():
        if engine != "ray":
            for name, value in (("ray-address", ray_address), ("ray-cpus", ray_cpus)):
                if value is not None:
                    raise InvalidConfig(
                        name, value, "only used with --engine ray", "add --engine ray"
                    )
        if ray_cpus is not None and ray_cpus < 1:
            raise InvalidConfig("ray-cpus", ray_cpus, "must be at least 1", "use e.g. 2")
        cfg = DecontamConfig(
            ngram=ngram,
            min_containment=min_containment,
            normalizer=normalizer,
            hash_algorithm=hash_algorithm,  # type: ignore[arg-type]
            batch_bytes=batch_bytes,
        )
        extra: dict[str, Any] = {}
        run: Any = run_decontaminate
        if engine == "ray":
            from neardup.engines.ray.decontam import run_decontaminate_ray

            run = run_decontaminate_ray
            extra = {"ray_address": ray_address, "num_cpus": ray_cpus}
        res: Any = run(
            list(inputs),
            [eval_set_name(a) for a in against],
            output,
            config=cfg,
            text_field=text_field,
            id_field=id_field,
            eval_text_field=eval_text_field,
            eval_id_field=eval_id_field,
            source_field=source_field,
            skip_bad=skip_bad,
            overwrite=overwrite,
            progress=progress,
            **extra,
        )
    if bars.enabled:
        click.echo("", err=True)
    sets = "; ".join(
        f"{name}: {s['contaminated_items']}/{s['checked_items']} items in "
        f"{s['training_documents']} records"
        + (f" ({s['too_short_items']} too short)" if s["too_short_items"] else "")
        for name, s in res.report["sets"].items()
    )
    click.echo(
        f"{res.documents} records: {res.removed} removed, {res.kept} kept; {sets}"
        + ("" if output is None else f"; wrote {output}")
    )
    if fail_on_contamination and res.removed:
        click.echo(
            "error: contamination: training records contain evaluation items (see report.json)",
            err=True,
        )
        sys.exit(7)  # CONTAMINATION_EXIT, literal for the exit-code docs check

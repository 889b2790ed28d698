"""``neardup audit`` and ``neardup split``: families, leakage across splits, and
family-aware splits.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from neardup.cli._clihelp import (
    SectionedCommand,
    audit_sections,
    split_sections,
)
from neardup.cli.common import (
    METHOD_OPTION,
    OVERWRITE_OPTION,
    common_options,
    config_from,
    errors,
    input_args,
    options,
    ready_kernels,
    resolved_inputs,
    run_options_from,
)
from neardup.core._provenance import PROVENANCE_FIELDS
from neardup.core.config import Config

__all__ = ["audit", "split"]

_KERNELS = ("dedup", "library")
"""The kernel groups audit and split run: reading (dedup's) and the library's
deduplication of the texts; built on first use, with a progress line."""


_FIELD_HELP = {
    "policy": "Column holding each record's access policy (a label or a list of labels); "
    "families list their members' policies and mixed ones are flagged.",
    "quote": 'Column listing the spans of other records a record quotes, [{"source": ID, '
    '"start": S, "end": E}, ...] (offsets into the source\'s text): each is a lineage edge.',
}


def _provenance_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for name in reversed(PROVENANCE_FIELDS):
        flag = "--" + name.removesuffix("_id").replace("_", "-") + "-field"
        f = click.option(
            flag,
            name + "_field",
            default=None,
            help=_FIELD_HELP.get(name, f"Column holding each record's {name}."),
        )(f)
    return f


def _named_split(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> list[tuple[str, str]]:
    out = []
    for v in values:
        name, sep, path = v.partition("=")
        if not sep or not name.strip() or not path:
            raise click.BadParameter(f"{v!r}: write NAME=PATH, e.g. test=data/test.jsonl")
        out.append((name.strip(), path))
    return out


_family_options = options(
    METHOD_OPTION,
    click.option("--decisions", default=None, help="Reviewer decisions (JSONL) to honour."),
    click.option(
        "--ignore-boilerplate",
        is_flag=True,
        help="Drop near edges that fall below the threshold without boilerplate shingles.",
    ),
    click.option(
        "--lineage-veto",
        is_flag=True,
        help="Drop near edges between records whose known origin ids differ (exact "
        "copies are kept); audit.json reports the dropped edges.",
    ),
    click.option(
        "--split",
        "named_splits",
        multiple=True,
        metavar="NAME=PATH",
        callback=_named_split,
        help="Read PATH as the records of split NAME (repeatable; instead of "
        "--split-field).  Without it, several inputs are splits named by their files.",
    ),
)
"""How audit and split build families: candidates, reviewers' decisions, boilerplate,
lineage, and splits taken from the inputs."""


def _inputs_and_splits(
    inputs: tuple[str, ...], named: list[tuple[str, str]], fields: dict[str, str]
) -> tuple[list[str], list[str | None] | None]:
    """The files to read and the split of each (None: from --split-field, or none)."""
    from neardup.io.inputs import split_inputs

    if not inputs and not named:
        raise click.UsageError("Missing argument 'INPUTS...' (or --split NAME=PATH).")
    if named and "split" in fields:
        raise click.UsageError("--split and --split-field exclude each other: use one.")
    if "split" in fields:
        return list(resolved_inputs(inputs)), None
    files: list[str] = []
    splits: list[str | None] | None = None
    with errors():
        files, splits = split_inputs(inputs, named)
    return files, splits


def _splits_line(splits: list[str | None] | None) -> str:
    if splits is None:
        return ""
    names = dict.fromkeys(s for s in splits if s is not None)
    return "; splits from the inputs: " + ", ".join(names)


def _veto_line(veto: dict[str, Any] | None) -> str:
    if veto is None:
        return ""
    return f"; lineage veto on: {veto['count']} near edges across origins dropped"


def _fields(opts: dict[str, Any]) -> dict[str, str]:
    return {
        name: opts.pop(name + "_field")
        for name in PROVENANCE_FIELDS
        if opts.get(name + "_field") is not None
    }


@click.command(cls=SectionedCommand, sections=audit_sections(PROVENANCE_FIELDS))
@click.argument("inputs", nargs=-1)
@click.option("--output", "-o", default=None, help="Output folder (omit to print only).")
@OVERWRITE_OPTION
@_family_options
@click.option(
    "--large-family",
    type=int,
    default=50,
    show_default=True,
    help="Flag families with at least this many members.",
)
@click.option(
    "--fail-on-leakage",
    is_flag=True,
    help="Exit with status 6 when a family straddles two splits (a release gate).",
)
@_provenance_options
@common_options
def audit(
    inputs: tuple[str, ...],
    output: str | None,
    overwrite: bool,
    method: str,
    decisions: str | None,
    ignore_boilerplate: bool,
    lineage_veto: bool,
    named_splits: list[tuple[str, str]],
    large_family: int,
    fail_on_leakage: bool,
    **opts: Any,
) -> None:
    """Families, cross-split leakage and review flags: families.jsonl, audit.json,
    report.html.

    Example: neardup audit data.jsonl --split-field split --label-field label -o audit/

    Example: neardup audit train.jsonl test.jsonl --fail-on-leakage
    """
    from neardup.lineage.audit import run_audit

    opts.pop("quiet")  # no progress bars in audit; the summary line always prints
    fields = _fields(opts)
    files, input_splits = _inputs_and_splits(inputs, named_splits, fields)
    ready_kernels(*_KERNELS)
    with errors():
        cfg = config_from(opts)
        memory_limit = run_options_from(opts).memory_limit
        res = run_audit(
            files,
            output,
            fields=fields,
            config=cfg,
            **input_args(opts),
            method=method,
            decisions=decisions,
            ignore_boilerplate=ignore_boilerplate,
            large_family=large_family,
            overwrite=overwrite,
            memory_limit=memory_limit,
            lineage_veto=lineage_veto,
            input_splits=input_splits,
        )
    veto = res.audit["lineage_vetoed_edges"] if lineage_veto else None
    click.echo(
        f"{res.records} records: {res.families} families "
        f"({res.records_in_families} records), {res.flagged_families} flagged; "
        f"leaking records {res.leaking_records} in {res.leaking_families} families"
        + "".join(f"; {k}: {v}" for k, v in res.leakage["pairs"].items())
        + _splits_line(input_splits)
        + _veto_line(veto)
        + ("" if output is None else f"; wrote {output}")
    )
    if fail_on_leakage and veto is not None:
        click.echo(
            f"note: --lineage-veto dropped {veto['count']} near edges before the gate "
            "(examples in audit.json: lineage_vetoed_edges)",
            err=True,
        )
    if fail_on_leakage and res.leaking_records:
        click.echo("error: leakage: a family straddles splits (see audit.json)", err=True)
        sys.exit(6)


@click.command(cls=SectionedCommand, sections=split_sections(PROVENANCE_FIELDS))
@click.argument("inputs", nargs=-1)
@click.option("--output", "-o", required=True, help="Output folder (one file per split).")
@click.option(
    "--ratios",
    default="train=0.8,valid=0.1,test=0.1",
    show_default=True,
    help="Split names and shares.",
)
@click.option("--stratify-field", default=None, help="Balance each value of this column.")
@OVERWRITE_OPTION
@_family_options
@_provenance_options
@common_options
def split(
    inputs: tuple[str, ...],
    output: str,
    ratios: str,
    stratify_field: str | None,
    overwrite: bool,
    method: str,
    decisions: str | None,
    ignore_boilerplate: bool,
    lineage_veto: bool,
    named_splits: list[tuple[str, str]],
    **opts: Any,
) -> None:
    """Family-aware split: whole families go to one split; split.json has the ratios.

    Example: neardup split data.jsonl --ratios train=0.8,valid=0.1,test=0.1 --seed 7 -o out/
    """
    import dataclasses

    from neardup.lineage.audit import parse_ratios, run_split

    opts.pop("quiet")  # no progress bars in split; the summary line always prints
    fields = _fields(opts)
    files, input_splits = _inputs_and_splits(inputs, named_splits, fields)
    ready_kernels(*_KERNELS)
    with errors():
        cfg = config_from(opts)
        memory_limit = run_options_from(opts).memory_limit
        split_seed = cfg.seed
        # --seed draws the assignment; the families must not depend on it, so the
        # hash functions keep their default seed.
        cfg = dataclasses.replace(cfg, seed=Config().seed)
        rep = run_split(
            files,
            output,
            ratios=parse_ratios(ratios),
            seed=split_seed,
            fields=fields,
            stratify_field=stratify_field,
            config=cfg,
            **input_args(opts),
            method=method,
            decisions=decisions,
            ignore_boilerplate=ignore_boilerplate,
            overwrite=overwrite,
            memory_limit=memory_limit,
            lineage_veto=lineage_veto,
            input_splits=input_splits,
        )
    veto = rep.report["lineage_vetoed_edges"] if lineage_veto else None
    click.echo(
        "achieved "
        + ", ".join(f"{k}={v:.4f}" for k, v in rep.achieved.items())
        + f" over {rep.families} families (largest {rep.largest_family})"
        + _splits_line(input_splits)
        + _veto_line(veto)
        + f"; wrote {output}"
    )

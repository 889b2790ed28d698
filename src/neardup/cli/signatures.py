"""``neardup signatures``: MinHash signatures and LSH band keys of a corpus, as a
Parquet file for a database (see :mod:`neardup.batch.sigexport`).
"""

from __future__ import annotations

from typing import Any

import click

from neardup.cli._clihelp import SIGNATURES_SECTIONS, SectionedCommand
from neardup.cli.common import (
    common_options,
    config_from,
    errors,
    input_args,
    needs_extra,
    resolved_inputs,
    run_options_from,
)

__all__ = ["signatures"]


@click.command(cls=SectionedCommand, sections=SIGNATURES_SECTIONS)
@click.argument("inputs", nargs=-1, required=True)
@click.option(
    "--output", "-o", required=True, help="Parquet file to write (id, signature, band_0...)."
)
@click.option("--overwrite", is_flag=True, help="Replace an existing output file.")
@common_options
def signatures(inputs: tuple[str, ...], output: str, overwrite: bool, **opts: Any) -> None:
    """Write each record's MinHash signature and LSH band keys to a Parquet file.

    Two records are LSH candidates exactly when one of their band_<t> columns is
    equal; the README gives the SQL query that lists an item's candidates.

    Example: neardup signatures corpus.jsonl -o sigs.parquet
    """
    inputs = resolved_inputs(inputs)
    with needs_extra("io"):
        import pyarrow  # noqa: F401
    from neardup.batch.job import set_workers  # the one place threads are set
    from neardup.batch.sigexport import export_signatures

    with errors():
        cfg = config_from(opts)
        run = run_options_from(opts)
        set_workers(run.workers)
        counts = export_signatures(
            inputs,
            output,
            config=cfg,
            overwrite=overwrite,
            memory_limit=run.memory_limit,
            **input_args(opts),
        )
    click.echo(
        f"wrote {counts['signed']} signatures ({counts['bands']} bands x {counts['rows']} "
        f"rows of {counts['num_perm']}) to {output}; empty {counts['empty']}, too large "
        f"{counts['too_large']}, bad records {counts['bad_records']}"
    )

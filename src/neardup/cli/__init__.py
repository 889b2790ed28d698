"""The ``neardup`` command line: a thin shell over library calls.

Exit codes: 0 success; 1 unexpected error; 2 usage error or invalid parameter;
3 bad input data (``repair``: the tenant is damaged); 4 I/O problem (unreadable
input, existing output); 5 memory limit; 6 leakage found (``audit
--fail-on-leakage``); 7 contamination found (``decontaminate
--fail-on-contamination``); 8 no layout recommended (``tune
--fail-on-refusal``); 130 and 143 a ``dedup`` stopped by SIGINT and SIGTERM.
"""

from __future__ import annotations

import click

from neardup.cli.common import Main
from neardup.cli.decontaminate import decontaminate
from neardup.cli.dedup import compile_cmd, dedup
from neardup.cli.evaluate import eval_cmd
from neardup.cli.lineage import audit, split
from neardup.cli.params import params
from neardup.cli.service import apikey, repair, route, serve
from neardup.cli.signatures import signatures
from neardup.cli.tune import tune_cmd
from neardup.core.procenv import process_defaults

__all__ = ["main"]


@click.group(cls=Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="neardup")
@click.pass_context
def main(ctx: click.Context) -> None:
    """neardup: find exact and near duplicates, verified exactly.

    Example: neardup dedup data/sample.jsonl --output out/
    """
    process_defaults()  # again for callers that skipped the console script
    # The CLI owns its process: numba, if a kernel needs its JIT, starts the fast way.
    from neardup.kernels._jit import start_numba

    start_numba()


for _command in (
    dedup,
    compile_cmd,
    params,
    audit,
    split,
    decontaminate,
    eval_cmd,
    signatures,
    tune_cmd,
    serve,
    apikey,
    repair,
    route,
):
    main.add_command(_command)

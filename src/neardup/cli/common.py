"""What every command of the ``neardup`` command line shares: the options that
name a :class:`~neardup.Config`, errors as one line and an exit code, progress
bars, input expansion, kernel preparation, and the process's quick exit.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import click

from neardup.core._errors import (
    CorruptFile,
    InputError,
    InvalidConfig,
    MemoryLimitExceeded,
    NeardupError,
    NeardupIOError,
    SchemeMismatch,
)
from neardup.core.config import Config, RunOptions, ShingleSpec

__all__ = [
    "CONFIG_OPTIONS",
    "METHOD_OPTION",
    "OVERWRITE_OPTION",
    "RAY_OPTIONS",
    "Decorator",
    "Main",
    "Progress",
    "choice_option",
    "common_options",
    "config_from",
    "errors",
    "exit_now",
    "input_args",
    "needs_extra",
    "options",
    "parse_size",
    "ready_kernels",
    "resolved_inputs",
    "run_options_from",
]

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]
"""What ``click.option(...)`` returns: it adds an option to the command it decorates."""


def options(*decorators: Decorator) -> Decorator:
    """One decorator that applies ``decorators`` as if they were written, in this
    order, above the command (click lists options in that order)."""

    def apply(f: Callable[..., Any]) -> Callable[..., Any]:
        for deco in reversed(decorators):
            f = deco(f)
        return f

    return apply


def choice_option(name: str, choices: Sequence[str], help: str) -> Decorator:
    """An option taking one of ``choices``, the first by default (shown in --help)."""
    return click.option(
        name, type=click.Choice(list(choices)), default=choices[0], show_default=True, help=help
    )


METHOD_OPTION = choice_option(
    "--method", ["lsh", "exact"], "MinHash LSH candidates, or the exact similarity join (recall 1)."
)
OVERWRITE_OPTION = click.option(
    "--overwrite", is_flag=True, help="Replace an existing output folder."
)

RAY_OPTIONS = options(
    click.option(
        "--ray-address",
        default=None,
        help="With --engine ray: join this running Ray cluster (default: start a local one).",
    ),
    click.option(
        "--ray-cpus",
        type=int,
        default=None,
        help="With --engine ray and no --ray-address: CPUs of the local Ray (default: all).",
    ),
)
"""``--ray-address`` and ``--ray-cpus``: where a command's ``--engine ray`` runs."""


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.I)
_UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "kib": 2**10,
    "m": 10**6,
    "mb": 10**6,
    "mib": 2**20,
    "g": 10**9,
    "gb": 10**9,
    "gib": 2**30,
    "t": 10**12,
    "tb": 10**12,
    "tib": 2**40,
}


def parse_size(text: str) -> int:
    """'8GB' -> 8_000_000_000, '4GiB' -> 4 * 2**30, '1000' -> 1000."""
    m = _SIZE.match(text)
    unit = (m.group(2) or "").lower() if m else None
    if m is None or unit not in _UNITS:
        raise InvalidConfig("memory-limit", text, "not a size", "write e.g. 8GB, 512MiB or 1000000")
    return int(float(m.group(1)) * _UNITS[unit])


@contextmanager
def needs_extra(extra: str) -> Iterator[None]:
    """Imports of an optional extra: a missing package ends the command (exit 2)
    with the pip command that installs the extra."""
    try:
        yield
    except ImportError as exc:
        click.echo(f"error: {exc}; fix: pip install 'neardup[{extra}]'", err=True)
        sys.exit(2)


@contextmanager
def errors(corrupt: int = 2) -> Iterator[None]:
    """Errors as one line and an exit code; ``corrupt``: the code of a damaged file
    (3, bad data, for the files a batch run reads)."""
    try:
        yield
    except InputError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(3)
    except CorruptFile as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(corrupt)
    except NeardupIOError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(4)
    except MemoryLimitExceeded as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(5)
    except InvalidConfig as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(4 if exc.field == "output" else 2)
    except (SchemeMismatch, NeardupError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)


class Progress:
    """tqdm bars on stderr, only when stderr is a terminal and not --quiet."""

    def __init__(self, quiet: bool) -> None:
        self.enabled = not quiet and sys.stderr.isatty()
        self.bars: dict[str, Any] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        try:
            from tqdm import tqdm
        except ImportError:  # pragma: no cover - tqdm comes with the cli extra
            return
        bar = self.bars.get(stage)
        if bar is None:
            bar = self.bars[stage] = tqdm(
                total=total,
                desc=stage,
                unit="doc",
                file=sys.stderr,
                leave=False,
                mininterval=1.0,
                delay=1.0,
            )
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    def note(self, message: str) -> None:
        if self.enabled:
            click.echo(message, err=True)


CONFIG_OPTIONS = (
    "threshold",
    "shingle",
    "tokenizer",
    "normalizer",
    "num_perm",
    "bands",
    "rows",
    "seed",
    "verify",
    "signature",
    "max_shingles",
    "max_document_bytes",
)


def config_from(opts: dict[str, Any]) -> Config:
    """The Config named by the shared options (popped from ``opts``)."""
    o = {name: opts.pop(name) for name in CONFIG_OPTIONS}
    return Config(
        threshold=o["threshold"],
        shingle=ShingleSpec.parse(
            o["shingle"], max_shingles=o["max_shingles"], tokenizer=o["tokenizer"]
        ),
        normalizer=o["normalizer"],
        num_perm=o["num_perm"],
        bands=o["bands"],
        rows=o["rows"],
        seed=o["seed"],
        verify=o["verify"],
        signature=o["signature"],
        max_document_bytes=o["max_document_bytes"],
    )


def run_options_from(
    opts: dict[str, Any], *, spill: bool = False, work_dir: str | None = None
) -> RunOptions:
    """The RunOptions named by ``--memory-limit`` (popped from ``opts``) and
    ``--workers``, with a command's own ``spill`` and ``work_dir``."""
    return RunOptions(
        memory_limit=parse_size(opts.pop("memory_limit")),
        workers=opts["workers"],
        spill=spill,
        work_dir=work_dir,
    )


common_options = options(
    click.option(
        "--text-field",
        default="text",
        show_default=True,
        help="Field/column holding the text (JSONL, Parquet, CSV, datasets).",
    ),
    click.option(
        "--id-field",
        default=None,
        help="Field/column holding record ids; default: row numbers (dedup: the "
        "field 'id' when every record has a distinct one).",
    ),
    click.option(
        "--threshold",
        type=float,
        default=0.8,
        show_default=True,
        help="Exact Jaccard similarity at which two documents are duplicates (with "
        "--vectors: the exact cosine, or the l2/l1 distance radius).",
    ),
    click.option(
        "--shingle",
        default="word:5",
        show_default=True,
        help="Shingles: word:N, char:N or byte:N.",
    ),
    click.option(
        "--tokenizer",
        type=int,
        default=2,
        show_default=True,
        help="Words of word shingles: 2 is script-aware (each Chinese, Japanese, Thai... "
        "letter is a word); 1 is the tokenizer of older releases (maximal \\w runs), to "
        "reproduce their runs and use their indexes.",
    ),
    click.option(
        "--normalizer",
        default="nfkc-casefold",
        show_default=True,
        help="Normalizer: nfkc-casefold, nfkc or raw.",
    ),
    click.option(
        "--num-perm",
        type=int,
        default=128,
        show_default=True,
        help="Signature length (MinHash rows).",
    ),
    click.option(
        "--bands",
        type=int,
        default=None,
        help="LSH bands; default: chosen for recall at the threshold.",
    ),
    click.option("--rows", type=int, default=None, help="Rows per LSH band."),
    choice_option("--signature", ["minhash", "oph"], "k-permutation or one-permutation MinHash."),
    choice_option("--verify", ["exact", "estimate"], "Verify candidates exactly or by estimate."),
    click.option(
        "--seed",
        type=int,
        default=42,
        show_default=True,
        help="Seed of the hash functions and permutations.",
    ),
    click.option(
        "--memory-limit",
        default="4GiB",
        show_default=True,
        help="Planned memory ceiling, e.g. 8GB; checked before allocating.",
    ),
    click.option(
        "--max-shingles",
        type=int,
        default=1_000_000,
        show_default=True,
        help="Cap on shingles per document (truncation is reported).",
    ),
    click.option(
        "--max-document-bytes",
        type=int,
        default=10 * 1024 * 1024,
        show_default=True,
        help="Larger documents are reported, not compared.",
    ),
    click.option(
        "--skip-bad", is_flag=True, help="Count and skip malformed records instead of stopping."
    ),
    click.option(
        "--workers",
        type=int,
        default=None,
        help="Threads for the compiled kernels (results do not depend on it).",
    ),
    click.option(
        "--quiet",
        is_flag=True,
        help="No progress bars on stderr (the summary line on stdout stays).",
    ),
)
"""The options of every command that reads a corpus (fields, the Config, threads)."""


class Main(click.Group):
    """The ``neardup`` group; records whether it runs standalone (as the program)."""

    standalone = False

    def main(self, *args: Any, **kwargs: Any) -> Any:
        # click's signature: main(args, prog_name, complete_var, standalone_mode, ...)
        standalone = kwargs.get("standalone_mode", args[3] if len(args) > 3 else True)
        Main.standalone = bool(standalone)
        return super().main(*args, **kwargs)


def exit_now() -> None:
    """End the process without interpreter teardown, when neardup is the program.

    After a batch run every output is written, fsynced and renamed into place, and
    standalone click would exit next anyway; the teardown it skips (freeing the
    modules, numba's compiled code and LLVM, the OpenMP pool) is a fixed cost of
    every run.  Only when click runs standalone on the process's own stdout/stderr (not
    ``main(standalone_mode=False)``, not a test runner capturing output).
    """
    out, err = sys.stdout, sys.stderr
    if not Main.standalone or out is not sys.__stdout__ or err is not sys.__stderr__:
        return
    for stream in (out, err):
        if stream is not None:
            stream.flush()
    os._exit(0)


def input_args(opts: dict[str, Any]) -> dict[str, Any]:
    """How the shared options say to read the inputs: ``text_field``, ``id_field``
    and ``skip_bad``, as keyword arguments of the readers and jobs."""
    return {name: opts[name] for name in ("text_field", "id_field", "skip_bad")}


def resolved_inputs(inputs: tuple[str, ...]) -> tuple[str, ...]:
    """The inputs with folders of data files and saved DatasetDicts expanded (see
    :func:`neardup.io.corpus.resolve_inputs`); a missing path ends the command."""
    from neardup.io.corpus import resolve_inputs

    out = inputs
    with errors():
        out = tuple(resolve_inputs(inputs))
    return out


def ready_kernels(*groups: str) -> None:
    """Compile the kernels of ``groups`` not cached on this machine yet, on every
    core, with a progress line; then announce anything compiled later."""
    from neardup.kernels._warm import announce_compiles, compile_kernels

    with errors():
        compile_kernels(groups, progress=lambda line: click.echo(line, err=True))
    announce_compiles()

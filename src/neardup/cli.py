"""The ``neardup`` command line: a thin shell over library calls.

Exit codes: 0 success; 1 unexpected error; 2 usage error or invalid parameter;
3 bad input data (``repair``: the tenant is damaged); 4 I/O problem (unreadable
input, existing output); 5 memory limit; 6 leakage found (``audit
--fail-on-leakage``); 130 and 143 a ``dedup`` stopped by SIGINT and SIGTERM.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
import sys
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from ._clihelp import (
    DEDUP_SECTIONS,
    EVAL_SECTIONS,
    SectionedCommand,
    audit_sections,
    split_sections,
)
from ._errors import (
    CorruptFile,
    InputError,
    InvalidConfig,
    MemoryLimitExceeded,
    NeardupError,
    NeardupIOError,
    SchemeMismatch,
)
from ._kernel_manifest import GROUPS as KERNEL_GROUPS
from ._launch import process_defaults
from ._provenance import PROVENANCE_FIELDS
from .config import Config, ShingleSpec

if TYPE_CHECKING:
    from .corpus import Prefetch

__all__ = ["main"]

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
def _errors(corrupt: int = 2) -> Iterator[None]:
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


class _Progress:
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


_CONFIG_OPTIONS = (
    "threshold",
    "shingle",
    "normalizer",
    "num_perm",
    "bands",
    "rows",
    "seed",
    "verify",
    "signature",
    "memory_limit",
    "max_shingles",
    "max_document_bytes",
)


def _config(opts: dict[str, Any]) -> Config:
    """The Config named by the shared options (popped from ``opts``)."""
    o = {name: opts.pop(name) for name in _CONFIG_OPTIONS}
    return Config(
        threshold=o["threshold"],
        shingle=ShingleSpec.parse(o["shingle"], max_shingles=o["max_shingles"]),
        normalizer=o["normalizer"],
        num_perm=o["num_perm"],
        bands=o["bands"],
        rows=o["rows"],
        seed=o["seed"],
        verify=o["verify"],
        signature=o["signature"],
        memory_limit=parse_size(o["memory_limit"]),
        max_document_bytes=o["max_document_bytes"],
    )


def _common(f: Callable[..., Any]) -> Callable[..., Any]:
    opts = [
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
        click.option(
            "--signature",
            type=click.Choice(["minhash", "oph"]),
            default="minhash",
            show_default=True,
            help="k-permutation or one-permutation MinHash.",
        ),
        click.option(
            "--verify",
            type=click.Choice(["exact", "estimate"]),
            default="exact",
            show_default=True,
            help="Verify candidates exactly or by estimate.",
        ),
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
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


class _Main(click.Group):
    """The ``neardup`` group; records whether it runs standalone (as the program)."""

    standalone = False

    def main(self, *args: Any, **kwargs: Any) -> Any:
        # click's signature: main(args, prog_name, complete_var, standalone_mode, ...)
        standalone = kwargs.get("standalone_mode", args[3] if len(args) > 3 else True)
        _Main.standalone = bool(standalone)
        return super().main(*args, **kwargs)


def _exit_now() -> None:
    """End the process without interpreter teardown, when neardup is the program.

    After a batch run every output is written, fsynced and renamed into place, and
    standalone click would exit next anyway; the teardown it skips (freeing the
    modules, numba's compiled code and LLVM, the OpenMP pool) took ~0.3-0.5 s per
    run.  Only when click runs standalone on the process's own stdout/stderr (not
    ``main(standalone_mode=False)``, not a test runner capturing output).
    """
    out, err = sys.stdout, sys.stderr
    if not _Main.standalone or out is not sys.__stdout__ or err is not sys.__stderr__:
        return
    for stream in (out, err):
        if stream is not None:
            stream.flush()
    os._exit(0)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="neardup")
@click.pass_context
def main(ctx: click.Context) -> None:
    """neardup: find exact and near duplicates, verified exactly.

    Example: neardup dedup data/sample.jsonl --output out/
    """
    process_defaults()  # again for callers that skipped the console script
    if ctx.invoked_subcommand != "dedup":
        # dedup starts numba itself, once its input is being read.
        from ._jit import start_numba

        start_numba()


@main.command(cls=SectionedCommand, sections=DEDUP_SECTIONS)
@click.argument("inputs", nargs=-1, required=True)
@click.option("--output", "-o", required=True, help="Output folder (must not exist).")
@click.option(
    "--method",
    type=click.Choice(["lsh", "exact"]),
    default="lsh",
    show_default=True,
    help="MinHash LSH candidates, or the exact similarity join (recall 1).",
)
@click.option(
    "--keep",
    type=click.Choice(["first", "longest", "shortest"]),
    default="first",
    show_default=True,
    help="Which member of a cluster is kept.",
)
@click.option(
    "--row-ids",
    is_flag=True,
    help="Ids are row numbers, even when the records have a field 'id'.",
)
@click.option("--against", default=None, help="Dedup against the index saved in this folder.")
@click.option("--save-index", default=None, help="Save the index of all documents here.")
@click.option("--overwrite", is_flag=True, help="Replace an existing output folder.")
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
    "--vectors",
    "vectors_field",
    default=None,
    metavar="FIELD",
    help="Dedup the vectors in FIELD (a list of numbers, or an object of feature: weight) "
    "instead of text; .npy inputs take any FIELD name.",
)
@click.option(
    "--metric",
    type=click.Choice(["cosine", "l2", "l1", "weighted_jaccard"]),
    default="cosine",
    show_default=True,
    help="With --vectors: cosine (random hyperplanes; --threshold is the cosine), "
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
@click.option(
    "--engine",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="local (this process), or ray (Ray Data, the ray extra): same clusters and kept set.",
)
@click.option(
    "--ray-address",
    default=None,
    help="With --engine ray: join this running Ray cluster (default: start a local one).",
)
@click.option(
    "--ray-cpus",
    type=int,
    default=None,
    help="With --engine ray and no --ray-address: CPUs of the local Ray (default: all).",
)
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
@_common
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
    if _Main.standalone and sys.stderr is sys.__stderr__:
        from .leftovers import install_signal_handlers

        install_signal_handlers()  # SIGINT/SIGTERM: remove this run's folders, exit 130/143
    inputs = _resolved(inputs)
    from ._jit import start_numba

    quiet = opts.pop("quiet")
    if row_ids and opts["id_field"] is not None:
        with _errors():
            raise InvalidConfig(
                "row-ids", True, "conflicts with --id-field", "pass one of them, not both"
            )
    # Without --id-field or --row-ids a field "id" gives the ids (local text runs).
    detect_id = not row_ids and opts["id_field"] is None
    rename_ids = opts.pop("rename_duplicate_ids")
    if rename_ids and (engine == "ray" or vectors_field is not None):
        with _errors():
            raise InvalidConfig(
                "rename-duplicate-ids", True, "only for text with --engine local", "drop it"
            )
    if engine == "ray" or vectors_field is not None:
        start_numba()
    if engine == "ray":
        with _errors():
            _dedup_ray(
                inputs, output, method, keep, against, save_index, overwrite, dry_run, spill,
                work_dir, vectors_field, ray_address, ray_cpus, resume, cc_threshold, quiet, opts,
            )
        return
    for name, value in (
        ("ray-address", ray_address),
        ("ray-cpus", ray_cpus),
        ("resume", resume or None),
        ("cc-threshold", cc_threshold),
    ):
        if value is not None:
            with _errors():
                raise InvalidConfig(name, value, "only used with --engine ray", "add --engine ray")
    if vectors_field is not None:
        _dedup_vectors(
            inputs, output, vectors_field, metric, hamming_radius, bits, method, keep,
            against, save_index, spill, overwrite, dry_run, no_report, quiet, opts,
        )
        return
    progress = _Progress(quiet)
    with _errors():
        cfg = _config(opts)
    summarized = False

    def summarize(stats: dict[str, Any]) -> None:
        nonlocal summarized
        summarized = True
        if stats.get("id_field_fallback"):
            click.echo(
                f"note: ids are row numbers: {stats['id_field_fallback']} "
                "(pass --id-field or --row-ids to choose)",
                err=True,
            )
        ids = stats.get("id_field")
        click.echo(
            f"{stats['documents_in']} documents: kept {stats['documents_out']}, exact "
            f"duplicates {stats['exact_duplicates']}, near duplicates "
            f"{stats['near_duplicates']}, clusters {stats['clusters']}, empty "
            f"{stats['empty']}, too large {stats['too_large']}, bad records "
            f"{stats['bad_records']}; predicted recall at {stats['threshold']}: "
            f"{stats['predicted_recall_at_threshold']:.4f}; ids: "
            + (f"field {ids!r}" if ids else "row numbers")
            + (" (detected)" if stats.get("id_field_detected") else "")
            + ("" if dry_run else f"; wrote {output}")
        )
        if not progress.bars:
            # Every output is in place: end here, before the run's memory is freed.
            _exit_now()

    with _errors():
        prefetch = _prefetch(list(inputs), cfg, spill)
    try:
        # Loading numba and the kernels (~0.3 s) while the input is being read.
        start_numba()
        _ready_kernels(
            "dedup",
            *(["dedup-index"] if save_index or against else []),
            *(["dedup-exact"] if method == "exact" else []),
        )
        from .job import run_dedup

        with _errors(corrupt=3):
            stats = run_dedup(
                list(inputs),
                output,
                config=cfg,
                text_field=opts["text_field"],
                id_field=opts["id_field"],
                keep=keep,
                method=method,  # type: ignore[arg-type]
                against=against,
                save_index=save_index,
                skip_bad=opts["skip_bad"],
                overwrite=overwrite,
                dry_run=dry_run,
                workers=opts["workers"],
                report=not no_report,
                progress=progress,
                spill=spill,
                work_dir=work_dir,
                prefetch=prefetch,
                on_finished=summarize,
                detect_id=detect_id,
                rename_duplicate_ids=rename_ids,
            )
    finally:
        if prefetch is not None:
            prefetch.close()
    if not summarized:
        summarize(stats)


def _prefetch(inputs: list[str], cfg: Config, spill: bool) -> Prefetch | None:
    """A :class:`~neardup.corpus.Prefetch` of the inputs when the run will read them
    whole into memory, else None."""
    from .corpus import Prefetch, in_memory_plan

    try:
        in_memory = not spill and in_memory_plan(inputs, cfg) <= cfg.memory_limit
    except OSError:
        return None  # the reader words the error
    return Prefetch(inputs) if in_memory else None


def _resolved(inputs: tuple[str, ...]) -> tuple[str, ...]:
    """The inputs with folders of data files and saved DatasetDicts expanded (see
    :func:`neardup.corpus.resolve_inputs`); a missing path ends the command."""
    from .corpus import resolve_inputs

    out = inputs
    with _errors():
        out = tuple(resolve_inputs(inputs))
    return out


def _ready_kernels(*groups: str) -> None:
    """Compile the kernels of ``groups`` not cached on this machine yet, on every
    core, with a progress line; then announce anything compiled later."""
    from ._warm import announce_compiles, compile_kernels

    with _errors():
        compile_kernels(groups, progress=lambda line: click.echo(line, err=True))
    announce_compiles()


@main.command("compile")
@click.option(
    "--group",
    "groups",
    multiple=True,
    type=click.Choice(sorted(KERNEL_GROUPS)),
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
    from ._warm import compile_kernels

    chosen = list(groups) or sorted(KERNEL_GROUPS)
    with _errors():
        out = compile_kernels(
            chosen, processes=processes, progress=lambda line: click.echo(line, err=True)
        )
    click.echo(
        f"{out['kernels']} kernels of {', '.join(chosen)}: {out['missing']} compiled "
        f"in {out['seconds']:.1f} s, the rest already cached"
    )


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
    from .ray_engine import DEFAULT_CC_THRESHOLD, run_dedup_ray

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
    cfg = _config(opts)
    stats = run_dedup_ray(
        list(inputs),
        output,
        config=cfg,
        text_field=opts["text_field"],
        id_field=opts["id_field"],
        keep=keep,
        skip_bad=opts["skip_bad"],
        overwrite=overwrite,
        dry_run=dry_run,
        ray_address=ray_address,
        num_cpus=ray_cpus,
        work_dir=work_dir,
        resume=resume,
        cc_threshold=DEFAULT_CC_THRESHOLD if cc_threshold is None else cc_threshold,
        progress=_Progress(quiet),
    )
    click.echo(
        f"{stats['documents_in']} documents: kept {stats.get('documents_out', '?')}, exact "
        f"duplicates {stats['exact_duplicates']}, near duplicates "
        f"{stats.get('near_duplicates', '?')}, clusters {stats.get('clusters', '?')} "
        f"(engine ray, reused stages: {len(stats['engine']['reused_stages'])})"
        + ("" if dry_run else f"; wrote {output}")
    )


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
    from .vectors import VectorConfig
    from .vjob import run_vector_dedup

    _ready_kernels("vectors")

    with _errors():
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
        stats = run_vector_dedup(
            list(inputs),
            output,
            vectors_field=vectors_field,
            config=cfg,
            id_field=opts["id_field"],
            text_field=opts["text_field"],
            skip_bad=opts["skip_bad"],
            overwrite=overwrite,
            dry_run=dry_run,
            workers=opts["workers"],
            report=not no_report,
        )
    click.echo(
        f"{stats['documents_in']} vectors: kept {stats['documents_out']}, identical "
        f"{stats['exact_duplicates']}, near duplicates {stats['near_duplicates']}, clusters "
        f"{stats['clusters']}, bad records {stats['bad_records']}; predicted recall at "
        f"{stats['metric']} {stats['threshold']}: "
        f"{stats['predicted_recall_at_threshold']:.4f}" + ("" if dry_run else f"; wrote {output}")
    )


def _png(path: str, bands: int, rows: int, threshold: float) -> None:
    """A small PNG of the S-curve, drawn without any plotting library."""
    from .lsh import candidate_probability

    w, h, pad = 480, 300, 30
    img = [[255] * w for _ in range(h)]

    def dot(x: int, y: int, v: int = 0) -> None:
        if 0 <= x < w and 0 <= y < h:
            img[y][x] = v

    for x in range(pad, w - pad):
        dot(x, h - pad, 120)
    for y in range(pad, h - pad):
        dot(pad, y, 120)
    xt = pad + round(threshold * (w - 2 * pad))
    for y in range(pad, h - pad, 3):
        dot(xt, y, 160)
    prev = None
    for x in range(pad, w - pad + 1):
        s = (x - pad) / (w - 2 * pad)
        y = h - pad - round(candidate_probability(min(s, 1.0), bands, rows) * (h - 2 * pad))
        if prev is not None:
            for yy in range(min(prev, y), max(prev, y) + 1):
                dot(x, yy)
                dot(x, yy + 1)
        prev = y
    raw = b"".join(b"\x00" + bytes(row) for row in img)

    def chunk(tag: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + tag
            + data
            + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
        )

    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )
    with open(path, "wb") as fh:
        fh.write(png)


@main.command()
@click.option(
    "--threshold",
    type=float,
    default=0.8,
    show_default=True,
    help="Similarity the layout must find (default layout: recall at it).",
)
@click.option(
    "--num-perm",
    type=int,
    default=128,
    show_default=True,
    help="Signature length for the default layout.",
)
@click.option("--far", type=float, default=None, help="Similarity of pairs to keep out.")
@click.option(
    "--recall",
    type=float,
    default=0.95,
    show_default=True,
    help="Required candidate probability at --threshold (with --far).",
)
@click.option(
    "--budget",
    type=float,
    default=20_000,
    show_default=True,
    help="Allowed far candidates per query (with --far).",
)
@click.option(
    "-n",
    "n",
    type=int,
    default=1_000_000,
    show_default=True,
    help="Items in the index (with --far).",
)
@click.option(
    "--max-perm",
    type=int,
    default=512,
    show_default=True,
    help="Largest signature the search may propose.",
)
@click.option("--png", default=None, help="Also write the S-curve as a PNG to this path.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option(
    "--metric",
    type=click.Choice(["jaccard", "cosine", "l2", "l1", "weighted_jaccard"]),
    default="jaccard",
    show_default=True,
    help="jaccard (MinHash) or a vector family: cosine (hyperplanes; --threshold is the "
    "cosine) or l2/l1 (p-stable; --threshold is the radius, the width is picked).",
)
def params(
    threshold: float,
    num_perm: int,
    far: float | None,
    recall: float,
    budget: float,
    n: int,
    max_perm: int,
    png: str | None,
    as_json: bool,
    metric: str,
) -> None:
    """The (bands, rows) calculator and its candidate-probability table.

    Example: neardup params --threshold 0.8 --far 0.3 --recall 0.95 --budget 20000 -n 1000000

    Vectors: neardup params --metric cosine --threshold 0.9 --far 0.0 --budget 10
    """
    if metric != "jaccard":
        _vector_params(metric, threshold, far, recall, budget, n, as_json)
        return
    from .lsh import candidate_probability, default_layout, optimal_params

    with _errors():
        if not 0 < threshold <= 1:
            raise InvalidConfig("threshold", threshold, "must be in (0, 1]", "use e.g. 0.8")
        if far is None:
            b, r = default_layout(threshold, num_perm)
            how = f"default layout for threshold {threshold} with num_perm={num_perm}"
        else:
            lay = optimal_params(
                near=threshold, far=far, recall=recall, far_budget=budget, n=n, max_perm=max_perm
            )
            b, r = lay.bands, lay.rows
            how = (
                f"smallest layout with P({threshold}) >= {recall} and at most {budget:g} "
                f"expected candidates at {far} among {n:,}"
            )
        table = [(s / 20, candidate_probability(s / 20, b, r)) for s in range(1, 21)]
        if png:
            _png(png, b, r, threshold)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "bands": b,
                    "rows": r,
                    "num_perm_used": b * r,
                    "table": [{"s": s, "p": p} for s, p in table],
                },
                sort_keys=True,
            )
        )
        return
    click.echo(f"{how}: bands={b} rows={r} (uses {b * r} rows)")
    click.echo(f"{'s':>6}  {'P(candidate)':>12}")
    for s, p in table:
        mark = "  <- threshold" if math.isclose(s, threshold) else ""
        click.echo(f"{s:6.2f}  {p:12.6f}{mark}")
    if far is not None:
        click.echo(
            f"expected far candidates per query: {candidate_probability(far, b, r) * n:,.1f}"
        )
    if png:
        click.echo(f"wrote {png}")


def _vector_params(
    metric: str,
    threshold: float,
    far: float | None,
    recall: float,
    budget: float,
    n: int,
    as_json: bool,
) -> None:
    from .lsh import candidate_probability
    from .vectors import (
        VectorConfig,
        hyperplane_collision,
        pstable_collision,
        vector_layout,
    )

    with _errors():
        cfg = VectorConfig(
            metric=metric,  # type: ignore[arg-type]
            threshold=threshold,
            far=far,
            far_budget=budget,
            planned_items=n,
            recall_target=recall,
        ).resolve()
        lay = vector_layout(
            metric,
            threshold,
            far=cfg.far_point,
            n=n,
            recall=recall,
            far_budget=budget,
            width=cfg.width,
            strict=False,
        )
        if metric == "cosine":
            xs = sorted({round(-1 + i / 10, 2) for i in range(21)} | {threshold})
            base = [hyperplane_collision(x) for x in xs]
        elif metric == "weighted_jaccard":
            xs = sorted({round(i / 20, 2) for i in range(21)} | {threshold})
            base = list(xs)
        else:
            xs = sorted({round(threshold * i / 4, 6) for i in range(13)} | {threshold})
            w = float(cfg.width or 1.0)
            base = [pstable_collision(x, w, p=2 if metric == "l2" else 1) for x in xs]
        table = [
            (x, p1, candidate_probability(p1, lay.bands, lay.rows))
            for x, p1 in zip(xs, base, strict=True)
        ]
    data = {
        "metric": metric,
        "bands": lay.bands,
        "rows": lay.rows,
        "hashes": lay.bands * lay.rows,
        "width": cfg.width,
        "far": cfg.far_point,
        "expected_far_candidates": lay.expected_far_candidates,
        "within_budget": lay.expected_far_candidates <= budget,
        "table": [{"x": x, "p_hash": p1, "p": p} for x, p1, p in table],
    }
    if as_json:
        click.echo(json.dumps(data, sort_keys=True))
        return
    unit = metric if metric in ("cosine", "weighted_jaccard") else f"{metric} distance"
    extra = f", width {cfg.width:.4g}" if cfg.width else ""
    click.echo(
        f"{metric}: bands={lay.bands} rows={lay.rows} ({lay.bands * lay.rows} hashes{extra}); "
        f"P({threshold}) = {lay.p_near:.4f}, expected far candidates per item at "
        f"{cfg.far_point:g} among {n:,}: {lay.expected_far_candidates:,.1f}"
        + ("" if data["within_budget"] else f" (over the budget {budget:g}: the least bad)")
    )
    click.echo(f"{unit:>14}  {'P(one hash)':>11}  {'P(candidate)':>12}")
    for x, p1, p in table:
        mark = "  <- threshold" if math.isclose(x, threshold) else ""
        click.echo(f"{x:14.4g}  {p1:11.6f}  {p:12.6f}{mark}")


def _provenance_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for name in reversed(PROVENANCE_FIELDS):
        flag = "--" + name.removesuffix("_id").replace("_", "-") + "-field"
        f = click.option(
            flag, name + "_field", default=None, help=f"Column holding each record's {name}."
        )(f)
    return f


def _fields(opts: dict[str, Any]) -> dict[str, str]:
    return {
        name: opts.pop(name + "_field")
        for name in PROVENANCE_FIELDS
        if opts.get(name + "_field") is not None
    }


@main.command(cls=SectionedCommand, sections=audit_sections(PROVENANCE_FIELDS))
@click.argument("inputs", nargs=-1, required=True)
@click.option("--output", "-o", default=None, help="Output folder (omit to print only).")
@click.option("--overwrite", is_flag=True, help="Replace an existing output folder.")
@click.option(
    "--method",
    type=click.Choice(["lsh", "exact"]),
    default="lsh",
    show_default=True,
    help="MinHash LSH candidates, or the exact similarity join (recall 1).",
)
@click.option("--decisions", default=None, help="Reviewer decisions (JSONL) to honour.")
@click.option(
    "--ignore-boilerplate",
    is_flag=True,
    help="Drop near edges that fall below the threshold without boilerplate shingles.",
)
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
@_common
def audit(
    inputs: tuple[str, ...],
    output: str | None,
    overwrite: bool,
    method: str,
    decisions: str | None,
    ignore_boilerplate: bool,
    large_family: int,
    fail_on_leakage: bool,
    **opts: Any,
) -> None:
    """Families, cross-split leakage and review flags: families.jsonl, audit.json,
    report.html.

    Example: neardup audit data.jsonl --split-field split --label-field label -o audit/
    """
    inputs = _resolved(inputs)
    from .audit import run_audit

    opts.pop("quiet")  # no progress bars in audit; the summary line always prints
    fields = _fields(opts)
    with _errors():
        cfg = _config(opts)
        res = run_audit(
            list(inputs),
            output,
            fields=fields,
            config=cfg,
            text_field=opts["text_field"],
            id_field=opts["id_field"],
            method=method,
            decisions=decisions,
            ignore_boilerplate=ignore_boilerplate,
            large_family=large_family,
            skip_bad=opts["skip_bad"],
            overwrite=overwrite,
        )
    leak = res["leakage"]
    click.echo(
        f"{res['records']} records: {res['families']} families "
        f"({res['records_in_families']} records), {res['flagged_families']} flagged; "
        f"leaking records {leak['leaking_records']} in {leak['leaking_families']} families"
        + "".join(f"; {k}: {v}" for k, v in leak["pairs"].items())
        + ("" if output is None else f"; wrote {output}")
    )
    if fail_on_leakage and leak["leaking_records"]:
        click.echo("error: leakage: a family straddles splits (see audit.json)", err=True)
        sys.exit(6)


@main.command(cls=SectionedCommand, sections=split_sections(PROVENANCE_FIELDS))
@click.argument("inputs", nargs=-1, required=True)
@click.option("--output", "-o", required=True, help="Output folder (one file per split).")
@click.option(
    "--ratios",
    default="train=0.8,valid=0.1,test=0.1",
    show_default=True,
    help="Split names and shares.",
)
@click.option("--stratify-field", default=None, help="Balance each value of this column.")
@click.option("--overwrite", is_flag=True, help="Replace an existing output folder.")
@click.option(
    "--method",
    type=click.Choice(["lsh", "exact"]),
    default="lsh",
    show_default=True,
    help="MinHash LSH candidates, or the exact similarity join (recall 1).",
)
@click.option("--decisions", default=None, help="Reviewer decisions (JSONL) to honour.")
@click.option(
    "--ignore-boilerplate",
    is_flag=True,
    help="Drop near edges that fall below the threshold without boilerplate shingles.",
)
@_provenance_options
@_common
def split(
    inputs: tuple[str, ...],
    output: str,
    ratios: str,
    stratify_field: str | None,
    overwrite: bool,
    method: str,
    decisions: str | None,
    ignore_boilerplate: bool,
    **opts: Any,
) -> None:
    """Family-aware split: whole families go to one split; split.json has the ratios.

    Example: neardup split data.jsonl --ratios train=0.8,valid=0.1,test=0.1 --seed 7 -o out/
    """
    inputs = _resolved(inputs)
    import dataclasses

    from .audit import parse_ratios, run_split

    opts.pop("quiet")  # no progress bars in split; the summary line always prints
    fields = _fields(opts)
    with _errors():
        cfg = _config(opts)
        split_seed = cfg.seed
        # --seed draws the assignment; the families must not depend on it, so the
        # hash functions keep their default seed.
        cfg = dataclasses.replace(cfg, seed=Config().seed)
        rep = run_split(
            list(inputs),
            output,
            ratios=parse_ratios(ratios),
            seed=split_seed,
            fields=fields,
            stratify_field=stratify_field,
            config=cfg,
            text_field=opts["text_field"],
            id_field=opts["id_field"],
            method=method,
            decisions=decisions,
            ignore_boilerplate=ignore_boilerplate,
            skip_bad=opts["skip_bad"],
            overwrite=overwrite,
        )
    click.echo(
        "achieved "
        + ", ".join(f"{k}={v:.4f}" for k, v in rep["achieved"].items())
        + f" over {rep['families']} families (largest {rep['largest_family']}); wrote {output}"
    )


@main.command(name="eval", cls=SectionedCommand, sections=EVAL_SECTIONS)
@click.argument("inputs", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@_common
def eval_cmd(inputs: tuple[str, ...], as_json: bool, **opts: Any) -> None:
    """Measure pair recall and precision of LSH dedup against the exact join.

    Example: neardup eval corpus.jsonl --threshold 0.8
    """
    inputs = _resolved(inputs)
    from .corpus import read_corpus
    from .evaluate import evaluate
    from .job import set_workers

    with _errors():
        cfg = _config(opts)
        set_workers(opts["workers"])
        corpus = read_corpus(
            list(inputs),
            text_field=opts["text_field"],
            id_field=opts["id_field"],
            skip_bad=opts["skip_bad"],
        )
        report = evaluate(corpus.texts, config=cfg)
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


def _service_config(opts: dict[str, Any]) -> Any:
    import os

    from .service import ServiceConfig

    data_dir = os.path.abspath(opts["data_dir"])
    return ServiceConfig(
        data_dir=data_dir,
        master_key_file=opts["master_key_file"] or data_dir.rstrip(os.sep) + ".master.key",
        keys_file=opts["keys_file"] or data_dir.rstrip(os.sep) + ".keys.json",
        max_body_bytes=opts.get("max_body_bytes") or 1 << 20,
        max_candidates=opts.get("max_candidates") or 100,
        content_roots=tuple(os.path.abspath(r) for r in opts.get("content_root") or ()),
        audit_sample_rate=(
            0.01 if opts.get("audit_sample_rate") is None else opts["audit_sample_rate"]
        ),
        audit_interval_s=60.0 if opts.get("audit_interval") is None else opts["audit_interval"],
        request_budget_s=opts.get("request_budget") or 5.0,
    )


_SERVICE_PATHS = [
    click.option("--data-dir", required=True, help="Data directory (created if absent)."),
    click.option(
        "--master-key-file",
        default=None,
        help="Master secret file, outside the data directory [default: DATA_DIR.master.key].",
    ),
    click.option(
        "--keys-file",
        default=None,
        help="API key file (hashed keys), outside the data directory "
        "[default: DATA_DIR.keys.json].",
    ),
]


def _service_paths(f: Callable[..., Any]) -> Callable[..., Any]:
    for deco in reversed(_SERVICE_PATHS):
        f = deco(f)
    return f


@main.command()
@_service_paths
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8731, show_default=True, type=int, help="TCP port.")
@click.option(
    "--content-root",
    multiple=True,
    help="Folder that content_uri (file://) may read from; repeatable. Default: none.",
)
@click.option("--max-body-bytes", type=int, default=1 << 20, show_default=True,
              help="Largest JSON request body.")
@click.option("--max-candidates", type=int, default=100, show_default=True,
              help="Server cap on candidates per query.")
@click.option(
    "--operator-tenant",
    multiple=True,
    help="On first start, issue an operator key for these tenants (repeatable).",
)
@click.option(
    "--bootstrap-token-file",
    default=None,
    help="Write the first-start operator token here (mode 0600) instead of stderr.",
)
@click.option("--audit-sample-rate", type=float, default=0.01, show_default=True,
              help="Share of queries that also run an exact search in the background "
              "(measured recall: neardup_audit_misses_total).")
@click.option("--audit-interval", type=float, default=60.0, show_default=True,
              help="At most one exact audit per tenant per this many seconds.")
@click.option("--request-budget", type=float, default=5.0, show_default=True,
              help="Seconds a write may take before it is logged (waiting included); "
              "past it: 503 deadline_exceeded and nothing is recorded.")
@click.option("--log-level", default="warning", show_default=True, help="uvicorn log level.")
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Worker processes, each serving the tenants a stable hash of the tenant id "
    "gives it, behind one front process on --port; 1: a single process. "
    "[default: the number of CPUs]",
)
def serve(**opts: Any) -> None:
    """Run the multi-tenant dedup service (HTTP + JSON) over an embedded store.

    On first start it creates the master secret and an operator API key (printed
    once, or written to --bootstrap-token-file); nothing else needs to run.

    Example: neardup serve --data-dir ./nd-data --operator-tenant acme --port 8731
    """
    import os

    try:
        import uvicorn

        from .server import create_app
        from .service import Service
        from .workers import default_workers
    except ImportError as exc:
        click.echo(f"error: {exc}; fix: pip install 'neardup[service]'", err=True)
        sys.exit(2)
    workers = opts["workers"] or default_workers()
    _ready_kernels("service")
    with _errors():
        cfg = _service_config(opts)
        token = None
        if not os.path.exists(cfg.keys_file):
            token = Service.bootstrap(cfg, operator_tenants=list(opts["operator_tenant"]))
        if workers == 1:
            svc = Service(cfg)
        else:
            _check_service_files(cfg)
        if token is not None:
            if opts["bootstrap_token_file"]:
                flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                fd = os.open(opts["bootstrap_token_file"], flags, 0o600)
                with os.fdopen(fd, "w") as fh:
                    fh.write(token + "\n")
            else:
                click.echo(f"operator API key (shown once): {token}", err=True)
    if workers == 1:
        app = create_app(svc, close_on_shutdown=True)
        uvicorn.run(app, host=opts["host"], port=opts["port"], log_level=opts["log_level"])
        return
    _serve_front(opts, cfg, workers)


def _check_service_files(cfg: Any) -> None:
    """What a single-process start checks first (master key, key file, audit log), so
    that a bad file stops ``serve --workers N`` with the same message."""
    import os

    from .auth import AuditLog, Keyring
    from .service import load_master

    load_master(cfg.master_key_file)
    Keyring.load(cfg.keys_file)
    os.makedirs(os.path.join(cfg.data_dir, "tenants"), exist_ok=True)
    AuditLog(os.path.join(cfg.data_dir, "audit.jsonl"))


def _serve_front(opts: dict[str, Any], cfg: Any, workers: int) -> None:
    import uvicorn

    from .workers import Front, worker_command

    def worker_cmd(index: int, socket: str) -> list[str]:
        return worker_command(cfg, index, workers, socket, log_level=opts["log_level"])

    front = Front(worker_cmd, workers, cfg.data_dir, cfg.keys_file)
    uvicorn.run(
        front,
        host=opts["host"],
        port=opts["port"],
        log_level=opts["log_level"],
        lifespan="on",
        # The workers' answers carry their own Date and Server headers.
        server_header=False,
        date_header=False,
    )


@main.command()
@_service_paths
@click.option(
    "--role",
    type=click.Choice(["producer", "reviewer", "operator"]),
    required=True,
    help="Role of the new key.",
)
@click.option("--tenant", "tenants", multiple=True, required=True,
              help="Tenant the key is scoped to (operators: repeatable).")
def apikey(**opts: Any) -> None:
    """Issue an API key offline (the server rereads keys at start); prints the token once.

    Example: neardup apikey --data-dir ./nd-data --role producer --tenant acme
    """
    from .auth import Keyring

    with _errors():
        cfg = _service_config(opts)
        # Locked and reread: a running server may be adding keys to the same file.
        token = Keyring().add_saved(cfg.keys_file, opts["role"], list(opts["tenants"]))
    click.echo(token)


@main.command()
@_service_paths
@click.option("--tenant", required=True, help="The tenant to examine.")
@click.option(
    "--rebase",
    is_flag=True,
    help="Rebuild a damaged command log from the tenant's feature store (a new "
    "generation; the damaged log is kept beside it).",
)
@click.option(
    "--accept-loss",
    is_flag=True,
    help="With --rebase: go ahead although the store lacks commands the log held.",
)
def repair(**opts: Any) -> None:
    """Examine one tenant of a data directory offline, and repair what is safe.

    Without options it only reports (JSON): "ok" (opening repaired what is safe by
    itself: a torn log tail is trimmed, a damaged store rebuilt from a snapshot and
    the log), or "damaged" with the file, the reason and the next step.  A server
    may keep running while its failed tenant is repaired; a tenant the server has
    open is refused.  After a repair: POST /v1/tenants/TENANT/reopen.  Exit codes:
    0 ok or repaired, 3 damaged (nothing changed), 2 bad parameter or refused.

    Example: neardup repair --data-dir ./nd-data --tenant acme --rebase
    """
    import json
    import os

    from .migration import load_tenant, read_pointer
    from .service import load_master
    from .tenant import Tenant, valid_tenant_id

    with _errors():
        cfg = _service_config(opts)
        name = valid_tenant_id(opts["tenant"])
        root = os.path.join(cfg.data_dir, "tenants", name)
        if not os.path.isdir(root):
            raise InvalidConfig("tenant", name, f"has no folder under {cfg.data_dir}", "check it")
        master = load_master(cfg.master_key_file)
        live = os.path.normpath(os.path.join(root, read_pointer(root)["live"]))
        report = Tenant.repair(
            live, master, rebase=opts["rebase"], accept_loss=opts["accept_loss"]
        )
        if report["status"] == "ok":
            # The companion version (shadow or previous) must open too.
            t, mig = load_tenant(root, master)
            t.close()
            if mig.other is not None:
                mig.other.close()
    click.echo(json.dumps({"tenant": name, **report}, indent=1, sort_keys=True, default=str))
    sys.exit(3 if report["status"] == "damaged" else 0)


@main.command()
@click.option("--table", required=True, help="Routing table JSON (tenant id -> backend URL).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8730, show_default=True, type=int, help="TCP port.")
@click.option("--log-level", default="warning", show_default=True, help="uvicorn log level.")
def route(**opts: Any) -> None:
    """Forward each tenant's requests to the `neardup serve` process that owns it.

    The table is {"format": "neardup-routes-v1", "tenants": {"acme": "http://host:8731"}}.

    Example: neardup route --table routes.json --port 8730
    """
    try:
        import uvicorn

        from .router import RoutingTable, create_router
    except ImportError as exc:
        click.echo(f"error: {exc}; fix: pip install 'neardup[service]'", err=True)
        sys.exit(2)
    with _errors():
        table = RoutingTable.load(opts["table"])
    uvicorn.run(create_router(table), host=opts["host"], port=opts["port"],
                log_level=opts["log_level"])

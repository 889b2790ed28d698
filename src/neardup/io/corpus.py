"""Reading corpora and writing their outputs, keeping every original field intact.

Input formats (all inputs of one run must be of one family):

* JSONL — ``.jsonl``, ``.ndjson``, ``.json`` (one object per line), optionally
  ``.gz`` or ``.zst`` (the ``io`` extra provides zstandard).  Kept records are written
  back as the exact original line bytes.
* Parquet — ``.parquet`` (the ``io`` extra, pyarrow); outputs are Parquet with the
  input schema.
* CSV — ``.csv`` (optionally ``.gz``) with a header row; outputs are CSV with the
  same columns.
* A folder of ``.txt`` files — one document per file, id = the relative path;
  outputs are JSONL ``{"id", "text"}``.
* A Hugging Face dataset saved with ``Dataset.save_to_disk`` (the ``hf`` extra,
  read offline with ``datasets.load_from_disk``); outputs are Parquet.

JSONL is read in blocks by a compiled scanner (:mod:`neardup.io.jsonl`).

Record ids come from ``id_field`` when given, else they are row numbers counted
across all inputs in order.  Bad records raise :class:`~neardup.InputError` naming
the file and line, unless ``skip_bad`` is set, in which case they are counted and
listed in :attr:`Corpus.bad`.

The work is split by concern: :mod:`neardup.io.columns` (what a read corpus holds),
:mod:`neardup.io.records` (checking one record), :mod:`neardup.io.blocks` (reading
files in blocks, :class:`Prefetch`), :mod:`neardup.io.jsonl` (the JSONL reader),
:mod:`neardup.io.readers` (CSV, ``.txt``, Arrow) and :mod:`neardup.io.writers`
(:func:`write_subset`).  This module reads a corpus (:func:`read_corpus`), samples
its text for the memory plan (:func:`text_sample`), and re-exports the names
callers import from here.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

from neardup.core._errors import InputError
from neardup.io._ids import IdChoice, detect_id_field, settle_ids
from neardup.io.blocks import Prefetch as Prefetch
from neardup.io.columns import BadRecord, Corpus
from neardup.io.columns import RawLines as RawLines
from neardup.io.columns import TextColumn as TextColumn
from neardup.io.inputs import (
    decompressing,
    detect_format,
    open_binary,
    resolve_inputs,
    strip_compression,
)
from neardup.io.jsonl import ID_INT_KIND as ID_INT_KIND
from neardup.io.jsonl import ID_STR_KIND as ID_STR_KIND
from neardup.io.jsonl import OnBlock as OnBlock
from neardup.io.jsonl import iter_jsonl, read_jsonl
from neardup.io.readers import read_arrow, read_csv, read_txt
from neardup.io.records import RecordReader
from neardup.io.writers import FieldAppender as FieldAppender
from neardup.io.writers import prepare_subset as prepare_subset
from neardup.io.writers import write_subset

__all__ = [
    "BadRecord",
    "Corpus",
    "detect_format",
    "iter_jsonl",
    "read_corpus",
    "record_fields",
    "resolve_inputs",
    "write_subset",
]


def read_corpus(
    paths: Sequence[str],
    *,
    text_field: str = "text",
    id_field: str | None = None,
    skip_bad: bool = False,
    on_texts: Callable[[list[str]], None] | None = None,
    on_block: OnBlock | None = None,
    prefetch: Prefetch | None = None,
    detect_id: bool = False,
) -> Corpus:
    """Read every input in order into one :class:`Corpus`.

    With ``detect_id`` and no ``id_field``, a field ``id`` the inputs have gives
    the ids when every record has a usable one (:mod:`neardup.io._ids`); the choice
    is in :attr:`Corpus.id_choice`.

    ``on_texts``, if given, is called with the texts read so far that it has not
    seen yet, in input order, while reading goes on (a block of a JSONL file at a
    time, else a file at a time), so that a caller can start on them early.
    ``on_block``, if given, takes instead the JSONL blocks that went through the
    compiled scanner (see :data:`OnBlock`), without building their strings.
    ``prefetch``, if given, is a :class:`Prefetch` started on the same ``paths``:
    the files it holds are taken from it instead of being read again.
    """
    if not paths:
        raise InputError("<none>", None, "no input given", "name at least one input file")
    formats = {detect_format(p) for p in paths}
    fam = {"hf": "arrow", "parquet": "arrow"}
    families = {fam.get(f, f) for f in formats}
    if len(families) > 1:
        raise InputError(
            ", ".join(paths),
            None,
            f"inputs mix formats {sorted(formats)}",
            "run one format at a time (or convert first)",
        )
    fmt = sorted(formats)[0] if len(formats) == 1 else "parquet"
    corpus = Corpus(format=fmt, inputs=list(paths), id_choice=IdChoice(id_field))
    detected = detect_id_field(paths) if detect_id and id_field is None else None
    id_from = id_field if id_field is not None else detected
    reader = RecordReader(corpus, text_field, id_from, skip_bad, detected is not None)
    for fi, path in enumerate(paths):
        kind = detect_format(path)
        if kind == "jsonl":
            pre = prefetch.chunks(fi, path) if prefetch is not None else None
            arena_of = functools.partial(prefetch.text_arena, fi) if prefetch is not None else None
            read_jsonl(reader, path, fi, on_texts, on_block, pre, arena_of)
        else:
            before = len(corpus.texts)
            if kind == "csv":
                read_csv(reader, path, fi)
            elif kind == "txt":
                read_txt(reader, path, fi)
            else:
                read_arrow(reader, path, fi, kind)
            if on_texts is not None:
                on_texts(corpus.texts[before:])
    if detected is not None:
        corpus.ids, corpus.id_choice = settle_ids(corpus.ids, detected)
    return corpus


def record_fields(corpus: Corpus, names: Sequence[str]) -> list[dict[str, Any]]:
    """The values of ``names`` for every record of ``corpus`` (missing: absent key)."""
    if not names:
        return [{} for _ in range(len(corpus))]
    out: list[dict[str, Any]] = []
    if corpus.format == "jsonl":
        for raw in corpus.raw_lines:
            rec = json.loads(raw)
            out.append({k: rec[k] for k in names if k in rec and rec[k] is not None})
    elif corpus.format == "csv":
        for row in corpus.csv_rows:
            out.append({k: row[k] for k in names if row.get(k) not in (None, "")})
    elif corpus.format == "txt":
        out = [{} for _ in range(len(corpus))]
    else:
        cols: dict[int, dict[str, list[Any]]] = {}
        for ti, tb in enumerate(corpus.tables):
            cols[ti] = {k: tb.column(k).to_pylist() for k in names if k in tb.column_names}
        for ti, ri in corpus.row_index:
            out.append({k: v[ri] for k, v in cols[ti].items() if v[ri] is not None})
    return out


def input_bytes(inputs: Sequence[str]) -> int:
    """The inputs' sizes on disk, compressed ones counted four times (what they are
    assumed to expand to); folders count 0."""
    total = 0
    for p in inputs:
        size = os.path.getsize(p) if os.path.isfile(p) else 0
        total += size * (4 if p.lower().endswith((".gz", ".zst")) else 1)
    return total


SAMPLE_BLOCKS = 8
"""How many blocks :func:`text_sample` reads, spread over the inputs."""

SAMPLE_BLOCK_BYTES = 16 << 10
"""The size of one block :func:`text_sample` reads."""


def text_sample(
    inputs: Sequence[str],
    *,
    blocks: int = SAMPLE_BLOCKS,
    block_bytes: int = SAMPLE_BLOCK_BYTES,
) -> tuple[list[str], int]:
    """Documents from a few blocks spread over ``inputs``, and the input bytes they
    came from: what the memory plan measures shingles per input byte on.

    ``blocks`` blocks of ``block_bytes`` are read at evenly spaced positions of the
    inputs' planned bytes (:func:`input_bytes`); a compressed input gives its share
    from the start of its decompressed stream, and small inputs are read whole.  A
    block's complete lines are its documents (a block inside one long line is one
    document).  A JSONL line is the string values of its record joined by newlines
    — every string field counts as text, the text field not being known here — or
    the line itself where it is not a JSON object; CSV and ``.txt`` lines are text
    as they are.  Parquet, saved datasets, folders and inputs that cannot be read
    give nothing.  Bounded (at most ``blocks * block_bytes`` bytes read) and
    deterministic: the same files give the same sample.

    >>> import tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "a.jsonl")
    >>> with open(path, "w", encoding="utf-8") as f:
    ...     _ = f.write('{"id": 1, "text": "中文 text"}\\n{"text": "\\\\u4e2d"}\\n')
    >>> text_sample([path])
    (['中文 text', '中'], 52)
    """
    sizes = [input_bytes([p]) for p in inputs]
    total = sum(sizes)
    if total == 0 or blocks < 1:
        return [], 0
    # Block j is centred on byte (j + 1/2) * total / blocks of the inputs laid end to end.
    counts = [0] * len(inputs)
    bounds = [0]
    for size in sizes:
        bounds.append(bounds[-1] + size)
    for j in range(blocks):
        at = (2 * j + 1) * total // (2 * blocks)
        counts[next(i for i in range(len(inputs)) if bounds[i + 1] > at)] += 1
    docs: list[str] = []
    nbytes = 0
    for i, path in enumerate(inputs):
        if not counts[i]:
            continue
        try:
            kind = detect_format(path)
            if kind not in ("jsonl", "csv", "txt") or not os.path.isfile(path):
                continue
            got = _sample_blocks(path, counts[i], block_bytes)
        except (OSError, InputError):
            continue  # unreadable: the reader words the error when the run reads it
        for data, whole_start, whole_end in got:
            lines = data.split(b"\n")
            kept = lines[(0 if whole_start else 1) : (None if whole_end else -1)] or [data]
            for line in kept:
                if line.strip():
                    nbytes += len(line) + 1
                    docs.append(_sample_text(line, kind == "jsonl"))
    return docs, nbytes


def _sample_blocks(path: str, count: int, block_bytes: int) -> list[tuple[bytes, bool, bool]]:
    """``count`` blocks of ``path`` as (bytes, starts the file, ends the file)."""
    if strip_compression(path)[1] is not None:
        with open_binary(path) as fh, decompressing(path):
            data = fh.read(count * block_bytes)
            return [(data, True, len(data) < count * block_bytes)]
    size = os.path.getsize(path)
    if size <= count * block_bytes:
        with open(path, "rb") as fh:
            return [(fh.read(), True, True)]
    out = []
    with open(path, "rb") as fh:
        for j in range(count):
            centre = (2 * j + 1) * size // (2 * count)
            at = min(max(centre - block_bytes // 2, 0), size - block_bytes)
            fh.seek(at)
            out.append((fh.read(block_bytes), at == 0, at + block_bytes >= size))
    return out


def _sample_text(line: bytes, jsonl: bool) -> str:
    text = line.decode("utf-8", "replace")
    if jsonl:
        try:
            record = json.loads(text)
        except ValueError:
            return text
        if isinstance(record, dict):
            return "\n".join(_strings(record))
    return text


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def streamable(inputs: Sequence[str]) -> bool:
    return all(os.path.isfile(p) and detect_format(p) == "jsonl" for p in inputs)

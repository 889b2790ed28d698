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
(:func:`write_subset`).  This module reads a corpus (:func:`read_corpus`), plans
its memory, and re-exports the names that callers import from here.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

from neardup.core._errors import InputError
from neardup.core.config import Config, scratch_bytes
from neardup.io._ids import IdChoice, detect_id_field, settle_ids
from neardup.io.blocks import Prefetch as Prefetch
from neardup.io.columns import BadRecord, Corpus
from neardup.io.columns import RawLines as RawLines
from neardup.io.columns import TextColumn as TextColumn
from neardup.io.inputs import detect_format, resolve_inputs
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


def in_memory_plan(inputs: Sequence[str], config: Config) -> int:
    """Planned bytes of an in-memory run over ``inputs``, from their sizes on disk.

    Text is held about three times (as read, as kept for output, normalized);
    compressed inputs are assumed to expand four times.
    """
    total = input_bytes(inputs)
    per_text_byte = 3 + 8 / (6 if config.shingle.kind == "word" else 1)
    return scratch_bytes(total) + int(total * per_text_byte)


def streamable(inputs: Sequence[str]) -> bool:
    return all(os.path.isfile(p) and detect_format(p) == "jsonl" for p in inputs)

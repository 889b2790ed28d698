"""Writing a corpus's records back: the kept and duplicate subsets, in the input's
format (JSONL as the original line bytes, CSV, Parquet; ``.txt`` inputs as JSONL)."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.io._directio import SequentialWriter
from neardup.io.columns import Corpus, RawLines
from neardup.io.jsonl import fast_loads

__all__ = ["FieldAppender", "prepare_subset", "write_subset"]


def _packed(items: Sequence[bytes]) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """``items`` as one byte array and the offsets of each item in it."""
    offs = np.zeros(len(items) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, items), dtype=np.int64, count=len(items)), out=offs[1:])
    return np.frombuffer(b"".join(items), dtype=np.uint8), offs


class FieldAppender:
    """Adds fields to JSONL records, keeping every original field byte-identical.

    ``FieldAppender(names)(line, values)`` appends ``"name": value`` pairs to the
    record's own bytes (as ``json.dumps(..., ensure_ascii=False)`` spells them),
    so that duplicates.jsonl keeps the original fields as kept.jsonl does, and no
    record is re-encoded.  A record that already has one of the names gets it
    replaced instead: it is parsed (orjson, else ``json.loads``, which decides
    what the reader accepted) and written as ``json.dumps(rec, ensure_ascii=False)``.
    The in-memory and the out-of-core writers both use it, so their outputs are
    the same bytes.
    """

    def __init__(self, names: Sequence[str]) -> None:
        self._names = list(names)
        self._encode = json.JSONEncoder(ensure_ascii=False).encode
        self._keys = [self._encode(k).encode() + b": " for k in self._names]
        self._loads = fast_loads() or json.loads
        # A name without a character that JSON may escape other than as \uXXXX
        # can name a key of a line only if the line spells it as is, quoted, or
        # holds a \u escape: lines with neither need not be parsed to know that
        # they lack it (most lines, so most records are not parsed at all).
        plain = all(
            n.isprintable() and not any(c in n for c in '"\\/') for n in self._names
        )
        self._spelled = [self._encode(k).encode() for k in self._names] if plain else None

    def many(
        self,
        lines: RawLines,
        indices: Sequence[int] | npt.NDArray[np.int64],
        columns: Sequence[Sequence[Any]],
    ) -> bytes:
        """The lines at ``indices`` with ``columns[f][t]`` appended to line ``t``, each
        followed by a newline: ``b"".join(self(line, row) + b"\\n" ...)``, the common
        case (nothing to parse) done by one compiled pass instead of Python per line."""
        rows = list(zip(*columns, strict=True))
        if self._spelled is None or not rows:
            taken = lines.take(indices)
            return b"".join(self(x, row) + b"\n" for x, row in zip(taken, rows, strict=True))
        from neardup.kernels._writes import append_fields

        nf = len(self._names)
        vals, val_offs = _packed([self._value(v) for row in rows for v in row])
        keys, key_offs = _packed(self._keys)
        forbid, forbid_offs = _packed([b"\\u", *self._spelled])
        pieces: list[bytes] = []
        for src, starts, ends, lo, hi in lines.spans(indices):
            out, offs, fast = append_fields(
                src, starts, ends, keys, key_offs, vals, val_offs[lo * nf :], forbid, forbid_offs
            )
            if fast.all():
                pieces.append(out[: offs[-1]].tobytes())
                continue
            for t in range(hi - lo):
                if fast[t]:
                    pieces.append(out[offs[t] : offs[t + 1]].tobytes())
                else:
                    line = src[starts[t] : ends[t]].tobytes()
                    pieces.append(self(line, rows[lo + t]) + b"\n")
        return b"".join(pieces)

    def _value(self, v: Any) -> bytes:
        return str(v).encode() if type(v) is int else self._encode(v).encode()

    def __call__(self, line: bytes, values: Sequence[Any]) -> bytes:
        """``line`` is a record the reader accepted: a JSON object (with the text
        field, so not empty)."""
        body = line if line[-1:] == b"}" else line.rstrip()
        if (
            self._spelled is not None
            and body[-1:] == b"}"
            and b"\\u" not in line
            and not any([k in line for k in self._spelled])
        ):
            pairs = zip(self._keys, values, strict=True)
            return body[:-1] + b", " + b", ".join([k + self._value(v) for k, v in pairs]) + b"}"
        try:
            rec = self._loads(line)
        except ValueError:
            rec = json.loads(line)
        if isinstance(rec, dict) and rec and body.endswith(b"}") and not any(
            k in rec for k in self._names
        ):
            fields = b", ".join(k + self._value(v) for k, v in zip(self._keys, values, strict=True))
            return body[:-1] + b", " + fields + b"}"
        for k, v in zip(self._names, values, strict=True):
            rec[k] = v
        return self._encode(rec).encode()


def prepare_subset(
    corpus: Corpus, indices: Sequence[int] | npt.NDArray[np.int64], path_base: str
) -> Callable[[], str]:
    """:func:`write_subset` without extra columns, in two steps: what needs the
    records' positions is done here, and the function returned writes the file
    (and returns its path), with little Python left for a writer thread."""
    if corpus.format != "jsonl":
        return lambda: write_subset(corpus, indices, path_base)
    path = path_base + ".jsonl"
    emit = corpus.raw_lines.prepare_write(indices)

    def write() -> str:
        # The bulk of a run's output: written around the page cache, see _directio.
        with SequentialWriter(path) as writer:
            emit(writer.write)
        return path

    return write


def write_subset(
    corpus: Corpus,
    indices: Sequence[int] | npt.NDArray[np.int64],
    path_base: str,
    extra: dict[str, list[Any]] | None = None,
) -> str:
    """Write the records at ``indices`` (input order) to ``path_base`` + a suffix.

    ``extra`` adds columns (one value per index) — e.g. the cluster id of each
    duplicate.  Returns the path written.
    """
    extra = extra or {}
    if corpus.format == "jsonl" and not extra:
        return prepare_subset(corpus, indices, path_base)()
    if corpus.format == "jsonl":
        path = path_base + ".jsonl"
        # The extra fields are appended to each record's own bytes (FieldAppender),
        # so that every original field stays byte-identical as in kept.jsonl.
        add = FieldAppender(list(extra))
        columns = list(extra.values())
        with open(path, "wb") as fh:
            for lo in range(0, len(indices), 65536):
                hi = lo + 65536
                fh.write(add.many(corpus.raw_lines, indices[lo:hi], [c[lo:hi] for c in columns]))
        return path
    if corpus.format == "txt":
        path = path_base + ".jsonl"
        with open(path, "w", encoding="utf-8") as fh:
            for t, i in enumerate(indices):
                rec = {"id": corpus.ids[i], "text": corpus.texts[i]}
                rec.update({k: v[t] for k, v in extra.items()})
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
        return path
    if corpus.format == "csv":
        path = path_base + ".csv"
        with open(path, "w", encoding="utf-8", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=corpus.csv_fields + list(extra))
            w.writeheader()
            for t, i in enumerate(indices):
                row = dict(corpus.csv_rows[i])
                row.update({k: v[t] for k, v in extra.items()})
                w.writerow(row)
        return path
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = path_base + ".parquet"
    if not corpus.tables:
        pq.write_table(pa.table({"id": [], "text": []}), path)
        return path
    pieces = []
    by_table: dict[int, list[int]] = {}
    # ``indices`` are ascending and tables are in input order, so taking table by
    # table keeps the input order.
    for i in indices:
        ti, ri = corpus.row_index[i]
        by_table.setdefault(ti, []).append(ri)
    schema = corpus.tables[0].schema
    for ti, rows in by_table.items():
        pieces.append(corpus.tables[ti].take(pa.array(rows, type=pa.int64())).cast(schema))
    table = pa.concat_tables(pieces) if pieces else schema.empty_table()
    for k, vals in extra.items():
        table = table.append_column(k, pa.array(vals))
    pq.write_table(table, path)
    return path

"""Reading vectors for the batch job: ``.npy`` (2-D float arrays, never
unpickled), Parquet (a list/fixed-size-list column of numbers, or a map column of
feature → weight) and JSONL (a list of numbers, or an object of feature → weight).

Zero vectors (cosine: no angle), NaN/inf components, wrong dimensions and missing
fields are bad records: refused with the path and line, or counted and left out
with ``skip_bad``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.core._errors import InputError, InvalidConfig
from neardup.core.ids import json_id
from neardup.io.corpus import BadRecord, Corpus
from neardup.io.inputs import iter_lines, strip_compression
from neardup.io.jsonl import fast_loads

__all__ = ["VectorCorpus", "count_identical", "read_vectors"]


@dataclass(slots=True)
class VectorCorpus:
    """Vectors (or weighted bags) of the inputs, with what is needed to write them back."""

    format: str
    inputs: list[str]
    ids: list[Any]
    dense: npt.NDArray[Any] | None
    bags: list[dict[str, float]] | None
    records: Corpus
    bad: list[BadRecord] = field(default_factory=list)
    text_of: Callable[[int], str | None] = field(default=lambda i: None)

    def __len__(self) -> int:
        return len(self.ids)


def _vector_format(path: str) -> str:
    base, comp = strip_compression(os.path.basename(path))
    if base.endswith(".npy") and comp is None:
        return "npy"
    if base.endswith(".parquet") and comp is None:
        return "parquet"
    if base.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    raise InputError(
        path,
        None,
        "unknown vector input format",
        "use .npy (2-D float array), .parquet (a list column) or .jsonl (.gz/.zst)",
    )


class _Rows:
    """Collects rows of one kind (dense of one dimension, or bags) with bad-record policy."""

    def __init__(self, field_name: str, metric: str, skip_bad: bool) -> None:
        self.field = field_name
        self.metric = metric
        self.skip_bad = skip_bad
        self.kind: str | None = None
        self.dim: int | None = None
        self.dense: list[npt.NDArray[np.float64]] = []
        self.bags: list[dict[str, float]] = []
        self.bad: list[BadRecord] = []

    def reject(self, path: str, line: int | None, reason: str, fix: str) -> None:
        if not self.skip_bad:
            raise InputError(path, line, reason, fix)
        self.bad.append(BadRecord(path, line, reason))

    def take(self, path: str, line: int | None, value: Any) -> bool:
        if isinstance(value, dict):
            kind = "bags"
        elif isinstance(value, list | tuple | np.ndarray):
            kind = "dense"
        else:
            self.reject(
                path,
                line,
                f"field {self.field!r} is {type(value).__name__}, not a vector",
                "point --vectors at a list of numbers or an object of feature: weight",
            )
            return False
        if self.kind is None and kind == "bags":
            self.kind = kind
        elif self.kind is not None and kind != self.kind:
            self.reject(
                path, line, f"mixes {kind} with {self.kind} rows", "use one kind per run"
            )
            return False
        if kind == "bags":
            try:
                bag = {str(k): float(v) for k, v in value.items()}
            except (TypeError, ValueError):
                self.reject(path, line, "a feature weight is not a number", "use numbers")
                return False
            w = np.fromiter(bag.values(), dtype=np.float64, count=len(bag))
            if not np.isfinite(w).all() or not np.any(w != 0):
                self.reject(
                    path,
                    line,
                    "an empty, all-zero or non-finite bag (its cosine is undefined)",
                    "drop the record or give it a nonzero feature",
                )
                return False
            if self.metric == "weighted_jaccard" and float(w.min()) < 0:
                self.reject(
                    path, line, "has a negative weight (weighted Jaccard needs weights >= 0)",
                    "use --metric cosine for signed weights",
                )
                return False
            self.bags.append(bag)
            return True
        try:
            v = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            self.reject(path, line, "a component is not a number", "store numbers only")
            return False
        return self._dense_row(path, line, v)

    def _dense_row(self, path: str, line: int | None, v: npt.NDArray[np.float64]) -> bool:
        if v.ndim != 1 or v.size == 0:
            self.reject(path, line, f"vector has shape {v.shape}", "store one flat list per row")
            return False
        return bool(self.block(path, v[None, :], [line]).size)

    def block(
        self, path: str, M: npt.NDArray[Any], lines: Sequence[int | None]
    ) -> npt.NDArray[np.int64]:
        """Validate the rows of ``M`` at once; keep the good ones, return their indices.

        Only rejected rows are visited one by one (the common case is none)."""
        if self.kind == "bags":
            for ln in lines[:1]:
                self.reject(path, ln, "mixes dense with bags rows", "use one kind per run")
            return np.zeros(0, dtype=np.int64)
        self.kind = "dense"
        if self.dim is None:
            self.dim = int(M.shape[1])
        if M.shape[1] != self.dim:
            for ln in lines:
                self.reject(
                    path, ln, f"dimension {M.shape[1]}, expected {self.dim}", "use one dimension"
                )
            return np.zeros(0, dtype=np.int64)
        finite = np.isfinite(M).all(axis=1)
        nonzero = np.any(M != 0, axis=1) if self.metric == "cosine" else finite
        ok = finite & nonzero
        for i in np.flatnonzero(~ok).tolist():
            if not finite[i]:
                self.reject(path, lines[i], "has a NaN or infinite component", "drop or repair it")
            else:
                self.reject(
                    path,
                    lines[i],
                    "is a zero vector (its angle, hence its cosine, is undefined)",
                    "drop it, or use --metric l2",
                )
        good = np.flatnonzero(ok)
        self.dense.append(M if good.size == M.shape[0] else M[good])
        return good


@dataclass(slots=True)
class _Sink:
    """What the JSONL and Parquet readers fill: the rows (validated), the records
    to write back, and an id per kept row."""

    rows: _Rows
    records: Corpus
    id_field: str | None
    text_field: str | None
    ids: list[Any] = field(default_factory=list)

    def add_id(self, value: Any) -> int:
        """The next kept row's position, recording its id: ``value`` (the row's
        ``id_field``) or, without an id field, the position itself."""
        pos = len(self.ids)
        self.ids.append(pos if self.id_field is None else json_id(value))
        return pos


def read_vectors(
    paths: Sequence[str],
    *,
    field_name: str,
    metric: str = "cosine",
    id_field: str | None = None,
    text_field: str | None = "text",
    skip_bad: bool = False,
) -> VectorCorpus:
    """Read the vectors of ``paths`` (all of one format; see the module docs).

    ``.npy`` files are memory-mapped and never unpickled; ``field_name`` and
    ``id_field`` do not apply to them (ids are global row numbers).  ``text_field``
    (when present in the records) is only used to show texts in the report.
    """
    if not paths:
        raise InvalidConfig("inputs", paths, "no input files", "pass at least one file")
    formats = {_vector_format(p) for p in paths}
    if len(formats) > 1:
        raise InvalidConfig(
            "inputs", sorted(formats), "mixes formats", "convert the inputs to one format"
        )
    fmt = formats.pop()
    if fmt == "npy":
        return _read_npy(list(paths), metric, skip_bad)
    rows = _Rows(field_name, metric, skip_bad)
    sink = _Sink(rows, Corpus(format=fmt, inputs=list(paths)), id_field, text_field)
    if fmt == "jsonl":
        text_of: Callable[[int], str | None] = _read_jsonl(paths, sink).get
    else:
        text_of = _read_parquet(paths, sink)
    ids, records = sink.ids, sink.records
    dense = np.vstack(rows.dense) if rows.kind == "dense" and rows.dense else None
    bags = rows.bags if rows.kind == "bags" else None
    if not ids:
        raise InputError(paths[0], None, "no vectors to compare", "check --vectors and inputs")
    return VectorCorpus(fmt, list(paths), ids, dense, bags, records, rows.bad, text_of)


def _read_npy(paths: list[str], metric: str, skip_bad: bool) -> VectorCorpus:
    arrays: list[npt.NDArray[Any]] = []
    bad: list[BadRecord] = []
    keep_rows: list[npt.NDArray[np.int64]] = []
    offset = 0
    for p in paths:
        try:
            a = np.load(p, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise InputError(
                p, None, f"not a readable .npy array ({exc})", "save with numpy.save (no pickle)"
            ) from exc
        if a.ndim != 2 or a.dtype.kind not in "fiu":
            raise InputError(
                p, None, f"array of shape {a.shape} and dtype {a.dtype}", "save an (n, dim) floats"
            )
        if arrays and a.shape[1] != arrays[0].shape[1]:
            raise InputError(
                p, None, f"dimension {a.shape[1]} != {arrays[0].shape[1]}", "use one dimension"
            )
        arr = np.asarray(a if a.dtype.kind == "f" else a.astype(np.float64))
        ok = np.isfinite(arr).all(axis=1)
        if metric == "cosine":
            ok &= np.any(arr != 0, axis=1)
        for r in np.flatnonzero(~ok)[:1000].tolist():
            reason = "zero vector or non-finite component"
            if not skip_bad:
                raise InputError(p, r + 1, f"row {r} is a {reason}", "drop it, or use --skip-bad")
            bad.append(BadRecord(p, r + 1, f"row {r} is a {reason}"))
        keep_rows.append(np.flatnonzero(ok) + offset)
        arrays.append(arr)
        offset += arr.shape[0]
    full = arrays[0] if len(arrays) == 1 else np.concatenate(arrays)
    rows = np.concatenate(keep_rows)
    dense = full if rows.size == full.shape[0] else full[rows]
    if rows.size == 0:
        raise InputError(paths[0], None, "no vectors to compare", "check the arrays")
    ids = rows.tolist()
    records = Corpus(format="npy", inputs=paths)
    return VectorCorpus("npy", paths, ids, np.ascontiguousarray(dense), None, records, bad)


def _read_jsonl(paths: Sequence[str], sink: _Sink) -> dict[int, str]:
    rows, id_field, text_field = sink.rows, sink.id_field, sink.text_field
    loads = fast_loads() or json.loads
    texts: dict[int, str] = {}
    for p in paths:
        for line, raw in iter_lines(p):
            body = raw.rstrip(b"\r\n")
            if not body.strip():
                continue
            try:
                rec = loads(body)
            except ValueError:
                rows.reject(p, line, "not valid JSON", "write one JSON object per line")
                continue
            if not isinstance(rec, dict) or rows.field not in rec:
                rows.reject(
                    p,
                    line,
                    f"no field {rows.field!r}",
                    "pass --vectors naming the field that holds the vector",
                )
                continue
            if id_field is not None and id_field not in rec:
                rows.reject(p, line, f"no id field {id_field!r}", "pass --id-field or omit it")
                continue
            if not rows.take(p, line, rec[rows.field]):
                continue
            pos = sink.add_id(rec.get(id_field))
            sink.records.raw_lines.append(body)
            if text_field is not None and isinstance(rec.get(text_field), str):
                texts[pos] = rec[text_field]
    return texts


def _read_parquet(paths: Sequence[str], sink: _Sink) -> Callable[[int], str | None]:
    rows, records, id_field, text_field = sink.rows, sink.records, sink.id_field, sink.text_field
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise InputError(
            paths[0], None, "reading Parquet needs pyarrow", "pip install 'neardup[io]'"
        ) from exc
    for p in paths:
        try:
            table = pq.read_table(p)
        except (OSError, pa.ArrowInvalid) as exc:
            raise InputError(p, None, f"cannot read Parquet ({exc})", "check the file") from exc
        if rows.field not in table.column_names:
            raise InputError(
                p,
                None,
                f"no column {rows.field!r} (columns: {table.column_names})",
                "pass --vectors with one of the columns above",
            )
        if id_field is not None and id_field not in table.column_names:
            raise InputError(p, None, f"no id column {id_field!r}", "pass --id-field or omit it")
        col = table.column(rows.field).combine_chunks()
        ti = len(records.tables)
        records.tables.append(table)
        id_vals = table.column(id_field).to_pylist() if id_field is not None else None
        t = col.type
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            lengths = pc.fill_null(pc.list_value_length(col), 0).to_numpy()
            valid = col.is_valid().to_numpy(zero_copy_only=False)
            flat = pc.list_flatten(col).to_numpy(zero_copy_only=False)
            starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
            dim = rows.dim if rows.dim is not None else int(lengths[valid][0]) if valid.any() else 0
            shaped = valid & (lengths == dim) & (dim > 0)
            for ri in np.flatnonzero(~shaped).tolist():
                why = "the vector is null" if not valid[ri] else f"dimension {lengths[ri]} != {dim}"
                rows.reject(p, ri + 1, why, "fill, fix or drop the row")
            local = np.flatnonzero(shaped)
            if local.size == len(col):
                M = flat.reshape(-1, dim) if dim else flat.reshape(0, 1)
            else:
                M = flat[starts[local][:, None] + np.arange(dim)[None, :]]
            if M.dtype.kind != "f":
                M = M.astype(np.float64)
            good = rows.block(p, M, (local + 1).tolist()) if local.size else local
            for ri in local[good].tolist():
                sink.add_id(None if id_vals is None else id_vals[ri])
                records.row_index.append((ti, ri))
        elif pa.types.is_map(t) or pa.types.is_struct(t):
            for ri, value in enumerate(col.to_pylist()):
                bag = dict(value) if isinstance(value, list) else value
                if value is None or not rows.take(p, ri + 1, bag):
                    if value is None:
                        rows.reject(p, ri + 1, "the bag is null", "fill or drop the row")
                    continue
                sink.add_id(None if id_vals is None else id_vals[ri])
                records.row_index.append((ti, ri))
        else:
            raise InputError(
                p,
                None,
                f"column {rows.field!r} has type {t}",
                "store vectors as list<float> (or map<string, double> for feature bags)",
            )
    has_text = text_field is not None and all(
        text_field in tb.column_names for tb in records.tables
    )

    def text_of(pos: int) -> str | None:
        if not has_text or pos >= len(records.row_index):
            return None
        ti, ri = records.row_index[pos]
        v = records.tables[ti].column(text_field)[ri].as_py()
        return v if isinstance(v, str) else None

    return text_of


def count_identical(X: npt.NDArray[Any]) -> int:
    """Rows byte-identical to an earlier row (one projection groups, equality confirms)."""
    n = X.shape[0]
    if n < 2:
        return 0
    probe = np.random.default_rng(0x1DE).standard_normal(X.shape[1])
    key = np.asarray(X, dtype=np.float64) @ probe
    order = np.argsort(key, kind="stable")
    ks = key[order]
    same = np.flatnonzero(ks[1:] == ks[:-1])
    count = 0
    seen: set[int] = set()
    for i in same.tolist():
        a, b = int(order[i]), int(order[i + 1])
        if b not in seen and np.array_equal(X[a], X[b]):
            seen.add(b)
            count += 1
    return count

"""Readers of the formats other than JSONL: CSV, ``.txt`` files, and Arrow tables
(Parquet, Hugging Face datasets saved to disk)."""

from __future__ import annotations

import csv
import io
import os

from neardup.core._errors import InputError, NeardupIOError
from neardup.io.inputs import open_binary
from neardup.io.records import RecordReader

__all__ = ["raw_line_of", "read_arrow", "read_csv", "read_txt"]


def read_csv(r: RecordReader, path: str, fi: int) -> None:
    with open_binary(path) as raw:
        try:
            # utf-8-sig: a byte-order mark (spreadsheet exports) is not part of
            # the first column's name.
            data = raw.read().decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = raw_line_of(exc)
            r.bad(path, line, f"not UTF-8 (byte {exc.start})", "re-encode the file as UTF-8")
            return
    # strict: a quote left open is an error at the end of the file, not a last
    # field that swallowed every row after it.
    rows = csv.DictReader(io.StringIO(data, newline=""), strict=True)
    if rows.fieldnames is None:
        r.bad(path, 1, "empty CSV file (no header)", "write a header row naming the columns")
        return
    if not r.c.csv_fields:
        r.c.csv_fields = list(rows.fieldnames)
    elif list(rows.fieldnames) != r.c.csv_fields:
        raise InputError(
            path,
            1,
            "CSV columns differ from the first input's",
            f"use the same columns as the first file: {r.c.csv_fields}",
        )
    width = len(r.c.csv_fields)
    try:
        for row in rows:
            if None in row or any(v is None for v in row.values()):
                # DictReader keeps extra fields under None and fills missing ones
                # with None: either way the row does not match the header.
                extra = len(row.get(None) or ())
                got = width + extra if extra else sum(v is not None for v in row.values())
                r.bad(
                    path,
                    rows.line_num,
                    f"the row has {got} field{'' if got == 1 else 's'}, the header {width}",
                    "quote fields that contain the delimiter, or fix the row",
                )
                continue
            if r.record(path, rows.line_num, row, fi, rows.line_num):
                r.c.csv_rows.append(row)
    except csv.Error as exc:
        raise InputError(
            path,
            rows.line_num,
            f"malformed CSV ({exc})",
            "close every quoted field with a quote (a quote inside a field is written twice)",
        ) from exc


def raw_line_of(exc: UnicodeDecodeError) -> int:
    return int(exc.object[: exc.start].count(b"\n")) + 1


def read_txt(r: RecordReader, root: str, fi: int) -> None:
    if os.path.isfile(root):
        # One .txt file is one document, its id the file name.
        root, files = os.path.dirname(root) or ".", [os.path.basename(root)]
    else:
        files = sorted(
            os.path.relpath(os.path.join(d, f), root)
            for d, _dirs, fs in os.walk(root)
            for f in fs
            if f.endswith(".txt")
        )
    for ri, rel in enumerate(files):
        full = os.path.join(root, rel)
        try:
            with open(full, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            raise NeardupIOError(full, exc) from exc
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            r.bad(full, raw_line_of(exc), f"not UTF-8 (byte {exc.start})", "re-encode as UTF-8")
            continue
        r.c.ids.append(rel.replace(os.sep, "/"))
        r.c.texts.append(text)
        r.c.origins.append((fi, ri))


def read_arrow(r: RecordReader, path: str, fi: int, kind: str) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise InputError(
            path, None, f"reading {kind} needs pyarrow", "pip install 'neardup[io]'"
        ) from exc
    if kind == "parquet":
        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowInvalid) as exc:
            raise InputError(
                path, None, f"cannot read Parquet ({exc})", "check that the file is complete"
            ) from exc
    else:
        try:
            import datasets
        except ImportError as exc:
            raise InputError(
                path,
                None,
                "reading a saved dataset needs the datasets package",
                "pip install 'neardup[hf]'",
            ) from exc
        try:
            ds = datasets.load_from_disk(path)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputError(
                path,
                None,
                f"not a readable saved dataset ({type(exc).__name__}: {exc})",
                "save it again with Dataset.save_to_disk, or point at its data files",
            ) from exc
        if isinstance(ds, datasets.DatasetDict):
            raise InputError(
                path, None, f"a DatasetDict with splits {list(ds)}", "point at one split's folder"
            )
        table = ds.data.table if hasattr(ds.data, "table") else ds.data
        table = pa.table(table)
    if r.text_field not in table.column_names:
        raise InputError(
            path,
            None,
            f"no column {r.text_field!r} (columns: {table.column_names})",
            "pass --text-field with one of the columns above",
        )
    id_column = r.id_field is not None and r.id_field in table.column_names
    if r.id_field is not None and not id_column and not r.id_optional:
        raise InputError(
            path,
            None,
            f"no id column {r.id_field!r}",
            f"pass --id-field with one of {table.column_names}, or omit it",
        )
    texts = table.column(r.text_field).to_pylist()
    ids = table.column(r.id_field).to_pylist() if id_column else [None] * len(texts)
    ti = len(r.c.tables)
    r.c.tables.append(table)
    for ri, (ident, text) in enumerate(zip(ids, texts, strict=True)):
        if not isinstance(text, str):
            r.bad(path, ri + 1, f"row {ri} has a non-text {r.text_field!r}", "fill or drop it")
            continue
        # A detected id field (``id_optional``) never makes a record bad: ids are
        # settled to row numbers afterwards, as for JSONL and CSV.
        if ident is None and r.id_field is not None and not r.id_optional:
            r.bad(
                path,
                ri + 1,
                f"row {ri} has a null id {r.id_field!r}",
                "give every row an id, or omit --id-field to number the rows",
            )
            continue
        r.add(ident, text, (fi, ri))
        r.c.row_index.append((ti, ri))

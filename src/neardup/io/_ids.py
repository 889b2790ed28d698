"""Which field gives the record ids when the command line names none.

``neardup dedup`` without ``--id-field`` (and without ``--row-ids``) uses a field
named exactly ``id`` when the inputs have one, in two steps:

1. :func:`detect_id_field` looks, before reading, at the first input only: the
   first non-blank line of a JSONL file (an object whose ``id`` is a string or an
   integer, not a boolean), the header of a CSV file (a column ``id``), the
   schema of a Parquet file or saved dataset (a column ``id`` of string or
   integer type).  A folder of ``.txt`` files has its own ids (the file paths).
2. The reader then takes the ids from that field without treating a missing one
   as a bad record, and :func:`settle_ids` checks them all: if every record has a
   non-empty string or integer id and no two records share one, they are the ids;
   otherwise every record gets its row number, as without the field, and the
   reason is reported (``id_field_fallback`` in ``stats.json``).

Both steps depend only on the inputs, so the choice is deterministic, and a
detected field never stops a run: an explicit ``--id-field`` keeps its strict
rules (a record without the id is a bad record).
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["DETECTED_ID_FIELD", "IdChoice", "detect_id_field", "settle_ids"]

DETECTED_ID_FIELD = "id"


@dataclass(frozen=True, slots=True)
class IdChoice:
    """Where a run's ids came from, as ``stats.json`` reports it."""

    field: str | None
    detected: bool = False
    fallback: str | None = None

    def stats(self) -> dict[str, Any]:
        return {
            "id_field": self.field,
            "id_field_detected": self.detected,
            "id_field_fallback": self.fallback,
        }


def detect_id_field(paths: Sequence[str]) -> str | None:
    """``"id"`` when the first input offers a field ``id`` (see the module docs),
    else None.  Unreadable or malformed inputs give None: the reader words the
    error."""
    if not paths or "://" in paths[0]:
        return None
    from neardup.io.inputs import detect_format, open_binary

    path = paths[0]
    try:
        kind = detect_format(path)
        if kind == "jsonl":
            with open_binary(path) as fh:
                for line in fh:
                    if line.strip():
                        rec = json.loads(line)
                        ident = rec.get(DETECTED_ID_FIELD) if isinstance(rec, dict) else None
                        ok = isinstance(ident, str | int) and not isinstance(ident, bool)
                        return DETECTED_ID_FIELD if ok else None
            return None
        if kind == "csv":
            with open_binary(path) as fh:
                head = io.TextIOWrapper(fh, encoding="utf-8-sig", newline="").readline()
            header = next(csv.reader([head]), [])
            return DETECTED_ID_FIELD if DETECTED_ID_FIELD in header else None
        if kind in ("parquet", "hf"):
            return _arrow_id(path, kind)
    except Exception:  # any failure here means "not detected"
        return None
    return None


def _arrow_id(path: str, kind: str) -> str | None:
    import pyarrow as pa

    if kind == "parquet":
        import pyarrow.parquet as pq

        schema = pq.read_schema(path)
    else:
        if not os.path.isdir(path):
            return None
        import datasets

        ds = datasets.load_from_disk(path)
        if isinstance(ds, datasets.DatasetDict):
            return None
        schema = ds.data.schema
    if DETECTED_ID_FIELD not in schema.names:
        return None
    t = schema.field(DETECTED_ID_FIELD).type
    ok = pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
    return DETECTED_ID_FIELD if ok else None


def settle_ids(ids: list[Any], field: str) -> tuple[list[Any], IdChoice]:
    """The ids of a run whose ``field`` was detected: ``ids`` themselves when every
    one is a non-empty string or an integer and all differ, else row numbers."""
    reason = _unusable(ids, field)
    if reason is None:
        return ids, IdChoice(field, detected=True)
    return list(range(len(ids))), IdChoice(None, fallback=reason)


def _unusable(ids: Sequence[Any], field: str) -> str | None:
    if not set(map(type, ids)) <= {int, str} or "" in ids:
        for k, v in enumerate(ids):
            if type(v) not in (int, str) or v == "":
                what = "has none" if v is None or v == "" else f"is {json.dumps(v)}"
                return f"record {k + 1}'s {field!r} {what}"
    if len(set(ids)) != len(ids):
        seen: dict[Any, int] = {}
        for k, v in enumerate(ids):
            if v in seen:
                return f"records {seen[v] + 1} and {k + 1} share the {field!r} {json.dumps(v)}"
            seen[v] = k
    return None

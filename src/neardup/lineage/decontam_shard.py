"""One training input of ``neardup decontaminate``, checked batch by batch:
its clean records written in its format, its removed records with their
matches, and its counts in a :class:`Tally`.

:func:`check_input` is the unit of work of both engines: the local job calls it
for each input in turn, the Ray engine in one task per input.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any

import numpy as np

from neardup.core._errors import InputError
from neardup.core.ids import json_id
from neardup.io.inputs import detect_format, strip_compression
from neardup.io.jsonl import fast_loads, iter_jsonl
from neardup.lineage.decontam import EvalIndex, Match

__all__ = ["MAX_SOURCES", "InputCounts", "Tally", "check_input", "training_format"]

MAX_SOURCES = 100_000
_TOP = 20


@dataclass(slots=True)
class _Chunk:
    """A run of one input's records: texts, ids, and how to write them back."""

    input_no: int
    first_row: int
    texts: list[str]
    ids: list[Any]
    lines: list[bytes] | None = None
    batch: Any = None  # a pyarrow RecordBatch for Parquet inputs


def training_format(path: str) -> str:
    fmt = detect_format(path)
    if fmt not in ("jsonl", "parquet"):
        raise InputError(
            path,
            None,
            f"decontaminate streams JSONL and Parquet training inputs, not {fmt}",
            "convert the training input to JSONL or Parquet",
        )
    return fmt


def _jsonl_chunks(
    path: str,
    fi: int,
    text_field: str,
    id_field: str | None,
    skip_bad: bool,
    bad: list[Any],
    batch_bytes: int,
) -> Iterator[_Chunk]:
    lines: list[bytes] = []
    chunk = _Chunk(fi, 0, [], [], lines)
    size = 0
    for row, (ident, text, line) in enumerate(
        iter_jsonl(
            [path],
            text_field=text_field,
            id_field=id_field,
            skip_bad=skip_bad,
            bad=bad,
            id_optional=id_field is None,
        ),
        start=1,
    ):
        chunk.texts.append(text)
        chunk.ids.append(ident)
        lines.append(line)
        size += len(line)
        if size >= batch_bytes:
            yield chunk
            lines = []
            chunk, size = _Chunk(fi, row, [], [], lines), 0
    if chunk.texts:
        yield chunk


def _parquet_chunks(
    path: str, fi: int, text_field: str, id_field: str | None, batch_bytes: int
) -> Iterator[_Chunk]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except OSError as exc:
        raise InputError(path, None, f"cannot read Parquet ({exc})", "check the file") from exc
    names = pf.schema_arrow.names
    if text_field not in names:
        raise InputError(
            path, None, f"no column {text_field!r} (columns: {names})", "pass --text-field"
        )
    meta = pf.metadata
    per_row = max(1, meta.serialized_size // max(meta.num_rows, 1)) if meta.num_rows else 1
    rows = max(64, min(65536, batch_bytes // max(per_row, 256)))
    row = 0
    for batch in pf.iter_batches(batch_size=rows):
        texts = batch.column(text_field).to_pylist()
        if any(not isinstance(t, str) for t in texts):
            raise InputError(
                path, row + 1, f"a row has a non-text {text_field!r}", "fill or drop it"
            )
        ids = (
            batch.column(id_field).to_pylist()
            if id_field is not None and id_field in names
            else [None] * len(texts)
        )
        yield _Chunk(fi, row, texts, ids, None, batch)
        row += len(texts)


class _CleanWriter:
    """One training input's clean records, in its format and compression."""

    def __init__(self, path: str, fmt: str, schema: Any) -> None:
        self.path = path
        self._pq: Any = None
        self._fh: IO[bytes] | None = None
        if fmt == "parquet":
            import pyarrow.parquet as pq

            self._pq = pq.ParquetWriter(path, schema)
            return
        _, comp = strip_compression(path)
        if comp == ".gz":
            self._fh = gzip.open(path, "wb", compresslevel=6)  # type: ignore[assignment]  # noqa: SIM115
        elif comp == ".zst":
            import zstandard

            self._fh = zstandard.ZstdCompressor().stream_writer(open(path, "wb"))  # noqa: SIM115
        else:
            self._fh = open(path, "wb")  # noqa: SIM115 - closed by close()

    def write(self, chunk: _Chunk, keep: np.ndarray[Any, Any]) -> None:
        if self._pq is not None:
            import pyarrow as pa

            self._pq.write_batch(chunk.batch.filter(pa.array(keep)))
            return
        lines = chunk.lines or []
        if self._fh is not None:
            self._fh.write(b"".join(lines[i] + b"\n" for i in np.flatnonzero(keep).tolist()))

    def close(self) -> None:
        if self._pq is not None:
            self._pq.close()
        elif self._fh is not None:
            self._fh.close()


class Tally:
    """Per evaluation set: how many documents contain each item, and their sources.

    Tallies of different inputs add up (:meth:`state`, :meth:`merge`): the
    Ray engine counts each input in a task and merges in input order.
    """

    def __init__(self, index: EvalIndex, sets: dict[str, str], counts: dict[str, int]) -> None:
        self.index = index
        self.sets = sets
        self.counts = counts
        self.docs_per_item = np.zeros(len(index), dtype=np.int64)
        self.docs_per_set: Counter[str] = Counter()
        self.sources: dict[str, Counter[str]] = {s: Counter() for s in sets}
        self.samples: list[dict[str, Any]] = []

    def add(self, source: str, matches: Sequence[Match], where: dict[str, Any]) -> None:
        seen = set()
        for m in matches:
            self.docs_per_item[m.item.index] += 1
            seen.add(m.item.set_name)
        for s in seen:
            self.docs_per_set[s] += 1
            c = self.sources[s]
            c[source if source in c or len(c) < MAX_SOURCES else "(other)"] += 1
        if len(self.samples) < _TOP:
            self.samples.append({**where, "matches": [m.to_dict() for m in matches[:3]]})

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, path in self.sets.items():
            mine = [it for it in self.index.items if it.set_name == name]
            short = [it for it in self.index.too_short if it.set_name == name]
            counts = self.docs_per_item[[it.index for it in mine]] if mine else np.zeros(0)
            hit = np.flatnonzero(counts)
            top = sorted(hit.tolist(), key=lambda k: (-int(counts[k]), k))[:_TOP]
            checked = len(mine)
            out[name] = {
                "path": path,
                "items": self.counts[name],
                "checked_items": checked,
                "too_short_items": len(short),
                "too_short_ids": [json_id(it.item_id) for it in short[:_TOP]],
                "contaminated_items": int(hit.size),
                "contaminated_share": round(hit.size / checked, 6) if checked else 0.0,
                "training_documents": int(self.docs_per_set[name]),
                "pairs": int(counts.sum()),
                "top_items": [
                    {"id": json_id(mine[k].item_id), "documents": int(counts[k])} for k in top
                ],
                "top_sources": [
                    {"source": s, "documents": n}
                    for s, n in sorted(self.sources[name].items(), key=lambda kv: (-kv[1], kv[0]))[
                        :_TOP
                    ]
                ],
            }
        return out

    def state(self) -> dict[str, Any]:
        """The counters as plain values (what a worker sends back)."""
        return {
            "docs_per_item": self.docs_per_item,
            "docs_per_set": dict(self.docs_per_set),
            "sources": {s: dict(c) for s, c in self.sources.items()},
            "samples": self.samples,
        }

    def merge(self, state: dict[str, Any]) -> None:
        """Add another tally's :meth:`state` (the cap on distinct sources holds)."""
        self.docs_per_item += state["docs_per_item"]
        self.docs_per_set.update(state["docs_per_set"])
        for s, counts in state["sources"].items():
            c = self.sources[s]
            for source, n in counts.items():
                c[source if source in c or len(c) < MAX_SOURCES else "(other)"] += n
        self.samples.extend(state["samples"][: _TOP - len(self.samples)])


@dataclass(frozen=True, slots=True)
class InputCounts:
    """What :func:`check_input` saw in one input (or, added up, in several)."""

    documents: int = 0
    removed: int = 0
    bytes: int = 0
    bad: int = 0

    def __add__(self, other: InputCounts) -> InputCounts:
        return InputCounts(
            self.documents + other.documents,
            self.removed + other.removed,
            self.bytes + other.bytes,
            self.bad + other.bad,
        )


def check_input(
    path: str,
    input_no: int,
    index: EvalIndex,
    tally: Tally,
    *,
    clean_path: str | None,
    removed: IO[bytes],
    text_field: str,
    id_field: str | None,
    source_field: str | None,
    skip_bad: bool,
    batch_bytes: int,
    progress: Callable[[int, int], None] | None = None,
) -> InputCounts:
    """Check every record of training input ``path`` against ``index``: clean
    records go to ``clean_path`` (None: not written) in the input's format and
    compression, removed ones to ``removed`` as JSON lines, counts to ``tally``.
    ``progress(documents, bytes)`` is called per batch with this input's totals."""
    fmt = training_format(path)
    loads = fast_loads() or json.loads
    bad: list[Any] = []
    docs = removed_n = nbytes = 0
    chunks = (
        _jsonl_chunks(path, input_no, text_field, id_field, skip_bad, bad, batch_bytes)
        if fmt == "jsonl"
        else _parquet_chunks(path, input_no, text_field, id_field, batch_bytes)
    )
    writer: _CleanWriter | None = None
    for chunk in chunks:
        if writer is None and clean_path is not None:
            schema = chunk.batch.schema if chunk.batch is not None else None
            writer = _CleanWriter(clean_path, fmt, schema)
        found = index.matches(chunk.texts)
        keep = np.array([not m for m in found], dtype=np.bool_)
        for k in np.flatnonzero(~keep).tolist():
            rec = _record(chunk, k, loads)
            src = _source(rec, source_field, path)
            where = {"input": path, "row": chunk.first_row + k, "id": json_id(chunk.ids[k])}
            tally.add(src, found[k], where)
            removed.write(_removed_line(where, found[k], chunk, k))
        if writer is not None:
            writer.write(chunk, keep)
        docs += len(chunk.texts)
        removed_n += int((~keep).sum())
        nbytes += sum(map(len, chunk.lines)) if chunk.lines else chunk.batch.nbytes
        if progress is not None:
            progress(docs, nbytes)
    if writer is not None:
        writer.close()
    elif clean_path is not None and fmt == "jsonl":
        _CleanWriter(clean_path, fmt, None).close()
    return InputCounts(docs, removed_n, nbytes, len(bad))


def _record(chunk: _Chunk, k: int, loads: Callable[[Any], Any]) -> dict[str, Any]:
    if chunk.lines is not None:
        rec = loads(chunk.lines[k])
        return rec if isinstance(rec, dict) else {}
    rows: list[dict[str, Any]] = chunk.batch.slice(k, 1).to_pylist()
    return rows[0]


def _source(rec: dict[str, Any], source_field: str | None, path: str) -> str:
    if source_field is None:
        return path
    v = rec.get(source_field)
    return "(none)" if v is None else str(v)


def _removed_line(where: dict[str, Any], matches: Sequence[Match], chunk: _Chunk, k: int) -> bytes:
    head = json.dumps({**where, "matches": [m.to_dict() for m in matches]}, ensure_ascii=False)
    if chunk.lines is not None:
        # The record's own bytes, spliced in: every field stays byte-identical.
        body = chunk.lines[k]
    else:
        rows = chunk.batch.slice(k, 1).to_pylist()
        body = json.dumps(rows[0], ensure_ascii=False, default=str).encode()
    return head[:-1].encode() + b', "record": ' + body + b"}\n"

"""``neardup decontaminate``: stream a training corpus once against indexed
evaluation sets, and write the clean corpus, the removed records with their
matches, and a per-evaluation-set report.

Memory is the evaluation index plus one batch of training text
(``DecontamConfig.batch_bytes``), whatever the size of the corpus: records are
read, checked and written batch by batch.  The report keeps per evaluation item
counters and, per set, the sources of contaminated documents (at most
:data:`MAX_SOURCES` distinct ones; later ones are counted under ``"(other)"``).

Output folder (staged and committed whole, like every command's):

* ``clean/<input name>`` — each training input's records that contain no
  evaluation item, in the input's format and compression (JSONL lines byte for
  byte; Parquet with the input's schema);
* ``removed.jsonl`` — one line per removed record: ``input``, ``row``, ``id``,
  ``matches`` (:meth:`Match.to_dict`) and ``record`` (the original record);
* ``report.json`` and ``report.html`` — per evaluation set: items, items too short
  to check, contaminated items, training documents containing them, top items and
  top sources.

Example:
    >>> import tempfile, json, os
    >>> d = tempfile.mkdtemp()
    >>> q = "what is the capital city of france and why is it there"
    >>> with open(os.path.join(d, "eval.jsonl"), "w") as f:
    ...     _ = f.write(json.dumps({"text": q}) + "\\n")
    >>> with open(os.path.join(d, "train.jsonl"), "w") as f:
    ...     _ = f.write(json.dumps({"text": "blog. " + q + ". bye"}) + "\\n")
    >>> res = run_decontaminate([os.path.join(d, "train.jsonl")],
    ...     [("eval", os.path.join(d, "eval.jsonl"))], os.path.join(d, "out"),
    ...     config=DecontamConfig(ngram=5))
    >>> res.removed, res.report["sets"]["eval"]["contaminated_items"]
    (1, 1)
"""

from __future__ import annotations

import gzip
import io
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np

from neardup.batch.outputs import commit_output, staged_output, write_json, writing
from neardup.core._errors import InputError
from neardup.core._posix import peak_rss_bytes
from neardup.core.ids import json_id
from neardup.io.corpus import read_corpus
from neardup.io.inputs import detect_format, resolve_inputs, strip_compression
from neardup.io.jsonl import fast_loads, iter_jsonl
from neardup.lineage.decontam import DecontamConfig, EvalIndex, Match, run_key
from neardup.lineage.decontam_report import render_html

__all__ = ["MAX_SOURCES", "DecontamResult", "eval_set_name", "run_decontaminate"]

MAX_SOURCES = 100_000
_TOP = 20


def eval_set_name(spec: str) -> tuple[str, str]:
    """``NAME=PATH`` or ``PATH`` (named by its file name without extensions)."""
    name, sep, path = spec.partition("=")
    if sep and name and not os.path.exists(spec):
        return name, path
    base = strip_compression(os.path.basename(spec.rstrip(os.sep)))[0]
    return base.split(".")[0] or base, spec


@dataclass(slots=True)
class _Chunk:
    """A run of one input's records: texts, ids, and how to write them back."""

    input_no: int
    first_row: int
    texts: list[str]
    ids: list[Any]
    lines: list[bytes] | None = None
    batch: Any = None  # a pyarrow RecordBatch for Parquet inputs


@dataclass
class DecontamResult:
    """What a run found: documents read, removed and kept, and the report."""

    documents: int
    removed: int
    kept: int
    bad: int
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def contaminated_items(self) -> int:
        return sum(int(s["contaminated_items"]) for s in self.report["sets"].values())


def _training_format(path: str) -> str:
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


class _Tally:
    """Per evaluation set: how many documents contain each item, and their sources."""

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


def _load_eval(
    against: Sequence[tuple[str, str]], text_field: str, id_field: str | None, skip_bad: bool
) -> tuple[list[tuple[str, Any, str]], dict[str, int]]:
    items: list[tuple[str, Any, str]] = []
    counts: dict[str, int] = {}
    for name, path in against:
        if name in counts:
            raise InputError(
                path, None, f"two evaluation sets are named {name!r}", "name them NAME=PATH"
            )
        corpus = read_corpus(
            resolve_inputs([path]),
            text_field=text_field,
            id_field=id_field,
            skip_bad=skip_bad,
            detect_id=id_field is None,
        )
        texts = list(corpus.texts)
        counts[name] = len(texts)
        items.extend((name, json_id(i), t) for i, t in zip(corpus.ids, texts, strict=True))
    return items, counts


def _clean_names(inputs: Sequence[str]) -> list[str]:
    names = [os.path.basename(p.rstrip(os.sep)) for p in inputs]
    if len(set(names)) == len(names):
        return names
    return [f"{i:05d}-{n}" for i, n in enumerate(names)]


def run_decontaminate(
    inputs: Sequence[str],
    against: Sequence[tuple[str, str]],
    output: str | None,
    *,
    config: DecontamConfig | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    eval_text_field: str | None = None,
    eval_id_field: str | None = None,
    source_field: str | None = None,
    skip_bad: bool = False,
    overwrite: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> DecontamResult:
    """Check every training record of ``inputs`` against the evaluation sets
    ``against`` (``(name, path)`` pairs) and write the outputs into ``output``
    (None: report only).  ``progress(documents, bytes)`` is called per batch."""
    cfg = config or DecontamConfig()
    t0 = time.perf_counter()
    if not inputs:
        raise InputError("<none>", None, "no training input given", "name at least one input")
    if not against:
        raise InputError("<none>", None, "no evaluation set given", "pass --against EVAL")
    formats = [_training_format(p) for p in inputs]
    items, counts = _load_eval(against, eval_text_field or text_field, eval_id_field, skip_bad)
    index = EvalIndex.build(items, cfg, run_key(cfg))
    t_index = time.perf_counter() - t0
    tally = _Tally(index, dict(against), counts)
    protect = [*inputs, *(p for _, p in against)]
    loads = fast_loads() or json.loads
    docs = removed = nbytes = 0
    bad: list[Any] = []
    with staged_output(output, overwrite, protect) as tmp:
        rem_fh: IO[bytes] = (
            open(os.path.join(tmp, "removed.jsonl"), "wb") if tmp else io.BytesIO()  # noqa: SIM115
        )
        if tmp:
            os.mkdir(os.path.join(tmp, "clean"))
        names = _clean_names(inputs)
        with writing(tmp or "<memory>"), rem_fh:
            for fi, (path, fmt) in enumerate(zip(inputs, formats, strict=True)):
                chunks = (
                    _jsonl_chunks(path, fi, text_field, id_field, skip_bad, bad, cfg.batch_bytes)
                    if fmt == "jsonl"
                    else _parquet_chunks(path, fi, text_field, id_field, cfg.batch_bytes)
                )
                writer: _CleanWriter | None = None
                for chunk in chunks:
                    if writer is None and tmp:
                        schema = chunk.batch.schema if chunk.batch is not None else None
                        writer = _CleanWriter(os.path.join(tmp, "clean", names[fi]), fmt, schema)
                    found = index.matches(chunk.texts)
                    keep = np.array([not m for m in found], dtype=np.bool_)
                    for k in np.flatnonzero(~keep).tolist():
                        rec = _record(chunk, k, loads)
                        src = _source(rec, source_field, path)
                        where = {
                            "input": path,
                            "row": chunk.first_row + k,
                            "id": json_id(chunk.ids[k]),
                        }
                        tally.add(src, found[k], where)
                        rem_fh.write(_removed_line(where, found[k], chunk, k))
                    if writer is not None:
                        writer.write(chunk, keep)
                    docs += len(chunk.texts)
                    removed += int((~keep).sum())
                    nbytes += sum(map(len, chunk.lines)) if chunk.lines else chunk.batch.nbytes
                    if progress is not None:
                        progress(docs, nbytes)
                if writer is not None:
                    writer.close()
                elif tmp and fmt == "jsonl":
                    open(os.path.join(tmp, "clean", names[fi]), "wb").close()
        seconds = time.perf_counter() - t0
        report = {
            "parameters": {
                "ngram": cfg.ngram,
                "min_containment": cfg.min_containment,
                "normalizer": cfg.normalizer,
                "hash_algorithm": cfg.hash_algorithm,
                "config_fingerprint": cfg.fingerprint,
            },
            "training": {
                "inputs": list(inputs),
                "documents": docs,
                "removed": removed,
                "kept": docs - removed,
                "bad_records": len(bad),
                "bytes": nbytes,
            },
            "sets": tally.report(),
            "examples": tally.samples,
            "timings_s": {"index": round(t_index, 6), "total": round(seconds, 6)},
            "peak_memory_bytes": peak_rss_bytes(),
            "index_bytes": index.nbytes,
        }
        if tmp is not None and output is not None:
            with writing(tmp):
                write_json(os.path.join(tmp, "report.json"), report)
                with open(os.path.join(tmp, "report.html"), "w", encoding="utf-8") as fh:
                    fh.write(render_html(report))
            commit_output(tmp, output)
    return DecontamResult(docs, removed, docs - removed, len(bad), report)


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

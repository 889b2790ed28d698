"""Out-of-core batch dedup: when the in-memory plan exceeds the memory limit.

The run streams its JSONL inputs twice and keeps no text in memory:

1. **Index pass** — records are read in chunks of up to 64 MiB of text (a fortieth
   of the memory limit); each chunk
   is normalized, shingled, hashed and signed, and its shingle-hash sets and
   signatures are appended to files in a work folder.  Only 8-byte-per-document
   arrays (offsets, content hashes, lengths, counts) stay in memory.
2. **Join** — the files are memory-mapped and :func:`~neardup.batch.pipeline.dedup_sets`
   runs unchanged on them: the band join works a few bands at a time, and exact
   verification reads the two sets of each candidate pair from the mapped file
   (the operating system's page cache decides what stays resident).
3. **Write pass** — the inputs are streamed again and every record goes to
   ``kept.jsonl`` (its original line, byte for byte) or ``duplicates.jsonl``.

The result is identical to the in-memory run's, except that exact-content
duplicates are confirmed by equal content hashes *and* equal shingle-hash sets
rather than by comparing the texts.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from neardup.batch.languages import field_value, language_stats
from neardup.batch.pipeline import DedupResult, dedup_sets, normalize_and_hash
from neardup.batch.plan import in_memory_plan
from neardup.core._errors import MemoryLimitExceeded, NeardupIOError
from neardup.core.config import DEFAULT_MEMORY_LIMIT, Config, scratch_bytes
from neardup.io._ids import IdChoice, detect_id_field, settle_ids
from neardup.io.corpus import BadRecord, FieldAppender, iter_jsonl
from neardup.sketch.minhash import MinHasher, SignatureSet
from neardup.text.hashing import HashKey, SchemeDescriptor, ShingleSets

__all__ = ["in_memory_plan", "spilled_dedup", "write_streamed"]

_CHUNK_CHARS = 64 << 20
WORK_ELSEWHERE = "point --work-dir at a disk with room for the working files"
_PER_DOC_RAM = 96


def chunk_chars(memory_limit: int) -> int:
    """Characters per index-pass chunk: a fortieth of the memory limit, 256 KiB-64 MiB."""
    return max(256 << 10, min(_CHUNK_CHARS, memory_limit // 40))


class _Appender:
    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.files: dict[str, IO[bytes]] = {}
        self.rows: dict[str, int] = {}

    def add(self, name: str, arr: npt.NDArray[Any]) -> None:
        path = os.path.join(self.folder, name)
        try:
            fh = self.files.get(name)
            if fh is None:
                fh = self.files[name] = open(path, "wb")  # noqa: SIM115
                self.rows[name] = 0
            fh.write(np.ascontiguousarray(arr).tobytes())
        except OSError as exc:
            raise NeardupIOError(path, exc, WORK_ELSEWHERE) from exc
        self.rows[name] += int(arr.shape[0])

    def close(self) -> None:
        for name, fh in self.files.items():
            try:
                fh.close()
            except OSError as exc:
                path = os.path.join(self.folder, name)
                raise NeardupIOError(path, exc, WORK_ELSEWHERE) from exc

    def mapped(self, name: str, dtype: Any, cols: int | None = None) -> npt.NDArray[Any]:
        rows = self.rows.get(name, 0)
        shape = (rows,) if cols is None else (rows, cols)
        if rows == 0:
            return np.empty(shape, dtype=dtype)
        return np.memmap(os.path.join(self.folder, name), dtype=dtype, mode="r", shape=shape)


def spilled_dedup(
    inputs: Sequence[str],
    workdir: str,
    *,
    config: Config,
    key: HashKey | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    skip_bad: bool = False,
    keep: str = "first",
    method: str = "lsh",
    progress: Callable[[str, int, int], None] | None = None,
    detect_id: bool = False,
    check_ids: Callable[[list[Any]], None] | None = None,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    language_field: str | None = None,
) -> tuple[DedupResult, list[Any], list[BadRecord]]:
    """Index pass + join over JSONL ``inputs`` with working files in ``workdir``.

    The index pass hashes chunks of :func:`chunk_chars` ``(memory_limit)``
    characters; the join is refused (:class:`MemoryLimitExceeded`) when its plan
    exceeds ``memory_limit``.

    ``detect_id`` as for :func:`neardup.io.corpus.read_corpus`; the choice goes into
    the result's stats (``id_field``, ``id_field_detected``, ``id_field_fallback``).
    ``check_ids(ids)``, if given, sees (and may replace in place) the record ids
    once they are all read, before the join (not for detected ids: those fall back
    to row numbers when they are not unique).  The result's stats have the
    per-language counts (:func:`neardup.batch.languages.language_stats`, with the
    records' ``language_field`` where they have one), as an in-memory run's.
    """
    cfg = config
    scheme = SchemeDescriptor.from_config(cfg, key)
    hasher = MinHasher(cfg, key=key) if method == "lsh" else None
    out = _Appender(workdir)
    ids: list[Any] = []
    bad: list[BadRecord] = []
    chunk: list[str] = []
    scripts: list[npt.NDArray[np.uint8]] = []
    langs: list[Any] = []
    size = 0
    done = 0
    chunk_limit = chunk_chars(memory_limit)

    def flush() -> None:
        nonlocal chunk, size, done
        if not chunk:
            return
        hashed = normalize_and_hash(chunk, cfg, key, scheme, None)
        part, big = hashed.sets, hashed.too_large
        out.add("data.u64", part.data)
        out.add("sizes.i64", np.diff(part.indptr))
        out.add("raw_counts.i64", part.raw_counts)
        out.add("truncated.b1", part.truncated)
        out.add("content.u64", part.content_hash)
        out.add("lengths.i64", part.byte_lengths)
        out.add("too_large.b1", big)
        scripts.append(hashed.scripts)
        if hasher is not None:
            out.add("sigs.u32", hasher.from_sets(part).matrix)
        done += len(chunk)
        if progress is not None:
            progress("index_pass", done, done)
        chunk, size = [], 0

    detected = detect_id_field(inputs) if detect_id and id_field is None else None
    id_from = id_field if id_field is not None else detected
    for ident, text, line in iter_jsonl(
        inputs,
        text_field=text_field,
        id_field=id_from,
        skip_bad=skip_bad,
        bad=bad,
        id_optional=detected is not None,
    ):
        ids.append(len(ids) if id_from is None else ident)
        if language_field is not None:
            langs.append(field_value(line, language_field))
        chunk.append(text)
        size += len(text)
        if size >= chunk_limit:
            flush()
    flush()
    out.close()
    if check_ids is not None and detected is None:
        check_ids(ids)
    n = len(ids)
    planned = scratch_bytes(chunk_limit) + n * _PER_DOC_RAM
    if planned > memory_limit:
        raise MemoryLimitExceeded(
            planned, memory_limit, f"the out-of-core join of {n:,} documents"
        )
    sizes = out.mapped("sizes.i64", np.int64)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=indptr[1:])
    sets = ShingleSets(
        out.mapped("data.u64", np.uint64),
        indptr,
        np.array(out.mapped("raw_counts.i64", np.int64)),
        np.array(out.mapped("truncated.b1", np.bool_)),
        np.array(out.mapped("content.u64", np.uint64)),
        np.array(out.mapped("lengths.i64", np.int64)),
        scheme,
    )
    sigs = (
        SignatureSet(out.mapped("sigs.u32", np.uint32, cfg.num_perm), scheme)
        if hasher is not None
        else None
    )
    too_large = np.array(out.mapped("too_large.b1", np.bool_))
    script_ids = np.concatenate(scripts) if scripts else np.zeros(0, dtype=np.uint8)
    result = dedup_sets(
        sets,
        sigs,
        None,
        too_large,
        config=cfg,
        key=key,
        keep=keep,
        method=method,  # type: ignore[arg-type]
        progress=progress,
        scripts=script_ids,
    )
    result.stats.update(
        language_stats(
            script_ids,
            result.duplicate_of >= 0,
            langs if language_field is not None else None,
            language_field,
        )
    )
    choice = IdChoice(id_field)
    if detected is not None:
        ids, choice = settle_ids(ids, detected)
    result.stats.update(choice.stats())
    result.stats["out_of_core"] = True
    result.stats["work_bytes"] = sum(
        os.path.getsize(os.path.join(workdir, f)) for f in os.listdir(workdir)
    )
    return result, ids, bad


def write_streamed(
    tmp: str,
    inputs: Sequence[str],
    result: DedupResult,
    ids: Sequence[Any],
    cluster_of: npt.NDArray[np.int64],
    *,
    text_field: str,
    id_field: str | None,
    skip_bad: bool,
    want_texts: set[int],
) -> dict[int, str]:
    """Write pass: kept.jsonl and duplicates.jsonl; returns the texts asked for."""
    texts: dict[int, str] = {}
    dup_of = result.duplicate_of
    add = FieldAppender(["cluster", "representative"])
    with (
        open(os.path.join(tmp, "kept.jsonl"), "wb") as kept,
        open(os.path.join(tmp, "duplicates.jsonl"), "wb") as dups,
    ):
        for i, (_ident, text, line) in enumerate(
            iter_jsonl(inputs, text_field=text_field, id_field=id_field, skip_bad=skip_bad, bad=[])
        ):
            if i in want_texts:
                texts[i] = text
            rep = int(dup_of[i])
            if rep < 0:
                kept.write(line + b"\n")
                continue
            dups.write(add(line, [int(cluster_of[i]), ids[rep]]) + b"\n")
    return texts

"""Reading JSONL: a block of lines at a time into a corpus, or streamed record by record.

JSONL is read in 1 MiB blocks.  A compiled scanner (:mod:`neardup.kernels._jsonscan`)
reads the plain records — ASCII JSON objects whose text is a string and whose id
an integer or an unescaped string — without creating Python objects; every other
line is parsed with orjson, else ``json.loads``, which decide validity and word
the errors.  Both give the same records (property-tested against ``json.loads``).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.core._errors import InputError
from neardup.io.blocks import Block, Chunk, block_view, line_blocks
from neardup.io.columns import BadRecord, Corpus
from neardup.io.inputs import detect_format, iter_lines
from neardup.io.records import RecordReader

__all__ = [
    "ID_INT_KIND",
    "ID_STR_KIND",
    "OnBlock",
    "fast_loads",
    "iter_jsonl",
    "read_jsonl",
]


def _jsonl_records(r: RecordReader, path: str) -> Iterator[tuple[int, Any, str, bytes]]:
    """(line number, id, text, raw line) of each valid record; bad ones go to ``r``."""
    fast = fast_loads()
    for no, line in iter_lines(path):
        got = _parse_line(r, path, no, line, fast)
        if got is not None:
            yield no, got[0], got[1], line.removesuffix(b"\n")


def fast_loads() -> Callable[[bytes], Any] | None:
    try:
        import orjson
    except ImportError:
        return None
    return orjson.loads


def _bulk_records(
    lines: Sequence[bytes | memoryview],
    loads: Callable[[Any], Any],
    text_field: str,
    id_field: str | None,
) -> tuple[list[str], list[Any] | None] | None:
    """(texts, ids) of a block whose every line is a valid record, else None."""
    try:
        recs = list(map(loads, lines))
        texts = [rec[text_field] for rec in recs]
        ids = None if id_field is None else [rec.get(id_field) for rec in recs]
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    # C-level scans, not a Python generator per record; JSON values never
    # compare equal to None, so ``in`` finds exactly the nulls.
    if texts and set(map(type, texts)) != {str}:
        return None
    if ids is not None and None in ids:
        return None
    return texts, ids


ID_INT_KIND = 1
ID_STR_KIND = 2
"""The scanner's id kinds (:data:`neardup.kernels._jsonscan.ID_INT` / ``ID_STR``), here so
that this module does not import the compiled scanner until it reads JSONL."""


OnBlock = Callable[[npt.NDArray[np.uint8], npt.NDArray[np.int64], dict[int, str]], None]
"""``on_block(buf, offsets, others)``: documents read by the compiled scanner, as
:meth:`TextColumn.add_encoded` takes them."""


def _scan_keys(r: RecordReader) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]] | None:
    """The field names as the scanner compares them (raw key bytes), or None when
    a name would need escaping in JSON (then every line takes the Python path)."""
    names = [r.text_field] + ([r.id_field] if r.id_field is not None else [])
    for name in names:
        if (
            not name
            or not name.isascii()
            or any(c in name for c in '"\\')
            or not name.isprintable()
        ):
            return None
    text_key = np.frombuffer(r.text_field.encode("ascii"), dtype=np.uint8)
    id_key = np.frombuffer((r.id_field or "").encode("ascii"), dtype=np.uint8)
    return text_key, id_key


def read_jsonl(
    r: RecordReader,
    path: str,
    fi: int,
    on_texts: Callable[[list[str]], None] | None = None,
    on_block: OnBlock | None = None,
    prefetched: Iterator[Chunk] | None = None,
    arena_of: Callable[[], npt.NDArray[np.uint8] | None] | None = None,
) -> None:
    # Each block goes through the compiled scanner first (:mod:`neardup.kernels._jsonscan`):
    # the lines it reads need no Python object but their id.  The lines it leaves
    # (non-ASCII text, unusual records, bad lines) are parsed one by one with
    # orjson or the standard library, which decides and explains exactly as before.
    from neardup.kernels._jsonscan import ID_INT, scan_block

    fast = fast_loads()
    keys = _scan_keys(r)
    c = r.c
    no = 0
    arena: npt.NDArray[np.uint8] | None = None
    used = 0  # bytes of ``arena`` holding texts
    for buf, starts, ends in line_blocks(path, prefetched):
        before = len(c.texts)
        if keys is not None:
            arr = np.frombuffer(buf, dtype=np.uint8)
            if arena_of is not None:
                arena, arena_of = arena_of(), None  # set before the first chunk
            size = int((ends - starts).sum())
            in_arena = arena is not None and size <= len(arena) - used
            # Always an array: the native scanner is built for one (None would take
            # numba's JIT); decoded texts are never longer than their lines.
            out = arena[used:] if arena is not None and in_arena else np.empty(size, np.uint8)
            handled, text, offsets, id_kind, id_int, id_start, id_end = scan_block(
                arr, starts, ends, keys[0], keys[1], r.id_field is not None, out
            )
            if in_arena:
                used += len(text)
            if handled.all():
                valid = np.arange(len(starts))
                others: dict[int, str] = {}
                ids: list[Any] | range
                if r.id_field is None:
                    ids = range(len(c.ids), len(c.ids) + len(starts))
                elif (id_kind == ID_INT).all():
                    ids = id_int.tolist()
                else:
                    ids = _scanned_ids(buf, id_kind, id_int, id_start, id_end, valid)
                c.ids.extend(ids)
                c.origins.extend(zip(itertools.repeat(fi), range(no + 1, no + 1 + len(starts))))
                c.raw_lines.add_block(buf, starts, ends)
            else:
                # Only the lines the scanner left take Python: (id, text) of
                # those that are valid records, by line index in the block.
                parsed: dict[int, tuple[Any, str]] = {}
                for k in np.flatnonzero(~handled).tolist():
                    raw_line = bytes(buf[int(starts[k]) : int(ends[k])])
                    rec = _parse_line(r, path, no + 1 + k, raw_line, fast)
                    if rec is not None:
                        parsed[k] = rec
                keep_mask = handled.copy()
                at = np.fromiter(parsed, dtype=np.int64, count=len(parsed))
                keep_mask[at] = True
                valid = np.flatnonzero(keep_mask)
                # Positions of the parsed lines among the kept ones.
                pos = np.searchsorted(valid, at).tolist()
                others = {j: rec[1] for j, rec in zip(pos, parsed.values(), strict=True)}
                if r.id_field is None:
                    c.ids.extend(range(len(c.ids), len(c.ids) + len(valid)))
                else:
                    kept_ids = _scanned_ids(buf, id_kind, id_int, id_start, id_end, valid)
                    for j, rec in zip(pos, parsed.values(), strict=True):
                        kept_ids[j] = rec[0]
                    c.ids.extend(kept_ids)
                c.origins.extend(zip(itertools.repeat(fi), (valid + (no + 1)).tolist()))
                c.raw_lines.add_block(buf, starts[valid], ends[valid])
            doc_offsets = np.empty(len(valid) + 1, dtype=np.int64)
            doc_offsets[:-1] = offsets[valid]
            doc_offsets[-1] = offsets[-1]
            c.texts.add_encoded(text, doc_offsets, others)
            if on_block is not None:
                on_block(text, doc_offsets, others)
            elif on_texts is not None:
                on_texts(c.texts[before:])
            no += len(starts)
            continue
        view = block_view(buf)
        lines = list(map(view.__getitem__, map(slice, starts.tolist(), ends.tolist())))
        got = _bulk_records(lines, fast, r.text_field, r.id_field) if fast else None
        if got is None:
            block = c.raw_lines.add_block(buf, starts[:0], ends[:0])
            keep = []
            for k, line in enumerate(lines, start=no + 1):
                rec = _parse_line(r, path, k, bytes(line), fast)
                if rec is not None:
                    r.add(rec[0], rec[1], (fi, k))
                    keep.append(k - no - 1)
            c.raw_lines.add_spans(block, starts[keep], ends[keep])
        else:
            texts, bulk_ids = got
            base = len(c.ids)
            c.ids.extend(range(base, base + len(texts)) if bulk_ids is None else bulk_ids)
            c.texts.extend(texts)
            c.origins.extend(zip(itertools.repeat(fi), range(no + 1, no + 1 + len(lines))))
            c.raw_lines.add_block(buf, starts, ends)
        del lines, view
        no += len(starts)
        if on_texts is not None:
            on_texts(c.texts[before:])


def _scanned_ids(
    buf: Block,
    kind: npt.NDArray[np.int8],
    ints: npt.NDArray[np.int64],
    start: npt.NDArray[np.int64],
    end: npt.NDArray[np.int64],
    rows: npt.NDArray[np.int64],
) -> list[Any]:
    """The ids the scanner read for ``rows``: ints, or ASCII strings (their JSON
    spelling has no escape, so the bytes are the string); None where it read none."""
    k = kind[rows]
    out: list[Any] = ints[rows].tolist()
    # Integer ids (the common case) need no per-row Python.
    for j in np.flatnonzero(k != ID_INT_KIND).tolist():
        if k[j] == ID_STR_KIND:
            a, b = int(start[rows[j]]), int(end[rows[j]])
            out[j] = bytes(buf[a:b]).decode("ascii")
        else:
            out[j] = None
    return out


def _parse_line(
    r: RecordReader, path: str, no: int, line: bytes, fast: Callable[[bytes], Any] | None
) -> tuple[Any, str] | None:
    """(id, text) of one line's valid record; blank and bad lines give None."""
    if fast is not None:
        try:
            # orjson parses the UTF-8 bytes directly, without decoding them; on
            # any error the standard library below decides and explains.
            rec = fast(line)
        except ValueError:
            pass
        else:
            return r.check(path, no, rec)
    if not line.strip():
        return None
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        r.bad(path, no, f"not UTF-8 (byte {exc.start})", "re-encode the file as UTF-8")
        return None
    try:
        rec = json.loads(text)
    except ValueError as exc:
        r.bad(path, no, f"malformed JSON ({exc})", "fix the line, or pass --skip-bad")
        return None
    return r.check(path, no, rec)


def iter_jsonl(
    paths: Sequence[str],
    *,
    text_field: str = "text",
    id_field: str | None = None,
    skip_bad: bool = False,
    bad: list[BadRecord] | None = None,
    id_optional: bool = False,
) -> Iterator[tuple[Any, str, bytes]]:
    """Stream ``(id, text, raw line)`` of the valid records of JSONL inputs, in order.

    The raw line is the record's bytes as read, without the line's ``\\n``.

    Nothing is retained, so inputs of any size can be read twice (once to index,
    once to write outputs).  ``id`` is None unless ``id_field`` is given; bad
    records raise InputError, or with ``skip_bad`` are appended to ``bad``.  With
    ``id_optional`` a record without ``id_field`` is not bad (its id is None).
    """
    for p in paths:
        if detect_format(p) != "jsonl":
            raise InputError(
                p,
                None,
                "streaming reads JSONL only",
                "convert the input to JSONL, or raise --memory-limit",
            )
    scratch = Corpus(format="jsonl", inputs=list(paths))
    r = RecordReader(scratch, text_field, id_field, skip_bad, id_optional)
    for path in paths:
        for _no, ident, text, line in _jsonl_records(r, path):
            yield ident, text, line
        if bad is not None:
            bad.extend(scratch.bad)
        scratch.bad.clear()

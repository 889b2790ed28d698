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

JSONL is read in 1 MiB blocks.  A compiled scanner (:mod:`neardup.kernels._jsonscan`)
reads the plain records — ASCII JSON objects whose text is a string and whose id
an integer or an unescaped string — without creating Python objects; every other
line is parsed with orjson, else ``json.loads``, which decide validity and word
the errors.  Both give the same records (property-tested against ``json.loads``).

Record ids come from ``id_field`` when given, else they are row numbers counted
across all inputs in order.  Bad records raise :class:`~neardup.InputError` naming
the file and line, unless ``skip_bad`` is set, in which case they are counted and
listed in :attr:`Corpus.bad`.
"""

from __future__ import annotations

import bisect
import contextlib
import csv
import functools
import gzip
import io
import itertools
import json
import mmap
import os
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from neardup.core._errors import InputError, NeardupIOError
from neardup.core.config import Config, scratch_bytes
from neardup.io._directio import SequentialWriter
from neardup.io._ids import IdChoice, detect_id_field, settle_ids
from neardup.io.inputs import (
    detect_format,
    iter_lines,
    open_binary,
    resolve_inputs,
    strip_compression,
)

__all__ = [
    "BadRecord",
    "Corpus",
    "detect_format",
    "iter_jsonl",
    "read_corpus",
    "resolve_inputs",
    "write_subset",
]

@dataclass(frozen=True, slots=True)
class BadRecord:
    path: str
    line: int | None
    reason: str


Block = bytes | npt.NDArray[np.uint8]
"""A buffer of JSONL lines: a ``bytes`` object, or a slice of one file-sized array."""


def _view(block: Block) -> memoryview:
    return block.data if isinstance(block, np.ndarray) else memoryview(block)


_Spans = tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], npt.NDArray[np.int64], int, int]


class RawLines:
    """The raw bytes of a corpus's JSONL records (without their ``\\n``), by index.

    Lines are kept as spans of the blocks they were read in rather than as one
    ``bytes`` per line: reading copies nothing per line, and :meth:`write` sends
    runs of consecutive lines to the file as slices of those blocks.  On 313k
    records this saved splitting and later re-joining 180 MB in Python (about
    0.6 s and as much fresh memory).  Behaves as a sequence of ``bytes``.
    """

    __slots__ = ("_block_of", "_blocks", "_ends", "_flat", "_pending", "_starts")

    def __init__(self) -> None:
        self._blocks: list[Block] = []
        self._block_of: list[npt.NDArray[np.int64]] = []
        self._starts: list[npt.NDArray[np.int64]] = []
        self._ends: list[npt.NDArray[np.int64]] = []
        self._flat: tuple[npt.NDArray[np.int64], ...] | None = None
        self._pending: list[bytes] = []

    def add_block(
        self, block: Block, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]
    ) -> int:
        """Keep ``block`` and add its lines ``block[starts[i]:ends[i]]``; returns its
        block number (for :meth:`add_spans`)."""
        self._flush_pending()
        self._blocks.append(block)
        b = len(self._blocks) - 1
        self.add_spans(b, starts, ends)
        return b

    def add_spans(
        self, block: int, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]
    ) -> None:
        self._block_of.append(np.full(len(starts), block, dtype=np.int64))
        self._starts.append(np.asarray(starts, dtype=np.int64))
        self._ends.append(np.asarray(ends, dtype=np.int64))
        self._flat = None

    def append(self, line: bytes) -> None:
        # Lines added one by one are gathered into one block when next needed.
        self._pending.append(bytes(line))
        self._flat = None

    def _flush_pending(self) -> None:
        if not self._pending:
            return
        lines, self._pending = self._pending, []
        lengths = np.fromiter(map(len, lines), dtype=np.int64, count=len(lines))
        starts = np.zeros(len(lines), dtype=np.int64)
        np.cumsum(lengths[:-1] + 1, out=starts[1:])
        self.add_block(b"\n".join(lines) + b"\n", starts, starts + lengths)

    def extend(self, lines: Iterable[bytes]) -> None:
        for line in lines:
            self.append(line)

    def _arrays(self) -> tuple[npt.NDArray[np.int64], ...]:
        self._flush_pending()
        if self._flat is None:
            if self._starts:
                self._flat = (
                    np.concatenate(self._block_of),
                    np.concatenate(self._starts),
                    np.concatenate(self._ends),
                )
            else:
                empty = np.zeros(0, np.int64)
                self._flat = (empty, empty, empty)
            # One array each from now on: later reads index them directly.
            self._block_of, self._starts, self._ends = (
                [self._flat[0]],
                [self._flat[1]],
                [self._flat[2]],
            )
        return self._flat

    def __len__(self) -> int:
        return sum(len(a) for a in self._starts) + len(self._pending)

    def __getitem__(self, i: int) -> bytes:
        blk, st, en = self._arrays()
        if not -len(st) <= i < len(st):
            raise IndexError(i)
        return bytes(self._blocks[int(blk[i])][int(st[i]) : int(en[i])])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RawLines | list | tuple):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def spans(self, indices: Sequence[int] | npt.NDArray[np.int64]) -> list[_Spans]:
        """The lines at ``indices`` as spans of arrays: ``(array, starts, ends, lo,
        hi)`` for the consecutive positions ``lo:hi`` of ``indices`` whose lines
        lie in one array (one group for a prefetched file)."""
        idx = np.asarray(indices, dtype=np.int64)
        if idx.size == 0:
            return []
        blk_all, st_all, en_all = self._arrays()
        blk, st, en = blk_all[idx], st_all[idx], en_all[idx]
        first_of: dict[int, int] = {}
        same = np.array(
            [first_of.setdefault(id(b), i) for i, b in enumerate(self._blocks)], dtype=np.int64
        )
        owner = same[blk]
        cut = np.flatnonzero(owner[1:] != owner[:-1]) + 1
        bounds = [0, *cut.tolist(), idx.size]
        arrays = {o: np.frombuffer(self._blocks[o], dtype=np.uint8) for o in first_of.values()}
        return [
            (arrays[int(owner[lo])], st[lo:hi], en[lo:hi], lo, hi)
            for lo, hi in itertools.pairwise(bounds)
        ]

    def take(self, indices: Sequence[int] | npt.NDArray[np.int64]) -> list[bytes]:
        """The lines at ``indices``, as ``[self[i] for i in indices]``."""
        idx = np.asarray(indices, dtype=np.int64)
        blk, st, en = self._arrays()
        if idx.size and not (-len(st) <= int(idx.min()) and int(idx.max()) < len(st)):
            raise IndexError(int(idx.min()) if int(idx.min()) < -len(st) else int(idx.max()))
        views = [_view(b) for b in self._blocks]
        return [
            bytes(views[b][s:e])
            for b, s, e in zip(blk[idx].tolist(), st[idx].tolist(), en[idx].tolist(), strict=True)
        ]

    def __iter__(self) -> Iterator[bytes]:
        blk, st, en = self._arrays()
        blocks = self._blocks
        for b, s, e in zip(blk.tolist(), st.tolist(), en.tolist(), strict=True):
            yield bytes(blocks[b][s:e])

    def write(
        self,
        sink: Callable[[bytes | memoryview], object],
        indices: Sequence[int] | npt.NDArray[np.int64],
    ) -> None:
        """Write the lines at ``indices`` (ascending), each followed by ``\\n``.

        Consecutive lines that are adjacent in their block, newline included, go
        out as one slice of the block: one write per run instead of per line.
        """
        self.prepare_write(indices)(sink)

    def prepare_write(
        self, indices: Sequence[int] | npt.NDArray[np.int64]
    ) -> Callable[[Callable[[bytes | memoryview], object]], None]:
        """:meth:`write` in two steps: the runs are found here (NumPy, a few ms),
        and the function returned writes them to a sink.  A thread that only
        writes then never waits for the GIL between NumPy calls (that waiting
        cost a writer thread 0.1 s while the main thread ran Python); given a
        :class:`SequentialWriter`'s ``write``, it writes in one compiled call.
        """
        idx = np.asarray(indices, dtype=np.int64)
        if idx.size == 0:
            return lambda sink: None
        blk_all, st_all, en_all = self._arrays()
        blk, st, en = blk_all[idx], st_all[idx], en_all[idx]
        joins = (np.diff(idx) == 1) & (blk[1:] == blk[:-1]) & (st[1:] == en[:-1] + 1)
        first = np.flatnonzero(np.r_[True, ~joins])
        last = np.r_[first[1:] - 1, idx.size - 1]
        rb, rs, re_ = blk[first], st[first], en[last]
        # Blocks that are one object (a prefetched file's array) share positions.
        arrays = [np.frombuffer(b, dtype=np.uint8) for b in self._blocks]
        first_of: dict[int, int] = {}
        same = np.array(
            [first_of.setdefault(id(b), i) for i, b in enumerate(self._blocks)], dtype=np.int64
        )
        owner = same[rb]
        newline = np.zeros(len(rb), dtype=np.bool_)
        for o in first_of.values():
            sel = np.flatnonzero(owner == o)
            if sel.size:
                src = arrays[o]
                inside = re_[sel] < len(src)
                newline[sel[inside]] = src[re_[sel[inside]]] == 10
        # Groups of runs of one array that each end before a newline: one span
        # write each; a run without (a last line) goes alone.
        cut = np.flatnonzero((owner[1:] != owner[:-1]) | ~newline[1:] | ~newline[:-1]) + 1
        groups = list(zip(np.r_[0, cut].tolist(), np.r_[cut, len(rb)].tolist(), strict=True))
        views = [_view(b) for b in self._blocks]

        def emit(sink: Callable[[bytes | memoryview], object]) -> None:
            writer = getattr(sink, "__self__", None)
            spans = isinstance(writer, SequentialWriter) and sink == writer.write
            for lo, hi in groups:
                if not newline[lo]:
                    view = views[int(rb[lo])]
                    sink(view[int(rs[lo]) : int(re_[lo])])
                    sink(b"\n")
                elif spans:
                    writer.write_spans(arrays[int(owner[lo])], rs[lo:hi], re_[lo:hi] + 1)  # type: ignore[union-attr]
                else:
                    for b, s, e in zip(
                        rb[lo:hi].tolist(), rs[lo:hi].tolist(), re_[lo:hi].tolist(), strict=True
                    ):
                        sink(views[b][s : e + 1])

        return emit


_Encoded = tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], dict[int, str]]


class TextColumn(Sequence[str]):
    """The texts of a corpus, by index: a sequence of ``str``.

    Texts read by the compiled JSONL scanner stay as the UTF-8 (ASCII) bytes it
    decoded, one buffer per block, and become ``str`` only when indexed: a run
    needs the strings of a few hundred documents (exact-duplicate checks, the
    report), not of every one, and building them held the GIL for a second per
    million documents.  Other texts are kept as given.
    """

    __slots__ = ("_ends", "_parts")

    def __init__(self, texts: Iterable[str] = ()) -> None:
        self._parts: list[
            list[str] | tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], dict[int, str]]
        ] = []
        self._ends: list[int] = []  # documents before the end of each part
        self.extend(texts)

    def append(self, text: str) -> None:
        if self._parts and isinstance(self._parts[-1], list):
            self._parts[-1].append(text)
            self._ends[-1] += 1
        else:
            self._parts.append([text])
            self._ends.append(len(self) + 1)

    def extend(self, texts: Iterable[str]) -> None:
        for t in texts:
            self.append(t)

    def add_encoded(
        self, buf: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64], others: dict[int, str]
    ) -> None:
        """Add ``len(offsets) - 1`` documents: document ``j`` is ``others[j]`` if
        present, else the ASCII bytes ``buf[offsets[j]:offsets[j + 1]]``."""
        n = len(offsets) - 1
        if n:
            self._parts.append((buf, offsets, others))
            self._ends.append(len(self) + n)

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def _get(self, i: int) -> str:
        k = bisect.bisect_right(self._ends, i)
        part = self._parts[k]
        j = i - (self._ends[k - 1] if k else 0)
        if isinstance(part, list):
            return part[j]
        buf, offsets, others = part
        got = others.get(j)
        if got is not None:
            return got
        return buf[offsets[j] : offsets[j + 1]].tobytes().decode("ascii")

    def encoded(self, i: int) -> bytes:
        """Text ``i`` as UTF-8, without building the ``str`` for scanned texts
        (two texts are equal exactly when these bytes are)."""
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        k = bisect.bisect_right(self._ends, i)
        part = self._parts[k]
        j = i - (self._ends[k - 1] if k else 0)
        if isinstance(part, list):
            return part[j].encode()
        buf, offsets, others = part
        got = others.get(j)
        if got is not None:
            return got.encode()
        return buf[offsets[j] : offsets[j + 1]].tobytes()

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        n = len(self)
        if isinstance(i, slice):
            return [self._get(j) for j in range(*i.indices(n))]
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return self._get(i)

    def __iter__(self) -> Iterator[str]:
        for part in self._parts:
            if isinstance(part, list):
                yield from part
            else:
                buf, offsets, others = part
                for j in range(len(offsets) - 1):
                    got = others.get(j)
                    yield (
                        got
                        if got is not None
                        else buf[offsets[j] : offsets[j + 1]].tobytes().decode("ascii")
                    )

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TextColumn | list | tuple):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def char_count(self) -> int:
        """Total characters, without building the strings (ASCII: one per byte)."""
        total = 0
        for part in self._parts:
            if isinstance(part, list):
                total += sum(map(len, part))
            else:
                _, offsets, others = part
                total += int(offsets[-1] - offsets[0])
                total += sum(len(t) for t in others.values())
        return total


@dataclass(slots=True)
class Corpus:
    """Documents of one or more inputs, with what is needed to write them back."""

    format: str
    inputs: list[str]
    ids: list[Any] = field(default_factory=list)
    texts: TextColumn = field(default_factory=TextColumn)
    origins: list[tuple[int, int]] = field(default_factory=list)
    raw_lines: RawLines = field(default_factory=RawLines)
    csv_rows: list[dict[str, str]] = field(default_factory=list)
    csv_fields: list[str] = field(default_factory=list)
    tables: list[Any] = field(default_factory=list)
    row_index: list[tuple[int, int]] = field(default_factory=list)
    bad: list[BadRecord] = field(default_factory=list)
    id_choice: IdChoice = field(default_factory=lambda: IdChoice(None))

    def __len__(self) -> int:
        return len(self.texts)


class _Reader:
    def __init__(
        self,
        corpus: Corpus,
        text_field: str,
        id_field: str | None,
        skip_bad: bool,
        id_optional: bool = False,
    ):
        self.c = corpus
        self.text_field = text_field
        self.id_field = id_field
        self.skip_bad = skip_bad
        # A detected id field (:mod:`neardup.io._ids`): a record without it is not bad.
        self.id_optional = id_optional

    def bad(self, path: str, line: int | None, reason: str, fix: str) -> None:
        if not self.skip_bad:
            raise InputError(path, line, reason, fix)
        self.c.bad.append(BadRecord(path, line, reason))

    def add(self, ident: Any, text: str, origin: tuple[int, int]) -> None:
        self.c.ids.append(len(self.c.ids) if self.id_field is None else ident)
        self.c.texts.append(text)
        self.c.origins.append(origin)

    def check(self, path: str, line: int | None, rec: Any) -> tuple[Any, str] | None:
        """(id, text) of a valid record, else None after reporting it as bad."""
        if not isinstance(rec, dict):
            self.bad(
                path,
                line,
                f"expected a JSON object, got {type(rec).__name__}",
                "write one object per line",
            )
            return None
        text = rec.get(self.text_field)
        if text is None and self.text_field in rec:
            self.bad(
                path,
                line,
                f"field {self.text_field!r} is null",
                "give the record a text, or drop it (--skip-bad skips such records)",
            )
            return None
        if text is None:
            fields = ", ".join(sorted(map(str, rec))[:10])
            self.bad(
                path,
                line,
                f"no field {self.text_field!r} (fields: {fields})",
                "pass --text-field with one of the fields above",
            )
            return None
        if not isinstance(text, str):
            self.bad(
                path,
                line,
                f"field {self.text_field!r} is {type(text).__name__}, not text",
                "point --text-field at a string field",
            )
            return None
        ident = None
        if self.id_field is not None:
            ident = rec.get(self.id_field)
            if ident is None and self.id_field in rec and not self.id_optional:
                self.bad(
                    path,
                    line,
                    f"the id field {self.id_field!r} is null",
                    "give every record an id, or omit --id-field to number the records",
                )
                return None
            if ident is None and not self.id_optional:
                fields = ", ".join(sorted(map(str, rec))[:10])
                self.bad(
                    path,
                    line,
                    f"no id field {self.id_field!r} (fields: {fields})",
                    "pass --id-field naming a field every record has, or omit it",
                )
                return None
        return ident, text

    def record(self, path: str, line: int | None, rec: Any, fi: int, ri: int) -> bool:
        got = self.check(path, line, rec)
        if got is None:
            return False
        self.add(got[0], got[1], (fi, ri))
        return True


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
    reader = _Reader(corpus, text_field, id_from, skip_bad, detected is not None)
    for fi, path in enumerate(paths):
        kind = detect_format(path)
        if kind == "jsonl":
            pre = prefetch.chunks(fi, path) if prefetch is not None else None
            arena_of = functools.partial(prefetch.text_arena, fi) if prefetch is not None else None
            _read_jsonl(reader, path, fi, on_texts, on_block, pre, arena_of)
        else:
            before = len(corpus.texts)
            if kind == "csv":
                _read_csv(reader, path, fi)
            elif kind == "txt":
                _read_txt(reader, path, fi)
            else:
                _read_arrow(reader, path, fi, kind)
            if on_texts is not None:
                on_texts(corpus.texts[before:])
    if detected is not None:
        corpus.ids, corpus.id_choice = settle_ids(corpus.ids, detected)
    return corpus


def _jsonl_records(r: _Reader, path: str) -> Iterator[tuple[int, Any, str, bytes]]:
    """(line number, id, text, raw line) of each valid record; bad ones go to ``r``."""
    fast = _fast_loads()
    for no, line in iter_lines(path):
        if fast is not None:
            try:
                # orjson parses UTF-8 bytes directly, several times faster; on any
                # error the standard library below decides and explains.
                rec = fast(line)
            except ValueError:
                pass
            else:
                got = r.check(path, no, rec)
                if got is not None:
                    yield no, got[0], got[1], line.removesuffix(b"\n")
                continue
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            r.bad(path, no, f"not UTF-8 (byte {exc.start})", "re-encode the file as UTF-8")
            continue
        try:
            rec = json.loads(text)
        except ValueError as exc:
            r.bad(path, no, f"malformed JSON ({exc})", "fix the line, or pass --skip-bad")
            continue
        got = r.check(path, no, rec)
        if got is not None:
            yield no, got[0], got[1], line.removesuffix(b"\n")


def _fast_loads() -> Callable[[bytes], Any] | None:
    try:
        import orjson
    except ImportError:
        return None
    return orjson.loads


_BLOCK_BYTES = 1 << 20
"""Bytes of JSONL read and parsed per block in :func:`_read_jsonl`: small, because
parsing a block holds the GIL that the hashing thread needs between kernel calls."""


def _line_blocks(
    path: str, prefetched: Iterator[_Chunk] | None = None
) -> Iterator[tuple[Block, npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
    """The lines of ``path`` a block at a time: ``(buf, starts, ends)`` with line
    ``i`` being ``buf[starts[i]:ends[i]]`` (split on ``\\n``, without it).

    An uncompressed file is read into one array of its size (see
    :func:`_file_chunks`; ``prefetched`` gives those chunks when a :class:`Prefetch`
    read them), and every block is that same array: a line never straddles two
    buffers, and no per-block buffer is allocated and joined to the previous
    block's tail (fresh 1 MiB buffers cost a page fault per 4 KiB).  Compressed
    files stream through ``bytes`` blocks.
    """
    if strip_compression(path)[1] is None:
        yield from _file_blocks(path, prefetched)
        return
    with open_binary(path) as raw:
        tail = b""
        try:
            while block := raw.read(_BLOCK_BYTES):
                buf = tail + block if tail else block
                nl = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8) == 10)
                if nl.size == 0:
                    tail = buf
                    continue
                tail = buf[int(nl[-1]) + 1 :]
                starts = np.empty(nl.size, dtype=np.int64)
                starts[0] = 0
                starts[1:] = nl[:-1] + 1
                yield buf, starts, nl.astype(np.int64)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise InputError(
                path,
                None,
                f"cannot decompress ({exc})",
                "check that the file is complete and not corrupted",
            ) from exc
        if tail:
            yield tail, np.zeros(1, np.int64), np.array([len(tail)], np.int64)


_Chunk = tuple[npt.NDArray[np.uint8], int, npt.NDArray[np.int64]] | bytes
"""What :func:`_file_chunks` yields: ``(arr, end, newlines)`` — the file array,
the bytes read so far and the positions of the newlines read since the previous
chunk — then once the bytes past the size the file had when opened (``b""``
unless it grew while being read)."""


def _plain_pages(size: int, populate: bool = False) -> npt.NDArray[np.uint8]:
    """A zeroed array of ``size`` bytes in anonymous memory of normal pages;
    with ``populate``, its pages are mapped now, in one call (where the platform
    can), rather than by a fault at each first touch.

    numpy advises huge pages for large arrays, and with the usual ``defrag=madvise``
    setting their first touch compacts memory synchronously (see
    :func:`neardup.batch.job.batch_process_tuning`, which cannot cover a read that
    starts before the job).  Where anonymous mappings are missing (Windows), a
    plain zeroed numpy array."""
    if size == 0:
        return np.empty(0, dtype=np.uint8)
    if not hasattr(mmap, "MAP_ANONYMOUS"):
        return np.zeros(size, dtype=np.uint8)
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    if populate:
        flags |= getattr(mmap, "MAP_POPULATE", 0)
    return np.frombuffer(mmap.mmap(-1, size, flags=flags), dtype=np.uint8)


def _file_chunks(
    path: str, first: int, most: int, stop: threading.Event | None = None
) -> Iterator[_Chunk]:
    """Read the uncompressed file ``path`` into one array of its size, in reads of
    ``first`` bytes doubling up to ``most``, with the newlines of each read."""
    try:
        fh = open(path, "rb", buffering=0)  # noqa: SIM115 - closed below
    except OSError as exc:
        raise NeardupIOError(path, exc) from exc
    with fh:
        try:
            size = os.fstat(fh.fileno()).st_size
            arr = _plain_pages(size)
            is_nl = np.empty(min(size, most), dtype=np.bool_)
            view = arr.data
            pos = 0
            step = first
            while pos < size:
                if stop is not None and stop.is_set():
                    return
                got = fh.readinto(view[pos : min(size, pos + step)])
                if not got:
                    break  # the file shrank while being read: take what is there
                hit = np.equal(arr[pos : pos + got], 10, out=is_nl[:got])
                nl = np.flatnonzero(hit)
                nl += pos
                pos += got
                step = min(step * 2, most)
                yield arr, pos, nl
            yield fh.read()  # the file grew while being read
        except OSError as exc:
            raise NeardupIOError(path, exc) from exc


def _file_blocks(
    path: str, prefetched: Iterator[_Chunk] | None = None
) -> Iterator[tuple[Block, npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
    chunks = prefetched or _file_chunks(path, _BLOCK_BYTES, _BLOCK_BYTES)
    arr: npt.NDArray[np.uint8] = np.empty(0, dtype=np.uint8)
    pos = 0  # bytes read
    line_start = 0  # start of the first line not yet yielded
    rest = b""
    for chunk in chunks:
        if isinstance(chunk, bytes):
            rest = chunk
            break
        arr, pos, nl = chunk
        # Blocks of about _BLOCK_BYTES whatever the read size: the scanner holds
        # the GIL for one block.
        cut = 0
        while cut < nl.size:
            stop = int(np.searchsorted(nl, line_start + _BLOCK_BYTES, side="left")) + 1
            stop = max(cut + 1, min(stop, nl.size))
            ends = nl[cut:stop].astype(np.int64)
            starts = np.empty(ends.size, dtype=np.int64)
            starts[0] = line_start
            starts[1:] = ends[:-1] + 1
            line_start = int(ends[-1]) + 1
            cut = stop
            yield arr, starts, ends
    tail = arr[line_start:pos].tobytes() + rest
    if tail:
        # Lines after the last newline of the sized read (rare): as bytes blocks.
        nl = np.flatnonzero(np.frombuffer(tail, dtype=np.uint8) == 10)
        bounds = np.r_[0, nl + 1].astype(np.int64)
        if bounds[-1] < len(tail):
            bounds = np.r_[bounds, len(tail) + 1]
        yield tail, bounds[:-1], bounds[1:] - 1


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


class Prefetch:
    """Plain (uncompressed) JSONL inputs read into memory on a background thread.

    A program with start-up work left (importing and loading compiled kernels)
    starts this first, then passes it to :func:`read_corpus`, which takes the bytes
    and line ends from it instead of reading; the reads release the GIL, so they
    overlap that work.  Each file is read once, into one array of its size, in
    order; what :func:`read_corpus` gives is the same either way, errors included
    (they are raised where the reader would have raised them).  Only files that
    an in-memory run reads whole are worth prefetching.

    Always :meth:`close` it (it stops the thread; idempotent).

    Example::

        pf = Prefetch(["corpus.jsonl"])
        try:
            corpus = read_corpus(["corpus.jsonl"], prefetch=pf)
        finally:
            pf.close()
    """

    _FIRST = 4 << 20
    _MOST = 64 << 20
    """Reads start small (the consumer may be waiting) and grow: each read and
    newline search releases the GIL, but taking it back between them can wait a
    switch interval behind a thread that is importing modules."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = list(paths)
        self._stop = threading.Event()
        self._queues: dict[int, queue.SimpleQueue[_Chunk | BaseException | None]] = {
            i: queue.SimpleQueue()
            for i, p in enumerate(self.paths)
            if detect_format(p) == "jsonl"
            and strip_compression(p)[1] is None
            and os.path.isfile(p)
        }
        self._arenas: dict[int, npt.NDArray[np.uint8]] = {}
        self._thread: threading.Thread | None = threading.Thread(
            target=self._run, name="neardup-prefetch", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        for i, q in self._queues.items():
            try:
                # Memory for the decoded text (never larger than the file), its
                # pages faulted in here while the reader has other work: in the
                # reading thread they cost ~0.07 s per 180 MB.  A touch per page,
                # not MAP_POPULATE: that held the memory map's lock for the whole
                # call and stalled the main thread's own allocations.
                with contextlib.suppress(OSError, ValueError):
                    arena = _plain_pages(os.path.getsize(self.paths[i]))
                    arena[:: mmap.PAGESIZE] = 0
                    self._arenas[i] = arena
                for chunk in _file_chunks(self.paths[i], self._FIRST, self._MOST, self._stop):
                    q.put(chunk)
            except BaseException as exc:  # handed to the reader, which raises it
                q.put(exc)
            q.put(None)
            if self._stop.is_set():
                return

    def chunks(self, index: int, path: str) -> Iterator[_Chunk] | None:
        """The chunks of input ``index`` (which must be ``path``), or None when it
        is not prefetched."""
        q = self._queues.get(index)
        if q is None or self.paths[index] != path:
            return None
        return self._drain(q)

    def text_arena(self, index: int) -> npt.NDArray[np.uint8] | None:
        """Memory, as large as input ``index``, that its decoded texts may use
        (None if not prefetched).  Ready once :meth:`chunks` has given a chunk."""
        return self._arenas.get(index)

    @staticmethod
    def _drain(
        q: queue.SimpleQueue[_Chunk | BaseException | None],
    ) -> Iterator[_Chunk]:
        while (item := q.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._queues.clear()
        self._arenas.clear()


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
    # C-level scans (a generator per record cost ~0.07 s per 313k records each);
    # JSON values never compare equal to None, so ``in`` finds exactly the nulls.
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


def _scan_keys(r: _Reader) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]] | None:
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


def _read_jsonl(
    r: _Reader,
    path: str,
    fi: int,
    on_texts: Callable[[list[str]], None] | None = None,
    on_block: OnBlock | None = None,
    prefetched: Iterator[_Chunk] | None = None,
    arena_of: Callable[[], npt.NDArray[np.uint8] | None] | None = None,
) -> None:
    # Each block goes through the compiled scanner first (:mod:`neardup.kernels._jsonscan`):
    # the lines it reads need no Python object but their id.  The lines it leaves
    # (non-ASCII text, unusual records, bad lines) are parsed one by one with
    # orjson or the standard library, which decides and explains exactly as before.
    from neardup.kernels._jsonscan import ID_INT, scan_block

    fast = _fast_loads()
    keys = _scan_keys(r)
    c = r.c
    no = 0
    arena: npt.NDArray[np.uint8] | None = None
    used = 0  # bytes of ``arena`` holding texts
    for buf, starts, ends in _line_blocks(path, prefetched):
        before = len(c.texts)
        if keys is not None:
            arr = np.frombuffer(buf, dtype=np.uint8)
            if arena_of is not None:
                arena, arena_of = arena_of(), None  # set before the first chunk
            out = None
            if arena is not None and int((ends - starts).sum()) <= len(arena) - used:
                out = arena[used:]
            handled, text, offsets, id_kind, id_int, id_start, id_end = scan_block(
                arr, starts, ends, keys[0], keys[1], r.id_field is not None, out
            )
            if out is not None:
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
        view = _view(buf)
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
    r: _Reader, path: str, no: int, line: bytes, fast: Callable[[bytes], Any] | None
) -> tuple[Any, str] | None:
    """(id, text) of one line's valid record; blank and bad lines give None."""
    if fast is not None:
        try:
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
    r = _Reader(scratch, text_field, id_field, skip_bad, id_optional)
    for path in paths:
        for _no, ident, text, line in _jsonl_records(r, path):
            yield ident, text, line
        if bad is not None:
            bad.extend(scratch.bad)
        scratch.bad.clear()


def _read_csv(r: _Reader, path: str, fi: int) -> None:
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


def _read_txt(r: _Reader, root: str, fi: int) -> None:
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


def _read_arrow(r: _Reader, path: str, fi: int, kind: str) -> None:
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
        if ident is None and r.id_field is not None:
            r.bad(
                path,
                ri + 1,
                f"row {ri} has a null id {r.id_field!r}",
                "give every row an id, or omit --id-field to number the rows",
            )
            continue
        r.add(ident, text, (fi, ri))
        r.c.row_index.append((ti, ri))


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
    record is re-encoded (~10 us each).  A record that already has one of the
    names gets it replaced instead: it is parsed (orjson, else ``json.loads``,
    which decides what the reader accepted) and written as
    ``json.dumps(rec, ensure_ascii=False)``.  The in-memory and the out-of-core
    writers both use it, so their outputs are the same bytes.
    """

    def __init__(self, names: Sequence[str]) -> None:
        self._names = list(names)
        self._encode = json.JSONEncoder(ensure_ascii=False).encode
        self._keys = [self._encode(k).encode() + b": " for k in self._names]
        self._loads = _fast_loads() or json.loads
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
        case (nothing to parse) done by one compiled pass (~3 us a line in Python)."""
        rows = list(zip(*columns, strict=True))
        if self._spelled is None or not rows:
            taken = lines.take(indices)
            return b"".join(self(x, row) + b"\n" for x, row in zip(taken, rows, strict=True))
        from neardup.kernels._kernels import append_fields

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
        # The extra fields are appended to the record's own bytes, so that every
        # original field stays byte-identical as in kept.jsonl (and no record is
        # re-encoded: that was ~10 us per record).  A record that already has one
        # of those keys has it replaced instead: parsed (orjson, else json.loads,
        # which decides what the reader accepted) and written as
        # json.dumps(rec, ensure_ascii=False) would.
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

"""What a read corpus holds: its records' raw lines, its texts and the :class:`Corpus`.

The readers (:mod:`neardup.io.jsonl`, :mod:`neardup.io.readers`) fill a
:class:`Corpus`; the writers (:mod:`neardup.io.writers`) write its records back.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, overload

import numpy as np
import numpy.typing as npt

from neardup.core._errors import InvalidType, shown
from neardup.core.arrays import distinct
from neardup.io._directio import SequentialWriter
from neardup.io._ids import IdChoice
from neardup.io.blocks import Block, block_view

__all__ = ["BadRecord", "Corpus", "RawLines", "TextColumn"]


@dataclass(frozen=True, slots=True)
class BadRecord:
    path: str
    line: int | None
    reason: str


_Spans = tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], npt.NDArray[np.int64], int, int]


class RawLines:
    """The raw bytes of a corpus's JSONL records (without their ``\\n``), by index.

    Lines are kept as spans of the blocks they were read in rather than as one
    ``bytes`` per line: reading copies nothing per line, and :meth:`write` sends
    runs of consecutive lines to the file as slices of those blocks, so that the
    text is never split into lines and joined again in Python (time and as much
    fresh memory as the text).  Behaves as a sequence of ``bytes``.
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
        views = [block_view(b) for b in self._blocks]
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
        """:meth:`write` in two steps: the runs are found here (NumPy), and the
        function returned writes them to a sink.  A thread that only writes then
        never waits for the GIL between NumPy calls (the main thread runs Python
        meanwhile); given a :class:`SequentialWriter`'s ``write``, it writes in
        one compiled call.
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
        views = [block_view(b) for b in self._blocks]

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
    report), not of every one, and building them all would hold the GIL that
    other threads need.  Other texts are kept as given.
    """

    __slots__ = ("_ends", "_parts")

    holds_checked_str: ClassVar[bool] = True
    """Every text is a ``str``, checked when added, so that
    :func:`neardup.core.checks.check_texts` need not decode them all again."""

    def __init__(self, texts: Iterable[str] = ()) -> None:
        self._parts: list[
            list[str] | tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], dict[int, str]]
        ] = []
        self._ends: list[int] = []  # documents before the end of each part
        self.extend(texts)

    def append(self, text: str) -> None:
        if not isinstance(text, str):
            raise InvalidType(
                f"texts[{len(self)}]",
                shown(text),
                f"has type {type(text).__name__}, expected str",
                "pass the text field's value as a str",
            )
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

    def equal_encoded(
        self, a: Sequence[int] | npt.NDArray[np.int64], b: Sequence[int] | npt.NDArray[np.int64]
    ) -> npt.NDArray[np.bool_]:
        """Whether ``encoded(a[t]) == encoded(b[t])``, for every ``t`` (indices in
        range): the scanned texts' bytes are compared where they lie in their
        part's buffer (no text is decoded), the few texts held as ``str`` encoded.

        >>> col = TextColumn(["ab", "x", "ab"])
        >>> col.equal_encoded([0, 0], [2, 1]).tolist()
        [True, False]
        """
        ia, ib = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        if ia.shape != ib.shape or ia.ndim != 1:
            raise InvalidType(
                "a, b",
                f"shapes {ia.shape}, {ib.shape}",
                "are not two index lists of one length",
                "pass two equal-length lists of positions",
            )
        n = len(self)
        for side in (ia, ib):
            if side.size and (side.min() < 0 or side.max() >= n):
                raise IndexError(int(side[(side < 0) | (side >= n)][0]))
        out = np.zeros(ia.shape[0], dtype=np.bool_)
        if not ia.size:
            return out
        la, sa, pa = self._byte_spans(ia)
        lb, sb, pb = self._byte_spans(ib)
        scanned = (pa >= 0) & (pb >= 0)
        same = np.flatnonzero(scanned & (la == lb))
        if same.size:
            # Pair by pair on slices of the buffers: no index array as long as
            # all the bytes compared, which gathering them first would need.
            bufs = [None if isinstance(held, list) else held[0] for held in self._parts]
            out[same] = [
                bufs[p][s : s + k].tobytes() == bufs[q][r : r + k].tobytes()
                for p, s, q, r, k in zip(
                    pa[same].tolist(), sa[same].tolist(), pb[same].tolist(), sb[same].tolist(),
                    la[same].tolist(), strict=True,
                )
            ]
        for t in np.flatnonzero(~scanned).tolist():
            out[t] = self.encoded(int(ia[t])) == self.encoded(int(ib[t]))
        return out

    def _byte_spans(
        self, idx: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(length, start in its part's buffer, part) of each text; part -1 for a
        text held as ``str`` (length and start then 0)."""
        ends = np.asarray(self._ends, dtype=np.int64)
        part = np.searchsorted(ends, idx, side="right")
        local = idx - np.concatenate([np.zeros(1, np.int64), ends[:-1]])[part]
        length = np.zeros(idx.shape[0], dtype=np.int64)
        start = np.zeros(idx.shape[0], dtype=np.int64)
        for k in distinct(part).tolist():
            held = self._parts[k]
            rows = np.flatnonzero(part == k)
            if isinstance(held, list):
                part[rows] = -1
                continue
            _, offsets, others = held
            j = local[rows]
            start[rows] = offsets[j]
            length[rows] = offsets[j + 1] - offsets[j]
            if others:
                as_str = rows[np.array([x in others for x in j.tolist()], dtype=np.bool_)]
                part[as_str] = -1
                start[as_str] = length[as_str] = 0
        return length, start, part

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

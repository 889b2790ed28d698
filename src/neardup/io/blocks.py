"""JSONL files read a block of lines at a time, and read ahead on a thread.

An uncompressed file is read into one array of its size and its lines are handed
out as spans of that array (:func:`line_blocks`); compressed files stream through
``bytes`` blocks.  :class:`Prefetch` does the same reads on a background thread
while a program still has start-up work to do.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import queue
import threading
from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt

from neardup.core._errors import NeardupIOError
from neardup.io.inputs import decompressing, detect_format, open_binary, strip_compression

__all__ = ["Block", "Chunk", "Prefetch", "block_view", "line_blocks"]

Block = bytes | npt.NDArray[np.uint8]
"""A buffer of JSONL lines: a ``bytes`` object, or a slice of one file-sized array."""


def block_view(block: Block) -> memoryview:
    return block.data if isinstance(block, np.ndarray) else memoryview(block)


_BLOCK_BYTES = 1 << 20
"""Bytes of JSONL read and parsed per block by :func:`neardup.io.jsonl.read_jsonl`: small, because
parsing a block holds the GIL that the hashing thread needs between kernel calls."""


def _writable(data: bytes) -> npt.NDArray[np.uint8]:
    """``data`` copied into a writable array: the compiled kernels that read
    blocks (the scanner, the field appender) are built for writable buffers, which
    they only read; a read-only ``bytes`` block would take numba's JIT instead."""
    return np.frombuffer(bytearray(data), dtype=np.uint8)


def line_blocks(
    path: str, prefetched: Iterator[Chunk] | None = None
) -> Iterator[tuple[Block, npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
    """The lines of ``path`` a block at a time: ``(buf, starts, ends)`` with line
    ``i`` being ``buf[starts[i]:ends[i]]`` (split on ``\\n``, without it).

    An uncompressed file is read into one array of its size (see
    :func:`_file_chunks`; ``prefetched`` gives those chunks when a :class:`Prefetch`
    read them), and every block is that same array: a line never straddles two
    buffers, and no per-block buffer is allocated and joined to the previous
    block's tail (fresh 1 MiB buffers cost a page fault per 4 KiB).  Compressed
    files stream through blocks of their own.
    """
    if strip_compression(path)[1] is None:
        yield from _file_blocks(path, prefetched)
        return
    with open_binary(path) as raw:
        tail = b""
        with decompressing(path):
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
                yield _writable(buf), starts, nl.astype(np.int64)
        if tail:
            yield _writable(tail), np.zeros(1, np.int64), np.array([len(tail)], np.int64)


Chunk = tuple[npt.NDArray[np.uint8], int, npt.NDArray[np.int64]] | bytes
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
) -> Iterator[Chunk]:
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
    path: str, prefetched: Iterator[Chunk] | None = None
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
        yield _writable(tail), bounds[:-1], bounds[1:] - 1


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
        self._queues: dict[int, queue.SimpleQueue[Chunk | BaseException | None]] = {
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
                # pages faulted in here while the reader has other work, not in
                # the reading thread.  A touch per page, not MAP_POPULATE: that
                # held the memory map's lock for the whole call and stalled the
                # main thread's own allocations.
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

    def chunks(self, index: int, path: str) -> Iterator[Chunk] | None:
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
        q: queue.SimpleQueue[Chunk | BaseException | None],
    ) -> Iterator[Chunk]:
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

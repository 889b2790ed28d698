"""Normalizing and shingle-hashing texts: all at once (:func:`normalize_and_hash`),
or on worker threads while the caller reads more (:class:`HashFeeder`)."""

from __future__ import annotations

import contextlib
import functools
import math
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from neardup.core.config import HASH_CHUNK_BYTES, Config
from neardup.kernels.threads import get_threads, set_threads
from neardup.text.hashing import HashKey, HashSink, SchemeDescriptor, ShingleSets, hash_kernel
from neardup.text.normalize import EncodedTexts, get_normalizer, unicode_stage
from neardup.text.scripts import detect_scripts

__all__ = ["HashFeeder", "Hashed", "normalize_and_hash"]


@dataclass(frozen=True, slots=True)
class Hashed:
    """Shingle-hash sets of a batch of texts, which were too large, the seconds
    spent normalizing and hashing them, and each text's script id
    (:func:`neardup.text.scripts.detect_scripts` of its normalized text)."""

    sets: ShingleSets
    too_large: npt.NDArray[np.bool_]
    normalize_s: float
    hash_s: float
    scripts: npt.NDArray[np.uint8]


def normalize_and_hash(
    texts: Sequence[str],
    cfg: Config,
    key: HashKey | None,
    scheme: SchemeDescriptor,
    progress: Callable[[str, int, int], None] | None,
    chunk_bytes: int = HASH_CHUNK_BYTES,
) -> Hashed:
    """Normalize and hash ``texts`` in chunks of about ``chunk_bytes`` characters.

    Only the shingle-hash sets are kept: each chunk's normalized text is dropped as
    soon as it is hashed, so the buffers stay small and are reused by the allocator
    instead of being faulted in afresh (faster than large chunks, and no copy of
    the corpus is held).  Documents over ``max_document_bytes`` (normalized UTF-8)
    get an empty set and are flagged in ``too_large``.  Each document's script is
    detected on the same normalized text (a pass over bytes already in cache).
    """
    norm = get_normalizer(cfg.normalizer)
    n = len(texts)
    ends = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=n))
    parts: list[ShingleSets] = []
    big_parts: list[npt.NDArray[np.bool_]] = []
    script_parts: list[npt.NDArray[np.uint8]] = []
    norm_s = hash_s = 0.0
    scratch: list[npt.NDArray[np.uint64]] = []
    start = 0
    while start < n or not parts:
        base = int(ends[start - 1]) if start else 0
        stop = int(np.searchsorted(ends, base + chunk_bytes, side="left")) + 1
        stop = min(max(stop, start + 1), n)
        t0 = time.perf_counter()
        raw, lower = unicode_stage(texts[start:stop], norm)
        t1 = time.perf_counter()
        part, big = hash_kernel(
            raw, lower, norm.collapse_whitespace, cfg, key, scheme, scratch=scratch
        )
        script_parts.append(detect_scripts(raw))
        hash_s += time.perf_counter() - t1
        norm_s += t1 - t0
        parts.append(part)
        big_parts.append(big)
        del raw
        if progress is not None:
            progress("shingle_hash", stop, n)
        start = stop
        if n == 0:
            break
    sets = parts[0] if len(parts) == 1 else ShingleSets.concat_all(parts)
    return Hashed(sets, np.concatenate(big_parts), norm_s, hash_s, np.concatenate(script_parts))


class HashFeeder:
    """Hashes texts on worker threads while the caller reads more.

    :meth:`feed` takes texts in input order, in batches of any size, and returns at
    once unless the workers are several chunks behind; :meth:`finish` waits and
    returns what :func:`normalize_and_hash` returns for all the texts fed
    (documents are hashed independently, so where chunks begin, and which worker
    hashes a chunk, does not matter: parts are put back in input order).
    The hashing kernel releases the GIL, so a reader (Python) and the kernels run
    at the same time; :meth:`close` stops the workers after an error.
    """

    _QUEUE_CHUNKS = 64
    """Chunks waiting for the workers at most (bounds the memory held for them:
    256 MiB of text at 4 MiB chunks).  Generous on purpose: the compiled reader
    outpaces hashing, and once it is done hashing has every core; a short queue
    kept the reader waiting and the cores half used."""

    def __init__(
        self,
        cfg: Config,
        key: HashKey | None,
        scheme: SchemeDescriptor,
        chunk_bytes: int = HASH_CHUNK_BYTES,
        capacity: int = 0,
    ) -> None:
        """``capacity``, when positive, is the number of shingle hashes expected at
        most (e.g. the input's size in bytes): the chunks' hashes then go straight
        to their places in one array (:class:`~neardup.text.hashing.HashSink`) instead
        of being concatenated at the end.  Exceeding it only costs that copy."""
        self._cfg, self._key, self._scheme = cfg, key, scheme
        self._chunk_bytes = chunk_bytes
        self._sink: HashSink | None = None
        if capacity > 0:
            # No anonymous mmap (not POSIX) or no room for it: concatenate as before.
            with contextlib.suppress(OSError, ValueError, OverflowError, AttributeError):
                self._sink = HashSink(capacity)
        self._norm = get_normalizer(cfg.normalizer)
        self._queue: queue.Queue[tuple[int, EncodedTexts, npt.NDArray[np.bool_]] | None] = (
            queue.Queue(self._QUEUE_CHUNKS)
        )
        self._seq = 0
        self._done: dict[int, tuple[ShingleSets, npt.NDArray[np.bool_]]] = {}
        self._scripts: dict[int, npt.NDArray[np.uint8]] = {}
        self._errors: dict[int, BaseException] = {}
        self._pending: list[str] = []
        self._pending_chars = 0
        self._blocks: list[tuple[EncodedTexts, npt.NDArray[np.bool_]]] = []
        self._block_bytes = 0
        self._first = math.inf
        self._last = 0.0
        self.normalize_s = 0.0
        self.wait_s = 0.0
        # One single-threaded kernel per worker, as many workers as numba threads:
        # chunks are independent, so this keeps every core busy without a barrier
        # per chunk (a parallel kernel per chunk waited for its slowest thread,
        # and shared its cores with the reader).
        workers = max(1, get_threads())
        self._threads = [
            threading.Thread(target=self._run, name=f"neardup-hash-{i}", daemon=True)
            for i in range(workers)
        ]
        for t in self._threads:
            t.start()

    @property
    def hash_s(self) -> float:
        """Seconds from the first chunk's hashing to the last one's end."""
        return max(0.0, self._last - self._first) if self._first != math.inf else 0.0

    def _put(self, item: tuple[EncodedTexts, npt.NDArray[np.bool_]]) -> None:
        self._queue.put((self._seq, item[0], item[1]))
        self._seq += 1

    def feed(self, texts: Sequence[str]) -> None:
        if not texts:
            return
        ends = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))
        start = 0
        while start < len(texts):
            need = self._chunk_bytes - self._pending_chars
            base = int(ends[start - 1]) if start else 0
            stop = min(int(np.searchsorted(ends, base + need, side="left")) + 1, len(texts))
            self._pending.extend(texts[start:stop])
            self._pending_chars += int(ends[stop - 1]) - base
            if self._pending_chars >= self._chunk_bytes:
                self._flush()
            start = stop

    def feed_block(
        self,
        buf: npt.NDArray[np.uint8],
        offsets: npt.NDArray[np.int64],
        others: dict[int, str],
    ) -> None:
        """Take documents already decoded to ASCII by the JSONL scanner: document
        ``j`` is ``buf[offsets[j]:offsets[j + 1]]``, or the text ``others[j]``
        (those go through the Unicode stage).  Ordered with :meth:`feed`."""
        n = len(offsets) - 1
        if n == 0:
            return
        self._flush()
        t0 = time.perf_counter()
        lower = np.full(n, self._norm.ascii_lower, dtype=np.bool_)
        if others:
            idx = np.fromiter(others, dtype=np.int64, count=len(others))
            order = np.argsort(idx)
            idx = idx[order]
            texts = [others[int(j)] for j in idx]
            fb, fb_lower = unicode_stage(texts, self._norm)
            lengths = np.diff(offsets)
            lengths[idx] = fb.lengths
            new_off = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(lengths, out=new_off[1:])
            out = np.empty(int(new_off[n]), dtype=np.uint8)
            prev = 0
            for k, j in enumerate(idx.tolist()):
                # Scanned documents between the texts given as str keep their bytes.
                out[new_off[prev] : new_off[j]] = buf[offsets[prev] : offsets[j]]
                out[new_off[j] : new_off[j + 1]] = fb.buf[fb.offsets[k] : fb.offsets[k + 1]]
                prev = j + 1
            out[new_off[prev] :] = buf[offsets[prev] : offsets[n]]
            lower[idx] = fb_lower
            raw = EncodedTexts(out, new_off)
        else:
            raw = EncodedTexts(buf[int(offsets[0]) : int(offsets[n])], offsets - offsets[0])
        self.normalize_s += time.perf_counter() - t0
        self._blocks.append((raw, lower))
        self._block_bytes += raw.nbytes
        if self._block_bytes >= self._chunk_bytes:
            self._flush_blocks()

    def _flush_blocks(self) -> None:
        if not self._blocks:
            return
        blocks, self._blocks, self._block_bytes = self._blocks, [], 0
        if len(blocks) == 1:
            self._put(blocks[0])
            return
        bufs = [b[0].buf for b in blocks]
        sizes = np.array([len(x) for x in bufs], dtype=np.int64)
        bases = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        offsets = np.concatenate(
            [b[0].offsets[:-1] + base for b, base in zip(blocks, bases, strict=True)]
            + [np.array([int(sizes.sum())], dtype=np.int64)]
        )
        raw = EncodedTexts(np.concatenate(bufs), offsets)
        self._put((raw, np.concatenate([b[1] for b in blocks])))

    def _flush(self) -> None:
        self._flush_blocks()
        if not self._pending:
            return
        # The Unicode part of normalization is Python code: it runs here, in the
        # reading thread, so that the worker never waits for the GIL and its kernel
        # threads stay busy while the next block is parsed.
        t0 = time.perf_counter()
        raw, lower = unicode_stage(self._pending, self._norm)
        self.normalize_s += time.perf_counter() - t0
        self._put((raw, lower))
        self._pending = []
        self._pending_chars = 0

    def _run(self) -> None:
        set_threads(1)  # per calling thread
        scratch: list[npt.NDArray[np.uint64]] = []
        sink = self._sink
        while (item := self._queue.get()) is not None:
            seq, raw, lower = item
            try:
                if self._errors:
                    continue  # drain, so that feed() never blocks on a dead worker
                t0 = time.perf_counter()
                self._first = min(self._first, t0)
                self._done[seq] = hash_kernel(
                    raw,
                    lower,
                    self._norm.collapse_whitespace,
                    self._cfg,
                    self._key,
                    self._scheme,
                    scratch=scratch,
                    place=None if sink is None else functools.partial(sink.place, seq),
                )
                self._scripts[seq] = detect_scripts(raw)
                self._last = max(self._last, time.perf_counter())
            except BaseException as exc:  # re-raised in the caller by finish()
                self._errors[seq] = exc
            finally:
                # The other worker may be waiting for this chunk's place in the sink.
                if sink is not None:
                    sink.release(seq)

    def _stop(self) -> None:
        if self._threads:
            for _ in self._threads:
                self._queue.put(None)
            for t in self._threads:
                t.join()
            self._threads = []

    def finish(self) -> Hashed:
        t0 = time.perf_counter()
        self._flush()
        self._stop()
        self.wait_s = time.perf_counter() - t0
        if self._errors:
            raise self._errors[min(self._errors)]
        if not self._done:
            return normalize_and_hash([], self._cfg, self._key, self._scheme, None)
        parts = [self._done[i][0] for i in range(self._seq)]
        big = np.concatenate([self._done[i][1] for i in range(self._seq)])
        scripts = np.concatenate([self._scripts[i] for i in range(self._seq)])
        placed = None if self._sink is None else self._sink.data(parts)
        sets = parts[0] if len(parts) == 1 else ShingleSets.concat_all(parts, placed)
        return Hashed(sets, big, self.normalize_s, self.hash_s, scripts)

    def close(self) -> None:
        """Stop the worker (idempotent; after :meth:`finish` it does nothing)."""
        self._pending = []
        self._stop()

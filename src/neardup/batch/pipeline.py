"""The whole pipeline as library calls: batch (:func:`find_duplicates`) and online
(:class:`Deduplicator`).

Batch order of work: normalize → exact-content duplicates (hash, then byte
comparison) → shingle hashing → signatures of one representative per exact group
→ LSH bands → exact verification of every candidate → connected components →
representatives.

Guarantees:

* **Precision**: an edge is reported only after its exact Jaccard was computed and
  found >= threshold (or, with ``Config(verify="estimate")``, labelled
  ``method="estimate"``).  Exact-content duplicates are confirmed byte for byte.
* **Recall**: a pair with J >= threshold is found when it collides in some band —
  probability ``candidate_probability(J, b, r)``, reported as
  ``stats["predicted_recall_at_threshold"]`` — unless a bucket cap cut it, which is
  counted in ``stats["candidate_overflow"]``.  ``method="exact"`` uses the
  AllPairs join instead of LSH and has recall 1.
* **Determinism**: the same texts, config and key give the same result, including
  edge order, in every process.

Example:
    >>> from neardup import Config, ShingleSpec, find_duplicates
    >>> docs = ["red fox runs very fast", "red fox runs very fast today",
    ...         "database backup completed nightly"]
    >>> r = find_duplicates(docs, config=Config(threshold=0.75, shingle=ShingleSpec(k=2)))
    >>> [(c.representative, c.members) for c in r.clusters]
    [(0, (0, 1))]
    >>> r.clusters[0].edges[0].jaccard
    0.8
"""

from __future__ import annotations

import contextlib
import functools
import math
import queue
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar, cast

import numpy as np
import numpy.typing as npt
from numba import get_num_threads, set_num_threads

from neardup.core._errors import DocumentTooLarge, EmptyDocument, InvalidConfig, MemoryLimitExceeded
from neardup.core.config import HASH_CHUNK_BYTES, Config, scratch_bytes
from neardup.graph.cluster import KEEP_RULES, Cluster, Edge, build_clusters
from neardup.kernels import _kernels as K
from neardup.kernels import _unionfind as UF
from neardup.sketch.lsh import LSHIndex, candidate_probability
from neardup.sketch.minhash import MinHasher, Signature, SignatureSet
from neardup.sketch.screen import BloomFilter
from neardup.text.hashing import (
    HashKey,
    HashSink,
    SchemeDescriptor,
    ShingleSets,
    hash_encoded,
    hash_kernel,
)
from neardup.text.normalize import EncodedTexts, encode_text, get_normalizer, unicode_stage
from neardup.verify.oracle import allpairs_join

_BAND_ROUND_BYTES = 256 << 20
"""Budget of one band round's keys (8 bytes per document and band)."""

__all__ = [
    "DedupIndex",
    "DedupResult",
    "Deduplicator",
    "Match",
    "dedup_sets",
    "find_duplicates",
]


@dataclass(frozen=True, eq=False, slots=True)
class DedupResult:
    """What :func:`find_duplicates` found.

    Positions count the documents of a ``prior`` index first (``n_prior`` of them),
    then the new texts.  ``duplicate_of[i]`` is the representative of document i's
    cluster, or -1 when i is kept (unique or a representative).  ``kept`` lists kept
    positions ascending; ``empty``, ``too_large`` and ``truncated`` list the
    documents that were not (or not fully) compared; ``stats`` has counts,
    parameters and timings.
    """

    clusters: list[Cluster]
    duplicate_of: npt.NDArray[np.int64]
    empty: npt.NDArray[np.int64]
    too_large: npt.NDArray[np.int64]
    truncated: npt.NDArray[np.int64]
    stats: dict[str, Any]
    scheme: SchemeDescriptor
    config_fingerprint: str
    sets: ShingleSets | None = field(default=None, repr=False)
    signatures: SignatureSet | None = field(default=None, repr=False)
    n_prior: int = 0
    config: dict[str, Any] | None = field(default=None, repr=False)

    def to_index(self, ids: Sequence[Any]) -> DedupIndex:
        """Everything needed to dedup later inputs against this run (and its prior)."""
        if self.sets is None:  # pragma: no cover - find_duplicates always sets it
            raise InvalidConfig("sets", None, "result has no shingle sets", "rerun")
        if len(ids) != len(self.sets):
            raise InvalidConfig(
                "ids",
                len(ids),
                f"need one id per document ({len(self.sets)})",
                "pass the prior ids followed by this run's ids",
            )
        return DedupIndex(self.sets, list(ids), self.edges, self.config_fingerprint, self.config)

    @property
    def kept(self) -> npt.NDArray[np.int64]:
        """Positions of kept new documents (unique or representative), ascending."""
        return (np.flatnonzero(self.duplicate_of[self.n_prior :] < 0) + self.n_prior).astype(
            np.int64
        )

    @property
    def duplicates(self) -> npt.NDArray[np.int64]:
        """Positions of new documents removed as duplicates, ascending."""
        return (np.flatnonzero(self.duplicate_of[self.n_prior :] >= 0) + self.n_prior).astype(
            np.int64
        )

    @property
    def edges(self) -> list[Edge]:
        return [e for c in self.clusters for e in c.edges]

    def pairs(self, *, expand_identical: bool = True) -> set[tuple[int, int]]:
        """Verified duplicate pairs (a < b) found by this run.

        Exact-content copies are collapsed before the near-duplicate search, so a
        copy's near pairs are implied, not listed, by the edges.  With
        ``expand_identical`` every verified edge is expanded over the identical
        groups at both ends (their shingle-hash sets are equal, so the expanded
        pairs have the same exact score), and pairs inside each group are added.
        """
        base = {(e.a, e.b) for e in self.edges}
        if not expand_identical:
            return base
        group: dict[int, list[int]] = {}
        leader: dict[int, int] = {}
        for e in self.edges:
            if e.method == "identical":
                root = leader.get(e.a, e.a)
                leader[e.b] = root
                group.setdefault(root, [root]).append(e.b)
        out: set[tuple[int, int]] = set()
        for members in group.values():
            out.update(
                (min(x, y), max(x, y)) for i, x in enumerate(members) for y in members[i + 1 :]
            )
        for e in self.edges:
            if e.method == "identical":
                continue
            for x in group.get(leader.get(e.a, e.a), [e.a]):
                for y in group.get(leader.get(e.b, e.b), [e.b]):
                    out.add((min(x, y), max(x, y)))
        return out

    def near_pairs(self) -> set[tuple[int, int]]:
        """Pairs joined by a verified near-duplicate edge (not exact-content edges)."""
        return {(e.a, e.b) for e in self.edges if e.method != "identical"}


def _exact_groups(
    text_of: Callable[[int], bytes] | None,
    n_prior: int,
    sets: ShingleSets,
    eligible: npt.NDArray[np.bool_],
    raw_of: Callable[[int], str | bytes] | None = None,
) -> tuple[list[Edge], npt.NDArray[np.bool_]]:
    """Exact-content duplicate edges and the mask of group leaders.

    Equal content hashes are confirmed byte for byte when both texts are at hand
    (``text_of(i - n_prior)`` for the documents from position ``n_prior`` on), else
    (a document from a saved index) by equality of the shingle-hash sets.  Texts are
    normalized again on demand, for group members only; when ``raw_of`` gives the
    original texts, two equal originals are confirmed without normalizing them
    (normalization is a function of the text, so their normalized bytes are equal).
    """

    def text(i: int) -> bytes | None:
        return text_of(i - n_prior) if text_of is not None and i >= n_prior else None

    def raw(i: int) -> str | bytes | None:
        return raw_of(i - n_prior) if raw_of is not None and i >= n_prior else None

    idx = np.flatnonzero(eligible)
    leaders = eligible.copy()
    edges: list[Edge] = []
    if idx.size < 2:
        return edges, leaders
    h = sets.content_hash[idx]
    order = np.argsort(h, kind="stable")
    hs = h[order]
    starts = np.flatnonzero(np.r_[True, hs[1:] != hs[:-1]])
    ends = np.r_[starts[1:], hs.shape[0]]
    # Only groups of two or more can hold a duplicate; most hashes are unique, so
    # the Python loop runs over those groups alone.
    multi = np.flatnonzero(ends - starts >= 2)
    normalized: dict[int, bytes | None] = {}

    def norm(i: int) -> bytes | None:
        if i not in normalized:
            normalized[i] = text(i)
        return normalized[i]

    originals: dict[int, str | bytes | None] = {}
    for s, e in zip(starts[multi].tolist(), ends[multi].tolist(), strict=True):
        members = sorted(idx[order[s:e]].tolist())
        firsts: list[int] = []
        normalized.clear()
        originals.clear()
        for m in members:
            rm = originals[m] = raw(m)
            for f in firsts:
                if rm is not None and rm == originals[f]:
                    same = True
                else:
                    eb, fb = norm(m), norm(f)
                    same = (
                        eb == fb
                        if eb is not None and fb is not None
                        else bool(np.array_equal(sets.get(m), sets.get(f)))
                    )
                if same:
                    leaders[m] = False
                    edges.append(
                        Edge(a=f, b=m, jaccard=1.0, estimate=1.0, band=None, method="identical")
                    )
                    break
            else:
                firsts.append(m)
    edges.sort(key=lambda x: (x.a, x.b))
    return edges, leaders


# Fields a scheme descriptor shares with the config it came from.
_SCHEME_AND_CONFIG = (
    "max_shingles",
    "hash_algorithm",
    "seed",
    "signature",
    "num_perm",
    "bands",
    "rows",
    "format_version",
)


@dataclass(eq=False, slots=True)
class DedupIndex:
    """What a batch run leaves for the next one (``--save-index`` / ``--against``).

    Holds every document's shingle-hash set (not its text), its id, the cluster
    edges found so far and the config fingerprint.  A run against it treats the
    indexed documents as coming first, so its result equals one run over the union.
    """

    sets: ShingleSets
    ids: list[Any]
    edges: list[Edge]
    config_fingerprint: str
    # The options behind config_fingerprint (Config.result_fields), so that a run
    # with other options can be told which ones differ.  None in older indexes.
    config: dict[str, Any] | None = None

    def __len__(self) -> int:
        return len(self.sets)

    def save(self, path: str) -> None:
        from neardup.core.persist import write_container

        e = self.edges
        arrays = {
            "data": self.sets.data,
            "indptr": self.sets.indptr,
            "raw_counts": self.sets.raw_counts,
            "truncated": self.sets.truncated,
            "content_hash": self.sets.content_hash,
            "byte_lengths": self.sets.byte_lengths,
            "edge_a": np.array([x.a for x in e], dtype=np.int64),
            "edge_b": np.array([x.b for x in e], dtype=np.int64),
            "edge_band": np.array([-1 if x.band is None else x.band for x in e], dtype=np.int64),
            "edge_inter": np.array(
                [-1 if x.intersection is None else x.intersection for x in e], dtype=np.int64
            ),
            "edge_union": np.array([-1 if x.union is None else x.union for x in e], dtype=np.int64),
        }
        meta = {
            "scheme": self.sets.scheme.to_dict(),
            "ids": self.ids,
            "config_fingerprint": self.config_fingerprint,
            **({} if self.config is None else {"config": self.config}),
            "edge_method": [x.method for x in e],
            "edge_estimate": [x.estimate for x in e],
        }
        write_container(path, "dedup-index", meta, arrays)

    @classmethod
    def load(cls, path: str) -> DedupIndex:
        """Read an index saved by :meth:`save`; :class:`~neardup.CorruptFile` unless
        its checksum, structure and recorded options all hold together (the
        checksum alone does not stop a deliberate edit)."""
        from neardup.core._errors import CorruptFile
        from neardup.core.persist import read_container

        meta, a = read_container(path, "dedup-index")
        try:
            index = cls._from_parts(path, meta, a)
        except CorruptFile:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise CorruptFile(
                path, f"its content is not a consistent index ({type(exc).__name__}: {exc})"
            ) from exc
        return index

    @classmethod
    def _from_parts(
        cls, path: str, meta: dict[str, Any], a: dict[str, npt.NDArray[Any]]
    ) -> DedupIndex:
        from neardup.core._errors import CorruptFile
        from neardup.core._fingerprint import fingerprint

        scheme = SchemeDescriptor.from_dict(meta["scheme"])
        n = len(meta["ids"])
        indptr = a["indptr"]
        per_doc = ("raw_counts", "truncated", "content_hash", "byte_lengths")
        if (
            indptr.ndim != 1
            or indptr.shape[0] != n + 1
            or any(a[k].shape != (n,) for k in per_doc)
            or (n and (indptr[0] != 0 or np.any(np.diff(indptr) < 0)))
            or int(indptr[-1]) != a["data"].shape[0]
        ):
            raise CorruptFile(path, "array lengths disagree with the id list")
        n_edges = a["edge_a"].shape[0]
        edge_arrays = ("edge_a", "edge_b", "edge_band", "edge_inter", "edge_union")
        if (
            any(a[k].shape != (n_edges,) for k in edge_arrays)
            or len(meta["edge_method"]) != n_edges
            or len(meta["edge_estimate"]) != n_edges
            or np.any(
                (a["edge_a"] < 0) | (a["edge_a"] >= n) | (a["edge_b"] < 0) | (a["edge_b"] >= n)
            )
            or not set(meta["edge_method"]) <= {"identical", "exact", "estimate"}
        ):
            raise CorruptFile(path, "its edges do not fit its documents")
        config = meta.get("config")
        if config is not None and fingerprint(config) != meta["config_fingerprint"]:
            raise CorruptFile(path, "its recorded options do not match its config fingerprint")
        if config is not None:
            recorded = {**config, **config["shingle"]}  # max_shingles lives in the shingle
            sd = scheme.to_dict()
            if any(sd[k] != recorded[k] for k in _SCHEME_AND_CONFIG):
                raise CorruptFile(path, "its scheme disagrees with its recorded options")
        sets = ShingleSets(
            a["data"],
            indptr,
            a["raw_counts"],
            a["truncated"],
            a["content_hash"],
            a["byte_lengths"],
            scheme,
        )
        edges = []
        for i in range(a["edge_a"].shape[0]):
            inter, union = int(a["edge_inter"][i]), int(a["edge_union"][i])
            method = meta["edge_method"][i]
            edges.append(
                Edge(
                    a=int(a["edge_a"][i]),
                    b=int(a["edge_b"][i]),
                    jaccard=1.0
                    if method == "identical"
                    else (inter / union if union > 0 else None),
                    estimate=meta["edge_estimate"][i],
                    band=None if a["edge_band"][i] < 0 else int(a["edge_band"][i]),
                    method=method,
                    intersection=inter if inter >= 0 else None,
                    union=union if union >= 0 else None,
                )
            )
        return cls(sets, list(meta["ids"]), edges, meta["config_fingerprint"], config)


@dataclass(frozen=True, slots=True)
class _Hashed:
    sets: ShingleSets
    too_large: npt.NDArray[np.bool_]
    normalize_s: float
    hash_s: float


def normalize_and_hash(
    texts: Sequence[str],
    cfg: Config,
    key: HashKey | None,
    scheme: SchemeDescriptor,
    progress: Callable[[str, int, int], None] | None,
    chunk_bytes: int = HASH_CHUNK_BYTES,
) -> _Hashed:
    """Normalize and hash ``texts`` in chunks of about ``chunk_bytes`` characters.

    Only the shingle-hash sets are kept: each chunk's normalized text is dropped as
    soon as it is hashed, so the buffers stay small and are reused by the allocator
    instead of being faulted in afresh (measured ~1.6x faster than 64 MiB chunks,
    and no copy of the corpus is held).  Documents over ``max_document_bytes``
    (normalized UTF-8) get an empty set and are flagged in ``too_large``.
    """
    norm = get_normalizer(cfg.normalizer)
    n = len(texts)
    ends = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=n))
    parts: list[ShingleSets] = []
    big_parts: list[npt.NDArray[np.bool_]] = []
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
    return _Hashed(sets, np.concatenate(big_parts), norm_s, hash_s)


_R = TypeVar("_R")


class _Background(Generic[_R]):
    """``fn(*args)`` run on a thread (for kernels that release the GIL);
    :meth:`result` waits for it and returns its value or raises its error."""

    def __init__(self, fn: Callable[..., _R], *args: Any) -> None:
        self._value: _R | None = None
        self._error: BaseException | None = None
        self.seconds = 0.0
        threads = int(get_num_threads())  # numba's count is per calling thread

        def run() -> None:
            set_num_threads(threads)
            t0 = time.perf_counter()
            try:
                self._value = fn(*args)
            except BaseException as exc:  # re-raised by result()
                self._error = exc
            self.seconds = time.perf_counter() - t0

        self._thread = threading.Thread(target=run, name="neardup-background", daemon=True)
        self._thread.start()

    def result(self) -> _R:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return cast(_R, self._value)


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
    kept the reader waiting and the cores half used (1.32 s vs 1.20 s of reading
    and hashing on 313k documents)."""

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
        # and shared its cores with the reader: 7.3 ms per 1 MiB chunk while
        # reading, 4.2-5.0 ms after, against 6.1 ms on one idle core).
        workers = max(1, int(get_num_threads()))
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
        set_num_threads(1)  # per calling thread in numba
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

    def finish(self) -> _Hashed:
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
        placed = None if self._sink is None else self._sink.data(parts)
        sets = parts[0] if len(parts) == 1 else ShingleSets.concat_all(parts, placed)
        return _Hashed(sets, big, self.normalize_s, self.hash_s)

    def close(self) -> None:
        """Stop the worker (idempotent; after :meth:`finish` it does nothing)."""
        self._pending = []
        self._stop()


def _normalized_text(texts: Sequence[str], cfg: Config) -> Callable[[int], bytes]:
    norm = get_normalizer(cfg.normalizer)
    return lambda i: encode_text(norm(texts[i]))


def find_duplicates(
    texts: Sequence[str],
    *,
    config: Config | None = None,
    key: HashKey | None = None,
    keep: str = "first",
    method: Literal["lsh", "exact"] = "lsh",
    edges: Literal["forest", "all"] = "forest",
    prior: DedupIndex | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> DedupResult:
    """Find exact and near duplicates in a batch of texts.

    Parameters:
        texts: the documents, in input order (their positions are the ids).
        config: parameters (default :class:`Config()`: word 5-grams, t = 0.8).
        key: a :class:`HashKey` when ``config.hash_algorithm == "siphash24"``.
        keep: representative rule, ``first`` | ``longest`` | ``shortest``.
        method: ``lsh`` (MinHash + banding) or ``exact`` (AllPairs join, recall 1).
        edges: ``forest`` records the edges that joined each cluster (a spanning
            forest; pairs already connected are not re-verified), ``all`` records
            every verified pair >= threshold.  Clusters are the same either way.
        prior: documents of earlier runs (:class:`DedupIndex`).  They take positions
            ``0 .. len(prior) - 1`` and ``texts`` follow, so the result equals one run
            over the union; ``stats`` counts only the new documents.
        progress: called as ``progress(stage, done, total)`` during long stages.
    """
    return find_duplicates_hashed(
        texts,
        None,
        config=config,
        key=key,
        keep=keep,
        method=method,
        edges=edges,
        prior=prior,
        progress=progress,
    )


def find_duplicates_hashed(
    texts: Sequence[str],
    hashed: _Hashed | None,
    *,
    config: Config | None = None,
    key: HashKey | None = None,
    keep: str = "first",
    method: Literal["lsh", "exact"] = "lsh",
    edges: Literal["forest", "all"] = "forest",
    prior: DedupIndex | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> DedupResult:
    """:func:`find_duplicates`, given ``hashed`` (a :class:`HashFeeder`'s result for
    exactly ``texts``) when the texts were hashed while being read."""
    cfg = config or Config()
    if keep not in KEEP_RULES:
        raise InvalidConfig("keep", keep, "unknown representative rule", f"use one of {KEEP_RULES}")
    if method not in ("lsh", "exact"):
        raise InvalidConfig("method", method, "unknown method", "use lsh or exact")
    if edges not in ("forest", "all"):
        raise InvalidConfig("edges", edges, "unknown edge mode", "use forest or all")
    scheme = SchemeDescriptor.from_config(cfg, key)
    if prior is not None:
        if prior.config is not None:
            differ = cfg.differences(prior.config)
            if differ:
                raise InvalidConfig(
                    "against",
                    prior.config_fingerprint,
                    f"the index was built with other options ({differ})",
                    "rerun with the index's options, or rebuild the index with these",
                )
        prior.sets.scheme.require_same(scheme, "a saved index and this run")
        if prior.config_fingerprint != cfg.fingerprint:
            raise InvalidConfig(
                "against",
                prior.config_fingerprint,
                f"the index was built with config {prior.config_fingerprint}, this run uses "
                f"{cfg.fingerprint}",
                "rerun with the same parameters as the indexed run",
            )
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    n_new = len(texts)
    n_prior = len(prior) if prior is not None else 0
    # Checked before anything is allocated: characters approximate UTF-8 bytes.
    count = getattr(texts, "char_count", None)
    chars = int(count()) if callable(count) else sum(len(t) for t in texts)
    avg = chars // n_new if n_new else 0
    planned = scratch_bytes(chars) + (n_new + n_prior) * cfg.estimated_memory_per_document(
        avg_bytes=max(avg, 1)
    )
    if planned > cfg.memory_limit:
        raise MemoryLimitExceeded(
            planned, cfg.memory_limit, f"deduplicating {n_new + n_prior:,} documents"
        )
    if hashed is None:
        hashed = normalize_and_hash(texts, cfg, key, scheme, progress)
    elif progress is not None:
        progress("shingle_hash", n_new, n_new)
    new_sets, too_large_new = hashed.sets, hashed.too_large
    timings["normalize"] = hashed.normalize_s
    timings["shingle_hash"] = hashed.hash_s
    pending = _Background(MinHasher(cfg, key=key).from_sets, new_sets) if method == "lsh" else None

    def new_sigs() -> SignatureSet | None:
        if pending is None:
            return None
        sigs = pending.result()
        timings["signatures"] = pending.seconds
        return sigs

    return dedup_sets(
        new_sets,
        new_sigs,
        _normalized_text(texts, cfg),
        too_large_new,
        config=cfg,
        key=key,
        keep=keep,
        method=method,
        edges=edges,
        prior=prior,
        progress=progress,
        timings=timings,
        t0=t0,
        raw_of=getattr(texts, "encoded", texts.__getitem__),
    )


def dedup_sets(
    new_sets: ShingleSets,
    new_sigs: SignatureSet | Callable[[], SignatureSet | None] | None,
    text_of: Callable[[int], bytes] | None,
    too_large_new: npt.NDArray[np.bool_],
    *,
    config: Config,
    key: HashKey | None = None,
    keep: str = "first",
    method: Literal["lsh", "exact"] = "lsh",
    edges: Literal["forest", "all"] = "forest",
    prior: DedupIndex | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    timings: dict[str, float] | None = None,
    t0: float | None = None,
    raw_of: Callable[[int], str | bytes] | None = None,
) -> DedupResult:
    """The stages after hashing, on shingle sets and signatures already computed.

    This is what :func:`find_duplicates` runs after hashing, and what an
    out-of-core run calls with memory-mapped ``new_sets`` and ``new_sigs``.
    ``new_sigs`` may also be a function returning them, called once the exact
    duplicates are found (a batch run computes them meanwhile, in a thread).
    ``text_of(i)`` (the normalized UTF-8 text of new document ``i``) confirms exact
    duplicates byte for byte; without it equal content hashes are confirmed by
    equal shingle-hash sets.  ``raw_of(i)`` (the original text of new document
    ``i``), when given, confirms equal originals without normalizing them.
    """
    cfg = config
    timings = {} if timings is None else timings
    t0 = time.perf_counter() if t0 is None else t0
    scheme = new_sets.scheme
    n_new = len(new_sets)
    n_prior = len(prior) if prior is not None else 0
    sets = prior.sets.concat(new_sets) if prior is not None else new_sets
    n = n_prior + n_new
    too_large = np.r_[np.zeros(n_prior, dtype=np.bool_), too_large_new]
    empty = (sets.raw_counts == 0) & ~too_large
    total_bytes = int(new_sets.byte_lengths.sum())

    t2 = time.perf_counter()
    eligible = ~empty & ~too_large
    exact_edges, leaders = _exact_groups(text_of, n_prior, sets, eligible, raw_of)
    if prior is not None:
        # Identical edges among indexed documents were found by the earlier run.
        exact_edges = [e for e in exact_edges if e.b >= n_prior]
    timings["exact_duplicates"] = time.perf_counter() - t2

    t3 = time.perf_counter()
    bands, rows = cfg.layout
    near_edges: list[Edge] = []
    counters = {
        "candidate_pairs": 0,
        "verified_pairs": 0,
        "candidate_overflow": 0,
        "skipped_connected": 0,
    }
    prior_edges = list(prior.edges) if prior is not None else []
    parent = np.arange(n, dtype=np.int64)
    # Seed the union-find with the earlier run's clusters so that pairs already
    # joined are not verified again.
    if prior_edges:
        UF.union_edges(
            parent,
            np.array([e.a for e in prior_edges], dtype=np.int64),
            np.array([e.b for e in prior_edges], dtype=np.int64),
        )
    sigs: SignatureSet | None = None
    if callable(new_sigs):
        new_sigs = new_sigs()
    if method == "lsh":
        if new_sigs is None:
            raise InvalidConfig(
                "new_sigs",
                None,
                "method='lsh' needs signatures",
                "pass MinHasher(config).from_sets(new_sets)",
            )
        sigs = new_sigs
        if prior is not None:
            sigs = MinHasher(cfg, key=key).from_sets(prior.sets).concat(new_sigs)
        mode = K.MODE_FOREST if edges == "forest" else K.MODE_ALL_EDGES
        seen = K.new_seen()
        # Bands are keyed and joined a few at a time so that key memory stays at
        # 8 bytes per document and band in the round, not for all bands at once.
        per_round = max(1, min(bands, _BAND_ROUND_BYTES // max(8 * n, 1)))
        parts: list[tuple[npt.NDArray[np.int64], ...]] = []
        ncand = nver = overflow = skipped = 0
        band_s = 0.0
        t5 = time.perf_counter()
        for lo in range(0, bands, per_round):
            hi = min(bands, lo + per_round)
            tk = time.perf_counter()
            keys = sigs.band_keys(lo=lo, hi=hi, order="F")
            band_s += time.perf_counter() - tk
            ra, rb, rband, rinter, runion, rmatch, c1, c2, c3, c4 = K.band_join(
                keys,
                lo,
                leaders,
                sigs.matrix,
                sets.data,
                sets.indptr,
                float(cfg.threshold),
                cfg.max_candidates,
                mode,
                cfg.verify == "estimate",
                parent,
                seen,
            )
            parts.append((ra, rb, rband, rinter, runion, rmatch))
            ncand, nver, overflow, skipped = ncand + c1, nver + c2, overflow + c3, skipped + c4
            if progress is not None:
                progress("candidates_verify", hi, bands)
        timings["band_keys"] = band_s
        cat = [
            np.concatenate([p[i] for p in parts]) if parts else np.empty(0, np.int64)
            for i in range(6)
        ]
        counters.update(
            candidate_pairs=int(ncand),
            verified_pairs=int(nver),
            candidate_overflow=int(overflow),
            skipped_connected=int(skipped),
        )
        k = cfg.num_perm
        for a, b, band, inter, union, match in zip(*(c.tolist() for c in cat), strict=True):
            exact = inter >= 0
            near_edges.append(
                Edge(
                    a=a,
                    b=b,
                    jaccard=inter / union if exact else None,
                    estimate=match / k,
                    band=band,
                    method="exact" if exact else "estimate",
                    intersection=inter if exact else None,
                    union=union if exact else None,
                )
            )
        timings["candidates_verify"] = time.perf_counter() - t5 - band_s
    else:
        active = np.flatnonzero(leaders).astype(np.int64)
        sub = sets.take(active)
        pairs = allpairs_join(sub, cfg.threshold)
        counters.update(candidate_pairs=len(pairs), verified_pairs=len(pairs))
        pa, pb = active[pairs.a], active[pairs.b]
        kept = np.ones(len(pairs), dtype=np.bool_)
        if edges == "forest" and len(pairs):
            # Pairs in their given order, each kept iff it joins two components.
            UF.kruskal(parent, pa, pb, np.arange(len(pairs), dtype=np.int64), kept)
        for ga, gb, inter, union, keep_it in zip(
            pa.tolist(),
            pb.tolist(),
            pairs.intersection.tolist(),
            pairs.union.tolist(),
            kept.tolist(),
            strict=True,
        ):
            if not keep_it:
                continue
            near_edges.append(
                Edge(
                    a=ga,
                    b=gb,
                    jaccard=inter / union,
                    estimate=None,
                    band=None,
                    method="exact",
                    intersection=inter,
                    union=union,
                )
            )
        timings["exact_join"] = time.perf_counter() - t3
    if prior is not None:
        near_edges = [e for e in near_edges if e.b >= n_prior]

    t6 = time.perf_counter()
    lengths = sets.byte_lengths
    clusters = build_clusters(n, prior_edges + exact_edges + near_edges, keep=keep, lengths=lengths)
    duplicate_of = np.full(n, -1, dtype=np.int64)
    for c in clusters:
        for m in c.members:
            if m != c.representative:
                duplicate_of[m] = c.representative
    timings["clusters"] = time.perf_counter() - t6
    timings["total"] = time.perf_counter() - t0

    new_dups = duplicate_of[n_prior:] >= 0
    new_exact = sum(1 for e in exact_edges if e.b >= n_prior)
    touching = [c for c in clusters if c.members[-1] >= n_prior]
    hist: dict[str, int] = {}
    for c in touching:
        hist[str(len(c))] = hist.get(str(len(c)), 0) + 1
    stats: dict[str, Any] = {
        "documents_in": n_new,
        "documents_out": int(np.count_nonzero(~new_dups)),
        "indexed_documents": n_prior,
        "bytes_in": int(total_bytes),
        "exact_duplicates": new_exact,
        "near_duplicates": int(np.count_nonzero(new_dups)) - new_exact,
        "clusters": len(touching),
        "cluster_size_histogram": dict(sorted(hist.items(), key=lambda kv: int(kv[0]))),
        "empty": int(np.count_nonzero(empty[n_prior:])),
        "too_large": int(np.count_nonzero(too_large_new)),
        "truncated": int(np.count_nonzero(new_sets.truncated)),
        "method": method,
        "verify": cfg.verify,
        "threshold": cfg.threshold,
        "bands": bands,
        "rows": rows,
        "num_perm": cfg.num_perm,
        "predicted_recall_at_threshold": candidate_probability(cfg.threshold, bands, rows)
        if method == "lsh"
        else 1.0,
        **counters,
        "scheme": scheme.to_dict(),
        "scheme_fingerprint": scheme.fingerprint,
        "config_fingerprint": cfg.fingerprint,
        "timings_s": {k: round(v, 6) for k, v in timings.items()},
    }
    return DedupResult(
        clusters=clusters,
        duplicate_of=duplicate_of,
        empty=np.flatnonzero(empty).astype(np.int64),
        too_large=np.flatnonzero(too_large).astype(np.int64),
        truncated=np.flatnonzero(sets.truncated).astype(np.int64),
        stats=stats,
        scheme=scheme,
        config_fingerprint=cfg.fingerprint,
        sets=sets,
        signatures=sigs,
        n_prior=n_prior,
        config=cfg.result_fields(),
    )


@dataclass(frozen=True, slots=True)
class Match:
    """A stored item that matched a query, with its verified score."""

    key: Hashable
    jaccard: float | None
    estimate: float
    method: str
    duplicate: bool


class Deduplicator:
    """An online catalogue: add texts one at a time, ask whether a text was seen.

    Each added text is screened by a Bloom filter over content hashes (cheap
    "definitely unseen"), looked up by exact content, then by LSH; every candidate
    is verified exactly against its retained shingle-hash set.  ``duplicate`` is
    True only for a verified score >= threshold.

    Example:
        >>> from neardup import Config, ShingleSpec
        >>> d = Deduplicator(Config(threshold=0.75, shingle=ShingleSpec(k=2)))
        >>> d.add("A", "red fox runs very fast")
        []
        >>> [(m.key, m.jaccard, m.duplicate) for m in d.add("B", "red fox runs very fast today")]
        [('A', 0.8, True)]
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        key: HashKey | None = None,
        expected_items: int = 100_000,
    ) -> None:
        self.config = config or Config()
        self.key = key
        self.hasher = MinHasher(self.config, key=key)
        self.index = LSHIndex(
            self.hasher.scheme,
            threshold=self.config.threshold,
            max_bucket_size=self.config.max_bucket_size,
            max_candidates=max(self.config.max_candidates, 1),
        )
        self.screen = BloomFilter(capacity=max(expected_items, 1), fp_rate=0.001)
        self._by_content: dict[int, list[Hashable]] = {}
        self._normalizer = get_normalizer(self.config.normalizer)

    def _prepare(self, text: str) -> tuple[ShingleSets, Signature]:
        enc = encode_text(self._normalizer(text))
        if len(enc) > self.config.max_document_bytes:
            raise DocumentTooLarge(None, len(enc), self.config.max_document_bytes)
        sets = hash_encoded(
            EncodedTexts.from_bytes([enc]), self.config, self.key, self.hasher.scheme
        )
        if sets.raw_counts[0] == 0:
            raise EmptyDocument(None)
        return sets, self.hasher.from_sets(sets)[0]

    def _matches(self, sets: ShingleSets, sig: Signature, limit: int | None) -> list[Match]:
        h = int(sets.content_hash[0])
        # The Bloom screen answers "definitely unseen" for most new content, so the
        # exact-content table is consulted only for possible repeats.
        same = self._by_content.get(h, []) if h in self.screen else []
        scored = self.index.query_verified(sig, sets.get(0), limit=limit, extra=same)
        out: list[Match] = []
        for key, e in scored:
            score = e.jaccard if e.jaccard is not None else e.estimate
            method = "identical" if key in same and e.jaccard == 1.0 else e.method
            out.append(
                Match(
                    key,
                    e.jaccard,
                    e.estimate or 0.0,
                    method,
                    score is not None and score >= self.config.threshold,
                )
            )
        out.sort(key=lambda m: (-(m.jaccard or 0.0), str(m.key)))
        return out

    def query(self, text: str, *, limit: int | None = None) -> list[Match]:
        """Verified matches of ``text`` among stored items (nothing is stored)."""
        sets, sig = self._prepare(text)
        return self._matches(sets, sig, limit)

    def seen_exact(self, text: str) -> bool:
        """True if exactly this normalized content was added (Bloom screen first)."""
        sets, _ = self._prepare(text)
        h = int(sets.content_hash[0])
        return h in self.screen and h in self._by_content

    def add(self, key: Hashable, text: str) -> list[Match]:
        """Store ``text`` under ``key`` and return its verified matches among earlier items."""
        sets, sig = self._prepare(text)
        matches = self._matches(sets, sig, None)
        h = int(sets.content_hash[0])
        self.index.insert(key, sig, sets.get(0).copy())
        self.screen.add([h])
        self._by_content.setdefault(h, []).append(key)
        return matches

    def __len__(self) -> int:
        return len(self.index)

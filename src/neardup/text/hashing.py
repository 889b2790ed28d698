"""Stages 2 and 3 — shingling and stable 64-bit shingle hashing, over whole batches.

Two schemes:

* ``xxh64`` — XXH64 of each shingle's canonical bytes with a seed.  Fast and stable
  across processes, platforms and releases; for *trusted* input only: anyone who
  knows the seed (or guesses it) can craft colliding shingles.
* ``siphash24`` — SipHash-2-4, a keyed pseudo-random function, with a 128-bit key
  derived per tenant and scheme version (:meth:`HashKey.derive`).  Without the
  key an attacker cannot predict or collide hashes; use it for untrusted input.

Shingle hashes: a ``byte`` k-gram hashes its k bytes of normalized UTF-8 text and
a ``char`` n-gram the UTF-8 of its n code points, so for them the hash equals
``xxhash.xxh64_intdigest(shingle.encode(), seed)``.  A ``word`` n-gram (of the
tokens :mod:`neardup.text.words` defines for the spec's tokenizer) hashes each
token once and chains the n token hashes through a bijective 64-bit mix
(``kernels._hashes.combine_tokens``), which costs O(n) per shingle instead of O(bytes).
The tests check both definitions against independent Python references.

The batch path (:func:`hash_documents`) concatenates the UTF-8 of every document
into one buffer and runs one compiled kernel over it: no Python object is created
per shingle.  Each document is reduced to the sorted set of its distinct hashes,
which exact verification uses.

Example:
    >>> from neardup import Config
    >>> sets = hash_documents(["red fox runs", "red fox runs"], Config())
    >>> sets.jaccard(0, 1)
    1.0
"""

from __future__ import annotations

import mmap
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from neardup.core._errors import DocumentTooLarge, EmptyDocument
from neardup.core.checks import check_texts, check_type
from neardup.core.config import Config, ShingleSpec
from neardup.kernels import _arrays as KA
from neardup.kernels import _hashes as KH
from neardup.kernels import _tokens as KT
from neardup.kernels.threads import get_threads
from neardup.text.normalize import (
    EncodedTexts,
    Normalizer,
    encode_text,
    get_normalizer,
    unicode_stage,
)
from neardup.text.scheme import HashKey, SchemeDescriptor, check_key
from neardup.text.words import word_table, word_tokens

__all__ = [
    "HashKey",
    "SchemeDescriptor",
    "ShingleSets",
    "hash_documents",
    "hash_shingle",
    "shingles",
]

_KIND_CODE = {"byte": KT.KIND_BYTE, "char": KT.KIND_CHAR, "word": KT.KIND_WORD}


@dataclass(frozen=True, eq=False, slots=True)
class ShingleSets:
    """Each document's sorted, distinct 64-bit shingle hashes, in CSR layout.

    ``data[indptr[d]:indptr[d + 1]]`` is document ``d``'s set.  ``raw_counts`` is
    the number of shingles before de-duplication (0 for an empty document),
    ``truncated`` flags documents cut at ``max_shingles``, ``content_hash`` is a
    hash of the whole normalized document (exact-duplicate screen) and
    ``byte_lengths`` the normalized UTF-8 length.

    "Exact" Jaccard here is exact over the 64-bit hashes: two distinct shingles of
    a pair share a hash with probability below |A ∪ B|² / 2**65.
    """

    data: npt.NDArray[np.uint64]
    indptr: npt.NDArray[np.int64]
    raw_counts: npt.NDArray[np.int64]
    truncated: npt.NDArray[np.bool_]
    content_hash: npt.NDArray[np.uint64]
    byte_lengths: npt.NDArray[np.int64]
    scheme: SchemeDescriptor

    def __len__(self) -> int:
        return int(self.indptr.shape[0] - 1)

    def sizes(self) -> npt.NDArray[np.int64]:
        return np.diff(self.indptr)

    def get(self, i: int) -> npt.NDArray[np.uint64]:
        return self.data[self.indptr[i] : self.indptr[i + 1]]

    @property
    def empty(self) -> npt.NDArray[np.bool_]:
        return np.asarray(self.raw_counts == 0, dtype=np.bool_)

    def intersection_union(self, i: int, j: int) -> tuple[int, int]:
        a, b = self.get(i), self.get(j)
        inter = int(KA.intersect_count(a, 0, a.shape[0], b, 0, b.shape[0]))
        return inter, int(a.shape[0] + b.shape[0] - inter)

    def jaccard(self, i: int, j: int) -> float:
        """Exact Jaccard of documents i and j (0.0 if both are empty)."""
        inter, union = self.intersection_union(i, j)
        return inter / union if union else 0.0

    def take(self, indices: npt.ArrayLike) -> ShingleSets:
        idx = np.asarray(indices, dtype=np.int64)
        sizes = self.sizes()[idx]
        indptr = np.zeros(idx.shape[0] + 1, dtype=np.int64)
        np.cumsum(sizes, out=indptr[1:])
        data = (
            KT.compact_csr(self.data, self.indptr[idx], sizes, indptr)
            if idx.size
            else np.empty(0, np.uint64)
        )
        return ShingleSets(
            data,
            indptr,
            self.raw_counts[idx],
            self.truncated[idx],
            self.content_hash[idx],
            self.byte_lengths[idx],
            self.scheme,
        )

    def concat(self, other: ShingleSets) -> ShingleSets:
        """The documents of ``self`` followed by those of ``other`` (same scheme)."""
        return ShingleSets.concat_all([self, other])

    @staticmethod
    def concat_all(
        parts: Sequence[ShingleSets], data: npt.NDArray[np.uint64] | None = None
    ) -> ShingleSets:
        """The documents of every part, in order (one copy, whatever the number of
        parts; none of the hashes when ``data``, their concatenation, is given)."""
        first = parts[0]
        for p in parts[1:]:
            first.scheme.require_same_sets(p.scheme)
        shifts = np.cumsum([0] + [int(p.indptr[-1]) for p in parts[:-1]])
        indptr = np.concatenate(
            [parts[0].indptr[:1]] + [p.indptr[1:] + s for p, s in zip(parts, shifts, strict=True)]
        )
        return ShingleSets(
            _concat_parallel([p.data for p in parts]) if data is None else data,
            indptr.astype(np.int64),
            np.concatenate([p.raw_counts for p in parts]),
            np.concatenate([p.truncated for p in parts]),
            np.concatenate([p.content_hash for p in parts]),
            np.concatenate([p.byte_lengths for p in parts]),
            first.scheme,
        )

    def nbytes(self) -> int:
        return int(self.data.nbytes + self.indptr.nbytes)


def _concat_parallel(arrays: Sequence[npt.NDArray[np.uint64]]) -> npt.NDArray[np.uint64]:
    """``np.concatenate(arrays)``, copied by as many threads as numba uses.

    NumPy releases the GIL while it copies, so the threads' copies (and the first
    touches of the new array's pages, the larger cost) run side by side."""
    total = sum(len(a) for a in arrays)
    workers = min(get_threads(), len(arrays))
    if total < (1 << 20) or workers < 2:
        return np.concatenate(arrays) if arrays else np.empty(0, dtype=np.uint64)
    out = np.empty(total, dtype=arrays[0].dtype)
    bounds = np.cumsum([0] + [len(a) for a in arrays])
    # Contiguous groups of parts of about equal size, one per thread.
    cuts = np.searchsorted(bounds, np.linspace(0, total, workers + 1)[1:-1])

    def copy(lo: int, hi: int) -> None:
        for k in range(lo, hi):
            out[bounds[k] : bounds[k + 1]] = arrays[k]

    edges = [0, *[int(c) for c in cuts], len(arrays)]
    threads = [
        threading.Thread(target=copy, args=(edges[i], edges[i + 1]), daemon=True)
        for i in range(1, workers)
    ]
    for t in threads:
        t.start()
    copy(edges[0], edges[1])
    for t in threads:
        t.join()
    return out


def _algo_params(config: Config, key: HashKey | None) -> tuple[int, int, int, int]:
    check_key(config, key)
    if key is None:
        return KH.ALGO_XXH64, config.seed, 0, 0
    k0, k1 = key.halves()
    return KH.ALGO_SIPHASH24, 0, k0, k1


def hash_documents(
    texts: Sequence[str],
    config: Config,
    *,
    key: HashKey | None = None,
    normalized: bool = False,
) -> ShingleSets:
    """Normalize, shingle and hash a batch of documents into :class:`ShingleSets`.

    Empty documents are kept (with an empty set and ``raw_counts == 0``) so that
    batch callers count and report them.  Documents over ``max_document_bytes``
    raise :class:`DocumentTooLarge`; batch callers filter them first.
    """
    scheme = SchemeDescriptor.from_config(config, key)
    texts = check_texts("texts", texts)
    norm = get_normalizer(config.normalizer)
    if normalized:
        sets, too_large = _hash_encoded_checked(
            EncodedTexts.from_bytes([encode_text(t) for t in texts]), config, key, scheme
        )
    else:
        sets, too_large = hash_texts(texts, norm, config, key, scheme)
    big = np.flatnonzero(too_large)
    if big.size:
        i = int(big[0])
        raise DocumentTooLarge(i, int(sets.byte_lengths[i]), config.max_document_bytes)
    return sets


def hash_texts(
    texts: Sequence[str],
    norm: Normalizer,
    config: Config,
    key: HashKey | None,
    scheme: SchemeDescriptor,
) -> tuple[ShingleSets, npt.NDArray[np.bool_]]:
    """Normalize and hash ``texts``; documents over ``max_document_bytes`` (normalized
    UTF-8) get an empty set and are flagged in the returned mask."""
    raw, lower = unicode_stage(texts, norm)
    return hash_kernel(raw, lower, norm.collapse_whitespace, config, key, scheme)


def hash_encoded(
    encoded: EncodedTexts, config: Config, key: HashKey | None, scheme: SchemeDescriptor
) -> ShingleSets:
    """Hash documents already normalized (no size check: callers check first)."""
    lower = np.zeros(len(encoded), dtype=np.bool_)
    return hash_kernel(encoded, lower, False, config, key, scheme, max_bytes=2**62)[0]


def _hash_encoded_checked(
    encoded: EncodedTexts, config: Config, key: HashKey | None, scheme: SchemeDescriptor
) -> tuple[ShingleSets, npt.NDArray[np.bool_]]:
    lower = np.zeros(len(encoded), dtype=np.bool_)
    return hash_kernel(encoded, lower, False, config, key, scheme)


def shingle_bound(
    byte_lengths: npt.NDArray[np.int64], kind: str
) -> npt.NDArray[np.int64]:
    """The most shingles (before ``max_shingles``) a document of each byte length
    can have: the room the hashing kernel is given for it, which it never checks.

    A byte or character shingle starts at each byte at most.  Word shingles are
    no more than the tokens.  A token that is not the document's last owns two
    bytes at least up to the next token's start: a run of word characters (one
    byte or more) ends at a separator (one byte or more) or at a character that is
    a token by itself (of a script written without spaces: three bytes or more in
    UTF-8; a sequence the document's end cuts short is no word character).  So
    ``n`` bytes hold at most ``(n + 1) // 2`` tokens; the room given is
    ``n // 2 + 1``, a slot more for an even ``n``, as a margin.  Normalization never
    lengthens the bytes the kernel is given.

    >>> shingle_bound(np.array([0, 1, 4, 5]), "word").tolist()
    [1, 1, 3, 3]
    """
    if kind == "word":
        return byte_lengths // 2 + 1
    return byte_lengths


def hash_kernel(
    raw: EncodedTexts,
    lower: npt.NDArray[np.bool_],
    collapse: bool,
    config: Config,
    key: HashKey | None,
    scheme: SchemeDescriptor,
    max_bytes: int | None = None,
    scratch: list[npt.NDArray[np.uint64]] | None = None,
    place: Callable[[int], npt.NDArray[np.uint64] | None] | None = None,
) -> tuple[ShingleSets, npt.NDArray[np.bool_]]:
    """Run the hashing kernel; ``scratch`` (a one-element list, kept by a caller
    hashing many batches) holds the padded output buffer, grown as needed and reused
    from batch to batch (fresh 16 MiB buffers per 2 MiB chunk were a quarter of a
    batch run's page faults).  ``place(count)``, if given, returns where the
    batch's ``count`` hashes go (see :class:`HashSink`), or None for a new array."""
    n = len(raw)
    spec = config.shingle
    bound = np.minimum(np.maximum(shingle_bound(raw.lengths, spec.kind), 1), spec.max_shingles)
    bound_off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(bound, out=bound_off[1:])
    algo, seed, k0, k1 = _algo_params(config, key)
    table = word_table(spec.tokenizer) if spec.kind == "word" else np.zeros(1, np.uint8)
    need = int(bound_off[n])
    if scratch is None:
        out = np.empty(need, dtype=np.uint64)
    else:
        if not scratch or scratch[0].shape[0] < need:
            scratch[:] = [np.empty(max(need, 1), dtype=np.uint64)]
        out = scratch[0]
    padded, counts, raw_counts, trunc, content, lengths, too_large = KT.hash_shingles(
        raw.buf,
        raw.offsets,
        lower,
        collapse,
        config.max_document_bytes if max_bytes is None else max_bytes,
        _KIND_CODE[spec.kind],
        spec.k,
        spec.max_shingles,
        algo,
        np.uint64(seed),
        np.uint64(k0),
        np.uint64(k1),
        table,
        bound_off,
        out,
    )
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    data = None if place is None else place(int(indptr[n]))
    if data is None:
        data = KT.compact_csr(padded, bound_off, counts, indptr)
    else:
        KT.compact_csr_into(padded, bound_off, counts, indptr, data)
    return ShingleSets(data, indptr, raw_counts, trunc, content, lengths, scheme), too_large


class HashSink:
    """One array that successive batches' shingle hashes are written into, in
    batch order, by whichever threads hash them.

    A batch's hashes go to their final place when they are compacted, so a run
    hashed in many batches needs no concatenation at the end (one copy of all the
    hashes and its page faults).  The
    array is anonymous memory of ``capacity`` entries mapped lazily (pages that are
    never written cost nothing), so a generous upper bound is cheap.

    Every batch number from 0 up must be registered, by :meth:`place` or else by
    :meth:`release` (a thread waits for the batches before its own).  When a batch
    does not fit, or one fails, :attr:`contiguous` turns False and this batch and
    all later ones get no place (their callers allocate as before).
    """

    def __init__(self, capacity: int) -> None:
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0)
        self.array: npt.NDArray[np.uint64] = np.frombuffer(
            mmap.mmap(-1, 8 * max(capacity, 1), flags=flags), dtype=np.uint64
        )
        self.filled = 0
        self.contiguous = True
        self._cond = threading.Condition()
        self._sizes: dict[int, int | None] = {}
        self._offsets: dict[int, int | None] = {}
        self._next = 0

    def place(self, batch: int, size: int | None) -> npt.NDArray[np.uint64] | None:
        """Register batch ``batch``'s number of hashes (None: it has none to put,
        e.g. it failed) and wait until the batches before it are registered; the
        slice of :attr:`array` to write them to, or None."""
        with self._cond:
            if batch in self._sizes or batch in self._offsets or batch < self._next:
                raise ValueError(f"batch {batch} registered twice")
            self._sizes[batch] = size
            while self._next in self._sizes:
                got = self._sizes.pop(self._next)
                if got is None or not self.contiguous or self.filled + got > len(self.array):
                    self.contiguous = False
                    self._offsets[self._next] = None
                else:
                    self._offsets[self._next] = self.filled
                    self.filled += got
                self._next += 1
            self._cond.notify_all()
            self._cond.wait_for(lambda: batch in self._offsets)
            off = self._offsets.pop(batch)
        return None if off is None or size is None else self.array[off : off + size]

    def release(self, batch: int) -> None:
        """Register ``batch`` as having no hashes here unless it already is."""
        with self._cond:
            known = batch in self._sizes or batch in self._offsets or batch < self._next
        if not known:
            self.place(batch, None)

    def data(self, parts: Sequence[ShingleSets]) -> npt.NDArray[np.uint64] | None:
        """The hashes of ``parts`` (every batch, in order) as one array, if they
        all went to their places; else None."""
        if not self.contiguous or sum(len(p.data) for p in parts) != self.filled:
            return None
        return self.array[: self.filled]


def shingles(text: str, spec: ShingleSpec, *, normalizer: str = "nfkc-casefold") -> list[str]:
    """The shingles of one document as strings, in document order (for explanations).

    Raises :class:`EmptyDocument` if the normalized text has no unit to shingle.
    """
    check_type("spec", spec, ShingleSpec, "pass config.shingle, e.g. ShingleSpec(k=5)")
    t = get_normalizer(normalizer)(text)
    k = spec.k
    if spec.kind == "word":
        units: Sequence[str] = word_tokens(t, spec.tokenizer)
        sep = " "
    elif spec.kind == "char":
        units, sep = t, ""
    else:
        units, sep = [chr(b) for b in encode_text(t)], ""
    if not units:
        raise EmptyDocument(None, f"no {spec.kind} unit")
    if len(units) < k:
        out = [sep.join(units)]
    else:
        out = [sep.join(units[i : i + k]) for i in range(len(units) - k + 1)]
    return out[: spec.max_shingles]


def _hash_bytes(data: bytes, algo: int, seed: int, k0: int, k1: int) -> int:
    arr = np.frombuffer(data, dtype=np.uint8) if data else np.zeros(1, np.uint8)
    if algo == KH.ALGO_SIPHASH24:
        return int(KH.siphash24(arr, 0, len(data), np.uint64(k0), np.uint64(k1)))
    return int(KH.xxh64(arr, 0, len(data), np.uint64(seed)))


def hash_shingle(shingle: str | bytes, config: Config, *, key: HashKey | None = None) -> int:
    """The 64-bit hash of one shingle (as :func:`shingles` returns it), as the batch
    kernel computes it.  For word shingles the tokens are separated by one space."""
    algo, seed, k0, k1 = _algo_params(config, key)
    if config.shingle.kind != "word":
        data = shingle if isinstance(shingle, bytes) else encode_text(shingle)
        return _hash_bytes(data, algo, seed, k0, k1)
    text = shingle.decode("utf-8", "surrogatepass") if isinstance(shingle, bytes) else shingle
    toks = text.split(" ")
    th = np.array([_hash_bytes(encode_text(t), algo, seed, k0, k1) for t in toks], dtype=np.uint64)
    return int(KH.combine_tokens(th, 0, len(toks)))

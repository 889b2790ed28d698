"""Normalizing, tokenizing and shingling whole batches of documents (numba).

A batch is one UTF-8 byte buffer with document offsets; shingle hashes come out in
CSR layout (``data[indptr[d]:indptr[d + 1]]`` belongs to document ``d``), sorted
and deduplicated per document.  No Python object is created per shingle, and
nothing here validates its arguments.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neardup.kernels._arrays import bucket_counts, sort_hashes_at
from neardup.kernels._hashes import P1, P4, P5, U64, fmix64, hash_span
from neardup.kernels._kernel import kernel, lazy, prange
from neardup.kernels.threads import split_rows

_borrow: Any = lazy("neardup.kernels._intrinsics", "borrow")

KIND_BYTE = 0


KIND_CHAR = 1


KIND_WORD = 2


@kernel
def _utf8_len(b0):
    if b0 < 0x80:
        return 1
    if b0 < 0xE0:
        return 2
    if b0 < 0xF0:
        return 3
    return 4


@kernel
def _utf8_decode(buf, p, n):
    b0 = np.int64(buf[p])
    if n == 1:
        return b0
    if n == 2:
        return ((b0 & 0x1F) << 6) | (np.int64(buf[p + 1]) & 0x3F)
    if n == 3:
        return (
            ((b0 & 0x0F) << 12)
            | ((np.int64(buf[p + 1]) & 0x3F) << 6)
            | (np.int64(buf[p + 2]) & 0x3F)
        )
    return (
        ((b0 & 0x07) << 18)
        | ((np.int64(buf[p + 1]) & 0x3F) << 12)
        | ((np.int64(buf[p + 2]) & 0x3F) << 6)
        | (np.int64(buf[p + 3]) & 0x3F)
    )


@kernel
def _ascii_tokens(buf, s, e, word_table, starts, ends):
    """Token starts and ends of ``buf[s:e]`` into ``starts``/``ends`` (each at least
    ``e - s + 1`` long); returns the token count, or -1 if a byte is not ASCII.

    Branch-free: every position is stored as a start and as an end and kept by
    advancing the counts.  The branchy scan mispredicted at both ends of every
    token, which cost more than the hashing.
    """
    prev = np.int64(0)
    ns = np.int64(0)
    ne = np.int64(0)
    high = 0
    for i in range(s, e):
        b = buf[i]
        high |= b
        w = np.int64(word_table[b & 0x7F])
        starts[ns] = i
        ns += w & (1 - prev)
        ends[ne] = i
        ne += prev & (1 - w)
        prev = w
    if high & 0x80:
        return -1
    if prev:
        ends[ne] = e
    return ns


@kernel
def _char_class(buf, p, e, word_table, nw):
    """(class, UTF-8 length) of the character at ``buf[p]`` (``p < e``):
    ``word_table``'s value for it (0 for a code point past the table).

    A sequence that the end ``e`` cuts short (raw bytes are hashed as given) is
    class 0 up to ``e``: decoding it would read bytes past the document, whatever
    its buffer holds there, and tokens would depend on the documents before it.
    """
    b0 = buf[p]
    if b0 < 0x80:
        return word_table[b0], 1
    n = _utf8_len(b0)
    if n > e - p:
        return 0, e - p
    cp = _utf8_decode(buf, p, n)
    return (word_table[cp] if cp < nw else 0), n


@kernel
def _utf8_tokens(buf, s, e, word_table, need, algo, seed, k0, k1, th):
    """Tokens of UTF-8 text: each is hashed into ``th`` (the first ``need``) as
    soon as its end is found, while its bytes are in cache; returns the count.

    ``word_table`` classes (see ``neardup.text.words``): 1 word characters form
    runs, 2 characters are tokens by themselves, 3 marks continue the token before
    them (and are skipped where none is open), 0 ends a token.  A table of 0 and 1
    only (tokenizer 1) gives maximal runs of word characters.
    """
    nw = word_table.shape[0]
    ntok = 0
    p = s
    while p < e:
        c, n = _char_class(buf, p, e, word_table, nw)
        if c == 0 or c == 3:
            p += n
            continue
        t0 = p
        p += n
        while p < e:
            c2, n2 = _char_class(buf, p, e, word_table, nw)
            # A run takes word characters and marks; a character of class 2 only marks.
            if c2 == 3 or (c2 == 1 and c == 1):
                p += n2
            else:
                break
        t1 = p if p < e else e
        if ntok < need:
            th[ntok] = hash_span(buf, t0, t1 - t0, algo, seed, k0, k1)
        ntok += 1
    return ntok


@kernel
def _shingle_count(units, k, max_sh):
    """(shingles, truncated, units per shingle) of ``units`` > 0 bytes, characters or
    tokens: a shorter text than ``k`` units is one shingle of all of them."""
    nsh = units - k + 1 if units >= k else 1
    trunc = nsh > max_sh
    if trunc:
        nsh = max_sh
    return nsh, trunc, k if units >= k else units


@kernel
def _doc_shingles(buf, s, e, kind, k, max_sh, algo, seed, k0, k1, word_table, out, o, pa, pb, th):
    """Hash the shingles of one document into ``out[o:]``; returns (count, truncated).

    ``pa``, ``pb`` (int64) and ``th`` (uint64) are scratch of at least ``e - s + 1``
    entries, reused across documents so that no allocation happens per document.
    """
    nbytes = e - s
    if nbytes == 0:
        return 0, False
    if kind == KIND_BYTE:
        nsh, trunc, width = _shingle_count(nbytes, k, max_sh)
        for i in range(nsh):
            out[o + i] = hash_span(buf, s + i, width, algo, seed, k0, k1)
        return nsh, trunc
    if kind == KIND_CHAR:
        starts = pa
        units = 0
        p = s
        while p < e:
            starts[units] = p
            units += 1
            p += _utf8_len(buf[p])
        starts[units] = e
        nsh, trunc, span = _shingle_count(units, k, max_sh)
        for i in range(nsh):
            a = starts[i]
            out[o + i] = hash_span(buf, a, starts[i + span] - a, algo, seed, k0, k1)
        return nsh, trunc
    # KIND_WORD: the tokens of ``word_table`` (see :func:`_utf8_tokens`); ASCII
    # characters are word characters or not (classes 1 and 0), never more.
    need = max_sh + k  # tokens past this only count towards truncation
    ntok = _ascii_tokens(buf, s, e, word_table, pa, pb)
    if ntok >= 0:
        for t in range(min(ntok, need)):
            th[t] = hash_span(buf, pa[t], pb[t] - pa[t], algo, seed, k0, k1)
    else:
        ntok = _utf8_tokens(buf, s, e, word_table, need, algo, seed, k0, k1, th)
    if ntok == 0:
        return 0, False
    nsh, trunc, span = _shingle_count(ntok, k, max_sh)
    # Each token is hashed once; an n-gram's hash chains its tokens' hashes through
    # a bijective mix, so the cost per shingle is O(n) mixes, not O(bytes).  The
    # chains of all n-grams advance together, one token position at a time: the
    # inner loop is independent across n-grams and compiles to vector code
    # (same values as :func:`combine_tokens`, which is the reference).
    init = P5 ^ U64(span)
    for i in range(nsh):
        out[o + i] = init
    for t in range(span):
        for i in range(nsh):
            out[o + i] = fmix64((out[o + i] ^ th[i + t]) * P1 + P4)
    return nsh, trunc


# Inlined (as :func:`_normalize_ascii_into`) so that :func:`_normalize_into`
# calls nothing with an array: numba then prunes the reference counting of its
# arguments, which it otherwise does on every document.
@kernel(inline="always")
def _space_len(buf, p, e):
    """UTF-8 length of the whitespace character at ``buf[p]``, or 0 if it is none.

    Whitespace is exactly what Python's ``str.isspace()`` accepts (checked against
    it in the tests): ASCII 9-13, 28-32, and U+0085, U+00A0, U+1680, U+2000-U+200A,
    U+2028, U+2029, U+202F, U+205F, U+3000.
    """
    b = buf[p]
    if b < 0x80:
        return 1 if (b == 32 or 9 <= b <= 13 or 28 <= b <= 31) else 0
    if b == 0xC2 and p + 1 < e:
        c = buf[p + 1]
        return 2 if (c == 0x85 or c == 0xA0) else 0
    if p + 2 >= e:
        return 0
    c = buf[p + 1]
    d = buf[p + 2]
    if b == 0xE1:
        return 3 if (c == 0x9A and d == 0x80) else 0
    if b == 0xE2:
        if c == 0x80 and (0x80 <= d <= 0x8A or d == 0xA8 or d == 0xA9 or d == 0xAF):
            return 3
        return 3 if (c == 0x81 and d == 0x9F) else 0
    if b == 0xE3:
        return 3 if (c == 0x80 and d == 0x80) else 0
    return 0


def _ascii_tables() -> tuple[np.ndarray, np.ndarray]:
    space = np.zeros(256, dtype=np.uint8)
    space[9:14] = 1
    space[28:33] = 1  # Python's ASCII whitespace: 9-13 and 28-32
    lower = np.arange(256, dtype=np.uint8)
    lower[65:91] += 32
    return space, lower


# Frozen into the compiled kernels as constants.
_ASCII_SPACE, _ASCII_LOWER = _ascii_tables()


@kernel(inline="always")
def _normalize_ascii_into(buf, s, e, dst, w0):
    """:func:`_normalize_into` with ``low`` and ``collapse`` for a pure-ASCII text.

    Branch-free, with one add per byte on the loop-carried chain: the branchy loop
    mispredicted at word boundaries and serialized on the output position.  The
    separator and the byte are stored at ``w`` and ``w + pending`` unconditionally
    and kept by advancing ``w``; every store lands at or before the input
    position, so it stays inside this document's ``e - s`` bytes.  Two table
    lookups classify and lowercase a byte (fewer branches than the arithmetic).
    """
    p = s
    while p < e and _ASCII_SPACE[buf[p]]:
        p += 1
    w = w0
    pending = np.int64(0)
    for q in range(p, e):
        b = buf[q]
        sp = np.int64(_ASCII_SPACE[b])
        emit_sep = pending & (1 - sp)
        dst[w] = 32
        dst[w + emit_sep] = _ASCII_LOWER[b]
        w += emit_sep + 1 - sp
        pending = sp
    return w - w0


@kernel
def _normalize_into(buf, s, e, low, collapse, dst, w0):
    """Write the byte-level normalization of ``buf[s:e]`` to ``dst[w0:]``; returns
    its length (never more than ``e - s``).

    ASCII letters are lowercased if ``low``; with ``collapse`` the result is
    ``" ".join(x.split())`` of the text (Python's whitespace, see :func:`_space_len`).
    """
    if low and collapse:
        return _normalize_ascii_into(buf, s, e, dst, w0)
    w = w0
    pending = False
    p = s
    while p < e:
        b = buf[p]
        if 32 < b < 0x80:
            # The common case: a visible ASCII character.
            if pending:
                dst[w] = 32
                w += 1
                pending = False
            if low and 65 <= b <= 90:
                b = b + 32
            dst[w] = b
            w += 1
            p += 1
            continue
        if collapse:
            sl = _space_len(buf, p, e)
            if sl > 0:
                pending = w > w0
                p += sl
                continue
        if pending:
            dst[w] = 32
            w += 1
            pending = False
        dst[w] = b
        w += 1
        p += 1
    return w - w0


@kernel(parallel=True)
def normalize_bytes(buf, offsets, lower, collapse):
    """The byte-level part of normalization for a whole batch (see
    :func:`_normalize_into`); returns ``(out, out_offsets)``, documents contiguous."""
    n = offsets.shape[0] - 1
    scratch = np.empty(max(offsets[n] - offsets[0], 1), dtype=np.uint8)
    base = offsets[0]
    lengths = np.zeros(n, dtype=np.int64)
    for d in prange(n):
        lengths[d] = _normalize_into(
            buf, offsets[d], offsets[d + 1], lower[d], collapse, scratch, offsets[d] - base
        )
    out_off = np.zeros(n + 1, dtype=np.int64)
    for d in range(n):
        out_off[d + 1] = out_off[d] + lengths[d]
    out = np.empty(out_off[n], dtype=np.uint8)
    for d in prange(n):
        a = offsets[d] - base
        b = out_off[d]
        for i in range(lengths[d]):
            out[b + i] = scratch[a + i]
    return out, out_off


_HASH_BLOCKS = 512


# nogil: batch runs hash in a worker thread while the main thread reads input.
@kernel(parallel=True, nogil=True)
def hash_shingles(
    buf,
    offsets,
    lower,
    collapse,
    max_bytes,
    kind,
    k,
    max_sh,
    algo,
    seed,
    k0,
    k1,
    word_table,
    bound_off,
    out,
):
    """Normalize (byte level), shingle, hash and reduce each document of a batch to
    a sorted set of unique shingle hashes.

    Document ``d`` is ``buf[offsets[d]:offsets[d + 1]]``; it is first passed through
    :func:`_normalize_into` (``lower[d]``, ``collapse``) unless neither applies.  A
    document whose normalized length exceeds ``max_bytes`` gets no shingle and is
    flagged.  Returns ``(hashes, counts_unique, counts_raw, truncated, content_hash,
    normalized_lengths, too_large)``; ``hashes`` is ``out`` (at least ``bound_off[n]``
    entries, given by the caller so that successive batches reuse one buffer instead
    of faulting in fresh pages) in the padded CSR ``bound_off``.  Work is split
    into blocks of documents so that scratch is allocated per block, not per
    document.
    """
    n = offsets.shape[0] - 1
    counts_unique = np.zeros(n, dtype=np.int64)
    counts_raw = np.zeros(n, dtype=np.int64)
    truncated = np.zeros(n, dtype=np.bool_)
    content = np.zeros(n, dtype=np.uint64)
    norm_len = np.zeros(n, dtype=np.int64)
    too_large = np.zeros(n, dtype=np.bool_)
    nblocks = min(n, _HASH_BLOCKS)
    for blk in prange(nblocks):
        d0 = blk * n // nblocks
        d1 = (blk + 1) * n // nblocks
        cap = 1
        for d in range(d0, d1):
            cap = max(cap, offsets[d + 1] - offsets[d] + 1)
        nbuf = np.empty(cap, dtype=np.uint8)
        pa = np.empty(cap, dtype=np.int64)
        pb = np.empty(cap, dtype=np.int64)
        th = np.empty(cap, dtype=np.uint64)
        seg = np.empty(min(cap, max_sh + 1), dtype=np.uint64)
        cnts = bucket_counts(seg.shape[0])
        # Borrowed arrays for the helpers called per document (owned ones cost
        # an atomic reference-count update per array and call).
        b_buf = _borrow(buf)
        b_table = _borrow(word_table)
        b_out = _borrow(out)
        b_nbuf = _borrow(nbuf)
        b_pa = _borrow(pa)
        b_pb = _borrow(pb)
        b_th = _borrow(th)
        b_seg = _borrow(seg)
        b_cnts = _borrow(cnts)
        for d in range(d0, d1):
            s = offsets[d]
            e = offsets[d + 1]
            # Every document is hashed from ``nbuf``: an array variable bound to
            # either source cost reference counting on every document.
            if lower[d] or collapse:
                e = _normalize_into(b_buf, s, e, lower[d], collapse, b_nbuf, 0)
            else:
                for i in range(e - s):
                    nbuf[i] = buf[s + i]
                e = e - s
            norm_len[d] = e
            if e > max_bytes:
                too_large[d] = True
                continue
            cnt, tr = _doc_shingles(
                b_nbuf, 0, e, kind, k, max_sh, algo, seed, k0, k1, b_table, b_out, bound_off[d],
                b_pa, b_pb, b_th,
            )
            content[d] = hash_span(
                b_nbuf, 0, e, algo, seed ^ U64(0x9E3779B97F4A7C15), k0 ^ U64(1), k1
            )
            o = bound_off[d]
            counts_raw[d] = cnt
            truncated[d] = tr
            if cnt > 0:
                sort_hashes_at(b_out, o, cnt, b_seg, b_cnts)
                u = 1
                out[o] = seg[0]
                for i in range(1, cnt):
                    if seg[i] != seg[i - 1]:
                        out[o + u] = seg[i]
                        u += 1
                counts_unique[d] = u
    return out, counts_unique, counts_raw, truncated, content, norm_len, too_large


# Not parallel itself: the copy it calls is (numba warned that it found nothing
# to parallelize here, on every first compile).
@kernel(nogil=True)
def compact_csr(padded, bound_off, counts, indptr):
    out = np.empty(indptr[counts.shape[0]], dtype=padded.dtype)
    _compact_csr_into(padded, bound_off, counts, indptr, out)
    return out


def compact_csr_into(padded: Any, bound_off: Any, counts: Any, indptr: Any, out: Any) -> None:
    """Copy document ``d``'s ``counts[d]`` values from ``padded[bound_off[d]:]``
    to ``out[indptr[d]:]`` (``out`` has ``indptr[n]`` entries); documents are
    shared out over threads."""
    split_rows(
        counts.shape[0],
        lambda lo, hi: _compact_csr_into(
            padded, bound_off[lo:hi], counts[lo:hi], indptr[lo:hi], out
        ),
        grain=8192,
    )


@kernel(nogil=True)
def _compact_csr_into(padded, bound_off, counts, indptr, out):
    n = counts.shape[0]
    for d in range(n):
        a = bound_off[d]
        b = indptr[d]
        for i in range(counts[d]):
            out[b + i] = padded[a + i]

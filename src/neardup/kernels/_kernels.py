"""Compiled hot kernels (numba, ``cache=True``).

Everything here works on whole batches held in flat numpy arrays (CSR layout:
``data[indptr[d]:indptr[d + 1]]`` belongs to document ``d``).  No Python object is
created per shingle.  The public modules wrap these functions with typed, validated
entry points; nothing in this module validates its arguments.

All arithmetic is on ``uint64`` and wraps modulo 2**64 by design: every constant
and shift amount is an explicit ``np.uint64`` because numba promotes mixed
signed/unsigned integer arithmetic to float64, which would silently lose bits.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir
from numba import get_num_threads, njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.typed import Dict

from neardup.kernels import _unionfind as UF

U64 = np.uint64
U32MAX = np.uint64(0xFFFFFFFF)

# XXH64's primes; P1, P2 and P4 also mix the chains of band keys (here and in _vkernels).
P1 = np.uint64(11400714785074694791)
P2 = np.uint64(14029467366897019727)
P3 = np.uint64(1609587929392839161)
P4 = np.uint64(9650029242287828579)
P5 = np.uint64(2870177450012600261)

ALGO_XXH64 = 0
ALGO_SIPHASH24 = 1

KIND_BYTE = 0
KIND_CHAR = 1
KIND_WORD = 2


@njit(inline="always", cache=True)
def _rotl(x, r):
    return (x << U64(r)) | (x >> U64(64 - r))


@njit(inline="always", cache=True)
def _read_le(buf, p, nbytes):
    """The little-endian unsigned integer in ``buf[p:p + nbytes]`` (at most 8 bytes)."""
    v = U64(0)
    for i in range(nbytes):
        v |= U64(buf[p + i]) << U64(8 * i)
    return v


@njit(inline="always", cache=True)
def _xxround(acc, inp):
    acc = acc + inp * P2
    acc = _rotl(acc, 31)
    return acc * P1


@njit(inline="always", cache=True)
def _xxmerge(acc, val):
    val = _xxround(U64(0), val)
    acc = acc ^ val
    return acc * P1 + P4


@njit(cache=True)
def xxh64(buf, start, length, seed):
    """XXH64 of ``buf[start:start+length]`` (bit-identical to the reference)."""
    p = start
    end = start + length
    seed = U64(seed)
    if length >= 32:
        v1 = seed + P1 + P2
        v2 = seed + P2
        v3 = seed
        v4 = seed - P1
        while p + 32 <= end:
            v1 = _xxround(v1, _read_le(buf, p, 8))
            v2 = _xxround(v2, _read_le(buf, p + 8, 8))
            v3 = _xxround(v3, _read_le(buf, p + 16, 8))
            v4 = _xxround(v4, _read_le(buf, p + 24, 8))
            p += 32
        h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
        h = _xxmerge(h, v1)
        h = _xxmerge(h, v2)
        h = _xxmerge(h, v3)
        h = _xxmerge(h, v4)
    else:
        h = seed + P5
    h = h + U64(length)
    while p + 8 <= end:
        k1 = _xxround(U64(0), _read_le(buf, p, 8))
        h = h ^ k1
        h = _rotl(h, 27) * P1 + P4
        p += 8
    if p + 4 <= end:
        h = h ^ (_read_le(buf, p, 4) * P1)
        h = _rotl(h, 23) * P2 + P3
        p += 4
    while p < end:
        h = h ^ (U64(buf[p]) * P5)
        h = _rotl(h, 11) * P1
        p += 1
    h = h ^ (h >> U64(33))
    h = h * P2
    h = h ^ (h >> U64(29))
    h = h * P3
    h = h ^ (h >> U64(32))
    return h


@njit(inline="always", cache=True)
def _sipround(v0, v1, v2, v3):
    """One SipRound of the four state words."""
    v0 += v1
    v1 = _rotl(v1, 13)
    v1 ^= v0
    v0 = _rotl(v0, 32)
    v2 += v3
    v3 = _rotl(v3, 16)
    v3 ^= v2
    v0 += v3
    v3 = _rotl(v3, 21)
    v3 ^= v0
    v2 += v1
    v1 = _rotl(v1, 17)
    v1 ^= v2
    v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


@njit(cache=True)
def siphash24(buf, start, length, k0, k1):
    """SipHash-2-4 (Aumasson & Bernstein) of ``buf[start:start+length]``: a keyed PRF."""
    k0 = U64(k0)
    k1 = U64(k1)
    v0 = k0 ^ U64(0x736F6D6570736575)
    v1 = k1 ^ U64(0x646F72616E646F6D)
    v2 = k0 ^ U64(0x6C7967656E657261)
    v3 = k1 ^ U64(0x7465646279746573)
    end = start + length
    p = start
    nrounds_total = length // 8 + 1
    for blk in range(nrounds_total):
        if blk < length // 8:
            m = _read_le(buf, p, 8)
            p += 8
        else:
            m = U64(length & 0xFF) << U64(56)
            i = 0
            while p + i < end:
                m |= U64(buf[p + i]) << U64(8 * i)
                i += 1
        v3 ^= m
        for _ in range(2):
            v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
        v0 ^= m
    v2 ^= U64(0xFF)
    for _ in range(4):
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3


@njit(inline="always", cache=True)
def hash_span(buf, start, length, algo, seed, k0, k1):
    if algo == ALGO_SIPHASH24:
        return siphash24(buf, start, length, k0, k1)
    return xxh64(buf, start, length, seed)


@njit(inline="always", cache=True)
def fmix64(h):
    """MurmurHash3's 64-bit finalizer: a bijective avalanche mix."""
    h = h ^ (h >> U64(33))
    h = h * U64(0xFF51AFD7ED558CCD)
    h = h ^ (h >> U64(33))
    h = h * U64(0xC4CEB9FE1A85EC53)
    h = h ^ (h >> U64(33))
    return h


@njit(inline="always", cache=True)
def band_start(seed, bnd):
    """The first link of band ``bnd``'s key chain (``seed`` a uint64)."""
    return fmix64(seed ^ (U64(bnd + 1) * P1))


@njit(inline="always", cache=True)
def band_step(h, v):
    """Key chain ``h`` after one more uint64 value ``v``."""
    return fmix64((h ^ v) * P2 + P4)


@njit(inline="always", cache=True)
def combine_tokens(th, start, span):
    """Hash of the word n-gram whose token hashes are ``th[start:start+span]``.

    ``acc = fmix64((acc ^ t) * P1 + P4)`` per token from ``acc = P5 ^ span``: each
    step is a bijection of ``acc`` for a fixed token, so n-grams that differ only in
    their last token never collide, and distinct n-grams collide with probability
    about 2**-64 when the token hashes are unpredictable (the keyed scheme).
    """
    acc = P5 ^ U64(span)
    for t in range(start, start + span):
        acc = fmix64((acc ^ th[t]) * P1 + P4)
    return acc


@njit(cache=True)
def _utf8_len(b0):
    if b0 < 0x80:
        return 1
    if b0 < 0xE0:
        return 2
    if b0 < 0xF0:
        return 3
    return 4


@njit(cache=True)
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


@njit(inline="always", cache=True)
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


@njit(inline="always", cache=True)
def _utf8_tokens(buf, s, e, word_table, need, algo, seed, k0, k1, th):
    """Tokens of UTF-8 text: each is hashed into ``th`` (the first ``need``) as
    soon as its end is found, while its bytes are in cache; returns the count."""
    nw = word_table.shape[0]
    ntok = 0
    p = s
    while p < e:
        b0 = buf[p]
        if b0 < 0x80:
            if word_table[b0] == 0:
                p += 1
                continue
            n = 1
        else:
            n = _utf8_len(b0)
            cp = _utf8_decode(buf, p, n)
            if not (cp < nw and word_table[cp] != 0):
                p += n
                continue
        t0 = p
        p += n
        while p < e:
            b0 = buf[p]
            if b0 < 0x80:
                if word_table[b0] == 0:
                    break
                p += 1
            else:
                n = _utf8_len(b0)
                cp = _utf8_decode(buf, p, n)
                if not (cp < nw and word_table[cp] != 0):
                    break
                p += n
        t1 = p if p < e else e
        if ntok < need:
            th[ntok] = hash_span(buf, t0, t1 - t0, algo, seed, k0, k1)
        ntok += 1
    return ntok


@njit(inline="always", cache=True)
def _shingle_count(units, k, max_sh):
    """(shingles, truncated, units per shingle) of ``units`` > 0 bytes, characters or
    tokens: a shorter text than ``k`` units is one shingle of all of them."""
    nsh = units - k + 1 if units >= k else 1
    trunc = nsh > max_sh
    if trunc:
        nsh = max_sh
    return nsh, trunc, k if units >= k else units


@njit(cache=True)
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
    # KIND_WORD: maximal runs of word characters (Python's ``\w`` for str).
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
    acc = out[o : o + nsh]
    init = P5 ^ U64(span)
    for i in range(nsh):
        acc[i] = init
    for t in range(span):
        for i in range(nsh):
            acc[i] = fmix64((acc[i] ^ th[i + t]) * P1 + P4)
    return nsh, trunc


@njit(inline="always", cache=True)
def _bucket_starts(keys):
    """Start offset of each top-bits bucket (about one key per bucket) and the shift."""
    m = keys.shape[0]
    bits = 1
    while (1 << bits) < m:
        bits += 1
    nb = 1 << bits
    counts = np.zeros(nb + 1, dtype=np.int64)
    sh = U64(64 - bits)
    for i in range(m):
        counts[np.int64(keys[i] >> sh) + 1] += 1
    for b in range(nb):
        counts[b + 1] += counts[b]
    return counts, sh


@njit(cache=True)
def sort_hashes(src, dst):
    """Sort uniformly distributed 64-bit hashes of ``src`` into ``dst``.

    A counting pass on the top bits puts each value in its bucket (about one value
    per bucket), then one insertion pass fixes the order inside buckets: expected
    O(m), where numba's quicksort is O(m log m) with poor locality.  Inputs
    that are far from uniform (crafted collisions of an unkeyed hash) exceed the
    work budget of the insertion pass and fall back to ``np.sort``.
    """
    m = src.shape[0]
    if m < 2:
        for i in range(m):
            dst[i] = src[i]
        return
    counts, sh = _bucket_starts(src)
    for i in range(m):
        bucket = np.int64(src[i] >> sh)
        dst[counts[bucket]] = src[i]
        counts[bucket] += 1
    work = 0
    for i in range(1, m):
        x = dst[i]
        j = i - 1
        while j >= 0 and dst[j] > x:
            dst[j + 1] = dst[j]
            j -= 1
            work += 1
        dst[j + 1] = x
        if work > 8 * m:
            dst[:] = np.sort(src)
            return


@njit(cache=True)
def argsort_keys(keys):
    """Stable argsort of uniformly distributed 64-bit keys (equal keys keep index order).

    Same idea as :func:`sort_hashes`: indices are scattered into buckets by the top
    bits of their key in increasing index order, then one insertion pass that moves
    an entry only past strictly greater keys restores key order and keeps ties in
    index order.  Skewed keys exceed the work budget and fall back to a mergesort.
    """
    m = keys.shape[0]
    order = np.empty(m, dtype=np.int64)
    if m < 2:
        for i in range(m):
            order[i] = i
        return order
    counts, sh = _bucket_starts(keys)
    for i in range(m):
        bucket = np.int64(keys[i] >> sh)
        order[counts[bucket]] = i
        counts[bucket] += 1
    work = 0
    for i in range(1, m):
        x = order[i]
        kx = keys[x]
        j = i - 1
        while j >= 0 and keys[order[j]] > kx:
            order[j + 1] = order[j]
            j -= 1
            work += 1
        order[j + 1] = x
        if work > 8 * m:
            return np.argsort(keys, kind="mergesort")
    return order


@njit(inline="always", cache=True)
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


@njit(inline="always", cache=True)
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


@njit(inline="always", cache=True)
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


@njit(parallel=True, cache=True)
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
@njit(parallel=True, cache=True, nogil=True)
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
        for d in range(d0, d1):
            s = offsets[d]
            e = offsets[d + 1]
            src = buf
            if lower[d] or collapse:
                e = _normalize_into(buf, s, e, lower[d], collapse, nbuf, 0)
                s = 0
                src = nbuf
            norm_len[d] = e - s
            if e - s > max_bytes:
                too_large[d] = True
                continue
            o = bound_off[d]
            cnt, tr = _doc_shingles(
                src, s, e, kind, k, max_sh, algo, seed, k0, k1, word_table, out, o, pa, pb, th
            )
            counts_raw[d] = cnt
            truncated[d] = tr
            content[d] = hash_span(
                src, s, e - s, algo, seed ^ U64(0x9E3779B97F4A7C15), k0 ^ U64(1), k1
            )
            if cnt > 0:
                sort_hashes(out[o : o + cnt], seg[:cnt])
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
@njit(cache=True, nogil=True)
def compact_csr(padded, bound_off, counts, indptr):
    out = np.empty(indptr[counts.shape[0]], dtype=padded.dtype)
    compact_csr_into(padded, bound_off, counts, indptr, out)
    return out


@njit(parallel=True, cache=True, nogil=True)
def compact_csr_into(padded, bound_off, counts, indptr, out):
    """Copy document ``d``'s ``counts[d]`` values from ``padded[bound_off[d]:]``
    to ``out[indptr[d]:]`` (``out`` has ``indptr[n]`` entries)."""
    n = counts.shape[0]
    for d in prange(n):
        a = bound_off[d]
        b = indptr[d]
        for i in range(counts[d]):
            out[b + i] = padded[a + i]


# nogil: a batch run finds exact duplicates (Python) while signatures are computed.
@njit(parallel=True, cache=True, nogil=True)
def minhash_kperm(hashes, indptr, a, b, out):
    """Classic k-permutation MinHash with multiply-add-shift permutations.

    Row ``p`` is ``min((a[p] * x + b[p]) mod 2**64 >> 32)`` over the document's
    shingle hashes ``x``; ``a[p]`` is odd.  Documents with no shingle keep 0xFFFFFFFF.
    """
    n = indptr.shape[0] - 1
    k = a.shape[0]
    for d in prange(n):
        row = np.full(k, U32MAX, dtype=np.uint64)
        for i in range(indptr[d], indptr[d + 1]):
            x = hashes[i]
            for p in range(k):
                v = (a[p] * x + b[p]) >> U64(32)
                if v < row[p]:
                    row[p] = v
        for p in range(k):
            out[d, p] = np.uint32(row[p])


@njit(inline="always", cache=True)
def _fastrange(v32, k):
    return np.int64((v32 * U64(k)) >> U64(32))


@njit(parallel=True, cache=True, nogil=True)
def minhash_oph(hashes, indptr, k, seed, out):
    """One-permutation MinHash with optimal densification (Shrivastava, 2017).

    Each shingle hash is mixed once; its high 32 bits pick a bin and its low 32
    bits are the value.  Empty bins copy the value of the first non-empty bin on a
    probe sequence that depends only on (seed, bin, attempt), so that all documents
    use the same sequence and a copied bin still collides with probability J.
    """
    n = indptr.shape[0] - 1
    seed = U64(seed)
    for d in prange(n):
        row = np.full(k, U32MAX + U64(1), dtype=np.uint64)
        nonempty = 0
        for i in range(indptr[d], indptr[d + 1]):
            v = fmix64(hashes[i] ^ seed)
            j = _fastrange(v >> U64(32), k)
            val = v & U32MAX
            if row[j] > U32MAX:
                nonempty += 1
                row[j] = val
            elif val < row[j]:
                row[j] = val
        if nonempty == 0:
            for j in range(k):
                out[d, j] = np.uint32(U32MAX)
            continue
        for j in range(k):
            if row[j] <= U32MAX:
                out[d, j] = np.uint32(row[j])
                continue
            attempt = U64(0)
            while True:
                attempt += U64(1)
                pv = fmix64(seed ^ fmix64((U64(j) << U64(32)) | attempt))
                src = _fastrange(pv >> U64(32), k)
                if row[src] <= U32MAX:
                    out[d, j] = np.uint32(row[src])
                    break


@njit(parallel=True, cache=True)
def band_keys(sig, band_lo, band_hi, rows, seed, out):
    """64-bit key per (document, band) for bands [band_lo, band_hi): a mixed chain
    over the band's rows.  ``out`` is (n, band_hi - band_lo)."""
    n = sig.shape[0]
    seed = U64(seed)
    nb = band_hi - band_lo
    init = np.empty(nb, dtype=np.uint64)
    for b in range(nb):
        init[b] = band_start(seed, band_lo + b)
    for d in prange(n):
        # The bands' chains advance together, a row at a time: independent
        # multiplies in vector lanes instead of one latency-bound chain per band
        # (same keys).
        for b in range(nb):
            out[d, b] = init[b]
        for j in range(rows):
            for b in range(nb):
                out[d, b] = band_step(out[d, b], U64(sig[d, (band_lo + b) * rows + j]))


@njit(cache=True)
def intersect_count(a, a0, a1, b, b0, b1):
    i = a0
    j = b0
    c = 0
    while i < a1 and j < b1:
        x = a[i]
        y = b[j]
        if x == y:
            c += 1
            i += 1
            j += 1
        elif x < y:
            i += 1
        else:
            j += 1
    return c


@njit(inline="always", cache=True)
def _row_matches(sig, a, b):
    """Signature rows on which documents ``a`` and ``b`` agree."""
    matches = 0
    for p in range(sig.shape[1]):
        if sig[a, p] == sig[b, p]:
            matches += 1
    return matches


@njit(cache=True)
def grow_array(arr, need):
    if need <= arr.shape[0]:
        return arr
    cap = max(need, 2 * arr.shape[0])
    out = np.empty(cap, dtype=arr.dtype)
    out[: arr.shape[0]] = arr
    return out


MODE_CANDIDATES = 0
MODE_ALL_EDGES = 1
MODE_FOREST = 2


@njit(inline="always", cache=True)
def pair_window(jj, start, max_cand):
    """The bucket slots ``[lo, jj)`` that slot ``jj`` of a bucket starting at ``start``
    is paired with (its ``max_cand`` nearest predecessors), and how many slots that
    cap cut off: (lo, cut)."""
    lo = jj - max_cand
    if lo < start:
        return start, 0
    return lo, lo - start


@njit(inline="always", cache=True)
def ordered(i, j):
    """The pair ``(i, j)`` smaller first."""
    if i < j:
        return i, j
    return j, i


@njit(cache=True)
def _new_seen():
    return Dict.empty(key_type=types.int64, value_type=types.int8)


def new_seen() -> Dict:
    """The pair memo that :func:`band_join` shares across calls (band rounds)."""
    # Made by a cached compiled function: ``Dict.empty`` called from Python compiles
    # its constructor afresh in every process, a cost paid by every run.
    return _new_seen()


_RUN_START = np.uint64(1 << 63)
_RUN_DOC = np.uint64((1 << 63) - 1)


_RUN_TOP_BITS = 10
"""First-level buckets of the band sort: 1024 write streams and counters that stay
in L1, then a second level sized to about one key per bucket within each."""


@njit(inline="always", cache=True)
def _sort_keyed(ks, ix, s, e):
    """Stable sort of ``ks[s:e]`` carrying ``ix`` along (insertion for the few keys
    a bucket usually holds; a skewed bucket falls back to a stable mergesort)."""
    if e - s > 32:
        o = np.argsort(ks[s:e], kind="mergesort")
        ks[s:e] = ks[s:e][o]
        ix[s:e] = ix[s:e][o]
        return
    for i in range(s + 1, e):
        kx = ks[i]
        xx = ix[i]
        j = i - 1
        while j >= s and ks[j] > kx:
            ks[j + 1] = ks[j]
            ix[j + 1] = ix[j]
            j -= 1
        ks[j + 1] = kx
        ix[j + 1] = xx


@njit(parallel=True, cache=True)
def _band_runs(keys, active, threads):
    """Sort each band's keys and write its buckets of two or more members back into
    the band's column of ``keys``; returns the number of entries written per band.

    Column ``bnd`` then holds, bucket after bucket in ascending key order, the
    members' document numbers in index order, the first of each bucket tagged with
    ``_RUN_START``.  Each band reads only its own column before overwriting it, so
    bands run in parallel; the serial walk (:func:`_join_runs`) then touches only
    the buckets that can yield pairs instead of every document of every band.

    The sort is a stable two-level bucket sort on the keys' top bits (they are
    uniform hashes): 1024 buckets first, then about one key per sub-bucket, with
    all scratch in a few arrays per thread.  One level of ~n buckets would miss the
    caches on every key.  Keys laid
    out band-major (``order="F"``) are read sequentially.  ``threads`` bands are
    sorted at once (numba's thread count, passed in: reading it in here would keep
    the kernel out of numba's cache).
    """
    n = keys.shape[0]
    nb = keys.shape[1]
    idx = np.empty(n, dtype=np.int64)
    m = 0
    for d in range(n):
        if active[d]:
            idx[m] = d
            m += 1
    counts = np.zeros(nb, dtype=np.int64)
    top = 1 << _RUN_TOP_BITS
    sh1 = U64(64 - _RUN_TOP_BITS)
    max_sub_bits = 20  # 8 MiB of counters at most, whatever a skewed bucket holds
    lanes = max(1, min(nb, threads))
    for lane in prange(lanes):
        st1 = np.empty(top + 1, dtype=np.int64)
        fill = np.empty(top, dtype=np.int64)
        ks = np.empty(m, dtype=np.uint64)
        ix = np.empty(m, dtype=np.int64)
        ks2 = np.empty(m, dtype=np.uint64)
        ix2 = np.empty(m, dtype=np.int64)
        st2 = np.empty(1, dtype=np.int64)
        fill2 = np.empty(1, dtype=np.int64)
        for bnd in range(lane, nb, lanes):
            st1[:] = 0
            for i in range(m):
                st1[np.int64(keys[idx[i], bnd] >> sh1) + 1] += 1
            for b in range(top):
                st1[b + 1] += st1[b]
            fill[:] = st1[:top]
            for i in range(m):
                d = idx[i]
                kv = keys[d, bnd]
                slot = np.int64(kv >> sh1)
                p = fill[slot]
                ks[p] = kv
                ix[p] = d
                fill[slot] = p + 1
            w = 0
            for bk in range(top):
                s = st1[bk]
                e = st1[bk + 1]
                if e - s < 2:
                    continue
                b2 = 1
                while (1 << b2) < e - s and b2 < max_sub_bits:
                    b2 += 1
                sub = 1 << b2
                if st2.shape[0] < sub + 1:
                    st2 = np.empty(sub + 1, dtype=np.int64)
                    fill2 = np.empty(sub, dtype=np.int64)
                sh2 = U64(64 - _RUN_TOP_BITS - b2)
                mask = U64(sub - 1)
                st2[: sub + 1] = 0
                for i in range(s, e):
                    st2[np.int64((ks[i] >> sh2) & mask) + 1] += 1
                for b in range(sub):
                    st2[b + 1] += st2[b]
                    fill2[b] = st2[b] + s
                for i in range(s, e):
                    slot = np.int64((ks[i] >> sh2) & mask)
                    p = fill2[slot]
                    ks2[p] = ks[i]
                    ix2[p] = ix[i]
                    fill2[slot] = p + 1
                for b in range(sub):
                    s2 = st2[b] + s
                    e2 = st2[b + 1] + s
                    if e2 - s2 < 2:
                        continue
                    _sort_keyed(ks2, ix2, s2, e2)
                    t = s2
                    while t < e2:
                        u = t + 1
                        while u < e2 and ks2[u] == ks2[t]:
                            u += 1
                        if u - t >= 2:
                            keys[w, bnd] = U64(ix2[t]) | _RUN_START
                            w += 1
                            for v in range(t + 1, u):
                                keys[w, bnd] = U64(ix2[v])
                                w += 1
                        t = u
            counts[bnd] = w
    return counts


@njit(cache=True)
def _join_runs(
    runs, counts, band_lo, sig, data, indptr, threshold, max_cand, mode, use_estimate, parent, seen
):
    n = runs.shape[0]
    nb = runs.shape[1]
    k = sig.shape[1]
    cap = 1024
    ea = np.empty(cap, dtype=np.int64)
    eb = np.empty(cap, dtype=np.int64)
    eband = np.empty(cap, dtype=np.int64)
    einter = np.empty(cap, dtype=np.int64)
    eunion = np.empty(cap, dtype=np.int64)
    ematch = np.empty(cap, dtype=np.int64)
    ne = 0
    n_cand = 0
    n_ver = 0
    overflow = 0
    skipped = 0
    for bnd in range(nb):
        cnt = counts[bnd]
        start = 0
        while start < cnt:
            stop = start + 1
            while stop < cnt and (runs[stop, bnd] & _RUN_START) == U64(0):
                stop += 1
            for jj in range(start + 1, stop):
                j = np.int64(runs[jj, bnd] & _RUN_DOC)
                lo, cut = pair_window(jj, start, max_cand)
                overflow += cut
                for ii in range(jj - 1, lo - 1, -1):
                    a, b = ordered(np.int64(runs[ii, bnd] & _RUN_DOC), j)
                    if mode == MODE_FOREST and UF.find(parent, a) == UF.find(parent, b):
                        skipped += 1
                        continue
                    pk = np.int64(a) * np.int64(n) + np.int64(b)
                    if pk in seen:
                        continue
                    n_cand += 1
                    inter = -1
                    uni = -1
                    matches = -1
                    if mode == MODE_CANDIDATES:
                        ok = True
                    elif use_estimate:
                        n_ver += 1
                        matches = _row_matches(sig, a, b)
                        ok = matches >= threshold * k
                    else:
                        n_ver += 1
                        inter = intersect_count(
                            data, indptr[a], indptr[a + 1], data, indptr[b], indptr[b + 1]
                        )
                        uni = (indptr[a + 1] - indptr[a]) + (indptr[b + 1] - indptr[b]) - inter
                        ok = uni > 0 and inter / uni >= threshold
                    if mode != MODE_FOREST or not ok:
                        seen[pk] = np.int8(1)
                    if ok:
                        if matches < 0:
                            # Only kept pairs report an estimate: most candidates
                            # that fail exact verification never need one.
                            matches = _row_matches(sig, a, b)
                        if mode != MODE_CANDIDATES:
                            UF.union(parent, a, b)
                        if ne >= ea.shape[0]:
                            ea = grow_array(ea, ne + 1)
                            eb = grow_array(eb, ne + 1)
                            eband = grow_array(eband, ne + 1)
                            einter = grow_array(einter, ne + 1)
                            eunion = grow_array(eunion, ne + 1)
                            ematch = grow_array(ematch, ne + 1)
                        ea[ne] = a
                        eb[ne] = b
                        eband[ne] = band_lo + bnd
                        einter[ne] = inter
                        eunion[ne] = uni
                        ematch[ne] = matches
                        ne += 1
            start = stop
    return (
        ea[:ne],
        eb[:ne],
        eband[:ne],
        einter[:ne],
        eunion[:ne],
        ematch[:ne],
        n_cand,
        n_ver,
        overflow,
        skipped,
    )


def band_join(
    keys: Any,
    band_lo: int,
    active: Any,
    sig: Any,
    data: Any,
    indptr: Any,
    threshold: float,
    max_cand: int,
    mode: int,
    use_estimate: bool,
    parent: Any,
    seen: Any,
) -> Any:
    """Walk the buckets of bands [band_lo, band_lo + keys.shape[1]) and verify pairs.

    ``keys`` is (n, bands in this round) uint64, fastest laid out band-major
    (``order="F"``), and is consumed (overwritten with the buckets, see
    :func:`_band_runs`); only rows with ``active`` set take
    part.  ``parent`` (union-find) and ``seen`` (pairs already handled) carry over
    from one round to the next, so bands may be processed a few at a time.  Within a
    bucket, members are visited in index order and each is paired with at most
    ``max_cand`` of the bucket's preceding members (nearest first); pairs cut by the
    cap are counted in ``overflow``.  Buckets are visited band by band in ascending
    key order.  A pair is handled once, at the first band in which it collides.
    ``mode`` selects what is returned:

    * MODE_CANDIDATES: every distinct candidate pair, unverified;
    * MODE_ALL_EDGES: every candidate pair that verifies (score >= threshold);
    * MODE_FOREST: like ALL_EDGES but pairs whose ends are already connected are
      skipped; the connected components are identical (skipping an edge inside a
      component cannot change components) and the edges form a spanning forest.

    Returns (a, b, band, inter, union, matches, n_candidates, n_verified,
    overflow, skipped_connected).  ``inter``/``union`` are -1 under estimate
    verification.
    """
    # Sorting the bands is independent per band (parallel); the walk is serial
    # because union-find and the pair memo make its result order-dependent.  Split
    # this way the walk costs O(bucketed entries) instead of O(n) per band.
    counts = _band_runs(keys, active, get_num_threads())
    return _join_runs(
        keys,
        counts,
        band_lo,
        sig,
        data,
        indptr,
        threshold,
        max_cand,
        mode,
        use_estimate,
        parent,
        seen,
    )


@njit(parallel=True, cache=True)
def jaccard_pairs(data, indptr, a, b, inter_out, union_out):
    for t in prange(a.shape[0]):
        i = a[t]
        j = b[t]
        c = intersect_count(data, indptr[i], indptr[i + 1], data, indptr[j], indptr[j + 1])
        inter_out[t] = c
        union_out[t] = (indptr[i + 1] - indptr[i]) + (indptr[j + 1] - indptr[j]) - c


@njit(inline="always", cache=True)
def _overlap(data, indptr, i, j):
    """(intersection, union) of the sets of documents ``i`` and ``j``; (0, 0) when
    either is empty (such a pair is never a duplicate)."""
    la = indptr[i + 1] - indptr[i]
    lb = indptr[j + 1] - indptr[j]
    if la == 0 or lb == 0:
        return 0, 0
    inter = intersect_count(data, indptr[i], indptr[i + 1], data, indptr[j], indptr[j + 1])
    return inter, la + lb - inter


@njit(parallel=True, cache=True)
def brute_force_counts(data, indptr, threshold, counts):
    """Count, per left document i, the pairs (i, j > i) with Jaccard >= threshold."""
    n = indptr.shape[0] - 1
    for i in prange(n):
        c = 0
        for j in range(i + 1, n):
            inter, uni = _overlap(data, indptr, i, j)
            if uni > 0 and inter / uni >= threshold:
                c += 1
        counts[i] = c


@njit(parallel=True, cache=True)
def brute_force_fill(data, indptr, threshold, offs, out_b, out_inter, out_union):
    n = indptr.shape[0] - 1
    for i in prange(n):
        w = offs[i]
        for j in range(i + 1, n):
            inter, uni = _overlap(data, indptr, i, j)
            if uni > 0 and inter / uni >= threshold:
                out_b[w] = j
                out_inter[w] = inter
                out_union[w] = uni
                w += 1


@njit(cache=True)
def rank_tokens(data):
    """Rank of every value of ``data`` among its distinct values, ordered by how
    often each occurs, then by value (the AllPairs token order: rare first).

    The same ranks as ``np.unique`` + ``np.lexsort((uniq, counts))``, in O(m) for
    uniformly distributed hashes: a stable bucket argsort (:func:`argsort_keys`)
    finds the distinct values in ascending order, and a counting sort on their
    counts keeps that order among equal counts.
    """
    m = data.shape[0]
    perm = argsort_keys(data)
    uid = np.empty(m, np.int64)
    counts = np.zeros(m, np.int64)
    nu = 0
    for j in range(m):
        i = perm[j]
        if j == 0 or data[i] != data[perm[j - 1]]:
            nu += 1
        counts[nu - 1] += 1
        uid[i] = nu - 1
    maxc = 0
    for u in range(nu):
        maxc = max(maxc, counts[u])
    start = np.zeros(maxc + 2, np.int64)
    for u in range(nu):
        start[counts[u] + 1] += 1
    for c in range(maxc + 1):
        start[c + 1] += start[c]
    rank = np.empty(nu, np.int64)
    for u in range(nu):
        c = counts[u]
        rank[u] = start[c]
        start[c] += 1
    tokens = np.empty(m, np.int64)
    for i in range(m):
        tokens[i] = rank[uid[i]]
    return tokens


@njit(parallel=True, cache=True)
def sort_segments(values, indptr):
    """Sort each CSR row ``values[indptr[d]:indptr[d + 1]]`` in place."""
    n = indptr.shape[0] - 1
    for d in prange(n):
        a = indptr[d]
        b = indptr[d + 1]
        if b - a > 1:
            values[a:b] = np.sort(values[a:b])


@njit(cache=True)
def allpairs_join(tokens, indptr, order, threshold, eps):
    """Exact self-join on Jaccard >= threshold with prefix and length filtering.

    ``tokens`` holds each document's set as token ranks sorted ascending (rare
    tokens first); ``order`` lists the documents by increasing set size.  A pair
    with J >= t must share a token within both documents' prefixes of length
    |x| - ceil(t|x|) + 1 (AllPairs, Bayardo et al. 2007), so only documents met in
    the inverted lists of prefix tokens are verified.  ``eps`` widens both filters
    so that rounding can only add candidates, never lose one.
    """
    n = indptr.shape[0] - 1
    ntok = 0
    for i in range(tokens.shape[0]):
        if tokens[i] + 1 > ntok:
            ntok = tokens[i] + 1
    # Inverted lists over prefixes, filled in size order: each list is sorted by
    # the position of its document in ``order``.
    plen = np.zeros(n, dtype=np.int64)
    cnt = np.zeros(ntok + 1, dtype=np.int64)
    for d in range(n):
        sz = indptr[d + 1] - indptr[d]
        if sz == 0:
            continue
        p = sz - np.int64(np.ceil(threshold * sz - eps)) + 1
        if p > sz:
            p = sz
        if p < 1:
            p = 1
        plen[d] = p
        for q in range(indptr[d], indptr[d] + p):
            cnt[tokens[q] + 1] += 1
    lstart = np.cumsum(cnt)
    fill = lstart[:-1].copy()
    post = np.empty(lstart[-1], dtype=np.int64)
    for pos in range(n):
        d = order[pos]
        for q in range(indptr[d], indptr[d] + plen[d]):
            t = tokens[q]
            post[fill[t]] = pos
            fill[t] += 1
    stamp = np.full(n, -1, dtype=np.int64)
    cap = 1024
    ra = np.empty(cap, dtype=np.int64)
    rb = np.empty(cap, dtype=np.int64)
    ri = np.empty(cap, dtype=np.int64)
    ru = np.empty(cap, dtype=np.int64)
    ne = 0
    n_cand = 0
    for pos in range(n):
        x = order[pos]
        sx = indptr[x + 1] - indptr[x]
        if sx == 0:
            continue
        minsize = threshold * sx - eps
        for q in range(indptr[x], indptr[x] + plen[x]):
            t = tokens[q]
            for u in range(lstart[t], lstart[t + 1]):
                ypos = post[u]
                if ypos >= pos:
                    break
                y = order[ypos]
                sy = indptr[y + 1] - indptr[y]
                if sy < minsize or stamp[y] == pos:
                    continue
                stamp[y] = pos
                n_cand += 1
                inter = intersect_count(
                    tokens, indptr[x], indptr[x + 1], tokens, indptr[y], indptr[y + 1]
                )
                uni = sx + sy - inter
                if inter / uni >= threshold:
                    if ne >= ra.shape[0]:
                        ra = grow_array(ra, ne + 1)
                        rb = grow_array(rb, ne + 1)
                        ri = grow_array(ri, ne + 1)
                        ru = grow_array(ru, ne + 1)
                    ra[ne] = min(x, y)
                    rb[ne] = max(x, y)
                    ri[ne] = inter
                    ru[ne] = uni
                    ne += 1
    return ra[:ne], rb[:ne], ri[:ne], ru[:ne], n_cand


@intrinsic
def _memcpy(typingctx: Any, dst: Any, doff: Any, src: Any, soff: Any, n: Any) -> Any:
    """``dst[doff:doff + n] = src[soff:soff + n]`` as one ``memcpy`` (1-D uint8
    arrays, no bounds check: the caller keeps both ranges inside).  numba's slice
    assignment and an explicit loop both copy about a byte per cycle: 0.08 and
    0.19 s against 0.02 s for 170 MB of spans."""
    sig = types.void(dst, doff, src, soff, n)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        d, do, s, so, nn = args
        da = context.make_array(signature.args[0])(context, builder, d)
        sa = context.make_array(signature.args[2])(context, builder, s)
        cgutils.raw_memcpy(builder, builder.gep(da.data, [do]), builder.gep(sa.data, [so]), nn, 1)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _sys_write(typingctx: Any, fd: Any, arr: Any, off: Any, n: Any) -> Any:
    """POSIX ``write(fd, &arr[off], n)``: bytes written, or -1 (errno is left for
    the caller to read by retrying from Python).  The symbol is resolved when the
    kernel is loaded, so the compiled code caches like any other."""
    sig = types.intp(fd, arr, off, n)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        f, a, o, nn = args
        i64 = ir.IntType(64)
        fnty = ir.FunctionType(i64, [ir.IntType(32), ir.IntType(8).as_pointer(), i64])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "write")
        ary = context.make_array(signature.args[1])(context, builder, a)
        ptr = builder.gep(ary.data, [o])
        return builder.call(fn, [builder.trunc(f, ir.IntType(32)), ptr, nn])

    return sig, codegen


# nogil: kept.jsonl is written on a thread while the main thread encodes the other
# outputs; with the copying and the writes in Python, that thread waited for the
# GIL at every span and every write.
@njit(cache=True, nogil=True)
def write_spans(fd, src, starts, ends, k, off, stage, fill):
    """Copy the spans ``src[starts[i]:ends[i]]`` (from span ``k``, offset ``off``)
    into ``stage[fill:]``, writing ``stage`` to ``fd`` each time it is full.

    Returns ``(k, off, fill, written, ok)``: where to continue, the bytes staged,
    and, when ``ok`` is False, that a write of the full stage failed after
    ``written`` bytes (the caller finishes that write itself, which raises the
    error or retries).
    """
    cap = stage.shape[0]
    m = starts.shape[0]
    while k < m:
        while k < m and fill < cap:
            a = starts[k] + off
            e = ends[k]
            take = min(e - a, cap - fill)
            _memcpy(stage, fill, src, a, take)  # type: ignore[call-arg]
            fill += take
            if a + take < e:
                off += take
            else:
                k += 1
                off = 0
        if fill == cap:
            w = 0
            while w < cap:
                got = _sys_write(fd, stage, w, cap - w)  # type: ignore[call-arg, var-annotated]
                if got <= 0:
                    return k, off, fill, w, False
                w += got
            fill = 0
    return k, off, fill, 0, True


@njit(inline="always", cache=True)
def _holds(src, a, e, pat, p0, p1):
    """Whether ``src[a:e]`` contains ``pat[p0:p1]``."""
    m = p1 - p0
    first = pat[p0]
    for i in range(a, e - m + 1):
        if src[i] == first:
            same = True
            for j in range(1, m):
                if src[i + j] != pat[p0 + j]:
                    same = False
                    break
            if same:
                return True
    return False


@njit(cache=True, nogil=True)
def append_fields(src, starts, ends, keys, key_offs, vals, val_offs, forbid, forbid_offs):
    """duplicates.jsonl's fast path (see ``corpus.FieldAppender``): for each line
    ``src[starts[i]:ends[i]]`` whose body (the line without trailing ASCII
    whitespace) ends in ``}`` and that holds none of the ``forbid`` patterns, the
    body without its ``}``, then ``, `` + key + value for each field (``keys``:
    the encoded names with ``": "``; ``vals``: line ``i``'s field ``f`` is value
    ``i * nfields + f``), ``}`` and a newline.

    Returns ``(out, offsets, fast)``: line ``i``'s bytes are
    ``out[offsets[i]:offsets[i + 1]]``, empty where ``fast[i]`` is False (the
    caller appends those lines itself)."""
    n = starts.shape[0]
    nf = key_offs.shape[0] - 1
    nforbid = forbid_offs.shape[0] - 1
    fast = np.zeros(n, dtype=np.bool_)
    body_end = np.zeros(n, dtype=np.int64)
    size = 0
    for i in range(n):
        a = starts[i]
        e = ends[i]
        while e > a and (src[e - 1] == 32 or 9 <= src[e - 1] <= 13):
            e -= 1
        if e == a or src[e - 1] != 125:
            continue
        bad = False
        for f in range(nforbid):
            if _holds(src, a, ends[i], forbid, forbid_offs[f], forbid_offs[f + 1]):
                bad = True
                break
        if bad:
            continue
        fast[i] = True
        body_end[i] = e - 1
        size += (e - 1 - a) + 2  # the body without its "}", then "}\n"
        for f in range(nf):
            size += 2 + (key_offs[f + 1] - key_offs[f])
            size += val_offs[i * nf + f + 1] - val_offs[i * nf + f]
    out = np.empty(size, dtype=np.uint8)
    offsets = np.zeros(n + 1, dtype=np.int64)
    w = 0
    for i in range(n):
        if fast[i]:
            a = starts[i]
            m = body_end[i] - a
            _memcpy(out, w, src, a, m)  # type: ignore[call-arg]
            w += m
            for f in range(nf):
                out[w] = 44
                out[w + 1] = 32
                w += 2
                k0 = key_offs[f]
                m = key_offs[f + 1] - k0
                _memcpy(out, w, keys, k0, m)
                w += m
                v0 = val_offs[i * nf + f]
                m = val_offs[i * nf + f + 1] - v0
                _memcpy(out, w, vals, v0, m)
                w += m
            out[w] = 125
            out[w + 1] = 10
            w += 2
        offsets[i + 1] = w
    return out, offsets, fast

"""Array helpers shared by the kernels: radix-bucketed sorts of uint64 keys, the
sorted-set intersection count and growable output buffers (numba)."""

from __future__ import annotations

import numpy as np

from neardup.kernels._hashes import U64
from neardup.kernels._kernel import kernel


@kernel
def _bucket_bits(m):
    """Top bits that give about one of ``m`` keys per bucket."""
    bits = 1
    while (1 << bits) < m:
        bits += 1
    return bits


@kernel
def bucket_counts(m):
    """Bucket counters for sorting up to ``m`` keys (:func:`sort_hashes_at`'s
    scratch): one per bucket, and one more."""
    return np.empty((1 << _bucket_bits(m)) + 1, dtype=np.int64)


@kernel
def _bucket_fill(keys, lo, m, counts):
    """Start offset of each top-bits bucket of ``keys[lo:lo + m]`` in ``counts``
    (:func:`bucket_counts` of ``m`` or more); returns the shift."""
    bits = _bucket_bits(m)
    nb = 1 << bits
    counts[: nb + 1] = 0
    sh = U64(64 - bits)
    for i in range(lo, lo + m):
        counts[np.int64(keys[i] >> sh) + 1] += 1
    for b in range(nb):
        counts[b + 1] += counts[b]
    return sh


@kernel
def _bucket_starts(keys):
    """Start offset of each top-bits bucket (about one key per bucket) and the shift."""
    m = keys.shape[0]
    counts = bucket_counts(m)
    return counts, _bucket_fill(keys, 0, m, counts)


@kernel
def sort_hashes(src, dst):
    """Sort uniformly distributed 64-bit hashes of ``src`` into ``dst``.

    A counting pass on the top bits puts each value in its bucket (about one value
    per bucket), then one insertion pass fixes the order inside buckets: expected
    O(m), where numba's quicksort is O(m log m) with poor locality.  Inputs
    that are far from uniform (crafted collisions of an unkeyed hash) exceed the
    work budget of the insertion pass and fall back to ``np.sort``.
    """
    m = src.shape[0]
    sort_hashes_at(src, 0, m, dst, bucket_counts(m))


@kernel
def sort_hashes_at(src, lo, m, dst, counts):
    """:func:`sort_hashes` of ``src[lo:lo + m]`` into ``dst[:m]``, with ``counts``
    (:func:`bucket_counts` of ``m`` or more) as scratch.

    Offsets and scratch rather than slices and a fresh array: a caller sorting
    each document's hashes makes no view and no allocation per document (each was
    a reference count update or an allocation inside its loop).
    """
    if m < 2:
        for i in range(m):
            dst[i] = src[lo + i]
        return
    sh = _bucket_fill(src, lo, m, counts)
    for i in range(lo, lo + m):
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
            dst[:m] = np.sort(src[lo : lo + m])
            return


@kernel
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


@kernel
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


@kernel
def _grow_columns(cols, need):
    cap = max(need, 2 * cols.shape[1])
    out = np.empty((cols.shape[0], cap), dtype=cols.dtype)
    out[:, : cols.shape[1]] = cols
    return out


@kernel
def append_column(cols, n, values):
    """``cols`` (rows: fields, columns: records) with the record ``values`` (a tuple
    of one type, a value per row) written in column ``n``; grown to twice its
    columns first when full, so appending costs amortized O(1).  Returns the buffer
    to keep using: the same one unless it grew."""
    if n >= cols.shape[1]:
        cols = _grow_columns(cols, n + 1)
    for i in range(len(values)):
        cols[i, n] = values[i]
    return cols

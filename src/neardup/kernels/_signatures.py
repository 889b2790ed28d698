"""Signatures and band keys (numba): MinHash by k permutations, one-permutation
hashing (OPH) with densification, and the per-band key chains of a signature
matrix."""

from __future__ import annotations

from typing import Any

import numpy as np

from neardup.kernels._hashes import U32MAX, U64, band_start, band_step, fmix64
from neardup.kernels._kernel import kernel, prange
from neardup.kernels.threads import split_rows


def minhash_kperm(hashes: Any, indptr: Any, a: Any, b: Any, out: Any) -> None:
    """Classic k-permutation MinHash with multiply-add-shift permutations.

    Row ``p`` is ``min((a[p] * x + b[p]) mod 2**64 >> 32)`` over the document's
    shingle hashes ``x``; ``a[p]`` is odd.  Documents with no shingle keep 0xFFFFFFFF.
    ``out`` is (documents, k), C order; documents are shared out over threads.
    """
    split_rows(
        indptr.shape[0] - 1,
        lambda lo, hi: _minhash_kperm(hashes, indptr[lo : hi + 1], a, b, out[lo:hi]),
        grain=1024,
    )


# nogil: run on several threads by minhash_kperm, and a batch run finds exact
# duplicates (Python) while signatures are computed.
@kernel(nogil=True)
def _minhash_kperm(hashes, indptr, a, b, out):
    n = indptr.shape[0] - 1
    k = a.shape[0]
    row = np.empty(k, dtype=np.uint64)  # one allocation, not one per document
    for d in range(n):
        row[:] = U32MAX
        for i in range(indptr[d], indptr[d + 1]):
            x = hashes[i]
            for p in range(k):
                v = (a[p] * x + b[p]) >> U64(32)
                if v < row[p]:
                    row[p] = v
        for p in range(k):
            out[d, p] = np.uint32(row[p])


@kernel
def _fastrange(v32, k):
    return np.int64((v32 * U64(k)) >> U64(32))


@kernel(parallel=True, nogil=True)
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


def band_keys(sig: Any, band_lo: int, band_hi: int, rows: int, seed: Any, out: Any) -> None:
    """64-bit key per (document, band) for bands [band_lo, band_hi): a mixed chain
    over the band's rows.  ``out`` is (n, band_hi - band_lo), C or F order (same
    values); shared out over threads by documents."""
    if out.flags.c_contiguous or not out.flags.f_contiguous:
        split_rows(
            sig.shape[0],
            lambda lo, hi: _band_keys(sig[lo:hi], band_lo, band_hi, rows, seed, out[lo:hi]),
            grain=4096,
        )
        return
    # F order: each part of the documents is keyed in C order, then copied into
    # its rows of every column.  The kernel writes a document's bands together;
    # written straight into F order they would land a column apart each (a cache
    # line, often a page, per key).
    nb = band_hi - band_lo

    def part(lo: int, hi: int) -> None:
        scratch = np.empty((hi - lo, nb), dtype=np.uint64)
        _band_keys(sig[lo:hi], band_lo, band_hi, rows, seed, scratch)
        out[lo:hi] = scratch

    split_rows(sig.shape[0], part, grain=4096)


@kernel(nogil=True)
def _band_keys(sig, band_lo, band_hi, rows, seed, out):
    n = sig.shape[0]
    seed = U64(seed)
    nb = band_hi - band_lo
    init = np.empty(nb, dtype=np.uint64)
    for b in range(nb):
        init[b] = band_start(seed, band_lo + b)
    for d in range(n):
        # The bands' chains advance together, a row at a time: independent
        # multiplies in vector lanes instead of one latency-bound chain per band
        # (same keys).
        for b in range(nb):
            out[d, b] = init[b]
        for j in range(rows):
            for b in range(nb):
                out[d, b] = band_step(out[d, b], U64(sig[d, (band_lo + b) * rows + j]))

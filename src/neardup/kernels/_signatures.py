"""Signatures and band keys (numba): MinHash by k permutations, one-permutation
hashing (OPH) with densification, and the per-band key chains of a signature
matrix."""

from __future__ import annotations

import numpy as np
from numba import prange

from neardup.kernels._cache import kernel
from neardup.kernels._hashes import U32MAX, U64, band_start, band_step, fmix64


# nogil: a batch run finds exact duplicates (Python) while signatures are computed.
@kernel(parallel=True, nogil=True)
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


@kernel(parallel=True)
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

"""Compiled kernels for vector signatures, Hamming bands and exact vector scores.

Same conventions as the text kernels (:mod:`neardup.kernels._tokens`): whole batches
in flat numpy arrays, ``uint64`` arithmetic with explicit constants, no validation here.
"""

from __future__ import annotations

import numpy as np

from neardup.kernels import _unionfind as UF
from neardup.kernels._arrays import append_column, argsort_keys
from neardup.kernels._bandjoin import MODE_ALL_EDGES, MODE_FOREST, ordered, pair_window
from neardup.kernels._hashes import P1, P2, P4, U64, band_start, band_step, fmix64, hash_span
from neardup.kernels._kernel import kernel, prange

_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)

METRIC_COSINE = 0
METRIC_L2 = 1
METRIC_L1 = 2
METRIC_SPARSE_COSINE = 3
METRIC_SPARSE_WJACCARD = 4

SIG_BITS = 0
SIG_CODES = 1


@kernel(inline="always")
def popcount64(x):
    x = x - ((x >> U64(1)) & _M1)
    x = (x & _M2) + ((x >> U64(2)) & _M2)
    x = (x + (x >> U64(4))) & _M4
    return np.int64((x * _H01) >> U64(56))


@kernel
def hamming_rows(sig, a, b, out):
    w = sig.shape[1]
    for t in range(a.shape[0]):
        h = 0
        for j in range(w):
            h += popcount64(sig[a[t], j] ^ sig[b[t], j])
        out[t] = h


@kernel
def hash_ranges(buf, starts, algo, seed, k0, k1, out):
    """Hash of each byte range ``buf[starts[i]:starts[i + 1]]`` (feature names)."""
    for i in range(out.shape[0]):
        out[i] = hash_span(buf, starts[i], starts[i + 1] - starts[i], algo, seed, k0, k1)


@kernel(parallel=True)
def _chain_keys(words, masks, word_lo, word_hi, rows, band_lo, seed, out):
    """Key per (row, band) for bands [band_lo, band_lo + out.shape[1]): a mixed chain
    over the band's words of the row, ``words[d, word_lo[bnd]:word_hi[bnd]]`` under
    the band's mask ``masks[bnd]``, or with ``masks`` None the ``rows`` words
    ``words[d, bnd * rows:(bnd + 1) * rows]`` as they are (numba compiles only the
    branch the arguments select)."""
    n = words.shape[0]
    nb = out.shape[1]
    seed = U64(seed)
    for d in prange(n):
        for t in range(nb):
            bnd = band_lo + t
            h = band_start(seed, bnd)
            if masks is None:
                base = bnd * rows
                for j in range(rows):
                    h = band_step(h, words[d, base + j])
            else:
                for j in range(word_lo[bnd], word_hi[bnd]):
                    h = band_step(h, words[d, j] & masks[bnd, j])
            out[d, t] = h


@kernel
def mask_keys(sig, masks, word_lo, word_hi, band_lo, seed, out):
    """Key per (row, band) for bands [band_lo, band_lo + out.shape[1]): a mixed chain
    over the row's signature words under the band's bit mask.  Keys are uniformly
    distributed (``argsort_keys`` relies on it); a collision of two different masked
    values only adds a candidate, which verification then rejects."""
    _chain_keys(sig, masks, word_lo, word_hi, 0, band_lo, seed, out)


@kernel
def code_keys(codes, band_lo, rows, seed, out):
    """Key per (row, band) for integer hash codes (p-stable): ``rows`` codes a band."""
    _chain_keys(codes, None, None, None, rows, band_lo, seed, out)


@kernel(inline="always")
def _unit(h):
    # 53 random bits -> (0, 1), never 0 (log of it is taken).
    return (np.float64(h >> U64(11)) + 0.5) * (1.0 / 9007199254740992.0)


@kernel(parallel=True)
def sparse_projections(tok, wts, indptr, nproj, seed, out):
    """``out[d, j] = sum_t w_t * g(tok_t, j)`` with g a standard normal drawn from
    (seed, token hash, j) by Box-Muller: the hyperplane of a weighted bag of
    features, whose components exist only for features that occur."""
    n = indptr.shape[0] - 1
    seed = U64(seed)
    for d in prange(n):
        for j in range(nproj):
            out[d, j] = 0.0
        for t in range(indptr[d], indptr[d + 1]):
            base = fmix64(seed ^ (tok[t] * P1))
            w = wts[t]
            for j in range(0, nproj, 2):
                h1 = fmix64(base ^ (U64(j + 1) * P2))
                h2 = fmix64(h1 ^ P4)
                rad = np.sqrt(-2.0 * np.log(_unit(h1)))
                ang = 2.0 * np.pi * _unit(h2)
                out[d, j] += w * rad * np.cos(ang)
                if j + 1 < nproj:
                    out[d, j + 1] += w * rad * np.sin(ang)


@kernel(inline="always")
def _dense_score(X, norms, metric, a, b):
    d = X.shape[1]
    s = 0.0
    if metric == METRIC_COSINE:
        for t in range(d):
            s += np.float64(X[a, t]) * np.float64(X[b, t])
        return s / (norms[a] * norms[b])
    if metric == METRIC_L2:
        for t in range(d):
            z = np.float64(X[a, t]) - np.float64(X[b, t])
            s += z * z
        return np.sqrt(s)
    for t in range(d):
        s += abs(np.float64(X[a, t]) - np.float64(X[b, t]))
    return s


@kernel(inline="always")
def _sparse_cosine(tok, wts, indptr, norms, a, b):
    i = indptr[a]
    ie = indptr[a + 1]
    j = indptr[b]
    je = indptr[b + 1]
    s = 0.0
    while i < ie and j < je:
        if tok[i] == tok[j]:
            s += wts[i] * wts[j]
            i += 1
            j += 1
        elif tok[i] < tok[j]:
            i += 1
        else:
            j += 1
    return s / (norms[a] * norms[b])


@kernel(inline="always")
def _sparse_wjaccard(tok, wts, indptr, a, b):
    """Exact weighted Jaccard sum(min) / sum(max) over non-negative weights."""
    i = indptr[a]
    ie = indptr[a + 1]
    j = indptr[b]
    je = indptr[b + 1]
    num = 0.0
    den = 0.0
    while i < ie or j < je:
        if j >= je or (i < ie and tok[i] < tok[j]):
            den += wts[i]
            i += 1
        elif i >= ie or tok[j] < tok[i]:
            den += wts[j]
            j += 1
        else:
            num += min(wts[i], wts[j])
            den += max(wts[i], wts[j])
            i += 1
            j += 1
    return num / den if den > 0 else 0.0


@kernel(inline="always")
def _u01(h):
    # 53 random bits in (0, 1): never 0, so logarithms are finite.
    return (np.float64(h >> U64(11)) + 0.5) * (1.0 / 9007199254740992.0)


@kernel(parallel=True)
def icws_codes(tok, wts, indptr, nhash, seed, out):
    """Improved consistent weighted sampling (Ioffe 2010): for hash k, every feature
    t with weight w > 0 draws r, c ~ Gamma(2, 1) and beta ~ U(0, 1) from (seed, t, k);
    the sample is the feature minimising ln a = ln c - r (floor(ln w / r + beta) -
    beta) - r, coded with its quantized level.  Two bags share a code with
    probability equal to their weighted Jaccard similarity."""
    n = indptr.shape[0] - 1
    seed = U64(seed)
    for d in prange(n):
        for k in range(nhash):
            best = np.inf
            code = U64(0)
            hk = fmix64(seed ^ (U64(k + 1) * P2))
            for t in range(indptr[d], indptr[d + 1]):
                w = wts[t]
                if w <= 0.0:
                    continue
                h1 = fmix64(hk ^ (tok[t] * P1))
                h2 = fmix64(h1 ^ P4)
                h3 = fmix64(h2 ^ P4)
                h4 = fmix64(h3 ^ P4)
                h5 = fmix64(h4 ^ P4)
                r = -np.log(_u01(h1)) - np.log(_u01(h2))
                c = -np.log(_u01(h3)) - np.log(_u01(h4))
                beta = _u01(h5)
                level = np.floor(np.log(w) / r + beta)
                ln_a = np.log(c) - r * (level - beta) - r
                if ln_a < best:
                    best = ln_a
                    code = fmix64(tok[t] ^ (U64(np.int64(level) + (1 << 40)) * P2))
            out[d, k] = code


@kernel(inline="always")
def score_pair(X, tok, wts, indptr, norms, metric, a, b):
    if metric == METRIC_SPARSE_COSINE:
        return _sparse_cosine(tok, wts, indptr, norms, a, b)
    if metric == METRIC_SPARSE_WJACCARD:
        return _sparse_wjaccard(tok, wts, indptr, a, b)
    return _dense_score(X, norms, metric, a, b)


@kernel(parallel=True)
def score_pairs(X, tok, wts, indptr, norms, metric, a, b, out):
    for t in prange(a.shape[0]):
        out[t] = score_pair(X, tok, wts, indptr, norms, metric, a[t], b[t])


@kernel
def _agreement(sig, sig_kind, a, b):
    w = sig.shape[1]
    c = 0
    if sig_kind == SIG_BITS:
        for j in range(w):
            c += popcount64(sig[a, j] ^ sig[b, j])
        return c  # differing bits
    for j in range(w):
        if sig[a, j] == sig[b, j]:
            c += 1
    return c  # agreeing codes


@kernel(parallel=True)
def sort_bands(keys):
    """Stable order of every band column and the column in that order, (bands, n)
    each (parallel over bands): the join then reads buckets sequentially."""
    n, nb = keys.shape
    orders = np.empty((nb, n), dtype=np.int64)
    skeys = np.empty((nb, n), dtype=np.uint64)
    for t in prange(nb):
        col = np.ascontiguousarray(keys[:, t])
        orders[t] = argsort_keys(col)
        for i in range(n):
            skeys[t, i] = col[orders[t, i]]
    return orders, skeys


@kernel
def vector_band_join(
    skeys,
    orders,
    band_lo,
    X,
    tok,
    wts,
    indptr,
    norms,
    metric,
    threshold,
    sig,
    sig_kind,
    max_cand,
    max_bucket,
    mode,
    parent,
    filter_words,
    filter_max,
):
    """Walk the buckets of bands [band_lo, band_lo + keys.shape[1]) and verify exactly.

    Within a bucket, members are visited in index order; only the first
    ``max_bucket`` members of a bucket take part and each is paired with at most
    ``max_cand`` preceding members (nearest first); both cuts are counted.  Every
    pair is scored exactly (cosine, l2 or l1); ``mode`` MODE_FOREST skips pairs
    whose ends are already connected (components are unchanged; the kept edges are
    a spanning forest), MODE_ALL_EDGES keeps every pair that verifies, once.

    With ``filter_words`` > 0, a pair whose leading ``filter_words`` signature words
    (bits) or codes disagree in more than ``filter_max`` places is dropped before
    scoring (counted in ``filtered``).

    Returns (a, b, band, score, agreement, n_checks, n_verified, cap_cut,
    bucket_cut, skipped, filtered).
    """
    nb = skeys.shape[0]
    n = skeys.shape[1]
    edges = np.empty((4, 1024), dtype=np.int64)  # a, b, band, agreement
    scores = np.empty((1, 1024), dtype=np.float64)
    ne = 0
    n_checks = 0
    n_ver = 0
    cap_cut = 0
    bucket_cut = 0
    skipped = 0
    filtered = 0
    is_sim = metric in (METRIC_COSINE, METRIC_SPARSE_COSINE, METRIC_SPARSE_WJACCARD)
    seen = dict()
    seen[np.int64(-1)] = np.int8(0)
    for t in range(nb):
        col = skeys[t]
        order = orders[t]
        start = 0
        while start < n:
            stop = start + 1
            kv = col[start]
            while stop < n and col[stop] == kv:
                stop += 1
            last = stop
            if last - start > max_bucket:
                bucket_cut += last - start - max_bucket
                last = start + max_bucket
            for jj in range(start + 1, last):
                j = order[jj]
                lo, cut = pair_window(jj, start, max_cand)
                cap_cut += cut
                for ii in range(jj - 1, lo - 1, -1):
                    a, b = ordered(order[ii], j)
                    if mode == MODE_FOREST and UF.find(parent, a) == UF.find(parent, b):
                        skipped += 1
                        continue
                    pk = np.int64(a) * np.int64(n) + np.int64(b)
                    if mode == MODE_ALL_EDGES and pk in seen:
                        continue
                    n_checks += 1
                    if filter_words > 0:
                        # The leading signature words are a sketch: a pair that
                        # differs in more than filter_max of their bits is below the
                        # threshold except with the (tiny, stated) tail probability
                        # the caller chose.  One cache line instead of a whole vector.
                        h = 0
                        if sig_kind == SIG_BITS:
                            for w in range(filter_words):
                                h += popcount64(sig[a, w] ^ sig[b, w])
                        else:
                            for w in range(filter_words):
                                if sig[a, w] != sig[b, w]:
                                    h += 1
                        if h > filter_max:
                            filtered += 1
                            continue
                    n_ver += 1
                    s = score_pair(X, tok, wts, indptr, norms, metric, a, b)
                    ok = s >= threshold if is_sim else s <= threshold
                    if not ok:
                        continue
                    if mode == MODE_ALL_EDGES:
                        seen[pk] = np.int8(1)
                    UF.union(parent, a, b)
                    agree = _agreement(sig, sig_kind, a, b)
                    edges = append_column(
                        edges,
                        ne,
                        (np.int64(a), np.int64(b), np.int64(band_lo + t), np.int64(agree)),
                    )
                    scores = append_column(scores, ne, (np.float64(s),))
                    ne += 1
            start = stop
    return (
        edges[0, :ne],
        edges[1, :ne],
        edges[2, :ne],
        scores[0, :ne],
        edges[3, :ne],
        n_checks,
        n_ver,
        cap_cut,
        bucket_cut,
        skipped,
        filtered,
    )

"""Exact set similarity in bulk (numba): Jaccard of given pairs, the brute-force
all-pairs oracle and the AllPairs prefix-filter join that verifies it at scale."""

from __future__ import annotations

import numpy as np

from neardup.kernels._arrays import append_column, argsort_keys, intersect_count
from neardup.kernels._kernel import kernel, prange


@kernel(parallel=True)
def jaccard_pairs(data, indptr, a, b, inter_out, union_out):
    for t in prange(a.shape[0]):
        i = a[t]
        j = b[t]
        c = intersect_count(data, indptr[i], indptr[i + 1], data, indptr[j], indptr[j + 1])
        inter_out[t] = c
        union_out[t] = (indptr[i + 1] - indptr[i]) + (indptr[j + 1] - indptr[j]) - c


@kernel(inline="always")
def _overlap(data, indptr, i, j):
    """(intersection, union) of the sets of documents ``i`` and ``j``; (0, 0) when
    either is empty (such a pair is never a duplicate)."""
    la = indptr[i + 1] - indptr[i]
    lb = indptr[j + 1] - indptr[j]
    if la == 0 or lb == 0:
        return 0, 0
    inter = intersect_count(data, indptr[i], indptr[i + 1], data, indptr[j], indptr[j + 1])
    return inter, la + lb - inter


@kernel(parallel=True)
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


@kernel(parallel=True)
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


@kernel
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


@kernel(parallel=True)
def sort_segments(values, indptr):
    """Sort each CSR row ``values[indptr[d]:indptr[d + 1]]`` in place."""
    n = indptr.shape[0] - 1
    for d in prange(n):
        a = indptr[d]
        b = indptr[d + 1]
        if b - a > 1:
            values[a:b] = np.sort(values[a:b])


@kernel
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
    pairs = np.empty((4, 1024), dtype=np.int64)  # a < b, intersection, union
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
                    pairs = append_column(
                        pairs,
                        ne,
                        (np.int64(min(x, y)), np.int64(max(x, y)), np.int64(inter), np.int64(uni)),
                    )
                    ne += 1
    return pairs[0, :ne], pairs[1, :ne], pairs[2, :ne], pairs[3, :ne], n_cand

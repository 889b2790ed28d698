"""The band join (numba): documents that share a band key become candidate pairs,
verified against the exact Jaccard (or the signature estimate) and either returned,
or merged into the one union-find (:mod:`neardup.kernels._unionfind`) in the
order of a spanning forest."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from neardup.kernels import _unionfind as UF
from neardup.kernels._arrays import append_column, intersect_count
from neardup.kernels._hashes import U64, fmix64
from neardup.kernels._kernel import kernel, lazy
from neardup.kernels.threads import get_threads, run_calls

_borrow: Any = lazy("neardup.kernels._intrinsics", "borrow")


@kernel
def _row_matches(sig, a, b):
    """Signature rows on which documents ``a`` and ``b`` agree."""
    matches = 0
    for p in range(sig.shape[1]):
        if sig[a, p] == sig[b, p]:
            matches += 1
    return matches


MODE_CANDIDATES = 0


MODE_ALL_EDGES = 1


MODE_FOREST = 2


@kernel
def pair_window(jj, start, max_cand):
    """The bucket slots ``[lo, jj)`` that slot ``jj`` of a bucket starting at ``start``
    is paired with (its ``max_cand`` nearest predecessors), and how many slots that
    cap cut off: (lo, cut)."""
    lo = jj - max_cand
    if lo < start:
        return start, 0
    return lo, lo - start


@kernel
def ordered(i, j):
    """The pair ``(i, j)`` smaller first."""
    if i < j:
        return i, j
    return j, i


class PairMemo:
    """The pairs :func:`band_join` has handled, shared across its calls (band
    rounds): an open-addressing set of the keys ``a * n + b`` in a plain int64
    array (-1: empty slot), grown to twice its size by the kernel when half full.

    Plain arrays rather than a compiled dictionary: any build of the kernels
    (numba's JIT, or the native module made ahead of time) can take and return
    them, and nothing has to be constructed by a compiler.
    """

    __slots__ = ("size", "table")

    def __init__(self, capacity: int = 1024) -> None:
        slots = 1 << max(4, int(capacity - 1).bit_length())
        self.table = np.full(slots, -1, dtype=np.int64)
        self.size = 0

    def __len__(self) -> int:
        return self.size


def new_seen() -> PairMemo:
    """An empty pair memo for :func:`band_join`."""
    return PairMemo()


@kernel
def _memo_slot(table, key):
    """The slot of ``table`` that holds ``key``, or the empty slot where it goes."""
    mask = table.shape[0] - 1
    h = np.int64(fmix64(np.uint64(key)) & np.uint64(mask))
    while table[h] != key and table[h] != -1:
        h = (h + 1) & mask
    return h


@kernel
def _memo_grown(table):
    """``table`` rehashed into twice as many slots."""
    out = np.full(table.shape[0] * 2, -1, dtype=np.int64)
    for v in table:
        if v != -1:
            out[_memo_slot(out, v)] = v
    return out


_RUN_START = np.uint64(1 << 63)


_RUN_DOC = np.uint64((1 << 63) - 1)


_RUN_TOP_BITS = 10
"""First-level buckets of the band sort: 1024 write streams and counters that stay
in L1, then a second level sized to about one key per bucket within each."""


@kernel
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


@kernel(nogil=True)
def _band_runs(keys, idx, lane, lanes, counts):
    """Sort the keys of bands ``lane, lane + lanes, ...`` and write each band's
    buckets of two or more members back into its column of ``keys``; the number of
    entries written goes to ``counts[band]``.

    Column ``bnd`` then holds, bucket after bucket in ascending key order, the
    members' document numbers in index order, the first of each bucket tagged with
    ``_RUN_START``.  Only the documents ``idx`` (ascending) take part.  Each band
    reads only its own column before overwriting it, so lanes run in parallel
    (threads: :func:`band_runs`); the serial walk (:func:`_join_runs`) then touches
    only the buckets that can yield pairs instead of every document of every band.

    The sort is a stable two-level bucket sort on the keys' top bits (they are
    uniform hashes): 1024 buckets first, then about one key per sub-bucket, with
    all scratch in a few arrays per lane.  One level of ~n buckets would miss the
    caches on every key.  Keys laid out band-major (``order="F"``) are read
    sequentially.
    """
    m = idx.shape[0]
    nb = keys.shape[1]
    top = 1 << _RUN_TOP_BITS
    sh1 = U64(64 - _RUN_TOP_BITS)
    max_sub_bits = 20  # 8 MiB of counters at most, whatever a skewed bucket holds
    st1 = np.empty(top + 1, dtype=np.int64)
    fill = np.empty(top, dtype=np.int64)
    ks = np.empty(m, dtype=np.uint64)
    ix = np.empty(m, dtype=np.int64)
    ks2 = np.empty(m, dtype=np.uint64)
    ix2 = np.empty(m, dtype=np.int64)
    st2 = np.empty(1, dtype=np.int64)
    fill2 = np.empty(1, dtype=np.int64)
    # Borrowed for the per-bucket sort calls (no reference counting per call).
    b_ks2 = _borrow(ks2)
    b_ix2 = _borrow(ix2)
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
                _sort_keyed(b_ks2, b_ix2, s2, e2)
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


def band_runs(keys: Any, active: Any, threads: int) -> Any:
    """Run :func:`_band_runs` over all bands of ``keys`` for the rows where
    ``active`` is set, on ``threads`` threads (each sorting every ``threads``-th
    band); returns the entries written per band.

    Python threads over a serial ``nogil`` kernel rather than a ``prange`` loop:
    the same parallelism, and numba's parallel compiler took half of this
    kernel's first-run compile time.
    """
    idx = np.flatnonzero(active).astype(np.int64, copy=False)
    nb = keys.shape[1]
    counts = np.zeros(nb, dtype=np.int64)
    lanes = max(1, min(nb, threads))
    if lanes == 1:
        _band_runs(keys, idx, 0, 1, counts)
        return counts
    run_calls(
        [functools.partial(_band_runs, keys, idx, ln, lanes, counts) for ln in range(lanes)],
        lanes,
        name="neardup-bands",
    )
    return counts


@kernel
def _join_runs(
    runs,
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
    table,
    size,
):
    n = runs.shape[0]
    nb = runs.shape[1]
    k = sig.shape[1]
    edges = np.empty((6, 1024), dtype=np.int64)  # a, b, band, inter, union, matches
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
                    slot = _memo_slot(table, pk)
                    if table[slot] == pk:
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
                        if 2 * (size + 1) > table.shape[0]:
                            table = _memo_grown(table)
                            slot = _memo_slot(table, pk)
                        table[slot] = pk
                        size += 1
                    if ok:
                        if matches < 0:
                            # Only kept pairs report an estimate: most candidates
                            # that fail exact verification never need one.
                            matches = _row_matches(sig, a, b)
                        if mode != MODE_CANDIDATES:
                            UF.union(parent, a, b)
                        edges = append_column(
                            edges,
                            ne,
                            (
                                np.int64(a),
                                np.int64(b),
                                np.int64(band_lo + bnd),
                                np.int64(inter),
                                np.int64(uni),
                                np.int64(matches),
                            ),
                        )
                        ne += 1
            start = stop
    return edges[:, :ne], n_cand, n_ver, overflow, skipped, table, size


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
    seen: PairMemo,
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
    counts = band_runs(keys, active, get_threads())
    edges, n_cand, n_ver, overflow, skipped, seen.table, seen.size = _join_runs(
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
        seen.table,
        seen.size,
    )
    return (*edges, n_cand, n_ver, overflow, skipped)

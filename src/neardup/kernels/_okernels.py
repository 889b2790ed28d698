"""Compiled kernels of the online band index (see ``neardup.service.online``)."""

from __future__ import annotations

import numpy as np

from neardup.kernels._kernel import kernel


@kernel(nogil=True)
def _lower(keys, lo, hi, q):
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < q:
            lo = mid + 1
        else:
            hi = mid
    return lo


@kernel(nogil=True)
def bucket_counts(mkeys, offsets, dkeys, dmask, dn, q, out):
    """out[b] = how many entries (main + delta) band b's bucket ``q[b]`` holds."""
    nb = q.shape[0]
    for b in range(nb):
        lo = _lower(mkeys, offsets[b], offsets[b + 1], q[b])
        hi = lo
        end = offsets[b + 1]
        while hi < end and mkeys[hi] == q[b]:
            hi += 1
        out[b] = hi - lo
    for i in range(dn):
        for b in range(nb):
            if dmask[i, b] and dkeys[i, b] == q[b]:
                out[b] += 1


@kernel(inline="always", nogil=True)
def _keep_live(p, b, alive, out_pos, out_band, n):
    """Append (position ``p``, band ``b``) at ``n`` if ``p`` is alive; the new count."""
    if alive[p]:
        out_pos[n] = p
        out_band[n] = b
        n += 1
    return n


@kernel(nogil=True)
def query(mkeys, mpos, offsets, dkeys, dmask, dpos, dn, alive, q, max_scan, out_pos, out_band):
    """Append (position, band) of every live bucket mate of ``q``; stop at ``max_scan``.

    Returns (count, scanned, capped).  Entries come band by band, main then delta,
    positions ascending within a bucket, so results are deterministic.
    """
    nb = q.shape[0]
    n = 0
    scanned = 0
    capped = False
    for b in range(nb):
        lo = _lower(mkeys, offsets[b], offsets[b + 1], q[b])
        end = offsets[b + 1]
        while lo < end and mkeys[lo] == q[b]:
            scanned += 1
            if scanned > max_scan:
                return n, scanned - 1, True
            n = _keep_live(mpos[lo], b, alive, out_pos, out_band, n)
            lo += 1
    for i in range(dn):
        for b in range(nb):
            if dmask[i, b] and dkeys[i, b] == q[b]:
                scanned += 1
                if scanned > max_scan:
                    return n, scanned - 1, True
                n = _keep_live(dpos[i], b, alive, out_pos, out_band, n)
    return n, scanned, capped


@kernel(nogil=True)
def merge(
    mkeys, mpos, offsets, dkeys_sorted, dpos_sorted, doffsets, alive, out_keys, out_pos, out_off
):
    """Merge each band's sorted main segment with its sorted delta run, dropping
    dead positions; ties keep main first (main positions precede delta ones)."""
    nb = offsets.shape[0] - 1
    w = 0
    for b in range(nb):
        out_off[b] = w
        i = offsets[b]
        ie = offsets[b + 1]
        j = doffsets[b]
        je = doffsets[b + 1]
        while i < ie or j < je:
            take_main = j >= je or (i < ie and mkeys[i] <= dkeys_sorted[j])
            if take_main:
                k = mkeys[i]
                p = mpos[i]
                i += 1
            else:
                k = dkeys_sorted[j]
                p = dpos_sorted[j]
                j += 1
            if alive[p]:
                out_keys[w] = k
                out_pos[w] = p
                w += 1
    out_off[nb] = w
    return w


@kernel(nogil=True)
def delta_runs(dkeys, dmask, dpos, dn, nb, out_keys, out_pos, out_off):
    """Lay the delta out band by band, sorted by (key, position), leaving out the
    entries whose band was cut by the bucket cap."""
    w = 0
    tmp_k = np.empty(dn, dtype=np.uint32)
    tmp_p = np.empty(dn, dtype=np.int64)
    for b in range(nb):
        out_off[b] = w
        m = 0
        for i in range(dn):
            if dmask[i, b]:
                tmp_k[m] = dkeys[i, b]
                tmp_p[m] = dpos[i]
                m += 1
        order = np.argsort(tmp_k[:m], kind="mergesort")
        for t in range(m):
            out_keys[w] = tmp_k[order[t]]
            out_pos[w] = tmp_p[order[t]]
            w += 1
    out_off[nb] = w
    return w

"""Output kernels (numba): spans of a byte buffer written to a file descriptor
without Python objects, and JSON field appending to records that are written out
as they came in."""

from __future__ import annotations

from typing import Any

import numpy as np

from neardup.kernels._kernel import kernel, lazy

# numba intrinsics (raw memcpy and write(2)), imported only when numba compiles.
_memcpy: Any = lazy("neardup.kernels._intrinsics", "memcpy")

_sys_write: Any = lazy("neardup.kernels._intrinsics", "sys_write")


# nogil: kept.jsonl is written on a thread while the main thread encodes the other
# outputs; with the copying and the writes in Python, that thread waited for the
# GIL at every span and every write.
@kernel(nogil=True)
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
            _memcpy(stage, fill, src, a, take)
            fill += take
            if a + take < e:
                off += take
            else:
                k += 1
                off = 0
        if fill == cap:
            w = 0
            while w < cap:
                got = _sys_write(fd, stage, w, cap - w)
                if got <= 0:
                    return k, off, fill, w, False
                w += got
            fill = 0
    return k, off, fill, 0, True


@kernel
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


@kernel(nogil=True)
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
            _memcpy(out, w, src, a, m)
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

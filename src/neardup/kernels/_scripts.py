"""Counting the letters of each Unicode script in whole batches of documents (numba).

A batch is one UTF-8 byte buffer with document offsets, as in
:mod:`neardup.kernels._tokens`.  A table maps each code point below its length to a
script slot (0: not counted); code points past the table count for nothing.
Nothing here validates its arguments.
"""

from __future__ import annotations

import numpy as np

from neardup.kernels._kernel import kernel


@kernel
def _code_point(buf, p, e):
    """The code point whose lead byte is ``buf[p]`` (>= 0xC0), or -1 when its
    sequence would run past ``e``."""
    b0 = np.int64(buf[p])
    if b0 < 0xE0:
        if p + 2 > e:
            return -1
        return ((b0 & 0x1F) << 6) | (np.int64(buf[p + 1]) & 0x3F)
    if b0 < 0xF0:
        if p + 3 > e:
            return -1
        return (
            ((b0 & 0x0F) << 12)
            | ((np.int64(buf[p + 1]) & 0x3F) << 6)
            | (np.int64(buf[p + 2]) & 0x3F)
        )
    if p + 4 > e:
        return -1
    return (
        ((b0 & 0x07) << 18)
        | ((np.int64(buf[p + 1]) & 0x3F) << 12)
        | ((np.int64(buf[p + 2]) & 0x3F) << 6)
        | (np.int64(buf[p + 3]) & 0x3F)
    )


@kernel(nogil=True)
def dominant_scripts(buf, offsets, table, slots, kana, han, high, out):
    """``out[d]``: the slot with the most letters in document ``d`` (lowest slot on
    a tie, 0 when none).  When a document has letters of slot ``kana``, its letters
    of slot ``han`` count for ``kana`` (Han with kana is Japanese).  ``high[d]`` is
    document ``d``'s largest byte (below 0x80: pure ASCII).  The buffer is
    valid UTF-8 (surrogates allowed): each lead byte starts a code point and
    continuation bytes are skipped."""
    counts = np.zeros(slots, dtype=np.int64)
    size = table.shape[0]
    latin = table[0x61]
    # ASCII letters are all Latin: counted in a register by a flat loop over the
    # bytes (no variable stride), which runs several times faster on ASCII text.
    ascii_letter = np.zeros(0x80, dtype=np.int64)
    for c in range(0x80):
        ascii_letter[c] = 1 if table[c] != 0 else 0
    for d in range(offsets.shape[0] - 1):
        e = offsets[d + 1]
        # A pure-ASCII document (most of an English corpus) is Latin when it has a
        # letter at all: a scan that stops at the first letter replaces the
        # per-byte table lookups.
        if high[d] < 0x80:
            best = 0
            for p in range(offsets[d], e):
                if ascii_letter[buf[p]]:
                    best = latin
                    break
            out[d] = best
            continue
        counts[:] = 0
        ascii_letters = 0
        for p in range(offsets[d], e):
            b0 = buf[p]
            if b0 < 0x80:
                ascii_letters += ascii_letter[b0]
            elif b0 >= 0xC0:
                cp = _code_point(buf, p, e)
                if 0 <= cp < size:
                    counts[table[cp]] += 1
        counts[latin] += ascii_letters
        if counts[kana] > 0:
            counts[kana] += counts[han]
            counts[han] = 0
        best = 0
        most = 0
        for s in range(1, slots):
            if counts[s] > most:
                best = s
                most = counts[s]
        out[d] = best

"""A compiled reader for the common JSONL record (numba, ``nogil``).

Parsing every line into Python objects held the GIL for most of a batch run's
reading time, while the hashing thread waited for it between kernel calls.  This
kernel handles the lines that need no Python at all — pure-ASCII JSON objects
whose text field is a string that decodes to ASCII and whose id field (if asked
for) is an integer or a plain string — and writes their decoded text into one
buffer, ready for the hashing kernel.

Every other line is *not* decided here: it is flagged, and the reader parses it
as before (orjson, then the standard library, which decides validity and words
the error).  So the kernel only has to be right about what it accepts:

* it accepts only strict JSON (RFC 8259: no NaN, no trailing commas, no control
  characters in strings, nothing after the object but whitespace), which both
  ``json.loads`` and orjson accept and parse to the same values;
* the text and id are read exactly as ``json.loads`` reads them (escapes decoded;
  integers of at most 18 digits; strings without escapes for ids);
* a line where the text or id key appears twice, or any key has an escape (so
  that two spellings could name one key), is flagged, not guessed.

The property tests check all this against ``json.loads`` on generated lines.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neardup.kernels._kernel import kernel, lazy

trailing_zeros: Any = lazy("numba.cpython.unsafe.numbers", "trailing_zeros")
_borrow: Any = lazy("neardup.kernels._intrinsics", "borrow")

__all__ = ["ID_INT", "ID_NONE", "ID_STR", "scan_block"]

ID_NONE = 0
ID_INT = 1
ID_STR = 2

_MAX_DEPTH = 60  # nesting below the record; deeper lines are flagged


@kernel
def _ws(buf, p, e):
    while p < e:
        c = buf[p]
        if c == 32 or c == 9 or c == 13 or c == 10:
            p += 1
        else:
            break
    return p


@kernel
def _hexval(c):
    if 48 <= c <= 57:
        return c - 48
    if 97 <= c <= 102:
        return c - 87
    if 65 <= c <= 70:
        return c - 55
    return -1


_LO = np.uint64(0x0101010101010101)
_HI = np.uint64(0x8080808080808080)
_QUOTES = np.uint64(0x2222222222222222)
_SLASHES = np.uint64(0x5C5C5C5C5C5C5C5C)
_SPACES = np.uint64(0x2020202020202020)


@kernel
def _load8(buf, p):
    v = np.uint64(0)
    for i in range(8):
        v |= np.uint64(buf[p + i]) << np.uint64(8 * i)
    return v


@kernel
def _special8(x):
    """The high bit of each byte of ``x`` that is a quote, a backslash, below 0x20
    or above 0x7F, at least for the lowest such byte (the subtractions' borrows
    only run upwards, so bytes above it may be flagged falsely); 0 if none is."""
    q = x ^ _QUOTES
    b = x ^ _SLASHES
    return (((q - _LO) & ~q) | ((b - _LO) & ~b) | (x - _SPACES) | x) & _HI


@kernel
def _plain8(x):
    """No byte of ``x`` is a quote, a backslash, below 0x20 or above 0x7F."""
    return _special8(x) == np.uint64(0)


@kernel
def _store8(out, w, x):
    for i in range(8):
        out[w + i] = np.uint8((x >> np.uint64(8 * i)) & np.uint64(0xFF))


@kernel
def _no_backslash8(x):
    b = x ^ _SLASHES
    return (((b - _LO) & ~b) & _HI) == np.uint64(0)


@kernel
def _ascii_u_escape(buf, p, e):
    """The value of the ``\\uXXXX`` escape at ``buf[p]``, or -1 if it is malformed
    or not ASCII (non-ASCII text takes the Python path)."""
    if p + 6 > e:
        return -1
    v = 0
    for j in range(2, 6):
        h = _hexval(buf[p + j])
        if h < 0:
            return -1
        v = v * 16 + h
    return v if v < 0x80 else -1


_CLOSED = -2
"""What :func:`_string_char` decodes a closing quote to."""


@kernel
def _string_char(buf, p, e):
    """The character of a JSON string at ``buf[p]`` (``p < e``): (its decoded byte,
    the position after it); (:data:`_CLOSED`, the position after the quote) at the
    closing quote; (-1, -1) if the string is not strict JSON or the character is
    not ASCII (non-ASCII text takes the Python path)."""
    c = buf[p]
    if c == 34:
        return _CLOSED, p + 1
    if c < 32 or c >= 128:
        return -1, -1
    if c != 92:
        return np.int64(c), p + 1
    if p + 1 >= e:
        return -1, -1
    d = buf[p + 1]
    # The escapes \" \\ \/ \b \f \n \r \t and \uXXXX.
    if d == 34 or d == 92 or d == 47:
        return np.int64(d), p + 2
    if d == 110:
        return 10, p + 2
    if d == 116:
        return 9, p + 2
    if d == 114:
        return 13, p + 2
    if d == 98:
        return 8, p + 2
    if d == 102:
        return 12, p + 2
    if d == 117:
        v = _ascii_u_escape(buf, p, e)
        if v >= 0:
            return np.int64(v), p + 6
    return -1, -1


@kernel
def _string_end(buf, p, e):
    """``buf[p]`` is a quote: the position after the closing quote, or -1 if the
    string is not strict JSON or decodes to anything but ASCII.  Also returns
    whether it holds an escape."""
    p += 1
    esc = False
    while p < e:
        # Eight plain bytes at a time (no quote, backslash, control or non-ASCII
        # byte): text values are most of a record's bytes.
        while p + 8 <= e and _plain8(_load8(buf, p)):
            p += 8
        if p >= e:
            break
        esc = esc or buf[p] == 92
        v, p = _string_char(buf, p, e)
        if v < 0:
            return p, esc
    return -1, esc


@kernel
def _copy_string(buf, p, e, out, w):
    """:func:`_string_end` that also writes the decoded string to ``out[w:]``;
    returns (position after the closing quote or -1, new ``w``).  Decoded text is
    never longer than its JSON form, so ``out`` needs only the line's length."""
    p += 1
    while p < e:
        # Eight bytes at a time; at a special byte, the plain bytes before it
        # are kept and the scan goes straight to it (the 8 bytes stored always
        # fit: the decoded text so far is no longer than the JSON read).
        while p + 8 <= e:
            x = _load8(buf, p)
            _store8(out, w, x)
            m = _special8(x)
            if m == np.uint64(0):
                p += 8
                w += 8
                continue
            skip = np.int64(trailing_zeros(m)) >> 3
            p += skip
            w += skip
            break
        if p >= e:
            break
        v, p = _string_char(buf, p, e)
        if v < 0:
            return p, w
        out[w] = v
        w += 1
    return -1, w


@kernel
def _number_end(buf, p, e):
    """Position after a strict JSON number starting at ``p``, or -1."""
    if p < e and buf[p] == 45:
        p += 1
    if p >= e:
        return -1
    if buf[p] == 48:
        p += 1
    elif 49 <= buf[p] <= 57:
        while p < e and 48 <= buf[p] <= 57:
            p += 1
    else:
        return -1
    if p < e and buf[p] == 46:
        p += 1
        if p >= e or not (48 <= buf[p] <= 57):
            return -1
        while p < e and 48 <= buf[p] <= 57:
            p += 1
    if p < e and (buf[p] == 101 or buf[p] == 69):
        p += 1
        if p < e and (buf[p] == 43 or buf[p] == 45):
            p += 1
        if p >= e or not (48 <= buf[p] <= 57):
            return -1
        while p < e and 48 <= buf[p] <= 57:
            p += 1
    return p


@kernel
def _literal_end(buf, p, e, word):
    n = word.shape[0]
    if p + n > e:
        return -1
    for j in range(n):
        if buf[p + j] != word[j]:
            return -1
    return p + n


@kernel
def _scalar_end(buf, p, e, lits):
    """End of a string, number or literal at ``p``; -1 if none (or not strict)."""
    c = buf[p]
    if c == 34:
        q, _ = _string_end(buf, p, e)
        return q
    if c == 45 or 48 <= c <= 57:
        return _number_end(buf, p, e)
    if c == 116:
        return _literal_end(buf, p, e, lits[0, :4])
    if c == 102:
        return _literal_end(buf, p, e, lits[1, :5])
    if c == 110:
        return _literal_end(buf, p, e, lits[2, :4])
    return -1


@kernel
def _after_key(buf, p, e):
    """At an object member's key: the position after its colon, or -1."""
    if p >= e or buf[p] != 34:
        return -1
    p, _ = _string_end(buf, p, e)
    if p < 0:
        return -1
    p = _ws(buf, p, e)
    if p >= e or buf[p] != 58:
        return -1
    return p + 1


@kernel
def _value_end(buf, p, e, lits):
    """Position after the JSON value starting at ``p`` (objects and arrays
    included, iteratively), or -1 if it is not strict JSON."""
    is_array = np.zeros(_MAX_DEPTH + 1, dtype=np.bool_)
    depth = 0
    while True:
        # A value starts at p.
        p = _ws(buf, p, e)
        if p >= e:
            return -1
        c = buf[p]
        if c == 123 or c == 91:
            close = 125 if c == 123 else 93
            p = _ws(buf, p + 1, e)
            if p < e and buf[p] == close:
                p += 1
            else:
                depth += 1
                if depth > _MAX_DEPTH:
                    return -1
                is_array[depth] = c == 91
                if c == 123:
                    p = _after_key(buf, p, e)
                    if p < 0:
                        return -1
                continue
        else:
            p = _scalar_end(buf, p, e, lits)
            if p < 0:
                return -1
        # The value ending at p is complete: close containers or go to the next.
        while True:
            if depth == 0:
                return p
            p = _ws(buf, p, e)
            if p >= e:
                return -1
            c = buf[p]
            if c == 44:
                p += 1
                if not is_array[depth]:
                    p = _after_key(buf, _ws(buf, p, e), e)
                    if p < 0:
                        return -1
                break
            if (c == 93 and is_array[depth]) or (c == 125 and not is_array[depth]):
                p += 1
                depth -= 1
                continue
            return -1


@kernel
def _key_is(buf, ks, ke, key):
    n = key.shape[0]
    if n == 0 or ke - ks != n:
        return False
    for j in range(n):  # noqa: SIM110 (no generators in compiled code)
        if buf[ks + j] != key[j]:
            return False
    return True


@kernel
def _scan_line(buf, s, e, text_key, id_key, want_id, lits, out, out_span, out_id):
    """Scan one line; True if it is handled here.  The decoded text value is
    written to ``out`` from ``out_span[0]``, which gets its end in ``out_span[1]``;
    ``out_id`` gets (kind, int value, start, end)."""
    p = _ws(buf, s, e)
    if p >= e or buf[p] != 123:
        return False
    p = _ws(buf, p + 1, e)
    seen_text = False
    seen_id = False
    if p < e and buf[p] == 125:
        return False  # no text field: the Python path words the error
    while True:
        if p >= e or buf[p] != 34:
            return False
        ks = p + 1
        q, kesc = _string_end(buf, p, e)
        if q < 0 or kesc:
            return False
        ke = q - 1
        p = _ws(buf, q, e)
        if p >= e or buf[p] != 58:
            return False
        p = _ws(buf, p + 1, e)
        if p >= e:
            return False
        if _key_is(buf, ks, ke, text_key):
            if seen_text or buf[p] != 34:
                return False
            q, w = _copy_string(buf, p, e, out, out_span[0])
            if q < 0:
                return False
            out_span[1] = w
            seen_text = True
            p = q
        elif want_id and _key_is(buf, ks, ke, id_key):
            if seen_id:
                return False
            c = buf[p]
            if c == 34:
                q, vesc = _string_end(buf, p, e)
                if q < 0 or vesc:
                    return False
                out_id[0] = ID_STR
                out_id[2] = p + 1
                out_id[3] = q - 1
            elif c == 45 or 48 <= c <= 57:
                q = _number_end(buf, p, e)
                if q < 0:
                    return False
                neg = c == 45
                a = p + 1 if neg else p
                if q - a > 18:
                    return False
                v = np.int64(0)
                for j in range(a, q):
                    d = buf[j]
                    if not (48 <= d <= 57):
                        return False  # a fraction or exponent: a float id
                    v = v * 10 + (d - 48)
                out_id[0] = ID_INT
                out_id[1] = -v if neg else v
            else:
                return False
            seen_id = True
            p = q
        else:
            p = _value_end(buf, p, e, lits)
            if p < 0:
                return False
        p = _ws(buf, p, e)
        if p >= e:
            return False
        if buf[p] == 44:
            p = _ws(buf, p + 1, e)
            continue
        if buf[p] == 125:
            p += 1
            break
        return False
    if _ws(buf, p, e) != e:
        return False
    return seen_text and (seen_id or not want_id)


@kernel(nogil=True)
def scan_block(buf, starts, ends, text_key, id_key, want_id, out=None):
    """Scan the lines ``buf[starts[i]:ends[i]]`` of a JSONL block.

    Returns ``(handled, text, offsets, id_kind, id_int, id_start, id_end)``:
    ``handled[i]`` says whether line ``i`` was read here; ``text`` holds the
    decoded text of the handled lines, line ``i``'s at
    ``text[offsets[i]:offsets[i + 1]]`` (empty for the others); ids as in
    :data:`ID_INT` / :data:`ID_STR` (``id_start``/``id_end`` index ``buf``).
    ``out``, if at least as long as the lines, receives the text (``text`` is then
    its start), so that a caller can decode into memory it prepared.
    """
    n = starts.shape[0]
    lits = np.zeros((3, 5), dtype=np.uint8)
    for j, c in enumerate((116, 114, 117, 101)):
        lits[0, j] = c
    for j, c in enumerate((102, 97, 108, 115, 101)):
        lits[1, j] = c
    for j, c in enumerate((110, 117, 108, 108)):
        lits[2, j] = c
    handled = np.zeros(n, dtype=np.bool_)
    id_kind = np.zeros(n, dtype=np.int8)
    id_int = np.zeros(n, dtype=np.int64)
    id_start = np.zeros(n, dtype=np.int64)
    id_end = np.zeros(n, dtype=np.int64)
    span = np.zeros(2, dtype=np.int64)
    idv = np.zeros(4, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    total = 0
    for i in range(n):
        total += ends[i] - starts[i]
    if out is None or out.shape[0] < total:  # noqa: SIM108 - numba prunes the None branch
        text = np.empty(total, dtype=np.uint8)
    else:
        text = out
    w = 0
    # Borrowed arrays: every helper call below takes them, and owned ones cost
    # reference counting on each (about 35 atomic updates per line).
    b_buf = _borrow(buf)
    b_text_key = _borrow(text_key)
    b_id_key = _borrow(id_key)
    b_lits = _borrow(lits)
    b_text = _borrow(text)
    b_span = _borrow(span)
    b_idv = _borrow(idv)
    for i in range(n):
        span[0] = w
        span[1] = w
        idv[0] = ID_NONE
        if _scan_line(
            b_buf, starts[i], ends[i], b_text_key, b_id_key, want_id, b_lits, b_text, b_span, b_idv
        ):
            handled[i] = True
            w = span[1]
            id_kind[i] = idv[0]
            id_int[i] = idv[1]
            id_start[i] = idv[2]
            id_end[i] = idv[3]
        # A line given up on after its text was copied leaves nothing: w stays.
        offsets[i + 1] = w
    return handled, text[:w], offsets, id_kind, id_int, id_start, id_end

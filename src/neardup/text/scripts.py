"""The dominant Unicode script of a document, for per-language counts.

A document's script is the script with the most letters in it; a letter is a
character of category ``L*`` or ``M*`` (marks count for the script whose block
holds them: Indic vowel signs, Hebrew points) inside one of the ranges of
:data:`SCRIPT_RANGES`, and any other ``Lu``/``Ll``/``Lt``/``Lo`` character counts for
``other``.  Digits, punctuation, symbols, spaces, emoji, surrogates and unassigned
code points count for nothing.  Two rules merge scripts: letters of Han in a
document that has kana (Hiragana or Katakana) count as ``Japanese``; Hangul is
``Korean``.  Ties go to the script listed first in :data:`SCRIPTS`; a document
without letters is ``none``.

The definition is :func:`script_of` (Python, one character at a time); batches go
through a compiled kernel (:func:`detect_scripts`) over the UTF-8 buffer, property
tested against it.  The answer depends only on the text and on the Unicode
database of the running Python (for which code points are letters).

>>> script_of("Привет, мир")
'Cyrillic'
>>> script_of("東京は晴れ"), script_of("东京晴天"), script_of("12 + 3")
('Japanese', 'Han', 'none')
"""

from __future__ import annotations

import bisect
import functools
import unicodedata
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from neardup.core.tablecache import cached_table
from neardup.text.normalize import EncodedTexts

__all__ = [
    "SCRIPTS",
    "SCRIPT_RANGES",
    "char_script",
    "detect_scripts",
    "label_counts",
    "script_names",
    "script_of",
]

SCRIPTS: tuple[str, ...] = (
    "none",
    "Latin",
    "Greek",
    "Cyrillic",
    "Armenian",
    "Hebrew",
    "Arabic",
    "Devanagari",
    "Bengali",
    "Gurmukhi",
    "Gujarati",
    "Oriya",
    "Tamil",
    "Telugu",
    "Kannada",
    "Malayalam",
    "Sinhala",
    "Thai",
    "Lao",
    "Tibetan",
    "Myanmar",
    "Georgian",
    "Ethiopic",
    "Khmer",
    "Korean",
    "Japanese",
    "Han",
    "other",
)
"""Script names by id (the id is the position; ``detect_scripts`` returns ids)."""

_ID = {name: i for i, name in enumerate(SCRIPTS)}
_KANA = _ID["Japanese"]
_HAN = _ID["Han"]
_OTHER = _ID["other"]
_TABLE_SIZE = 0x40000  # past plane 3 nothing is a letter (tags, private use)

SCRIPT_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x0041, 0x005A, "Latin"),
    (0x0061, 0x007A, "Latin"),
    (0x00AA, 0x00AA, "Latin"),
    (0x00BA, 0x00BA, "Latin"),
    (0x00C0, 0x024F, "Latin"),
    (0x0250, 0x02AF, "Latin"),
    (0x0370, 0x03FF, "Greek"),
    (0x0400, 0x052F, "Cyrillic"),
    (0x0531, 0x058F, "Armenian"),
    (0x0591, 0x05FF, "Hebrew"),
    (0x0600, 0x06FF, "Arabic"),
    (0x0750, 0x077F, "Arabic"),
    (0x0870, 0x08FF, "Arabic"),
    (0x0900, 0x097F, "Devanagari"),
    (0x0980, 0x09FF, "Bengali"),
    (0x0A00, 0x0A7F, "Gurmukhi"),
    (0x0A80, 0x0AFF, "Gujarati"),
    (0x0B00, 0x0B7F, "Oriya"),
    (0x0B80, 0x0BFF, "Tamil"),
    (0x0C00, 0x0C7F, "Telugu"),
    (0x0C80, 0x0CFF, "Kannada"),
    (0x0D00, 0x0D7F, "Malayalam"),
    (0x0D80, 0x0DFF, "Sinhala"),
    (0x0E00, 0x0E7F, "Thai"),
    (0x0E80, 0x0EFF, "Lao"),
    (0x0F00, 0x0FFF, "Tibetan"),
    (0x1000, 0x109F, "Myanmar"),
    (0x10A0, 0x10FF, "Georgian"),
    (0x1100, 0x11FF, "Korean"),
    (0x1200, 0x139F, "Ethiopic"),
    (0x1780, 0x17FF, "Khmer"),
    (0x19E0, 0x19FF, "Khmer"),
    (0x1C80, 0x1C8F, "Cyrillic"),
    (0x1C90, 0x1CBF, "Georgian"),
    (0x1D00, 0x1DBF, "Latin"),
    (0x1E00, 0x1EFF, "Latin"),
    (0x1F00, 0x1FFF, "Greek"),
    (0x2C60, 0x2C7F, "Latin"),
    (0x2D00, 0x2D2F, "Georgian"),
    (0x2D80, 0x2DDF, "Ethiopic"),
    (0x2DE0, 0x2DFF, "Cyrillic"),
    (0x3005, 0x3007, "Han"),
    (0x3021, 0x3029, "Han"),
    (0x3038, 0x303B, "Han"),
    (0x3041, 0x30FF, "Japanese"),
    (0x3130, 0x318F, "Korean"),
    (0x31F0, 0x31FF, "Japanese"),
    (0x3400, 0x4DBF, "Han"),
    (0x4E00, 0x9FFF, "Han"),
    (0xA640, 0xA69F, "Cyrillic"),
    (0xA720, 0xA7FF, "Latin"),
    (0xA8E0, 0xA8FF, "Devanagari"),
    (0xA960, 0xA97F, "Korean"),
    (0xA9E0, 0xA9FF, "Myanmar"),
    (0xAA60, 0xAA7F, "Myanmar"),
    (0xAB00, 0xAB2F, "Ethiopic"),
    (0xAB30, 0xAB6F, "Latin"),
    (0xAC00, 0xD7FF, "Korean"),
    (0xF900, 0xFAFF, "Han"),
    (0xFB00, 0xFB06, "Latin"),
    (0xFB13, 0xFB17, "Armenian"),
    (0xFB1D, 0xFB4F, "Hebrew"),
    (0xFB50, 0xFDFF, "Arabic"),
    (0xFE70, 0xFEFF, "Arabic"),
    (0xFF21, 0xFF3A, "Latin"),
    (0xFF41, 0xFF5A, "Latin"),
    (0xFF66, 0xFF9F, "Japanese"),
    (0xFFA0, 0xFFDC, "Korean"),
    (0x1AFF0, 0x1B16F, "Japanese"),
    (0x1E7E0, 0x1E7FF, "Ethiopic"),
    (0x1EE00, 0x1EEFF, "Arabic"),
    (0x20000, 0x2FA1F, "Han"),
    (0x30000, 0x323AF, "Han"),
)
"""Code point ranges (inclusive) and the script whose letters they hold: the
Unicode blocks of each script (kana blocks are ``Japanese``, Hangul ``Korean``)."""

_STARTS = [r[0] for r in SCRIPT_RANGES]


def char_script(ch: str) -> int:
    """The script id one character counts for (0: it is not a letter).

    >>> SCRIPTS[char_script("ж")], SCRIPTS[char_script("7")], SCRIPTS[char_script("ʻ")]
    ('Cyrillic', 'none', 'none')
    """
    cp = ord(ch)
    if cp >= _TABLE_SIZE:
        return 0
    cat = unicodedata.category(ch)
    if cat[0] not in "LM":
        return 0
    k = bisect.bisect_right(_STARTS, cp) - 1
    if k >= 0 and cp <= SCRIPT_RANGES[k][1]:
        return _ID[SCRIPT_RANGES[k][2]]
    return _OTHER if cat in ("Lu", "Ll", "Lt", "Lo") else 0


def _dominant(counts: Mapping[int, int]) -> int:
    counts = dict(counts)
    if counts.get(_KANA, 0) > 0:
        counts[_KANA] += counts.pop(_HAN, 0)
    best, most = 0, 0
    for sid in sorted(counts):
        if sid and counts[sid] > most:
            best, most = sid, counts[sid]
    return best


def script_of(text: str) -> str:
    """The dominant script of ``text`` (the reference definition; see the module).

    >>> script_of("Hello, Welt"), script_of("مرحبا"), script_of("")
    ('Latin', 'Arabic', 'none')
    """
    counts: dict[int, int] = {}
    for ch in text:
        sid = char_script(ch)
        if sid:
            counts[sid] = counts.get(sid, 0) + 1
    return SCRIPTS[_dominant(counts)]


@functools.cache
def _table() -> npt.NDArray[np.uint8]:
    return cached_table("scripts", __file__, _build_table)


def _build_table() -> npt.NDArray[np.uint8]:
    # From the same rule as char_script.
    table = np.zeros(_TABLE_SIZE, dtype=np.uint8)
    for lo, hi, name in SCRIPT_RANGES:
        table[lo : hi + 1] = _ID[name]
    cats = list(map(unicodedata.category, map(chr, range(_TABLE_SIZE))))
    kinds = sorted(set(cats))
    cat = np.fromiter(
        map({c: i for i, c in enumerate(kinds)}.__getitem__, cats),
        dtype=np.uint8,
        count=_TABLE_SIZE,
    )
    letter = np.isin(cat, [i for i, c in enumerate(kinds) if c[0] in "LM"])
    plain = np.isin(cat, [i for i, c in enumerate(kinds) if c in ("Lu", "Ll", "Lt", "Lo")])
    table[~letter] = 0
    table[(table == 0) & plain] = _OTHER
    return table


def detect_scripts(texts: EncodedTexts) -> npt.NDArray[np.uint8]:
    """The script id of every document of a UTF-8 batch (``texts.get(i)`` is
    document ``i``); ``SCRIPTS[ids[i]] == script_of(texts.get(i).decode())``
    (surrogates, written with ``surrogatepass``, count for nothing).

    >>> ids = detect_scripts(EncodedTexts.from_bytes(["Ελλάδα".encode(), b"ok"]))
    >>> script_names(ids)
    ['Greek', 'Latin']
    """
    from neardup.kernels import _scripts as KS

    out = np.zeros(len(texts.offsets) - 1, dtype=np.uint8)
    if len(out):
        high = _largest_bytes(texts)
        table = _table()
        KS.dominant_scripts(texts.buf, texts.offsets, table, len(SCRIPTS), _KANA, _HAN, high, out)
    return out


def _largest_bytes(texts: EncodedTexts) -> npt.NDArray[np.uint8]:
    """Each document's largest byte (0 for an empty one): numpy's ``reduceat`` runs
    at memory speed, where a loop in the kernel did not vectorize (and ``max`` of
    a slice there made numba's cache loads rebuild its compiler registry)."""
    starts = texts.offsets[:-1]
    out = np.zeros(len(starts), dtype=np.uint8)
    nonempty = np.diff(texts.offsets) > 0
    if nonempty.any():
        # Segments of the non-empty documents only: each then ends where the next
        # non-empty one starts, which is its own end.
        out[nonempty] = np.maximum.reduceat(texts.buf[: texts.offsets[-1]], starts[nonempty])
    return out


def script_names(ids: npt.NDArray[np.uint8] | Sequence[int]) -> list[str]:
    """The names of script ids, in order."""
    return [SCRIPTS[int(i)] for i in ids]


def label_counts(
    labels: Sequence[str],
    flags: Mapping[str, npt.NDArray[np.bool_]],
    *,
    total: str = "documents",
) -> dict[str, dict[str, int]]:
    """Per label, in label order: how many items have it (``total``) and, for each
    of ``flags``, how many of those are flagged.

    >>> label_counts(["Latin", "Han", "Latin"], {"duplicates": np.array([0, 0, 1], bool)})
    {'Han': {'documents': 1, 'duplicates': 0}, 'Latin': {'documents': 2, 'duplicates': 1}}
    """
    names, inverse = np.unique(np.asarray(labels, dtype=object), return_inverse=True)
    size = len(names)
    docs = np.bincount(inverse, minlength=size)
    counts = {
        name: np.bincount(inverse, weights=mask.astype(np.int64), minlength=size)
        for name, mask in flags.items()
    }
    return {
        str(names[k]): {total: int(docs[k]), **{n: int(c[k]) for n, c in counts.items()}}
        for k in range(size)
    }

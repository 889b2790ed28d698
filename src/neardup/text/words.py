"""What a *word* is: the tokens of ``word`` shingles, defined once, per tokenizer version.

Tokenizer 2 (the default) is script-aware.  Every character is in one of four
classes (:func:`char_class`):

* 0 — not part of a word (spaces, punctuation, symbols, emoji, joiners);
* 1 — a word character: Python's ``\\w`` (letters, digits, ``_``) of a script
  written with spaces between words (Latin, Cyrillic, Greek, Arabic, Hebrew,
  Devanagari and the other Indic scripts, Hangul, ...), and the decimal digits of
  every script;
* 2 — a letter of a script written *without* spaces between words (the ranges
  of :data:`UNSPACED_SCRIPTS`: Han ideographs with their extensions and
  compatibility forms, Hiragana, Katakana including halfwidth forms, Yi, Thai,
  Lao, Khmer, Myanmar, Tibetan and the Tai scripts): each is a token of its own,
  as Unicode's word-boundary rules and Lucene's CJK analysis treat ideographs;
* 3 — a combining mark (general category Mn, Mc or Me): it belongs to the token
  it follows, whatever that token is, and is dropped where no token precedes it
  (Unicode's word-boundary rule WB4).  So a Thai vowel sign or tone mark stays
  with its consonant, and a Devanagari vowel sign or virama with its word.

A token is then a maximal run of class-1 characters and the marks that follow
them, or one class-2 character and the marks that follow it.  Mixed text works
as expected: ``"iPhone15の価格"`` is ``iphone15 の 価 格`` after normalization.

Tokenizer 1 (every release before tokenizer versions existed) takes maximal runs
of ``\\w``: a sentence of Chinese, Japanese or Thai is one token, and combining
marks split words.  It stays available to reproduce old runs and to keep
answering with indexes and tenants built with it.

The compiled tokenizer (:mod:`neardup.kernels._tokens`) reads the classes from
:func:`word_table`; the tests check it against :func:`word_tokens`.

Example:
    >>> word_tokens("東京タワー is 333m tall")
    ['東', '京', 'タ', 'ワ', 'ー', 'is', '333m', 'tall']
    >>> word_tokens("東京タワー is 333m tall", 1)
    ['東京タワー', 'is', '333m', 'tall']
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from neardup.core.config import TOKENIZER_VERSIONS, check_tokenizer
from neardup.core.tablecache import cached_table

__all__ = [
    "TOKENIZER_VERSIONS",
    "UNSPACED_SCRIPTS",
    "char_class",
    "token_counts",
    "word_pattern",
    "word_spans",
    "word_spans_many",
    "word_table",
    "word_tokens",
]

UNSPACED_SCRIPTS: tuple[tuple[str, int, int], ...] = (
    ("Thai", 0x0E00, 0x0E7F),
    ("Lao", 0x0E80, 0x0EFF),
    ("Tibetan", 0x0F00, 0x0FFF),
    ("Myanmar", 0x1000, 0x109F),
    ("Khmer", 0x1780, 0x17FF),
    ("Tai Le", 0x1950, 0x197F),
    ("New Tai Lue", 0x1980, 0x19DF),
    ("Tai Tham", 0x1A20, 0x1AAF),
    ("CJK symbols (iteration marks, ideographic numbers)", 0x3000, 0x303F),
    ("Hiragana", 0x3040, 0x309F),
    ("Katakana", 0x30A0, 0x30FF),
    ("Katakana phonetic extensions", 0x31F0, 0x31FF),
    ("CJK unified ideographs extension A", 0x3400, 0x4DBF),
    ("CJK unified ideographs", 0x4E00, 0x9FFF),
    ("Yi syllables", 0xA000, 0xA48F),
    ("Myanmar extended-B", 0xA9E0, 0xA9FF),
    ("Myanmar extended-A", 0xAA60, 0xAA7F),
    ("Tai Viet", 0xAA80, 0xAADF),
    ("CJK compatibility ideographs", 0xF900, 0xFAFF),
    ("Halfwidth katakana", 0xFF66, 0xFF9F),
    ("Kana extended-B, kana supplement, kana extended-A, small kana", 0x1AFF0, 0x1B16F),
    ("CJK ideographs of planes 2 and 3 (extensions B-I, compatibility)", 0x20000, 0x3FFFF),
)
"""(name, first, last) code point blocks whose word characters are tokens of their
own under tokenizer 2 (their decimal digits excepted: they form runs like other
digits).  Hangul is not here: Korean is written with spaces between words."""

_W = re.compile(r"\w")


def char_class(ch: str, tokenizer: int = 2) -> int:
    """The class (0-3, see the module docstring) of one character under ``tokenizer``.

    >>> [char_class(c) for c in "a中\\u0e34 "]
    [1, 2, 3, 0]
    """
    version = check_tokenizer(tokenizer)
    if _W.match(ch):
        if version == 1:
            return 1
        cp = ord(ch)
        unspaced = any(lo <= cp <= hi for _, lo, hi in UNSPACED_SCRIPTS)
        return 2 if unspaced and unicodedata.category(ch) != "Nd" else 1
    if version >= 2 and unicodedata.category(ch) in ("Mn", "Mc", "Me"):
        return 3
    return 0


def word_table(tokenizer: int = 2) -> npt.NDArray[np.uint8]:
    """:func:`char_class` of every code point, as the compiled tokenizer reads it
    (computed once per version, read-only)."""
    return _table(check_tokenizer(tokenizer))


@functools.cache
def _table(version: int) -> npt.NDArray[np.uint8]:
    return cached_table(f"word-classes-{version}", __file__, lambda: _build_table(version))


def _build_table(version: int) -> npt.NDArray[np.uint8]:
    # Decoding all code points as UTF-32 builds the string in one C call instead
    # of 1.1M chr() calls, paid by every run.
    universe = np.arange(0x110000, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")
    if version == 1:
        table = np.zeros(0x110000, dtype=np.uint8)
        for m in re.finditer(r"\w+", universe):
            table[m.start() : m.end()] = 1
    else:
        table = _table(1).copy()
        digit = np.zeros(0x110000, dtype=np.bool_)
        for m in re.finditer(r"\d+", universe):  # \d of str: exactly category Nd
            digit[m.start() : m.end()] = True
        for _, lo, hi in UNSPACED_SCRIPTS:
            part = table[lo : hi + 1]
            part[(part == 1) & ~digit[lo : hi + 1]] = 2
        # Combining marks live in planes 0, 1 and 14 only (the tests check every
        # code point), so the other planes' categories are not asked for.
        category = unicodedata.category
        for lo, hi in ((0, 0x20000), (0xE0000, 0xF0000)):
            marks = [category(c) in ("Mn", "Mc", "Me") for c in universe[lo:hi]]
            table[lo:hi][np.array(marks, dtype=np.bool_)] = 3
    table.flags.writeable = False
    return table


def _char_set(table: npt.NDArray[np.uint8], cls: int) -> str:
    """A regular-expression character set of the code points of class ``cls``."""
    cps = np.flatnonzero(table == cls)
    if cps.size == 0:
        return "[^\\s\\S]"
    breaks = np.flatnonzero(np.diff(cps) != 1)
    firsts = np.concatenate([cps[:1], cps[breaks + 1]])
    lasts = np.concatenate([cps[breaks], cps[-1:]])
    parts = (
        f"\\U{int(a):08x}" if a == b else f"\\U{int(a):08x}-\\U{int(b):08x}"
        for a, b in zip(firsts, lasts, strict=True)
    )
    return "[" + "".join(parts) + "]"


def word_pattern(tokenizer: int = 2) -> re.Pattern[str]:
    """The compiled pattern whose matches are the tokens of ``tokenizer``, in order."""
    return _pattern(check_tokenizer(tokenizer))


@functools.cache
def _pattern(version: int) -> re.Pattern[str]:
    if version == 1:
        return re.compile(r"\w+")
    table = _table(version)
    word, single, mark = (_char_set(table, c) for c in (1, 2, 3))
    return re.compile(f"{single}{mark}*|{word}(?:{word}|{mark})*")


def word_spans(text: str, tokenizer: int = 2) -> tuple[list[int], list[int]]:
    """The starts and ends (code point offsets) of the word tokens of ``text``, in
    order: the spans of :func:`word_pattern`'s matches, found from the class table
    without compiling that pattern (its thousands of ranges take longer to compile
    than a run's report takes to tokenize).

    A token starts where :func:`token_counts` says, and ends at the next token
    start or character of class 0.

    >>> word_spans("iphone15の価格 ok")
    ([0, 8, 9, 10, 12], [8, 9, 10, 11, 14])
    """
    return word_spans_many([text], tokenizer)[0]


def word_spans_many(texts: Sequence[str], tokenizer: int = 2) -> list[tuple[list[int], list[int]]]:
    """:func:`word_spans` of each text, found in one pass over all of them.

    >>> word_spans_many(["a b", "", "中文"])
    [([0, 2], [1, 3]), ([], []), ([0, 1], [1, 2])]
    """
    check_tokenizer(tokenizer)
    if not texts:
        return []
    cls, starts, lengths = _token_starts(texts, tokenizer)
    bounds = np.flatnonzero(starts | (cls == 0))
    firsts = np.flatnonzero(starts)
    ends = np.append(bounds, cls.shape[0])[np.searchsorted(bounds, firsts) + 1]
    text_starts = np.concatenate([np.zeros(1, np.int64), np.cumsum(lengths + 1)[:-1]])
    owner = np.searchsorted(text_starts, firsts, side="right") - 1
    cuts = np.searchsorted(owner, np.arange(len(texts) + 1)).tolist()
    local_firsts = (firsts - text_starts[owner]).tolist()
    local_ends = (ends - text_starts[owner]).tolist()
    return [
        (local_firsts[cuts[i] : cuts[i + 1]], local_ends[cuts[i] : cuts[i + 1]])
        for i in range(len(texts))
    ]


def _token_starts(
    texts: Sequence[str], tokenizer: int
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
    """The class of every code point of ``texts`` joined by newlines, where a token
    starts (the rule :func:`token_counts` states), and each text's length."""
    table = word_table(tokenizer)
    # Texts joined by a character of class 0, so that no token spans two of them.
    joined = "\n".join(texts).encode("utf-32-le", "surrogatepass")
    cls = table[np.frombuffer(joined, dtype="<u4")]
    pos = np.arange(cls.shape[0])
    last = np.maximum.accumulate(np.where(cls != 3, pos, -1))
    before = np.concatenate([np.zeros(1, np.uint8), np.where(last >= 0, cls[last], 0)[:-1]])
    starts = (cls == 2) | ((cls == 1) & (before != 1))
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    return cls, starts, lengths


def word_tokens(text: str, tokenizer: int = 2) -> list[str]:
    """The word tokens of ``text`` (already normalized), in order.

    >>> word_tokens("กินข้าว 2024")
    ['กิ', 'น', 'ข้', 'า', 'ว', '2024']
    >>> word_tokens("हिन्दी text"), word_tokens("हिन्दी text", 1)
    (['हिन्दी', 'text'], ['ह', 'न', 'द', 'text'])
    """
    firsts, ends = word_spans(text, tokenizer)
    return [text[a:b] for a, b in zip(firsts, ends, strict=True)]


def token_counts(texts: Sequence[str], tokenizer: int = 2) -> npt.NDArray[np.int64]:
    """``len(word_tokens(t, tokenizer))`` of every text, counted by NumPy over the
    code points of the whole batch (no compiled kernel to load: the memory plan
    counts a sample's tokens before the run loads its kernels).

    A token starts at every class-2 character, and at a class-1 character unless
    the character before it, marks skipped, is of class 1 (it then continues that
    run).

    >>> token_counts(["東京タワー is 333m tall", "", "हिन्दी text"]).tolist()
    [8, 0, 2]
    """
    n = len(texts)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    cls, starts, lengths = _token_starts(texts, tokenizer)
    owner = np.repeat(np.arange(n), lengths + 1)[: cls.shape[0]]
    return np.bincount(owner[starts], minlength=n).astype(np.int64)

"""Stage 1 — versioned text normalization.

A normalizer is named and versioned (``nfkc-casefold@1``); the name and version are
part of every scheme fingerprint, so signatures computed under different
normalizations can never be compared by accident.  Normalization is used for
candidate discovery only: :meth:`Normalizer.with_offsets` keeps a map from every
normalized character back to the original text so that explanations can point at
what a person actually wrote.

Example:
    >>> n = get_normalizer("nfkc-casefold")
    >>> n("  Ｆｏｘ\\tRUNS  ")
    'fox runs'
    >>> nt = n.with_offsets("  Ｆｏｘ\\tRUNS  ")
    >>> nt.original_span(0, 3)
    (2, 5)
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from neardup.core._errors import InvalidConfig
from neardup.core.checks import check_text
from neardup.core.config import NORMALIZER_VERSIONS, check_normalizer
from neardup.core.tablecache import cached_table

__all__ = [
    "NORMALIZERS",
    "EncodedTexts",
    "NormalizedText",
    "Normalizer",
    "get_normalizer",
    "nfkc",
    "normalize_batch",
]

_NON_SPACE = re.compile(r"\S+")


def _identity(text: str) -> str:
    return text


def nfkc(text: str) -> str:
    """Exactly ``unicodedata.normalize("NFKC", text)``, with less work on text with
    compatibility characters (the full-width punctuation of Chinese and Japanese
    text, for instance).

    Python normalizes a string that has any such character as a whole, decomposing
    and recomposing every character.  Here each run of Basic Multilingual Plane
    characters that NFKC changes is replaced by its own NFKC first, and the result
    normalized again — usually by Python's quick check alone.  The result is the
    same: NFKC of a string depends only on the compatibility decomposition of each
    character and the canonical order of the marks, and replacing a substring by
    its NFKC keeps both (the tests check it on random text of every script).

    >>> nfkc("中文（简体）：ｶﾞ")
    '中文(简体):ガ'
    """
    if text.isascii() or unicodedata.is_normalized("NFKC", text):
        return text
    return unicodedata.normalize("NFKC", _compat_runs().sub(_nfkc_match, text))


@functools.cache
def _compat_runs() -> re.Pattern[str]:
    """Runs of the BMP characters that NFKC changes (a code point table kept
    between runs, :mod:`neardup.core.tablecache`).

    :func:`nfkc` is exact whatever this matches: its final pass normalizes the
    whole text, and the runs replaced first only decide how much work is left."""
    table = cached_table("nfkc-changed-bmp", __file__, _changed_bmp)
    cps = np.flatnonzero(table)
    breaks = np.flatnonzero(np.diff(cps) != 1)
    firsts = np.concatenate([cps[:1], cps[breaks + 1]])
    lasts = np.concatenate([cps[breaks], cps[-1:]])
    parts = (f"\\u{int(a):04x}-\\u{int(b):04x}" for a, b in zip(firsts, lasts, strict=True))
    # BMP only: a set of BMP ranges compiles to a bitmap (one lookup per character);
    # the few changed characters of other planes are left to the final pass.
    return re.compile("[" + "".join(parts) + "]+")


def _changed_bmp() -> npt.NDArray[np.uint8]:
    normalize = unicodedata.normalize
    bmp = np.arange(0x10000, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")
    return np.array([normalize("NFKC", c) != c for c in bmp], dtype=np.uint8)


@functools.lru_cache(maxsize=4096)
def _nfkc_run(run: str) -> str:
    return unicodedata.normalize("NFKC", run)


def _nfkc_match(m: re.Match[str]) -> str:
    return _nfkc_run(m.group())


def _nfkc_casefold(text: str) -> str:
    # ASCII is already NFKC and its case folding is lower(): skip the Unicode pass.
    if text.isascii():
        return text.lower()
    return nfkc(text).casefold()


@dataclass(frozen=True, slots=True)
class NormalizedText:
    """Normalized text plus, per normalized character, its span in the original.

    ``starts[i]``/``ends[i]`` delimit the original characters that produced
    normalized character ``i``; a collapsed whitespace run maps to the whole run.
    """

    original: str
    text: str
    starts: tuple[int, ...]
    ends: tuple[int, ...]

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """Map the normalized slice ``[start, end)`` to a slice of the original text."""
        if not 0 <= start <= end <= len(self.text):
            raise InvalidConfig(
                "span",
                (start, end),
                f"outside the normalized text of length {len(self.text)}",
                "pass 0 <= start <= end <= len(text)",
            )
        if start == end:
            pos = self.starts[start] if start < len(self.starts) else len(self.original)
            return pos, pos
        return min(self.starts[start:end]), max(self.ends[start:end])


@dataclass(frozen=True, slots=True)
class Normalizer:
    """A named, versioned, pure text transform.

    Guarantees: deterministic for a given (name, version) and Python's Unicode
    database version (recorded in :attr:`fingerprint`); idempotent for the built-in
    normalizers except ``raw`` which is the identity.
    """

    name: str
    version: int
    casefold_nfkc: Callable[[str], str]
    collapse_whitespace: bool
    description: str
    ascii_lower: bool = False
    """What ``casefold_nfkc`` does to pure-ASCII text: lowercase it (or nothing)."""

    @property
    def fingerprint(self) -> str:
        """``name@version/unicode-X.Y.Z``: what is written into scheme descriptors."""
        return f"{self.name}@{self.version}/unicode-{unicodedata.unidata_version}"

    def __call__(self, text: str) -> str:
        out = self.casefold_nfkc(check_text("text", text))
        if self.collapse_whitespace:
            out = " ".join(out.split())
        return out

    def with_offsets(self, text: str) -> NormalizedText:
        """Normalize and keep the map back to original character offsets.

        The result's ``text`` always equals ``self(text)``.
        """
        chars, starts, ends = self._segment_map(check_text("text", text))
        if self.collapse_whitespace:
            joined = "".join(chars)
            out_chars: list[str] = []
            o_starts: list[int] = []
            o_ends: list[int] = []
            prev_end: int | None = None
            for m in _NON_SPACE.finditer(joined):
                a, b = m.span()
                if prev_end is not None:
                    out_chars.append(" ")
                    o_starts.append(starts[prev_end])
                    o_ends.append(ends[a - 1])
                # A run of characters at a time (pieces, not characters: only
                # joined below), not a Python step per character.
                out_chars.append(joined[a:b])
                o_starts.extend(starts[a:b])
                o_ends.extend(ends[a:b])
                prev_end = b
            chars, starts, ends = out_chars, o_starts, o_ends
        result = "".join(chars)
        return NormalizedText(text, result, tuple(starts), tuple(ends))

    def _segment_map(self, text: str) -> tuple[list[str], list[int], list[int]]:
        """Normalize per segment (a starter and its combining marks) and map back."""
        target = self.casefold_nfkc(text)
        if text.isascii():
            # ASCII maps one character to one character under every built-in normalizer.
            return list(target), list(range(len(text))), list(range(1, len(text) + 1))
        for segments in (_grapheme_segments(text), _space_segments(text), [(0, len(text))]):
            chars: list[str] = []
            starts: list[int] = []
            ends: list[int] = []
            for s, e in segments:
                piece = self.casefold_nfkc(text[s:e])
                chars.extend(piece)
                starts.extend([s] * len(piece))
                ends.extend([e] * len(piece))
            if "".join(chars) == target:
                return chars, starts, ends
        raise AssertionError("unreachable: a single segment always reproduces the target")


def _grapheme_segments(text: str) -> list[tuple[int, int]]:
    segs: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(text) + 1):
        if i == len(text) or (
            unicodedata.combining(text[i]) == 0 and not 0x1160 <= ord(text[i]) <= 0x11FF
        ):
            segs.append((start, i))
            start = i
    return segs if text else []


def _space_segments(text: str) -> list[tuple[int, int]]:
    segs: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(text) + 1):
        if i == len(text) or text[i].isspace() != text[i - 1].isspace() or text[i].isspace():
            segs.append((start, i))
            start = i
    return segs if text else []


def _make() -> dict[str, Normalizer]:
    return {
        "nfkc-casefold": Normalizer(
            "nfkc-casefold",
            NORMALIZER_VERSIONS["nfkc-casefold"],
            _nfkc_casefold,
            True,
            "Unicode NFKC, full case folding, whitespace runs collapsed to one space, trimmed",
            ascii_lower=True,
        ),
        "nfkc": Normalizer(
            "nfkc",
            NORMALIZER_VERSIONS["nfkc"],
            nfkc,
            True,
            "Unicode NFKC, whitespace collapsed, case kept",
        ),
        "raw": Normalizer(
            "raw", NORMALIZER_VERSIONS["raw"], _identity, False, "the text exactly as given"
        ),
    }


def encode_text(text: str) -> bytes:
    # surrogatepass keeps lone surrogates (invalid in UTF-8 but legal in str) hashable.
    return text.encode("utf-8", "surrogatepass")


@dataclass(frozen=True, slots=True, eq=False)
class EncodedTexts:
    """A batch of normalized documents as one UTF-8 buffer (no object per document).

    Document ``i`` is ``buf[offsets[i]:offsets[i + 1]]``; ``offsets`` need not start
    at 0, so :meth:`slice` is a view, not a copy.
    """

    buf: npt.NDArray[np.uint8]
    offsets: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.offsets.shape[0]) - 1

    @property
    def lengths(self) -> npt.NDArray[np.int64]:
        """UTF-8 byte length of every document."""
        return np.diff(self.offsets)

    @property
    def nbytes(self) -> int:
        """Bytes of text held by the documents of this batch."""
        return int(self.offsets[-1] - self.offsets[0])

    def get(self, i: int) -> bytes:
        """Document ``i`` as bytes."""
        return self.buf[self.offsets[i] : self.offsets[i + 1]].tobytes()

    def slice(self, start: int, stop: int) -> EncodedTexts:
        """Documents ``start .. stop - 1`` (a view)."""
        return EncodedTexts(self.buf, self.offsets[start : stop + 1])

    def blank(self, mask: npt.NDArray[np.bool_]) -> EncodedTexts:
        """A copy in which the documents where ``mask`` is true are empty."""
        if not mask.any():
            return self
        lengths = np.where(mask, 0, self.lengths)
        keep = np.repeat(~mask, self.lengths)
        offsets = np.zeros(len(self) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return EncodedTexts(self.buf[self.offsets[0] : self.offsets[-1]][keep], offsets)

    @classmethod
    def from_bytes(cls, docs: Sequence[bytes]) -> EncodedTexts:
        """Pack already-normalized UTF-8 documents."""
        n = len(docs)
        offsets = np.zeros(n + 1, dtype=np.int64)
        if n:
            np.cumsum(np.fromiter(map(len, docs), dtype=np.int64, count=n), out=offsets[1:])
        buf = np.frombuffer(b"".join(docs), dtype=np.uint8) if n else np.empty(0, np.uint8)
        return cls(buf, offsets)


def unicode_stage(
    texts: Sequence[str], normalizer: Normalizer
) -> tuple[EncodedTexts, npt.NDArray[np.bool_]]:
    """The part of normalization that needs Python's Unicode database.

    Returns the documents as UTF-8 after NFKC / case folding — applied only to the
    documents that are not pure ASCII, for which the rule is trivial — and, per
    document, whether ASCII letters are still to be lowercased.  Whitespace is left
    as is.  The byte-level rest (lowercasing ASCII, collapsing whitespace) is done
    by compiled code: :func:`normalize_batch`, or fused into shingle hashing.
    """
    n = len(texts)
    if not (normalizer.ascii_lower or normalizer.collapse_whitespace):
        # Neither case nor whitespace changes: the fold alone (no per-document checks).
        fold_only = normalizer.casefold_nfkc
        return EncodedTexts.from_bytes([encode_text(fold_only(t)) for t in texts]), np.zeros(
            n, dtype=np.bool_
        )
    ascii_doc = np.fromiter(map(str.isascii, texts), dtype=np.bool_, count=n)
    fold = normalizer.casefold_nfkc
    raw = EncodedTexts.from_bytes(
        [
            t.encode("ascii") if a else encode_text(fold(t))
            for t, a in zip(texts, ascii_doc.tolist(), strict=True)
        ]
    )
    lower = ascii_doc if normalizer.ascii_lower else np.zeros(n, dtype=np.bool_)
    return raw, lower


def normalize_batch(texts: Sequence[str], normalizer: Normalizer) -> EncodedTexts:
    """Normalize and UTF-8 encode a batch of documents.

    Guarantee: document ``i`` of the result is exactly
    ``normalizer(texts[i]).encode("utf-8", "surrogatepass")``.  Pure-ASCII documents
    (the common case) are lowercased and whitespace-collapsed by one compiled pass
    over the whole batch; only the others go through Python's Unicode functions.

    Example:
        >>> enc = normalize_batch(["A  b\tC", "Ｆｏｘ"], get_normalizer("nfkc-casefold"))
        >>> enc.get(0), enc.get(1)
        (b'a b c', b'fox')
    """
    from neardup.kernels import _tokens as KT

    raw, lower = unicode_stage(texts, normalizer)
    if not (normalizer.ascii_lower or normalizer.collapse_whitespace):
        return raw
    buf, offsets = KT.normalize_bytes(raw.buf, raw.offsets, lower, normalizer.collapse_whitespace)
    return EncodedTexts(buf, offsets)


NORMALIZERS: tuple[str, ...] = tuple(NORMALIZER_VERSIONS)
"""Names accepted by :func:`get_normalizer` (the default is ``nfkc-casefold``)."""


def get_normalizer(name: str) -> Normalizer:
    """Return the built-in normalizer called ``name`` (optionally ``name@version``)."""
    base, _ = check_normalizer(name)
    return _make()[base]

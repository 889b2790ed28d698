"""Explanations: which shingles two documents share, and where, in the original text.

:func:`shared_spans` recomputes both documents' shingles with their positions,
keeps those present in both, and maps them through the normalizer's offset map
back to character spans of the *original* texts, merged into maximal runs.  It is
meant for a handful of pairs (reports, reviews), not for the batch path.

Example:
    >>> from neardup import ShingleSpec
    >>> ex = shared_spans("Red fox runs very FAST", "red fox runs very fast today",
    ...                   ShingleSpec(kind="word", k=2))
    >>> ex.spans_a, ex.spans_b, ex.shared, ex.total
    ([(0, 22)], [(0, 22)], 4, 5)
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from neardup.core.config import ShingleSpec
from neardup.text.normalize import NormalizedText, get_normalizer
from neardup.text.words import word_spans, word_spans_many

__all__ = [
    "Explanation",
    "shared_shingles",
    "shared_shingles_of_pairs",
    "shared_spans",
    "spans_for_pairs",
]

@dataclass(frozen=True, slots=True)
class Explanation:
    """Shared shingles of a pair: count, union size, and original-text spans."""

    shared: int
    total: int
    spans_a: list[tuple[int, int]]
    spans_b: list[tuple[int, int]]
    shared_shingles: list[str]


def positioned_shingles(nt: NormalizedText, spec: ShingleSpec) -> list[tuple[str, int, int]]:
    """(shingle, start, end) in normalized-text character offsets, document order."""
    t = nt.text
    k = spec.k
    if spec.kind == "word":
        firsts, ends = word_spans(t, spec.tokenizer)
        toks = [(t[a:b], a, b) for a, b in zip(firsts, ends, strict=True)]
        if not toks:
            return []
        span = min(k, len(toks))
        return [
            (" ".join(x[0] for x in toks[i : i + span]), toks[i][1], toks[i + span - 1][2])
            for i in range(len(toks) - span + 1)
        ][: spec.max_shingles]
    if not t:
        return []
    span = min(k, len(t))
    return [(t[i : i + span], i, i + span) for i in range(len(t) - span + 1)][: spec.max_shingles]


def _char_spec(spec: ShingleSpec) -> ShingleSpec:
    """``spec``, with ``byte`` shingles explained on characters (a byte k-gram has
    no stable character span)."""
    if spec.kind != "byte":
        return spec
    return ShingleSpec(kind="char", k=spec.k, max_shingles=spec.max_shingles)


def _once_in_order(shingles: list[str], common: set[str]) -> list[str]:
    """The shingles of ``shingles`` that are in ``common``, each once, in order."""
    seen: set[str] = set()
    return [x for x in shingles if x in common and not (x in seen or seen.add(x))]  # type: ignore[func-returns-value]


def shared_shingles(
    text_a: str, text_b: str, spec: ShingleSpec, *, normalizer: str = "nfkc-casefold"
) -> list[str]:
    """The shingles two texts share, once each, in ``text_a``'s order.

    The same list as ``shared_spans(...).shared_shingles``, several times cheaper
    (no character offset map), for counting shingles over many pairs.

    Example:
        >>> from neardup import ShingleSpec
        >>> shared_shingles("a b c d", "b c d e", ShingleSpec(kind="word", k=2))
        ['b c', 'c d']
    """
    texts = {0: text_a, 1: text_b}
    return shared_shingles_of_pairs(texts, [(0, 1)], spec, normalizer=normalizer)[0]


def shared_shingles_of_pairs(
    texts: Mapping[int, str],
    pairs: Sequence[tuple[int, int]],
    spec: ShingleSpec,
    *,
    normalizer: str = "nfkc-casefold",
) -> list[list[str]]:
    """``shared_shingles(texts[a], texts[b], ...)`` of every pair, each text
    normalized once and all of them tokenized in one pass (identical results).

    >>> from neardup import ShingleSpec
    >>> shared_shingles_of_pairs({0: "a b c", 1: "x a b", 2: "b c"}, [(0, 1), (0, 2)],
    ...                          ShingleSpec(kind="word", k=2))
    [['a b'], ['b c']]
    """
    norm = get_normalizer(normalizer)
    char_spec = _char_spec(spec)
    used = sorted({i for pair in pairs for i in pair})
    normalized = [norm(texts[i]) for i in used]
    if char_spec.kind == "word":
        spans = word_spans_many(normalized, char_spec.tokenizer)
        listed = [
            _window([t[a:b] for a, b in zip(*sp, strict=True)], char_spec, " ")
            for t, sp in zip(normalized, spans, strict=True)
        ]
    else:
        listed = [_window(list(t), char_spec, "") for t in normalized]
    shingles = dict(zip(used, listed, strict=True))
    return [_once_in_order(shingles[a], set(shingles[a]) & set(shingles[b])) for a, b in pairs]


def _window(units: list[str], spec: ShingleSpec, sep: str) -> list[str]:
    """The shingles of ``units`` (tokens or characters), as
    :func:`positioned_shingles` makes them without positions."""
    if not units:
        return []
    span = min(spec.k, len(units))
    count = min(len(units) - span + 1, spec.max_shingles)
    # Slices of the units joined once, not a join per shingle: unit j starts at
    # starts[j], and a shingle ends one separator before its successor's start.
    joined = sep.join(units)
    w = len(sep)
    starts = list(itertools.accumulate([len(u) + w for u in units], initial=0))
    return [joined[starts[i] : starts[i + span] - w] for i in range(count)]


def merge_spans(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def spans_for_pairs(
    texts: Sequence[str],
    pairs: Sequence[tuple[int, int]],
    spec: ShingleSpec,
    *,
    normalizer: str = "nfkc-casefold",
) -> list[tuple[list[tuple[int, int]], list[tuple[int, int]]]]:
    """``(spans_a, spans_b)`` of :func:`shared_spans` for many pairs of ``texts``,
    normalizing and shingling each document once (identical results).

    >>> from neardup import ShingleSpec
    >>> spans_for_pairs(["a b c", "x a b"], [(0, 1)], ShingleSpec(kind="word", k=2))
    [([(0, 3)], [(2, 5)])]
    """
    norm = get_normalizer(normalizer)
    char_spec = _char_spec(spec)
    cache: dict[int, tuple[NormalizedText, list[tuple[str, int, int]], set[str]]] = {}

    def get(i: int) -> tuple[NormalizedText, list[tuple[str, int, int]], set[str]]:
        hit = cache.get(i)
        if hit is None:
            nt = norm.with_offsets(texts[i])
            pos = positioned_shingles(nt, char_spec)
            hit = cache[i] = (nt, pos, {x[0] for x in pos})
        return hit

    out = []
    for a, b in pairs:
        na, pa, sa = get(a)
        nb, pb, sb = get(b)
        common = sa & sb
        out.append(
            (
                merge_spans([na.original_span(s, e) for sh, s, e in pa if sh in common]),
                merge_spans([nb.original_span(s, e) for sh, s, e in pb if sh in common]),
            )
        )
    return out


def shared_spans(
    text_a: str, text_b: str, spec: ShingleSpec, *, normalizer: str = "nfkc-casefold"
) -> Explanation:
    """Shingles shared by two texts and their spans in each original text.

    ``byte`` shingles are explained on characters (a byte k-gram has no stable
    character span).
    """
    norm = get_normalizer(normalizer)
    na, nb = norm.with_offsets(text_a), norm.with_offsets(text_b)
    char_spec = _char_spec(spec)
    pa, pb = positioned_shingles(na, char_spec), positioned_shingles(nb, char_spec)
    sa, sb = {x[0] for x in pa}, {x[0] for x in pb}
    common = sa & sb
    spans_a = merge_spans([na.original_span(s, e) for sh, s, e in pa if sh in common])
    spans_b = merge_spans([nb.original_span(s, e) for sh, s, e in pb if sh in common])
    uniq = _once_in_order([sh for sh, _, _ in pa], common)
    return Explanation(len(common), len(sa | sb), spans_a, spans_b, uniq)

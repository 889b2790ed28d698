"""Quoted-source spans and access policies: the provenance a record carries as
structure rather than as one string.

A record's **quote** field lists the spans of *other* records it quotes, each
``{"source": ID, "start": S, "end": E}``: characters ``[S, E)`` of record ``ID``'s
text (offsets into the original text, 0 <= S < E <= its length), optionally with
``"at": [s, e]``, where the quoted text sits in the quoting record's own text.  A
single object stands for a list of one; a string is read as JSON (CSV columns).
Every quoted span is a lineage edge of kind ``quote`` between the two records
(:func:`neardup.lineage.families.build_families`), whatever their texts: a test
record that quotes a training record leaks through the quote.

A record's **policy** field is its access policy: one label (a string) or a list of
labels; families list their members' labels and a family whose members carry
different policies is flagged.

Both are checked before any text is compared: an unknown source id, a record
quoting itself, offsets that are not integers, out of range, or with start >= end
raise :class:`~neardup.errors.InputError` naming the record and the value.

>>> parse_quote([{"source": "d1", "start": 0, "end": 5}], ("in.jsonl", 3))
(Quote(source='d1', start=0, end=5, at=None),)
>>> parse_policy(["team-b", "team-a", "team-a"], ("in.jsonl", 3))
('team-a', 'team-b')
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from neardup.core._errors import InputError

__all__ = ["Quote", "QuoteLink", "Where", "parse_policy", "parse_quote", "resolve_quotes"]

Where = tuple[str, int | None]
"""Where a record was read: (path, line or row), for error messages."""

_SHAPE = 'write a list of {"source": ID, "start": S, "end": E[, "at": [s, e]]}'


@dataclass(frozen=True, slots=True)
class Quote:
    """One quoted span: characters ``[start, end)`` of record ``source``'s text;
    ``at`` is where it sits in the quoting record's text, when known."""

    source: str
    start: int
    end: int
    at: tuple[int, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "start": self.start, "end": self.end}
        if self.at is not None:
            out["at"] = list(self.at)
        return out


@dataclass(frozen=True, slots=True)
class QuoteLink:
    """A checked quote between positions: ``quoting`` quotes ``source`` at ``span``
    (offsets into the source's text), ``at`` in its own text (or None)."""

    quoting: int
    source: int
    span: tuple[int, int]
    at: tuple[int, int] | None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def parse_quote(value: Any, where: Where) -> tuple[Quote, ...]:
    """The quotes of one record's quote field (None or [] → none); InputError when
    the value has another shape."""
    if value is None:
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except ValueError as exc:
            raise InputError(*where, f"quote field {value[:60]!r} is not JSON", _SHAPE) from exc
    items = [value] if isinstance(value, Mapping) else value
    if not isinstance(items, list):
        raise InputError(*where, f"quote field {value!r:.60} is not a list", _SHAPE)
    out = []
    for q in items:
        if not isinstance(q, Mapping) or q.get("source") is None:
            raise InputError(*where, f"quote {q!r:.60} has no source", _SHAPE)
        start, end = _int(q.get("start")), _int(q.get("end"))
        if start is None or end is None:
            raise InputError(
                *where, f"quote of {q['source']!r}: start and end must be integers", _SHAPE
            )
        at = q.get("at")
        at_pair = None
        if at is not None:
            if not isinstance(at, list) or len(at) != 2 or None in (_int(at[0]), _int(at[1])):
                raise InputError(
                    *where, f"quote of {q['source']!r}: at {at!r:.40} is not [start, end]",
                    _SHAPE,
                )
            at_pair = (int(at[0]), int(at[1]))
        out.append(Quote(str(q["source"]), start, end, at_pair))
    return tuple(out)


def parse_policy(value: Any, where: Where) -> tuple[str, ...]:
    """One record's access policy labels, sorted and distinct (None → none)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value else ()
    if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
        return tuple(sorted(set(value)))
    raise InputError(
        *where, f"policy {value!r:.60} is not a label or a list of labels",
        'write a string ("internal") or a list of strings (["team-a", "team-b"])',
    )


def _span_error(where: Where, what: str, span: tuple[int, int], length: int) -> InputError:
    why = (
        f"start {span[0]} is not below end {span[1]}"
        if span[0] >= span[1]
        else f"[{span[0]}, {span[1]}) is not a span of its {length}-character text"
    )
    return InputError(
        *where,
        f"{what}: {why}",
        "use character offsets with 0 <= start < end <= the text's length",
    )


def resolve_quotes(
    texts: Sequence[str],
    quotes: Sequence[tuple[Quote, ...]],
    pos_of: Mapping[str, int],
    where: Sequence[Where] | None = None,
) -> list[QuoteLink]:
    """Every quote of every record, checked against the records it names.

    ``pos_of`` maps an id (as a string) to its position; ``where[i]`` locates record
    i in error messages (default: its position).  Raises InputError for an unknown
    source, a record quoting itself or offsets out of range.
    """
    out = []
    for i, qs in enumerate(quotes):
        loc = where[i] if where is not None else (f"record {i}", None)
        for q in qs:
            src = pos_of.get(q.source)
            if src is None:
                raise InputError(
                    *loc, f"quotes unknown record {q.source!r}",
                    "name the quoted record by its id (--id-field), or drop the quote",
                )
            if src == i:
                raise InputError(
                    *loc, f"quotes itself ({q.source!r})", "quote only other records"
                )
            span = (q.start, q.end)
            if not 0 <= q.start < q.end <= len(texts[src]):
                raise _span_error(loc, f"quote of {q.source!r}", span, len(texts[src]))
            if q.at is not None and not 0 <= q.at[0] < q.at[1] <= len(texts[i]):
                raise _span_error(loc, f"quote of {q.source!r} at", q.at, len(texts[i]))
            out.append(QuoteLink(i, src, span, q.at))
    return out

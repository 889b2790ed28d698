"""Record ids must name one record each: duplicates are refused, or renamed on request.

An id that two records share makes ``clusters.jsonl`` ambiguous (an edge from an id
to itself).  :func:`unique_ids` refuses the run with :class:`InputError` naming the
id and both records, or — with ``rename`` — gives the second record with id ``X``
the id ``X#2``, the third ``X#3`` (skipping any that another record has), and
says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from neardup.core._errors import InputError

__all__ = [
    "JSON_SCALARS",
    "describe",
    "json_id",
    "unique_ids",
]

RENAME_OPTION = "--rename-duplicate-ids"


def unique_ids(
    ids: list[Any],
    n_prior: int,
    where: Callable[[int], tuple[str, int | None]],
    *,
    rename: bool,
) -> list[tuple[Any, int, int, str]]:
    """Check (and with ``rename``, fix in place) that ``ids`` are distinct.

    ``ids`` holds the ids of a saved index (the first ``n_prior``) then this run's
    records; ``where(k)`` gives the file and line (or None) of this run's k-th
    record.  Equal ids of different JSON types (``1`` and ``"1"``) are distinct.
    Returns the renames made: ``(old id, first record, renamed record, new id)``
    with 1-based record numbers of this run (0 for a record of the index).

    Raises :class:`InputError` at the first repeated id unless ``rename``; an id
    repeated within the saved index itself is always refused.
    """
    if len(set(ids)) == len(ids):
        return []  # the common case, one C-level pass
    # A new id is one no record has, so that it names a single record.
    taken = {(type(i), i) for i in ids}
    seen: dict[tuple[type, Any], int] = {}
    renames: list[tuple[Any, int, int, str]] = []
    for pos, ident in enumerate(ids):
        key = (type(ident), ident)
        first = seen.get(key)
        if first is None:
            seen[key] = pos
            continue
        if not rename or pos < n_prior:
            _refuse(ident, first, pos, n_prior, where)
        k = 2
        while (str, f"{ident}#{k}") in taken:
            k += 1
        new = f"{ident}#{k}"
        ids[pos] = new
        taken.add((str, new))
        renames.append((ident, _number(first, n_prior), pos - n_prior + 1, new))
    return renames


def _number(pos: int, n_prior: int) -> int:
    return 0 if pos < n_prior else pos - n_prior + 1


def _refuse(
    ident: Any, first: int, pos: int, n_prior: int, where: Callable[[int], tuple[str, int | None]]
) -> None:
    fix = f"give each record its own id, or pass {RENAME_OPTION} (the second {ident!r} becomes "
    fix += f"'{ident}#2')"
    if pos < n_prior:
        raise InputError(
            "--against",
            None,
            f"the saved index holds id {ident!r} twice (its records {first + 1} and {pos + 1})",
            "rebuild the index from the source data",
        )
    path, line = where(pos - n_prior)
    if first < n_prior:
        also = f"already the id of record {first + 1} of the saved index (--against)"
    else:
        fpath, fline = where(first - n_prior)
        also = f"also the id of record {first - n_prior + 1}"
        if fline is not None:
            also += f" ({fpath}:{fline})"
    raise InputError(
        path,
        line,
        f"record {pos - n_prior + 1} has id {ident!r}, {also}",
        fix,
    )


def describe(renames: list[tuple[Any, int, int, str]]) -> str:
    """One line for the renames :func:`unique_ids` made."""
    old, first, again, new = renames[0]
    before = "a record of the saved index" if first == 0 else f"record {first}"
    more = f" (and {len(renames) - 1} more)" if len(renames) > 1 else ""
    return (
        f"neardup: warning: {len(renames)} duplicate id{'s' if len(renames) > 1 else ''} "
        f"renamed in clusters.jsonl and the representative field: record {again} had "
        f"id {old!r} of {before}, now {new!r}{more}; the records themselves are unchanged"
    )


JSON_SCALARS = (str, int, float, bool, type(None))


def json_id(value: Any) -> Any:
    # A tuple, not a union type: isinstance on ``X | Y`` builds the check at every
    # call, and this runs once per document.
    return value if isinstance(value, JSON_SCALARS) else str(value)

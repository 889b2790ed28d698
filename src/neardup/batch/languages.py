"""Per-language counts of a run: the ``by_language`` breakdown of ``stats.json``.

A document's language is the value of the run's language field (``--language-field``)
when its record has one (not null, not empty), else its detected script
(:mod:`neardup.text.scripts`: ``Latin``, ``Cyrillic``, ``Han``, ``Japanese``, ...).
The counts depend only on the inputs and the config.

>>> import numpy as np
>>> from neardup.text.scripts import SCRIPTS
>>> latin, han = SCRIPTS.index("Latin"), SCRIPTS.index("Han")
>>> st = language_stats(np.array([latin, han, latin], np.uint8), np.array([0, 0, 1], bool))
>>> st["language_field"], st["by_language"]["Latin"]
(None, {'documents': 2, 'duplicates': 1, 'kept': 1, 'duplicate_rate': 0.5})
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.text.scripts import SCRIPTS, label_counts, script_names

__all__ = ["field_value", "language_counts", "language_labels", "language_stats"]


def field_value(line: bytes, field: str) -> Any:
    """The value of ``field`` in one JSONL record (None when absent)."""
    rec = json.loads(line)
    return rec.get(field) if isinstance(rec, dict) else None


def language_labels(
    scripts: npt.NDArray[np.uint8], values: Iterable[Any] | None = None
) -> list[str]:
    """Each document's language: its ``values`` entry (as text) when there is one,
    else the name of its script."""
    names = script_names(scripts)
    if values is None:
        return names
    out = [
        name if v is None or v == "" else (v if isinstance(v, str) else json.dumps(v))
        for v, name in zip(values, names, strict=True)
    ]
    return out


def language_stats(
    scripts: npt.NDArray[np.uint8],
    removed: npt.NDArray[np.bool_],
    values: Sequence[Any] | None = None,
    field: str | None = None,
) -> dict[str, Any]:
    """``language_field`` (``field``, None for detected scripts only) and
    ``by_language``: documents, duplicates (removed), kept and duplicate rate per
    language, in name order (as ``stats.json`` writes its keys)."""
    if values is None:
        # Script ids only: counted by id, without a Python string per document (on
        # 383k documents the strings and their sort cost more than detecting).
        size = len(SCRIPTS)
        docs = np.bincount(scripts, minlength=size)
        dups = np.bincount(scripts[np.asarray(removed, dtype=np.bool_)], minlength=size)
        return language_counts(
            {SCRIPTS[i]: int(docs[i]) for i in np.flatnonzero(docs)},
            {SCRIPTS[i]: int(dups[i]) for i in np.flatnonzero(dups)},
            field,
        )
    counts = label_counts(language_labels(scripts, values), {"duplicates": removed})
    return language_counts(
        {k: c["documents"] for k, c in counts.items()},
        {k: c["duplicates"] for k, c in counts.items()},
        field,
    )


def language_counts(
    documents: Mapping[str, int], duplicates: Mapping[str, int], field: str | None = None
) -> dict[str, Any]:
    """:func:`language_stats` from counts already made: ``documents`` per language
    (the languages listed), ``duplicates`` per language (0 where absent).

    >>> language_counts({"Han": 4}, {"Han": 1})["by_language"]
    {'Han': {'documents': 4, 'duplicates': 1, 'kept': 3, 'duplicate_rate': 0.25}}
    """
    by: dict[str, dict[str, int | float]] = {}
    for name in sorted(documents):
        docs, dups = int(documents[name]), int(duplicates.get(name, 0))
        if docs == 0:
            continue
        by[name] = {
            "documents": docs,
            "duplicates": dups,
            "kept": docs - dups,
            "duplicate_rate": round(dups / docs, 6),
        }
    return {"language_field": field, "by_language": by}

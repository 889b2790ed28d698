"""One record checked into a :class:`~neardup.io.columns.Corpus`: its text and id
found, or the reason it is bad (raised, or kept with ``skip_bad``)."""

from __future__ import annotations

from typing import Any

from neardup.core._errors import InputError
from neardup.io.columns import BadRecord, Corpus

__all__ = ["RecordReader"]


class RecordReader:
    """Checks records for one :class:`~neardup.io.columns.Corpus` and adds the valid
    ones; a bad record raises :class:`~neardup.InputError`, or with ``skip_bad`` is
    listed in ``corpus.bad``."""

    def __init__(
        self,
        corpus: Corpus,
        text_field: str,
        id_field: str | None,
        skip_bad: bool,
        id_optional: bool = False,
    ):
        self.c = corpus
        self.text_field = text_field
        self.id_field = id_field
        self.skip_bad = skip_bad
        # A detected id field (:mod:`neardup.io._ids`): a record without it is not bad.
        self.id_optional = id_optional

    def bad(self, path: str, line: int | None, reason: str, fix: str) -> None:
        if not self.skip_bad:
            raise InputError(path, line, reason, fix)
        self.c.bad.append(BadRecord(path, line, reason))

    def add(self, ident: Any, text: str, origin: tuple[int, int]) -> None:
        self.c.ids.append(len(self.c.ids) if self.id_field is None else ident)
        self.c.texts.append(text)
        self.c.origins.append(origin)

    def check(self, path: str, line: int | None, rec: Any) -> tuple[Any, str] | None:
        """(id, text) of a valid record, else None after reporting it as bad."""
        if not isinstance(rec, dict):
            self.bad(
                path,
                line,
                f"expected a JSON object, got {type(rec).__name__}",
                "write one object per line",
            )
            return None
        text = rec.get(self.text_field)
        if text is None and self.text_field in rec:
            self.bad(
                path,
                line,
                f"field {self.text_field!r} is null",
                "give the record a text, or drop it (--skip-bad skips such records)",
            )
            return None
        if text is None:
            fields = ", ".join(sorted(map(str, rec))[:10])
            self.bad(
                path,
                line,
                f"no field {self.text_field!r} (fields: {fields})",
                "pass --text-field with one of the fields above",
            )
            return None
        if not isinstance(text, str):
            self.bad(
                path,
                line,
                f"field {self.text_field!r} is {type(text).__name__}, not text",
                "point --text-field at a string field",
            )
            return None
        ident = None
        if self.id_field is not None:
            ident = rec.get(self.id_field)
            if ident is None and self.id_field in rec and not self.id_optional:
                self.bad(
                    path,
                    line,
                    f"the id field {self.id_field!r} is null",
                    "give every record an id, or omit --id-field to number the records",
                )
                return None
            if ident is None and not self.id_optional:
                fields = ", ".join(sorted(map(str, rec))[:10])
                self.bad(
                    path,
                    line,
                    f"no id field {self.id_field!r} (fields: {fields})",
                    "pass --id-field naming a field every record has, or omit it",
                )
                return None
        return ident, text

    def record(self, path: str, line: int | None, rec: Any, fi: int, ri: int) -> bool:
        got = self.check(path, line, rec)
        if got is None:
            return False
        self.add(got[0], got[1], (fi, ri))
        return True

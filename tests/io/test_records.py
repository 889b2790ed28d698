"""neardup.io.records: one record checked into a corpus, or the reason it is bad."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup import InputError
from neardup.io.columns import BadRecord, Corpus
from neardup.io.records import RecordReader


def _reader(
    id_field: str | None = None, *, skip_bad: bool = False, id_optional: bool = False
) -> RecordReader:
    return RecordReader(
        Corpus(format="jsonl", inputs=["in.jsonl"]), "text", id_field, skip_bad, id_optional
    )


def test_valid_records_are_added_with_their_origin() -> None:
    r = _reader()
    assert r.record("in.jsonl", 1, {"text": "a", "x": 1}, 0, 1)
    assert r.record("in.jsonl", 3, {"text": ""}, 0, 3)  # an empty text is a text
    assert r.c.ids == [0, 1]  # no id field: row numbers
    assert r.c.texts == ["a", ""]
    assert r.c.origins == [(0, 1), (0, 3)]
    keyed = _reader("id")
    assert keyed.check("in.jsonl", 1, {"id": "k1", "text": "a"}) == ("k1", "a")
    assert keyed.record("in.jsonl", 1, {"id": 0, "text": "b"}, 2, 5)
    assert keyed.c.ids == [0] and keyed.c.origins == [(2, 5)]
    assert keyed.check("in.jsonl", 1, {"id": False, "text": "a"}) == (False, "a")


_FIELDS = "fields: a, b, c, d, e, f, g, h, i, j"  # sorted, the first ten

BAD: list[tuple[str | None, Any, str, str]] = [
    (None, [1, 2], "expected a JSON object, got list", "write one object per line"),
    (None, "text", "expected a JSON object, got str", "write one object per line"),
    (None, None, "expected a JSON object, got NoneType", "write one object per line"),
    (
        None,
        {"text": None},
        "field 'text' is null",
        "give the record a text, or drop it (--skip-bad skips such records)",
    ),
    (
        None,
        {k: 1 for k in "kjihgfedcba"},
        f"no field 'text' ({_FIELDS})",
        "pass --text-field with one of the fields above",
    ),
    (
        None,
        {"text": 5},
        "field 'text' is int, not text",
        "point --text-field at a string field",
    ),
    (
        None,
        {"text": ["a"]},
        "field 'text' is list, not text",
        "point --text-field at a string field",
    ),
    (
        "id",
        {"text": "a", "id": None},
        "the id field 'id' is null",
        "give every record an id, or omit --id-field to number the records",
    ),
    (
        "id",
        {"text": "a", "key": 1},
        "no id field 'id' (fields: key, text)",
        "pass --id-field naming a field every record has, or omit it",
    ),
]


@pytest.mark.parametrize(("id_field", "rec", "reason", "fix"), BAD)
def test_a_bad_record_raises_naming_file_line_reason_and_fix(
    id_field: str | None, rec: Any, reason: str, fix: str
) -> None:
    r = _reader(id_field)
    with pytest.raises(InputError) as err:
        r.check("in.jsonl", 7, rec)
    assert str(err.value) == f"in.jsonl:7: {reason}; fix: {fix}"
    assert r.c.ids == [] and r.c.texts == []


@pytest.mark.parametrize(("id_field", "rec", "reason", "fix"), BAD)
def test_with_skip_bad_a_bad_record_is_listed_and_not_added(
    id_field: str | None, rec: Any, reason: str, fix: str
) -> None:
    r = _reader(id_field, skip_bad=True)
    assert r.check("in.jsonl", 7, rec) is None
    assert not r.record("in.jsonl", 8, rec, 0, 8)
    assert r.c.bad == [BadRecord("in.jsonl", 7, reason), BadRecord("in.jsonl", 8, reason)]
    assert r.c.ids == [] and r.c.texts == [] and r.c.origins == []


def test_a_record_without_a_line_number_names_only_the_file() -> None:
    with pytest.raises(InputError, match=r"^in\.parquet: field 'text' is null; fix: "):
        _reader().check("in.parquet", None, {"text": None})


def test_an_optional_id_may_be_missing_or_null() -> None:
    # A detected id field (not named by the user): its absence is not an error.
    r = _reader("id", id_optional=True)
    assert r.check("in.jsonl", 1, {"text": "a"}) == (None, "a")
    assert r.check("in.jsonl", 2, {"text": "b", "id": None}) == (None, "b")
    assert r.record("in.jsonl", 3, {"text": "c", "id": 9}, 0, 3)
    assert r.c.ids == [9] and r.c.bad == []
    # The text is never optional.
    with pytest.raises(InputError, match="no field 'text'"):
        r.check("in.jsonl", 4, {"id": 1})


def test_another_text_field_is_read_and_named_in_errors() -> None:
    r = RecordReader(Corpus(format="jsonl", inputs=[]), "body", None, False)
    assert r.check("f", 1, {"body": "x", "text": 1}) == (None, "x")
    with pytest.raises(InputError, match=r"no field 'body' \(fields: text\); fix: pass --text"):
        r.check("f", 2, {"text": "x"})


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2)
    ),
    max_leaves=4,
)


@given(st.dictionaries(st.sampled_from(["text", "id", "a", "b"]), _JSON, max_size=4))
def test_a_record_is_either_added_or_listed_as_bad(rec: dict[str, Any]) -> None:
    r = _reader("id", skip_bad=True)
    added = r.record("in.jsonl", 1, rec, 0, 1)
    valid = isinstance(rec.get("text"), str) and rec.get("id") is not None
    assert added == valid
    assert (len(r.c.texts), len(r.c.bad)) == ((1, 0) if valid else (0, 1))
    if valid:
        assert r.c.texts == [rec["text"]] and r.c.ids == [rec["id"]]

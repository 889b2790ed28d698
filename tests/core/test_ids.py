"""neardup.core.ids: repeated record ids are refused naming both records, or
renamed X#2, X#3 ... deterministically and without colliding with any id."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.core._errors import InputError
from neardup.core.ids import describe, json_id, unique_ids


def _where(k: int) -> tuple[str, int | None]:
    return ("in.jsonl", k + 1)


IDS = st.one_of(
    st.sampled_from(["a", "b", "a#2", "a#3", "1", "1#2", "b#2#2", "b#2"]),
    st.integers(0, 3),
    st.booleans(),
    st.sampled_from([1.0, 2.5]),
)


def _key(v: Any) -> tuple[type, Any]:
    return (type(v), v)


@settings(max_examples=300, deadline=None)
@given(st.lists(IDS, max_size=30), st.integers(0, 5))
def test_renames_are_deterministic_and_collision_free(ids: list[Any], n_prior: int) -> None:
    n_prior = min(n_prior, len(ids))
    # Only the run's records may be renamed: keep the saved index's ids distinct.
    prior: list[Any] = []
    for v in ids[:n_prior]:
        if _key(v) not in {_key(q) for q in prior}:
            prior.append(v)
    ids = prior + ids[n_prior:]
    n_prior = len(prior)
    original = list(ids)
    a, b = list(ids), list(ids)
    ra = unique_ids(a, n_prior, _where, rename=True)
    rb = unique_ids(b, n_prior, _where, rename=True)
    assert a == b and ra == rb  # deterministic
    assert len({_key(v) for v in a}) == len(a)  # one record per id (type-aware)
    changed = [i for i in range(len(a)) if _key(a[i]) != _key(original[i])]
    assert len(changed) == len(ra)
    originals = {_key(v) for v in original}
    for (old, first, again, new), pos in zip(ra, changed, strict=True):
        assert pos >= n_prior and again == pos - n_prior + 1
        assert _key(old) == _key(original[pos])
        head, _, k = new.rpartition("#")
        assert head == str(old) and int(k) >= 2
        assert (str, new) not in originals  # never an id another record has
        first_pos = first - 1 + n_prior if first else None
        if first_pos is not None:
            assert _key(original[first_pos]) == _key(old) and first_pos < pos
    # The first record with each id keeps it.
    firsts: dict[tuple[type, Any], int] = {}
    for i, v in enumerate(original):
        firsts.setdefault(_key(v), i)
    assert all(_key(a[i]) == k for k, i in firsts.items())
    # Without rename: refused exactly when an id repeats.
    c = list(original)
    if changed:
        with pytest.raises(InputError):
            unique_ids(c, n_prior, _where, rename=False)
    else:
        assert unique_ids(c, n_prior, _where, rename=False) == []
        assert c == original


def test_the_rename_skips_ids_already_taken() -> None:
    ids = ["x", "x#2", "x", "x", 7, "7"]
    renames = unique_ids(ids, 0, _where, rename=True)
    assert ids == ["x", "x#2", "x#3", "x#4", 7, "7"]  # 7 and "7" are distinct ids
    assert renames == [("x", 1, 3, "x#3"), ("x", 1, 4, "x#4")]
    line = describe(renames)
    assert "2 duplicate ids renamed" in line and "record 3 had id 'x'" in line
    assert "now 'x#3'" in line and "(and 1 more)" in line


def test_a_repeated_id_is_refused_naming_both_records() -> None:
    with pytest.raises(InputError) as err:
        unique_ids(["a", "b", "a"], 0, _where, rename=False)
    e = err.value
    assert (e.path, e.line) == ("in.jsonl", 3)
    assert "record 3 has id 'a'" in e.reason and "record 1 (in.jsonl:1)" in e.reason
    assert "--rename-duplicate-ids" in e.fix


def test_an_id_of_the_saved_index_is_named_as_such() -> None:
    with pytest.raises(InputError) as err:
        unique_ids(["a", "b", "b"], 2, _where, rename=False)
    assert "record 2 of the saved index" in err.value.reason
    assert err.value.line == 1
    renames = unique_ids(ids := ["a", "b", "b"], 2, _where, rename=True)
    assert ids[2] == "b#2" and renames == [("b", 0, 1, "b#2")]
    assert "a record of the saved index" in describe(renames)


def test_a_repeat_inside_the_saved_index_is_always_refused() -> None:
    with pytest.raises(InputError, match="saved index holds id 'a' twice") as err:
        unique_ids(["a", "a", "c"], 2, _where, rename=True)
    assert err.value.path == "--against"


def test_json_id_keeps_scalars_and_stringifies_the_rest() -> None:
    assert [json_id(v) for v in ("s", 1, 1.5, True, None)] == ["s", 1, 1.5, True, None]
    assert json_id([1, 2]) == "[1, 2]" and json_id({"a": 1}) == "{'a': 1}"

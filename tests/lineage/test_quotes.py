"""Quoted-source spans and access policies: parsing and checking
(:mod:`neardup.lineage.quotes`); what families make of them: test_families.py."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup import InputError
from neardup.lineage.quotes import Quote, QuoteLink, parse_policy, parse_quote, resolve_quotes

AT = ("in.jsonl", 7)


def test_quote_shapes() -> None:
    assert parse_quote(None, AT) == ()
    assert parse_quote([], AT) == ()
    one = {"source": 3, "start": 1, "end": 4, "at": [0, 3]}
    assert parse_quote(one, AT) == (Quote("3", 1, 4, (0, 3)),)
    assert parse_quote('[{"source": "a", "start": 0, "end": 2}]', AT) == (Quote("a", 0, 2),)
    assert Quote("a", 0, 2, (1, 3)).to_dict() == {"source": "a", "start": 0, "end": 2, "at": [1, 3]}


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("not json", "is not JSON"),
        (5, "is not a list"),
        ([{"start": 0, "end": 1}], "has no source"),
        ([{"source": "a", "start": "0", "end": 1}], "must be integers"),
        ([{"source": "a", "start": True, "end": 1}], "must be integers"),
        ([{"source": "a", "start": 0, "end": 1, "at": [0]}], "is not [start, end]"),
    ],
)
def test_bad_quote_shapes_name_the_record(value: object, said: str) -> None:
    with pytest.raises(InputError, match=re.escape(said)) as info:
        parse_quote(value, AT)
    assert (info.value.path, info.value.line) == AT


def test_policy_labels() -> None:
    assert parse_policy(None, AT) == () == parse_policy("", AT)
    assert parse_policy("internal", AT) == ("internal",)
    assert parse_policy(["b", "a", "b"], AT) == ("a", "b")
    for bad in (3, ["a", 1], [""], {"a": 1}):
        with pytest.raises(InputError, match="not a label or a list of labels"):
            parse_policy(bad, AT)


TEXTS = ["0123456789", "abcdef"]
POS = {"x": 0, "y": 1}


def test_resolve_quotes_links_positions() -> None:
    links = resolve_quotes(TEXTS, [(), (Quote("x", 2, 10, (0, 6)),)], POS)
    assert links == [QuoteLink(quoting=1, source=0, span=(2, 10), at=(0, 6))]


@pytest.mark.parametrize(
    ("quote", "said"),
    [
        (Quote("zz", 0, 1), "quotes unknown record 'zz'"),
        (Quote("y", 0, 1), "quotes itself"),
        (Quote("x", 5, 3), "start 5 is not below end 3"),
        (Quote("x", 4, 4), "start 4 is not below end 4"),
        (Quote("x", -1, 3), r"\[-1, 3\) is not a span of its 10-character text"),
        (Quote("x", 0, 11), r"\[0, 11\) is not a span of its 10-character text"),
        (Quote("x", 0, 2, (0, 7)), r"at: \[0, 7\) is not a span of its 6-character text"),
    ],
)
def test_bad_spans_are_refused_with_the_record_located(quote: Quote, said: str) -> None:
    with pytest.raises(InputError, match=said) as info:
        resolve_quotes(TEXTS, [(), (quote,)], POS, [("a.jsonl", 1), ("a.jsonl", 2)])
    assert (info.value.path, info.value.line) == ("a.jsonl", 2)


@given(st.integers(-3, 14), st.integers(-3, 14))
def test_a_span_is_accepted_exactly_when_inside_the_source(start: int, end: int) -> None:
    ok = 0 <= start < end <= len(TEXTS[0])
    try:
        got = resolve_quotes(TEXTS, [(), (Quote("x", start, end),)], POS)
    except InputError:
        assert not ok
    else:
        assert ok and got[0].span == (start, end)

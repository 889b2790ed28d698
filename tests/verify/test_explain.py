"""explain: shared shingles and their spans in the original texts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import ShingleSpec
from neardup.verify.explain import shared_shingles, shared_spans

_TEXT = st.text(alphabet=st.sampled_from(list("ab cD\u00c5\u212b\tx\n.")), max_size=40)
_SPEC = st.builds(
    ShingleSpec,
    kind=st.sampled_from(["word", "char", "byte"]),
    k=st.integers(1, 4),
)


@settings(max_examples=200, deadline=None)
@given(_TEXT, _TEXT, _SPEC)
def test_shared_shingles_equal_those_of_shared_spans(a: str, b: str, spec: ShingleSpec) -> None:
    assert shared_shingles(a, b, spec) == shared_spans(a, b, spec).shared_shingles


def test_shared_spans_point_at_the_original_text() -> None:
    a, b = "Red  FOX runs", "the red fox runs"
    ex = shared_spans(a, b, ShingleSpec(kind="word", k=2))
    assert ex.shared_shingles == ["red fox", "fox runs"]
    assert [a[s:e] for s, e in ex.spans_a] == ["Red  FOX runs"]
    assert [b[s:e] for s, e in ex.spans_b] == ["red fox runs"]
    assert (ex.shared, ex.total) == (2, 3)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.text(alphabet="ab cA\u00e9\ufb01 ", max_size=40), min_size=2, max_size=6),
    st.data(),
)
def test_spans_for_pairs_equals_shared_spans(texts: list[str], data: st.DataObject) -> None:
    from neardup.verify.explain import spans_for_pairs

    n = len(texts)
    pairs = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)),
                               max_size=8))
    for spec in (ShingleSpec(kind="word", k=2), ShingleSpec(kind="char", k=3)):
        got = spans_for_pairs(texts, pairs, spec)
        for (a, b), (sa, sb) in zip(pairs, got, strict=True):
            ex = shared_spans(texts[a], texts[b], spec)
            assert (sa, sb) == (ex.spans_a, ex.spans_b)


@settings(max_examples=80, deadline=None)
@given(
    texts=st.lists(_TEXT, min_size=1, max_size=6),
    spec=_SPEC,
    data=st.data(),
)
def test_shared_shingles_of_pairs_equal_shared_shingles(
    texts: list[str], spec: ShingleSpec, data: st.DataObject
) -> None:
    from neardup.verify.explain import shared_shingles_of_pairs

    index = st.integers(0, len(texts) - 1)
    pairs = data.draw(st.lists(st.tuples(index, index), max_size=8))
    got = shared_shingles_of_pairs(dict(enumerate(texts)), pairs, spec)
    assert got == [shared_shingles(texts[a], texts[b], spec) for a, b in pairs]

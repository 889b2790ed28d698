"""explain: shared shingles and their spans in the original texts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import ShingleSpec
from neardup.explain import shared_shingles, shared_spans

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

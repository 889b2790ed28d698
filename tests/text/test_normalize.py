from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup import InvalidConfig, get_normalizer
from neardup.text.normalize import NORMALIZERS, normalize_batch


def test_nfkc_casefold_collapses_and_folds() -> None:
    n = get_normalizer("nfkc-casefold")
    assert n("  Ｆｏｘ\tRUNS\n\n Straße ") == "fox runs strasse"
    assert n.fingerprint.startswith("nfkc-casefold@1/unicode-")


def test_raw_is_identity() -> None:
    assert get_normalizer("raw")("  A\tb ") == "  A\tb "


def test_versions() -> None:
    assert get_normalizer("nfkc@1").version == 1
    with pytest.raises(InvalidConfig, match="version 9"):
        get_normalizer("nfkc@9")
    with pytest.raises(InvalidConfig, match="unknown normalizer"):
        get_normalizer("lowercase")


def test_offsets_point_into_the_original() -> None:
    n = get_normalizer("nfkc-casefold")
    original = "  Ｆｏｘ\tRUNS  ﬁne"
    nt = n.with_offsets(original)
    assert nt.text == "fox runs fine"
    s, e = nt.original_span(0, 3)
    assert original[s:e] == "Ｆｏｘ"
    s, e = nt.original_span(4, 8)
    assert original[s:e] == "RUNS"
    # The ligature ﬁ expands to two characters that both map back to it.
    s, e = nt.original_span(9, 10)
    assert original[s:e] == "ﬁ"
    with pytest.raises(InvalidConfig):
        nt.original_span(5, 100)


@pytest.mark.parametrize("name", NORMALIZERS)
@given(text=st.text(max_size=60))
def test_offset_path_equals_fast_path(name: str, text: str) -> None:
    n = get_normalizer(name)
    nt = n.with_offsets(text)
    assert nt.text == n(text)
    assert len(nt.starts) == len(nt.text) == len(nt.ends)
    for s, e in zip(nt.starts, nt.ends, strict=True):
        assert 0 <= s < e <= len(text)


@given(text=st.text(max_size=60))
def test_idempotent(text: str) -> None:
    for name in ("nfkc-casefold", "nfkc"):
        n = get_normalizer(name)
        once = n(text)
        assert n(n(once)) == n(once)


@given(text=st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
def test_ascii_fast_path_equals_the_unicode_definition(text: str) -> None:
    import unicodedata

    assert get_normalizer("nfkc-casefold")(text) == " ".join(
        unicodedata.normalize("NFKC", text).casefold().split()
    )
    assert get_normalizer("nfkc")(text) == " ".join(unicodedata.normalize("NFKC", text).split())


_ASCII_WS = "".join(chr(c) for c in range(128) if chr(c).isspace())
_ALL_WS = "".join(chr(c) for c in range(0x110000) if chr(c).isspace())
_MIXED = st.text(alphabet=st.sampled_from(list(_ALL_WS + "aZ09_.-Q\u200bＦé\u2027ßİ")))


@pytest.mark.slow
@pytest.mark.parametrize("name", NORMALIZERS)
@given(
    texts=st.lists(st.one_of(_MIXED, st.text(), st.text(alphabet=_ASCII_WS + "xY")), max_size=12)
)
def test_batch_kernel_equals_per_document_normalization(name: str, texts: list[str]) -> None:
    norm = get_normalizer(name)
    enc = normalize_batch(texts, norm)
    assert len(enc) == len(texts)
    assert enc.offsets[0] == 0
    for i, t in enumerate(texts):
        assert enc.get(i) == norm(t).encode("utf-8", "surrogatepass")


def test_encoded_texts_slice_and_blank() -> None:
    enc = normalize_batch(["One  two", "", "THREE\tfour ", "five"], get_normalizer("nfkc-casefold"))
    part = enc.slice(2, 4)
    assert [part.get(i) for i in range(len(part))] == [b"three four", b"five"]
    assert part.nbytes == len(b"three fourfive")
    blanked = enc.blank(np.array([False, False, True, False]))
    assert [blanked.get(i) for i in range(4)] == [b"one two", b"", b"", b"five"]
    assert enc.blank(np.zeros(4, dtype=np.bool_)) is enc
    assert len(normalize_batch([], get_normalizer("raw"))) == 0

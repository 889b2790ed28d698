from __future__ import annotations

import unicodedata

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup import InvalidConfig, get_normalizer
from neardup.text.normalize import NORMALIZERS, nfkc, normalize_batch


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


# Characters around which NFKC composes, reorders or expands: full- and half-width
# forms, half-width kana and their sound marks, combining marks of different
# classes, conjoining Hangul jamo, ligatures, compatibility ideographs, characters
# outside the BMP that NFKC changes (math letters, plane-2 compatibility ideographs).
_NFKC_HARD = list(
    "aeAΩ中カｶﾞﾟ゙゚（：，。　…ﬁ㍿①¼ｱ가ᄀ각ᅡᆨ\u0301\u0308\u0327\u0323\u0345\u093c"
    "\u0bbe\u0b3e\u0cd5\u102e\u1b35\u2000\u00a0\u212b\u2126\uf900\U0001d400\U0002f800"
)


@given(
    text=st.one_of(
        st.text(max_size=40),
        st.text(alphabet=st.sampled_from(_NFKC_HARD), max_size=40),
        st.lists(st.one_of(st.sampled_from(_NFKC_HARD), st.characters()), max_size=40).map("".join),
    )
)
def test_fast_nfkc_is_exactly_unicodedata_nfkc(text: str) -> None:
    assert nfkc(text) == unicodedata.normalize("NFKC", text)


def test_fast_nfkc_on_every_bmp_character_in_context() -> None:
    # Each BMP character alone, after a starter it may compose with, and before a
    # combining mark and a sound mark it may compose with.
    bmp = [chr(c) for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF]
    for ctx in ("{}", "e{}", "{}\u0301", "ｶ{}ﾞ", "가{}ᆨ"):
        text = "".join(ctx.format(c) for c in bmp)
        assert nfkc(text) == unicodedata.normalize("NFKC", text), ctx
    chinese = "中文（简体）：第１版，共３章…"
    assert nfkc(chinese) == "中文(简体):第1版,共3章..."

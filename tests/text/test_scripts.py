from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.text.normalize import EncodedTexts
from neardup.text.scripts import (
    SCRIPT_RANGES,
    SCRIPTS,
    char_script,
    detect_scripts,
    label_counts,
    script_names,
    script_of,
)

SAMPLES = {
    "Latin": "Der schnelle braune Fuchs springt über den faulen Hund.",
    "Greek": "Η γρήγορη καφέ αλεπού πηδά πάνω από τον τεμπέλη σκύλο.",
    "Cyrillic": "Быстрая коричневая лиса прыгает через ленивую собаку.",
    "Armenian": "Արագ շագանակագույն աղվեսը ցատկում է ծույլ շան վրայով։",
    "Hebrew": "השועל החום המהיר קופץ מעל הכלב העצלן.",
    "Arabic": "الثعلب البني السريع يقفز فوق الكلب الكسول.",
    "Devanagari": "तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है।",
    "Bengali": "দ্রুত বাদামী শিয়াল অলস কুকুরের উপর লাফ দেয়।",
    "Tamil": "விரைவான பழுப்பு நரி சோம்பேறி நாயின் மீது குதிக்கிறது.",
    "Thai": "สุนัขจิ้งจอกสีน้ำตาลกระโดดข้ามสุนัขขี้เกียจ",
    "Lao": "ໝາຈອກສີນ້ຳຕານໂດດຂ້າມໝາຂີ້ຄ້ານ",
    "Tibetan": "ཝ་མོ་སྨུག་པོ་མགྱོགས་པོ་ཁྱི་ལེ་ལོ་ཅན་གྱི་སྟེང་དུ་མཆོང་།",
    "Myanmar": "မြန်ဆန်သော အညိုရောင်မြေခွေးသည် ပျင်းရိသောခွေးကို ခုန်ကျော်သည်။",
    "Georgian": "სწრაფი ყავისფერი მელა გადახტება ზარმაც ძაღლს.",
    "Ethiopic": "ፈጣኑ ቡናማ ቀበሮ በሰነፉ ውሻ ላይ ዘለለ።",
    "Khmer": "កញ្ជ្រោងពណ៌ត្នោតលោតរំលងឆ្កែខ្ជិល",
    "Korean": "빠른 갈색 여우가 게으른 개를 뛰어넘는다.",
    "Japanese": "素早い茶色の狐が怠惰な犬を飛び越える。",
    "Han": "敏捷的棕色狐狸跳过了懒狗。",
    "other": "ܐܠܗܐ ܪܒܐ",  # Syriac: a script without a name of its own here
    "none": "12 345 — 🙂 ¿?",
}


def batch(texts: list[str]) -> EncodedTexts:
    return EncodedTexts.from_bytes([t.encode("utf-8", "surrogatepass") for t in texts])


@pytest.mark.parametrize(("name", "text"), sorted(SAMPLES.items()))
def test_a_sentence_has_its_script(name: str, text: str) -> None:
    assert script_of(text) == name
    assert script_names(detect_scripts(batch([text]))) == [name]


def test_han_with_kana_is_japanese_and_han_alone_is_not() -> None:
    # Mostly kanji, one kana: the kana decides for the Han letters too.
    assert script_of("東京都千代田区の") == "Japanese"
    assert script_of("東京都千代田区") == "Han"
    assert script_of("カタカナ") == "Japanese"


def test_the_majority_wins_and_ties_go_to_the_first_listed_script() -> None:
    assert script_of("hello мир мир") == "Cyrillic"
    assert script_of("ab жы") == "Latin"  # 2 and 2: Latin is listed before Cyrillic
    assert SCRIPTS.index("Latin") < SCRIPTS.index("Cyrillic")


def test_marks_digits_and_punctuation() -> None:
    # A combining accent outside any script block counts for nothing; a vowel sign
    # inside the Devanagari block counts for Devanagari.
    assert char_script("\u0301") == 0
    assert SCRIPTS[char_script("\u093e")] == "Devanagari"
    assert char_script("٣") == 0  # an Arabic-Indic digit
    assert char_script("。") == 0
    assert script_of("") == "none"


def test_ranges_are_sorted_and_disjoint() -> None:
    for (lo, hi, name), (lo2, _, _) in itertools.pairwise(SCRIPT_RANGES):
        assert lo <= hi < lo2, name
    assert {name for _, _, name in SCRIPT_RANGES} <= set(SCRIPTS)


def test_every_code_point_counts_as_char_script_says() -> None:
    # One document per code point (surrogates as surrogatepass writes them).
    chars = [chr(cp) for cp in range(0x40000)]
    got = detect_scripts(batch(chars))
    want = np.array([char_script(c) for c in chars], dtype=np.uint8)
    assert np.array_equal(got, want)
    assert detect_scripts(batch([chr(0x10FFFF), chr(0xE0041)])).tolist() == [0, 0]


# Text of every kind: any code point (surrogates included), and the letters,
# marks and joiners of the scripts above, so that documents mix them.
_FROM_SAMPLES = "".join(SAMPLES.values()) + "\u200d\u200c\u0301\u093e\ufe0f👩‍👩‍👧ｶﾞ"
_CHARS = st.one_of(
    st.characters(exclude_categories=()),
    st.sampled_from(sorted(set(_FROM_SAMPLES))),
)


# Mostly ASCII, as most of a Western corpus is: the kernel's pure-ASCII shortcut
# (largest byte, then the first letter) must agree with the full count, and a
# single non-ASCII character anywhere must take the full count.
_ASCII_MOSTLY = st.one_of(
    st.characters(max_codepoint=0x7F),
    st.characters(max_codepoint=0x7F),
    st.characters(max_codepoint=0x7F),
    st.sampled_from(sorted(set(_FROM_SAMPLES))),
)


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        st.lists(st.text(_CHARS, max_size=40), max_size=8),
        st.lists(st.text(_ASCII_MOSTLY, max_size=60), max_size=8),
    )
)
def test_kernel_equals_the_reference(texts: list[str]) -> None:
    got = script_names(detect_scripts(batch(texts)))
    assert got == [script_of(t) for t in texts]


def test_pure_ascii_documents_without_letters_have_no_script() -> None:
    texts = ["", "123 456 -- !!", "...a", "9" * 1000 + "Z", "\x7f\x00"]
    assert script_names(detect_scripts(batch(texts))) == ["none", "none", "Latin", "Latin", "none"]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["Latin", "Han", "Thai", "none"]), min_size=1), st.data())
def test_label_counts_add_up(labels: list[str], data: st.DataObject) -> None:
    flags = np.array(data.draw(st.lists(st.booleans(), min_size=len(labels),
                                        max_size=len(labels))), dtype=np.bool_)
    counts = label_counts(labels, {"duplicates": flags})
    assert sum(c["documents"] for c in counts.values()) == len(labels)
    assert sum(c["duplicates"] for c in counts.values()) == int(flags.sum())
    for name, c in counts.items():
        assert c["documents"] == labels.count(name)
    assert list(counts) == sorted(counts)

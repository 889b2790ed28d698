"""The word tokenizers: the definition, its table, and the compiled tokenizer against it."""

from __future__ import annotations

import re
import unicodedata

import numpy as np
import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

from fresh_python import fresh_python
from neardup import Config, EmptyDocument, InvalidConfig, ShingleSpec, hash_documents, shingles
from neardup.text.words import (
    UNSPACED_SCRIPTS,
    char_class,
    token_counts,
    word_table,
    word_tokens,
)

# Characters the tokenizers treat differently, and their neighbours: letters of
# unspaced scripts with their marks, Indic vowel signs and viramas, kana marks and
# iteration marks, halfwidth kana, digits of several scripts, Hangul, emoji with
# zero-width joiners and variation selectors, lone surrogates (JSON "\ud800"
# escapes), spaces and punctuation.
_INTERESTING = (
    "กขคิีึุู่้๊๋ั็์ำะา๐๑๒"  # Thai letters, vowel signs, tone marks, digits
    "ກຂິີ່້໑"  # Lao
    "កខិីុ្១"  # Khmer
    "ကခိီု့်၁"  # Myanmar
    "ཀཁིེུྐྑ་།༡"  # Tibetan letters, vowels, subjoined letters, tsheg, digits
    "हिन्दीक्षािीु्०१"  # Devanagari letters, vowel signs, virama, digits
    "中文字東京々〆〇〡𠀀𪜀丽"  # Han incl. extension B and compatibility
    "ひらがなゝゞ゙゚カタカナーヽｶﾀｰﾞﾟ"  # kana, marks, halfwidth
    "ꀀꀁ"  # Yi
    "한국어"  # Hangul
    "abcXYZ_019éü\u0301\u0308"  # Latin, digits, underscore, combining marks
    "٠١ابت\u064e\u0650"  # Arabic digits, letters, harakat
    "👨\u200d👩\u200d👧\u200c\ufe0f🇯🇵"  # emoji, ZWJ, ZWNJ, VS16, flag
    "\ud800\udfff"  # lone surrogates
    " \t\n\u3000.,!?、。「」-"  # spaces and punctuation
)

TEXTS = st.text(
    alphabet=st.one_of(st.sampled_from(_INTERESTING), st.characters(codec="utf-8")),
    max_size=60,
)


def _reference_tokens(text: str, tokenizer: int) -> list[str]:
    """The tokenizer of the module docstring, one character at a time from
    :func:`char_class` (independent of the regular expression and the table)."""
    out: list[str] = []
    cur: list[str] = []
    kind = 0  # class of the open token's first character; 0: none open
    for ch in text:
        c = char_class(ch, tokenizer)
        if kind and (c == 3 or (c == 1 and kind == 1)):
            cur.append(ch)
            continue
        if kind:
            out.append("".join(cur))
            cur, kind = [], 0
        if c in (1, 2):
            cur, kind = [ch], c
    if kind:
        out.append("".join(cur))
    return out


@pytest.mark.parametrize("tokenizer", [1, 2])
@given(text=TEXTS)
def test_word_tokens_follow_the_definition(tokenizer: int, text: str) -> None:
    assert word_tokens(text, tokenizer) == _reference_tokens(text, tokenizer)


@pytest.mark.parametrize("tokenizer", [1, 2])
@given(text=TEXTS)
def test_word_spans_are_the_pattern_match_spans(tokenizer: int, text: str) -> None:
    from neardup.text.words import word_pattern, word_spans

    matches = list(word_pattern(tokenizer).finditer(text))
    assert word_spans(text, tokenizer) == (
        [m.start() for m in matches],
        [m.end() for m in matches],
    )


@pytest.mark.parametrize("tokenizer", [1, 2])
@given(texts=st.lists(TEXTS, max_size=5))
def test_word_spans_of_many_texts_are_each_texts_spans(tokenizer: int, texts: list[str]) -> None:
    from neardup.text.words import word_pattern, word_spans_many

    want = []
    for t in texts:
        matches = list(word_pattern(tokenizer).finditer(t))
        want.append(([m.start() for m in matches], [m.end() for m in matches]))
    assert word_spans_many(texts, tokenizer) == want


def test_explanations_and_tokens_never_compile_the_pattern() -> None:
    # Its thousands of ranges take the sre compiler longer than a report's
    # tokenizing: nothing a run calls may compile it.
    code = (
        "from neardup import ShingleSpec\n"
        "from neardup.text import words\n"
        "from neardup.verify.explain import shared_shingles, shared_spans\n"
        "spec = ShingleSpec(kind='word', k=2)\n"
        "shared_shingles('東京 タワー is tall', '東京 タワー is high', spec)\n"
        "shared_spans('東京 タワー is tall', '東京 タワー is high', spec)\n"
        "words.word_tokens('हिन्दी text')\n"
        "print(words._pattern.cache_info().currsize)\n"
    )
    assert fresh_python(code).strip() == "0"


@given(text=TEXTS)
def test_tokenizer_1_is_maximal_word_runs(text: str) -> None:
    assert word_tokens(text, 1) == re.findall(r"\w+", text)


@pytest.mark.parametrize("tokenizer", [1, 2])
@given(text=TEXTS)
def test_tokens_joined_by_spaces_tokenize_to_themselves(tokenizer: int, text: str) -> None:
    # What explanations rely on: a shingle string hashes like the shingle.
    toks = word_tokens(text, tokenizer)
    assert word_tokens(" ".join(toks), tokenizer) == toks


@given(cp=st.integers(0, 0x10FFFF))
def test_table_is_the_class_of_every_code_point_sampled(cp: int) -> None:
    for tokenizer in (1, 2):
        assert word_table(tokenizer)[cp] == char_class(chr(cp), tokenizer)


@pytest.mark.slow
def test_table_is_the_class_of_every_code_point() -> None:
    for tokenizer in (1, 2):
        table = word_table(tokenizer)
        want = np.fromiter(
            (char_class(chr(cp), tokenizer) for cp in range(0x110000)), np.uint8, 0x110000
        )
        assert np.array_equal(table, want)
        assert not table.flags.writeable


def test_classes_by_category() -> None:
    marks = np.array(
        [unicodedata.category(chr(cp))[0] == "M" for cp in range(0x110000)], dtype=np.bool_
    )
    table = word_table(2)
    assert np.array_equal(table == 3, marks)
    assert not np.any(word_table(1) > 1)
    # Tokenizer 2 changes nothing but the unspaced scripts' letters and the marks.
    assert np.array_equal(word_table(1) == 1, (table == 1) | (table == 2))
    inside = np.zeros(0x110000, dtype=np.bool_)
    for _, lo, hi in UNSPACED_SCRIPTS:
        inside[lo : hi + 1] = True
    assert not np.any((table == 2) & ~inside)
    assert table[:0x80].max() == 1  # the ASCII fast path sees classes 0 and 1 only


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("東京タワーは333mです", ["東", "京", "タ", "ワ", "ー", "は", "333m", "で", "す"]),
        ("iphone15の価格は10万円", ["iphone15", "の", "価", "格", "は", "10", "万", "円"]),
        ("中文2024年", ["中", "文", "2024", "年"]),
        ("กินข้าว ๒๕๖๗", ["กิ", "น", "ข้", "า", "ว", "๒๕๖๗"]),
        ("한국어 텍스트", ["한국어", "텍스트"]),
        ("हिन्दी भाषा", ["हिन्दी", "भाषा"]),
        ("ｶﾀｶﾅ", ["ｶ", "ﾀ", "ｶ", "ﾅ"]),
        ("\u0301a\u0301 👨\u200d👩 ꀀꀁ", ["a\u0301", "ꀀ", "ꀁ"]),
    ],
)
def test_words_per_script(text: str, tokens: list[str]) -> None:
    assert word_tokens(text) == tokens


def _ref_word_hash(toks: list[str], seed: int = 42) -> int:
    m = (1 << 64) - 1

    def fmix(h: int) -> int:
        h ^= h >> 33
        h = (h * 0xFF51AFD7ED558CCD) & m
        h ^= h >> 33
        h = (h * 0xC4CEB9FE1A85EC53) & m
        return h ^ (h >> 33)

    acc = 2870177450012600261 ^ len(toks)
    for t in toks:
        th = xxhash.xxh64_intdigest(t.encode("utf-8", "surrogatepass"), seed)
        acc = fmix((((acc ^ th) * 11400714785074694791) + 9650029242287828579) & m)
    return acc


@pytest.mark.parametrize("tokenizer", [1, 2])
@pytest.mark.parametrize("k", [1, 3])
@given(texts=st.lists(TEXTS, min_size=1, max_size=6))
def test_compiled_tokenizer_equals_the_definition(k: int, tokenizer: int, texts: list[str]) -> None:
    spec = ShingleSpec(kind="word", k=k, tokenizer=tokenizer)
    sets = hash_documents(texts, Config(shingle=spec), normalized=True)
    for i, text in enumerate(texts):
        toks = _reference_tokens(text, tokenizer)
        span = min(k, len(toks))
        grams = [toks[j : j + span] for j in range(len(toks) - span + 1)] if toks else []
        assert sets.raw_counts[i] == len(grams)
        assert sets.get(i).tolist() == sorted({_ref_word_hash(g) for g in grams})


def test_one_edited_chinese_character_keeps_most_shingles() -> None:
    a = (
        "自然语言处理是计算机科学和人工智能的一个重要方向"
        "它研究人与计算机之间用自然语言进行有效通信的各种理论和方法"
    )
    b = a.replace("重", "主")
    assert a.count("重") == 1 and " " not in a
    new = hash_documents([a, b], Config())
    grams = len(a) - 4  # word 5-grams over one token per character, all distinct
    assert new.sizes().tolist() == [grams, grams]
    # The edit changes the 5 grams over it, on each side.
    assert new.jaccard(0, 1) == pytest.approx((grams - 5) / (grams + 5))
    assert new.jaccard(0, 1) > 0.8
    old = hash_documents([a, b], Config(shingle=ShingleSpec(tokenizer=1)))
    assert old.sizes().tolist() == [1, 1] and old.jaccard(0, 1) == 0.0  # one token each


def test_tokenizer_is_validated_and_ignored_off_word_shingles() -> None:
    for bad in (0, 3, "2", True, None, [2]):
        with pytest.raises(InvalidConfig, match="tokenizer"):
            ShingleSpec(tokenizer=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidConfig, match="tokenizer"):
            word_tokens("x", bad)  # type: ignore[arg-type]
    assert ShingleSpec(kind="char", tokenizer=1) == ShingleSpec(kind="char")
    assert ShingleSpec.parse("word:3", tokenizer=1).tokenizer == 1
    assert ShingleSpec.parse("word:3").tokenizer == 2
    with pytest.raises(EmptyDocument):
        shingles("。、！", ShingleSpec())


@pytest.mark.slow
def test_the_cached_tables_are_the_built_ones() -> None:
    from neardup.text import scripts, words

    for version in (1, 2):
        assert np.array_equal(words.word_table(version), words._build_table(version))
    assert np.array_equal(scripts._table(), scripts._build_table())


@pytest.mark.parametrize("tokenizer", [1, 2])
@given(texts=st.lists(TEXTS, max_size=6))
def test_token_counts_are_the_number_of_tokens(tokenizer: int, texts: list[str]) -> None:
    expected = [len(word_tokens(t, tokenizer)) for t in texts]
    assert token_counts(texts, tokenizer).tolist() == expected

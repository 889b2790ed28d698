"""neardup.batch.plan: the memory an in-memory run is planned to need, measured on a
sample of the inputs so that scripts denser in shingles than English plan more."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import Config, RunOptions, ShingleSpec, run_dedup
from neardup.batch.plan import MAX_SHINGLES_PER_BYTE, MIN_WORD_RATE, in_memory_plan, shingle_rate
from neardup.core.config import scratch_bytes
from neardup.io.corpus import input_bytes
from neardup.testing import synthetic_documents
from neardup.text.hashing import hash_documents

# Common Chinese characters and full-width punctuation (NFKC maps the latter to ASCII).
_HAN = "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家"


def _chinese(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        "".join(rng.choice(_HAN) for _ in range(rng.randint(40, 400))) + "（第" + str(i) + "页）。"
        for i in range(n)
    ]


def _write(path: Path, texts: list[str], *, ascii_only: bool = False) -> list[str]:
    with path.open("w", encoding="utf-8") as fh:
        for i, t in enumerate(texts):
            fh.write(json.dumps({"id": i, "text": t, "lang": "zh"}, ensure_ascii=ascii_only))
            fh.write("\n")
    return texts


def _old_plan(path: Path) -> int:
    total = input_bytes([str(path)])
    return scratch_bytes(total) + int(total * (3 + 8 / 6))


def test_english_plans_as_before(tmp_path: Path) -> None:
    src = tmp_path / "en.jsonl"
    texts = _write(src, synthetic_documents(3000, seed=3, words=60))
    planned, old = in_memory_plan([str(src)], Config()), _old_plan(src)
    assert old <= planned < 1.03 * old
    counted = int(hash_documents(texts, Config()).raw_counts.sum()) / src.stat().st_size
    rate = shingle_rate([str(src)], Config())
    assert counted <= rate <= max(MIN_WORD_RATE, 1.1 * counted)


def test_the_plan_holds_the_shingles_of_chinese_text(tmp_path: Path) -> None:
    for ascii_only in (False, True):  # UTF-8 (3 bytes a character), or \\uXXXX escapes
        src = tmp_path / f"zh-{ascii_only}.jsonl"
        texts = _write(src, _chinese(3000, seed=5), ascii_only=ascii_only)
        size = src.stat().st_size
        sets = hash_documents(texts, Config())
        raw = int(sets.raw_counts.sum())
        assert len(sets.data) <= raw  # the distinct hashes a run keeps
        rate = shingle_rate([str(src)], Config())
        planned = in_memory_plan([str(src)], Config())
        assert planned == scratch_bytes(size) + int(size * (3 + 8 * rate))
        # Every shingle's 8 bytes fit in the plan, which is within 10% of them.
        assert raw <= rate * size <= 1.1 * raw
        if not ascii_only:
            assert raw * 8 > size * 8 / 6  # what the old plan held: too little
            assert _old_plan(src) < planned
        else:
            assert rate == MIN_WORD_RATE  # 6 bytes a character: no more than English


def test_char_shingles_plan_one_per_byte(tmp_path: Path) -> None:
    src = tmp_path / "zh.jsonl"
    _write(src, _chinese(50, seed=1))
    char = Config(shingle=ShingleSpec(kind="char", k=5))
    assert shingle_rate([str(src)], char) == 1.0
    size = src.stat().st_size
    assert in_memory_plan([str(src)], char) == scratch_bytes(size) + size * 11


def test_unsampled_inputs_plan_at_the_floor(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "n.txt").write_text("中文" * 1000, encoding="utf-8")
    assert shingle_rate([str(folder)], Config()) == MIN_WORD_RATE


def test_a_chinese_corpus_over_the_limit_spills_where_the_old_plan_did_not(
    tmp_path: Path,
) -> None:
    src = tmp_path / "zh.jsonl"
    texts = _chinese(300, seed=9)
    _write(src, texts + texts[:20])  # 20 exact duplicates
    old, new = _old_plan(src), in_memory_plan([str(src)], Config())
    assert old < new
    limit = (old + new) // 2
    spilled = run_dedup([str(src)], str(tmp_path / "out"), options=RunOptions(memory_limit=limit))
    assert spilled.stats.get("out_of_core") is True
    assert spilled.stats["exact_duplicates"] == 20
    in_memory = run_dedup([str(src)], str(tmp_path / "out2"), options=RunOptions(memory_limit=new))
    assert "out_of_core" not in in_memory.stats
    assert in_memory.stats["exact_duplicates"] == 20


@pytest.fixture
def sampled(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The input lists the memory plan reads a sample of, from here on (the plan's
    cache of earlier samples cleared)."""
    from neardup.batch import plan as plan_module

    calls: list[list[str]] = []
    real = plan_module.text_sample

    def counting(inputs: Any, **kw: Any) -> Any:
        calls.append(list(inputs))
        return real(inputs, **kw)

    monkeypatch.setattr(plan_module, "text_sample", counting)
    plan_module._rate.cache_clear()
    return calls


def test_a_second_plan_of_unchanged_files_reads_no_sample(
    tmp_path: Path, sampled: list[list[str]]
) -> None:
    calls = sampled
    src = tmp_path / "zh.jsonl"
    src.write_text('{"text": "一二三四五六七八九十"}\n' * 50, encoding="utf-8")
    first = in_memory_plan([str(src)], Config())
    assert in_memory_plan([str(src)], Config()) == first
    assert len(calls) == 1
    src.write_text('{"text": "the quick brown fox jumps"}\n' * 70, encoding="utf-8")
    assert in_memory_plan([str(src)], Config()) != first
    assert len(calls) == 2


def test_a_limit_that_even_the_bound_fits_reads_no_sample(
    tmp_path: Path, sampled: list[list[str]]
) -> None:
    calls = sampled
    src = tmp_path / "zh.jsonl"
    _write(src, _chinese(200, seed=9))
    size = input_bytes([str(src)])
    bound = scratch_bytes(size) + size * (3 + 8 * MAX_SHINGLES_PER_BYTE)
    assert in_memory_plan([str(src)], Config(), limit=bound) == bound
    assert calls == []
    sampled = in_memory_plan([str(src)], Config(), limit=bound - 1)
    assert len(calls) == 1
    assert sampled == in_memory_plan([str(src)], Config()) < bound


@settings(max_examples=60, deadline=None)  # a hashing kernel call each
@given(
    texts=st.lists(
        st.text(st.sampled_from("a \u00e9\ufdfa\u4e2d\u3000\ufb01.\U0001f600"), max_size=40),
        min_size=1,
        max_size=5,
    ),
    kind=st.sampled_from(["word", "char"]),
)
def test_no_input_byte_gives_more_shingles_than_the_bound(texts: list[str], kind: str) -> None:
    # U+FDFA is the longest NFKC expansion (18 characters, four words), U+FB01
    # a ligature; the bound must hold for the text bytes alone, before JSON adds any.
    cfg = Config(shingle=ShingleSpec(kind=kind, k=1 if kind == "word" else 3))
    raw = hash_documents(texts, cfg).raw_counts
    for t, n in zip(texts, raw.tolist(), strict=True):
        assert n <= MAX_SHINGLES_PER_BYTE * len(t.encode())

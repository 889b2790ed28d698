"""neardup.batch.external: the out-of-core run (index pass, join on mapped files,
write pass) finds what the in-memory find_duplicates finds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from neardup import Config, find_duplicates
from neardup.batch.external import chunk_chars, spilled_dedup, write_streamed
from neardup.core._errors import MemoryLimitExceeded
from neardup.testing import plant_near_duplicates, synthetic_documents

SMALL = 8 << 20  # memory_limit: chunks of 256 Ki characters


def _corpus() -> list[str]:
    base = synthetic_documents(260, seed=11, words=300)
    texts, _parents = plant_near_duplicates(base, copies=40, edit_rate=[0.005, 0.01], seed=12)
    texts.append(texts[3])  # an exact duplicate
    texts.append("")  # an empty document
    return texts


def _write_jsonl(path: Path, texts: list[str], start: int = 0) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for i, t in enumerate(texts, start):
            fh.write(json.dumps({"id": f"d{i}", "text": t, "extra": [i]}) + "\n")


def _groups(dup_of: np.ndarray) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for i, rep in enumerate(dup_of.tolist()):
        if rep >= 0:
            out.setdefault(rep, {rep}).add(i)
    return out


def test_chunk_size_is_a_fortieth_of_the_limit_within_bounds() -> None:
    assert chunk_chars(1 << 20) == 256 << 10
    assert chunk_chars(400 << 20) == 10 << 20
    assert chunk_chars(64 << 30) == 64 << 20


@pytest.mark.parametrize("method", ["lsh", "exact"])
def test_out_of_core_equals_in_memory(tmp_path: Path, method: str) -> None:
    texts = _corpus()
    assert sum(map(len, texts)) > chunk_chars(SMALL)  # more than one index-pass chunk
    # Two input files: the positions run on across them.
    half = len(texts) // 2
    _write_jsonl(tmp_path / "a.jsonl", texts[:half])
    _write_jsonl(tmp_path / "b.jsonl", texts[half:], start=half)
    work = tmp_path / "work"
    work.mkdir()
    seen: list[str] = []
    result, ids, bad = spilled_dedup(
        [str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")],
        str(work),
        config=Config(),
        memory_limit=SMALL,
        id_field="id",
        method=method,
        progress=lambda stage, _d, _t: seen.append(stage),
    )
    expected = find_duplicates(texts, memory_limit=SMALL, method=method)  # type: ignore[arg-type]
    assert bad == [] and ids == [f"d{i}" for i in range(len(texts))]
    assert result.duplicate_of.tolist() == expected.duplicate_of.tolist()
    assert [(c.representative, c.members) for c in result.clusters] == [
        (c.representative, c.members) for c in expected.clusters
    ]
    assert result.empty.tolist() == expected.empty.tolist() == [len(texts) - 1]
    # The planted copies and the exact copy were found.
    groups = _groups(result.duplicate_of)
    assert len(groups) >= 35 and any({3, len(texts) - 2} <= g for g in groups.values())
    assert result.stats["out_of_core"] is True
    assert result.stats["work_bytes"] > 0 and "index_pass" in seen


def test_the_write_pass_keeps_original_lines_and_labels_duplicates(tmp_path: Path) -> None:
    texts = _corpus()
    src = tmp_path / "in.jsonl"
    _write_jsonl(src, texts)
    work = tmp_path / "work"
    work.mkdir()
    result, ids, _bad = spilled_dedup(
        [str(src)], str(work), config=Config(), memory_limit=SMALL, id_field="id"
    )
    cluster_of = np.full(len(texts), -1, dtype=np.int64)
    for c in result.clusters:
        cluster_of[list(c.members)] = c.id
    out = tmp_path / "out"
    out.mkdir()
    got = write_streamed(
        str(out),
        [str(src)],
        result,
        ids,
        cluster_of,
        text_field="text",
        id_field="id",
        skip_bad=False,
        want_texts={0, 5},
    )
    assert got == {0: texts[0], 5: texts[5]}
    lines = src.read_bytes().splitlines()
    dup_of = result.duplicate_of.tolist()
    kept = (out / "kept.jsonl").read_bytes().splitlines()
    assert kept == [ln for i, ln in enumerate(lines) if dup_of[i] < 0]  # byte for byte
    dups = [json.loads(ln) for ln in (out / "duplicates.jsonl").read_text().splitlines()]
    want = [i for i, r in enumerate(dup_of) if r >= 0]
    assert [d["id"] for d in dups] == [f"d{i}" for i in want]
    for d, i in zip(dups, want, strict=True):
        assert d["representative"] == f"d{dup_of[i]}"
        assert d["cluster"] == int(cluster_of[i]) >= 0
        assert d["extra"] == [i]


def test_bad_records_are_skipped_and_reported(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "one two three four five six"}\nnot json\n{"text": "x y"}\n')
    work = tmp_path / "work"
    work.mkdir()
    result, ids, bad = spilled_dedup(
        [str(src)], str(work), config=Config(), memory_limit=SMALL, skip_bad=True
    )
    assert ids == [0, 1] and len(result.duplicate_of) == 2
    assert len(bad) == 1


def test_a_memory_limit_too_small_for_the_join_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    _write_jsonl(src, synthetic_documents(20, seed=1, words=20))
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(MemoryLimitExceeded):
        spilled_dedup([str(src)], str(work), config=Config(), memory_limit=2 << 20)

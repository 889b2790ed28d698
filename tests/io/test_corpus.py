"""neardup.io.corpus: a corpus read from its inputs, and what a run plans for it.

The readers, columns and writers it joins have test modules of their own
(test_jsonl, test_readers, test_columns, test_writers, ...)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from neardup import Config, InputError, ShingleSpec
from neardup.core.config import scratch_bytes
from neardup.io import corpus as C


def test_in_memory_and_out_of_core_duplicates_are_the_same_bytes(tmp_path: Path) -> None:
    from neardup import RunOptions, run_dedup

    src = tmp_path / "in.jsonl"
    base = "the quick brown fox jumps over the lazy dog and then some more words follow"
    rows = [
        {"id": i, "text": f"{base} {i % 5}", "n": 1.50 if i % 2 else None, "cluster": "x"}
        if i % 3 == 0
        else {"id": i, "text": f"{base} {i % 5}", "tags": ["a", "\u00e9"]}
        for i in range(40)
    ]
    # Compact separators: appending to the original bytes keeps them compact.
    src.write_text("\n".join(json.dumps(r, separators=(",", ":")) for r in rows) + "\n")
    run_dedup([str(src)], str(tmp_path / "mem"), id_field="id", report=False)
    spill = RunOptions(spill=True)
    run_dedup([str(src)], str(tmp_path / "ooc"), id_field="id", report=False, options=spill)
    mem = (tmp_path / "mem" / "duplicates.jsonl").read_bytes()
    assert mem and mem == (tmp_path / "ooc" / "duplicates.jsonl").read_bytes()
    for line in mem.splitlines():
        rec = json.loads(line)
        assert isinstance(rec["cluster"], int) and "representative" in rec
        if rec.get("tags"):
            assert line.startswith(b'{"id":') and b'"tags":["a","\\u00e9"], "cluster": ' in line


def test_inputs_are_read_in_order_with_ids_counted_across_them(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl.gz"
    a.write_text('{"text": "one"}\n{"text": "two"}\n', encoding="utf-8")
    with gzip.open(b, "wt", encoding="utf-8") as fh:
        fh.write('{"text": "three"}\n')
    fed: list[list[str]] = []
    c = C.read_corpus([str(a), str(b)], on_texts=fed.append)
    assert c.format == "jsonl" and c.inputs == [str(a), str(b)]
    assert c.texts == ["one", "two", "three"] and c.ids == [0, 1, 2]
    assert c.origins == [(0, 1), (0, 2), (1, 1)]
    assert [t for batch in fed for t in batch] == list(c.texts)
    csv_file = tmp_path / "c.csv"
    csv_file.write_text("text\nfour\nfive\n", encoding="utf-8")
    fed.clear()
    c = C.read_corpus([str(csv_file), str(csv_file)], on_texts=fed.append)
    assert c.format == "csv" and c.ids == [0, 1, 2, 3]
    assert fed == [["four", "five"], ["four", "five"]]  # a file at a time


def test_no_input_and_mixed_formats_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"^<none>: no input given; fix: name at least one"):
        C.read_corpus([])
    a, b = tmp_path / "a.jsonl", tmp_path / "b.csv"
    a.write_text('{"text": "x"}\n', encoding="utf-8")
    b.write_text("text\nx\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        C.read_corpus([str(a), str(b)])
    assert str(err.value) == (
        f"{a}, {b}: inputs mix formats ['csv', 'jsonl']; fix: run one format at a time "
        "(or convert first)"
    )


def test_parquet_and_saved_datasets_are_one_family(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    datasets = pytest.importorskip("datasets")
    pq.write_table(pa.table({"text": ["a", "b"]}), tmp_path / "a.parquet")
    datasets.Dataset.from_dict({"text": ["c"]}).save_to_disk(str(tmp_path / "ds"))
    c = C.read_corpus([str(tmp_path / "a.parquet"), str(tmp_path / "ds")])
    assert c.format == "parquet" and c.texts == ["a", "b", "c"] and c.ids == [0, 1, 2]


def test_a_detected_id_field_gives_the_ids_or_falls_back(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text('{"id": "x", "text": "a"}\n{"id": 7, "text": "b"}\n', encoding="utf-8")
    c = C.read_corpus([str(good)], detect_id=True)
    assert c.ids == ["x", 7] and c.id_choice.detected
    assert C.read_corpus([str(good)]).ids == [0, 1]  # only when asked to detect
    gap = tmp_path / "gap.jsonl"
    gap.write_text('{"id": "x", "text": "a"}\n{"text": "b"}\n', encoding="utf-8")
    c = C.read_corpus([str(gap)], detect_id=True)
    assert c.ids == [0, 1] and c.bad == [] and c.id_choice.fallback


def test_the_in_memory_plan_comes_from_the_sizes_on_disk(tmp_path: Path) -> None:
    plain, packed = tmp_path / "a.jsonl", tmp_path / "b.jsonl.gz"
    plain.write_bytes(b"x" * 1000)
    packed.write_bytes(b"y" * 100)
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "n.txt").write_text("note", encoding="utf-8")
    inputs = [str(plain), str(packed), str(folder)]
    assert C.input_bytes(inputs) == 1000 + 4 * 100  # compressed: four times; folders 0
    word = Config()
    char = Config(shingle=ShingleSpec(kind="char", k=5))
    assert C.in_memory_plan(inputs, word) == scratch_bytes(1400) + int(1400 * (3 + 8 / 6))
    assert C.in_memory_plan(inputs, char) == scratch_bytes(1400) + 1400 * 11
    assert C.streamable([str(plain), str(packed)])
    assert not C.streamable(inputs) and not C.streamable([str(tmp_path / "c.csv")])

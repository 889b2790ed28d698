"""neardup.io.corpus: a corpus read from its inputs, and the sample a run plans from.

The readers, columns and writers it joins have test modules of their own
(test_jsonl, test_readers, test_columns, test_writers, ...)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from neardup import InputError
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


def test_planned_input_bytes_come_from_the_sizes_on_disk(tmp_path: Path) -> None:
    plain, packed = tmp_path / "a.jsonl", tmp_path / "b.jsonl.gz"
    plain.write_bytes(b"x" * 1000)
    packed.write_bytes(b"y" * 100)
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "n.txt").write_text("note", encoding="utf-8")
    inputs = [str(plain), str(packed), str(folder)]
    assert C.input_bytes(inputs) == 1000 + 4 * 100  # compressed: four times; folders 0
    assert C.streamable([str(plain), str(packed)])
    assert not C.streamable(inputs) and not C.streamable([str(tmp_path / "c.csv")])


def _lines(path: Path, texts: list[str]) -> dict[str, int]:
    """Write ``texts`` as JSONL records (unless empty: then read them); the byte
    length of each text's line with its newline."""
    if texts:
        with path.open("w", encoding="utf-8") as fh:
            for i, t in enumerate(texts):
                fh.write(json.dumps({"id": i, "text": t, "meta": {"lang": "x", "n": [i]}}) + "\n")
    return {json.loads(line)["text"]: len(line) for line in path.read_bytes().splitlines(True)}


def test_a_small_input_is_sampled_whole(tmp_path: Path) -> None:
    src = tmp_path / "a.jsonl"
    _lines(src, ["中文", 'é\n"q"'])  # json.dumps escapes: \u4e2d, \n, \"
    docs, nbytes = C.text_sample([str(src)])
    assert docs == ["中文\nx", 'é\n"q"\nx']  # every string value, unescaped
    assert nbytes == src.stat().st_size
    csv = tmp_path / "b.csv"
    csv.write_text("id,text\n1,hello there\n", encoding="utf-8")
    assert C.text_sample([str(csv)]) == (["id,text", "1,hello there"], csv.stat().st_size)
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "n.txt").write_text("note", encoding="utf-8")
    assert C.text_sample([str(folder)]) == ([], 0)
    broken, odd = tmp_path / "c.jsonl.gz", tmp_path / "d.xyz"
    broken.write_bytes(b"not gzip")
    odd.write_bytes(b"what format?")
    assert C.text_sample([str(broken), str(odd)]) == ([], 0)  # the reader words errors


def test_the_sample_is_bounded_spread_and_deterministic(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _lines(a, [f"first file line {i} " + "word " * 40 for i in range(4000)])
    _lines(b, [f"second file line {i} " + "word " * 40 for i in range(4000)])
    inputs = [str(a), str(b)]
    docs, nbytes = C.text_sample(inputs, blocks=4, block_bytes=4096)
    assert nbytes <= 4 * 4096 and docs  # complete lines of 4 blocks of 4 KiB
    size = {**_lines(a, []), **_lines(b, [])}
    assert nbytes == sum(size[d.removesuffix("\nx")] for d in docs)  # the lines kept
    firsts = sorted({d.split(" ")[0] for d in docs})
    assert firsts == ["first", "second"]  # two blocks in each file
    numbers = sorted(int(d.split(" ")[3]) for d in docs if d.startswith("first"))
    assert numbers[0] > 0 and numbers[-1] < 3999  # from inside the file, not its ends
    assert C.text_sample(inputs, blocks=4, block_bytes=4096) == (docs, nbytes)


def test_a_compressed_input_is_sampled_from_its_start(tmp_path: Path) -> None:
    src = tmp_path / "a.jsonl.gz"
    rows = "".join(json.dumps({"text": f"line {i}"}) + "\n" for i in range(10000))
    with gzip.open(src, "wt", encoding="utf-8") as fh:
        fh.write(rows)
    docs, nbytes = C.text_sample([str(src)], blocks=2, block_bytes=1000)
    assert docs[:2] == ["line 0", "line 1"] and nbytes <= 2000
    assert rows.encode()[:nbytes].decode().count("\n") == len(docs)

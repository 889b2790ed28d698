"""One training input checked (``check_input``), and tallies that add up across
inputs as the Ray engine adds them."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import numpy as np
import pytest

from neardup import InputError
from neardup.lineage import decontam_shard
from neardup.lineage.decontam import DecontamConfig, EvalIndex
from neardup.lineage.decontam_shard import InputCounts, Tally, check_input, training_format
from neardup.testing import synthetic_documents

ITEMS = synthetic_documents(6, seed=5, words=30)


def _index() -> EvalIndex:
    return EvalIndex.build(
        [("bench", f"e{i}", t) for i, t in enumerate(ITEMS)], DecontamConfig(ngram=5)
    )


def _training(path: Path, n: int, seed: int, every: int = 4) -> list[bytes]:
    lines = []
    for i, t in enumerate(synthetic_documents(n, seed=seed, words=120)):
        if i % every == 1:
            t = t + " " + ITEMS[i % len(ITEMS)]
        lines.append(json.dumps({"text": t, "site": f"s{i % 5}"}).encode())
    path.write_bytes(b"".join(x + b"\n" for x in lines))
    return lines


def _check(path: Path, index: EvalIndex, tally: Tally, **kw: object) -> InputCounts:
    opts: dict[str, object] = {
        "clean_path": None,
        "removed": io.BytesIO(),
        "text_field": "text",
        "id_field": None,
        "source_field": "site",
        "skip_bad": False,
        "batch_bytes": 2048,
    }
    opts.update(kw)
    return check_input(str(path), 0, index, tally, **opts)  # type: ignore[arg-type]


def test_counts_add_up() -> None:
    a, b = InputCounts(3, 1, 100, 0), InputCounts(2, 2, 50, 1)
    assert a + b == InputCounts(5, 3, 150, 1)
    assert InputCounts() + a == a


def test_tallies_of_two_inputs_merge_into_the_tally_of_both(tmp_path: Path) -> None:
    index = _index()
    sets, counts = {"bench": "eval.jsonl"}, {"bench": len(ITEMS)}
    _training(tmp_path / "a.jsonl", 30, seed=1)
    _training(tmp_path / "b.jsonl", 25, seed=2, every=3)
    both = Tally(index, sets, counts)
    ca = _check(tmp_path / "a.jsonl", index, both)
    cb = _check(tmp_path / "b.jsonl", index, both)
    merged = Tally(index, sets, counts)
    for name in ("a.jsonl", "b.jsonl"):
        one = Tally(index, sets, counts)
        _check(tmp_path / name, index, one)
        merged.merge(one.state())
    assert ca.removed == 8 and cb.removed == 8 and ca.documents == 30
    assert merged.report() == both.report()
    assert merged.samples == both.samples
    assert np.array_equal(merged.docs_per_item, both.docs_per_item)


def test_merging_keeps_the_cap_on_distinct_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decontam_shard, "MAX_SOURCES", 2)
    index = _index()
    tally = Tally(index, {"bench": "x"}, {"bench": len(ITEMS)})
    for sources in ({"s1": 2, "s2": 1}, {"s2": 1, "s3": 4}):
        tally.merge(
            {
                "docs_per_item": np.zeros(len(index), dtype=np.int64),
                "docs_per_set": {"bench": sum(sources.values())},
                "sources": {"bench": sources},
                "samples": [],
            }
        )
    assert dict(tally.sources["bench"]) == {"s1": 2, "s2": 2, "(other)": 4}
    assert tally.docs_per_set["bench"] == 8


def test_clean_records_and_removed_lines(tmp_path: Path) -> None:
    index = _index()
    lines = _training(tmp_path / "a.jsonl", 12, seed=3)
    removed = io.BytesIO()
    tally = Tally(index, {"bench": "x"}, {"bench": len(ITEMS)})
    c = _check(
        tmp_path / "a.jsonl",
        index,
        tally,
        clean_path=str(tmp_path / "clean.jsonl"),
        removed=removed,
    )
    dirty = [i for i in range(12) if i % 4 == 1]
    assert (c.documents, c.removed, c.bad) == (12, len(dirty), 0)
    assert c.bytes == sum(len(x) for x in lines)
    clean = b"".join(x + b"\n" for i, x in enumerate(lines) if i not in dirty)
    assert (tmp_path / "clean.jsonl").read_bytes() == clean
    out = [json.loads(x) for x in removed.getvalue().splitlines()]
    assert [r["row"] for r in out] == dirty
    assert all(json.dumps(r["record"]).encode() in lines for r in out)


def test_an_empty_compressed_input_gives_a_valid_empty_clean_file(tmp_path: Path) -> None:
    src = tmp_path / "empty.jsonl.gz"
    src.write_bytes(gzip.compress(b""))
    tally = Tally(_index(), {"bench": "x"}, {"bench": len(ITEMS)})
    c = _check(src, tally.index, tally, clean_path=str(tmp_path / "clean.jsonl.gz"))
    assert c == InputCounts()
    assert gzip.decompress((tmp_path / "clean.jsonl.gz").read_bytes()) == b""


def test_only_jsonl_and_parquet_are_streamed(tmp_path: Path) -> None:
    csv = tmp_path / "x.csv"
    csv.write_text("text\nhello\n")
    with pytest.raises(InputError, match="JSONL and Parquet"):
        training_format(str(csv))
    assert training_format(str(tmp_path / "y.jsonl.zst")) == "jsonl"

"""neardup.io.inputs: formats, file lists and decompressed bytes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from neardup import InputError, InvalidConfig, NeardupIOError
from neardup.io.inputs import (
    detect_format,
    iter_lines,
    resolve_inputs,
    split_inputs,
    split_name,
    strip_compression,
)


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("a.jsonl", ("a.jsonl", None)),
        ("A.NDJSON.GZ", ("a.ndjson", ".gz")),
        ("x.parquet.zst", ("x.parquet", ".zst")),
        ("notes.txt", ("notes.txt", None)),
    ],
)
def test_strip_compression(name: str, want: tuple[str, str | None]) -> None:
    assert strip_compression(name) == want


def test_detect_format_by_suffix_and_folder(tmp_path: Path) -> None:
    for name, fmt in [("a.jsonl.gz", "jsonl"), ("b.parquet", "parquet"), ("c.txt", "txt")]:
        (tmp_path / name).write_bytes(b"")
        assert detect_format(str(tmp_path / name)) == fmt
    data = tmp_path / "shards"
    data.mkdir()
    (data / "p1.jsonl").write_text("{}\n")
    with pytest.raises(InputError, match="folder of data files"):
        detect_format(str(data))
    assert detect_format(str(data), expand=True) == "files"


def test_resolve_inputs_expands_folders_sorted_and_refuses_missing_paths(tmp_path: Path) -> None:
    data = tmp_path / "d"
    data.mkdir()
    for name in ("b.jsonl", "a.jsonl.gz", "skip.md"):
        (data / name).write_text("")
    assert resolve_inputs([str(data)]) == [str(data / "a.jsonl.gz"), str(data / "b.jsonl")]
    with pytest.raises(NeardupIOError, match="does not exist"):
        resolve_inputs([str(tmp_path / "missing.jsonl")])


@pytest.mark.parametrize(
    ("path", "want"),
    [
        ("out/train.jsonl", "train"),
        ("Test.JSONL.GZ", "Test"),
        ("v/valid.parquet.zst", "valid"),
        ("eval.set.csv", "eval.set"),
        ("notes.txt", "notes"),
        ("README", "README"),
        (".jsonl", ".jsonl"),
    ],
)
def test_split_name_drops_format_and_compression(path: str, want: str) -> None:
    assert split_name(path) == want


def _dataset_dict(root: Path, splits: list[str]) -> Path:
    """The folder layout DatasetDict.save_to_disk writes (what resolve_inputs reads)."""
    root.mkdir()
    (root / "dataset_dict.json").write_text(json.dumps({"splits": splits}))
    for s in splits:
        (root / s).mkdir()
        (root / s / "state.json").write_text("{}")
    return root


def test_split_inputs_names_each_input(tmp_path: Path) -> None:
    for name in ("train.jsonl", "test.jsonl.gz", "extra.jsonl"):
        (tmp_path / name).write_text("")
    shards = tmp_path / "valid"
    shards.mkdir()
    for name in ("p1.jsonl", "p0.jsonl"):
        (shards / name).write_text("")
    tr, te, ex = (str(tmp_path / n) for n in ("train.jsonl", "test.jsonl.gz", "extra.jsonl"))
    # one input: no split
    assert split_inputs([tr]) == ([tr], None)
    assert split_inputs([str(shards)]) == ([str(shards / "p0.jsonl"), str(shards / "p1.jsonl")],
                                           None)
    # several: file stems, a folder's name for each of its files
    files, splits = split_inputs([tr, te, str(shards)])
    assert files == [tr, te, str(shards / "p0.jsonl"), str(shards / "p1.jsonl")]
    assert splits == ["train", "test", "valid", "valid"]
    # named: one named input is enough; a named path is read once, with its name
    assert split_inputs([tr], [("dev", ex)]) == ([tr, ex], ["train", "dev"])
    assert split_inputs([tr, ex], [("test", ex)]) == ([tr, ex], ["train", "test"])
    assert split_inputs([], [("a", tr), ("a", te)]) == ([tr, te], ["a", "a"])
    with pytest.raises(InvalidConfig, match="names a path named already"):
        split_inputs([], [("a", tr), ("b", tr)])
    with pytest.raises(InvalidConfig, match="empty name"):
        split_inputs([], [("", tr)])


def test_split_inputs_takes_a_dataset_dicts_split_names(tmp_path: Path) -> None:
    dd = _dataset_dict(tmp_path / "dd", ["train", "validation", "test"])
    files, splits = split_inputs([str(dd)])
    assert files == [str(dd / s) for s in ("train", "validation", "test")]
    assert splits == ["train", "validation", "test"]
    # a name given to the whole DatasetDict covers all its splits
    assert split_inputs([], [("old", str(dd))])[1] == ["old"] * 3
    (dd / "dataset_dict.json").write_text("{}")
    with pytest.raises(InputError, match="not a readable DatasetDict listing"):
        split_inputs([str(dd)])


def test_iter_lines_reads_compressed_and_names_a_damaged_file(tmp_path: Path) -> None:
    good = tmp_path / "g.jsonl.gz"
    good.write_bytes(gzip.compress(b"one\ntwo\n"))
    assert list(iter_lines(str(good))) == [(1, b"one\n"), (2, b"two\n")]
    bad = tmp_path / "b.jsonl.gz"
    whole = gzip.compress(b"".join(b"%d\n" % i for i in range(100_000)))
    bad.write_bytes(whole[: len(whole) // 2])  # a torn download
    with pytest.raises(InputError, match="cannot decompress"):
        list(iter_lines(str(bad)))

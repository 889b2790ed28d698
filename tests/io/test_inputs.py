"""neardup.io.inputs: formats, file lists and decompressed bytes."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from neardup import InputError, NeardupIOError
from neardup.io.inputs import detect_format, iter_lines, resolve_inputs, strip_compression


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


def test_iter_lines_reads_compressed_and_names_a_damaged_file(tmp_path: Path) -> None:
    good = tmp_path / "g.jsonl.gz"
    good.write_bytes(gzip.compress(b"one\ntwo\n"))
    assert list(iter_lines(str(good))) == [(1, b"one\n"), (2, b"two\n")]
    bad = tmp_path / "b.jsonl.gz"
    whole = gzip.compress(b"".join(b"%d\n" % i for i in range(100_000)))
    bad.write_bytes(whole[: len(whole) // 2])  # a torn download
    with pytest.raises(InputError, match="cannot decompress"):
        list(iter_lines(str(bad)))

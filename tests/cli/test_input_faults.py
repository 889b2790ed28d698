"""Damaged inputs end in a clear message and exit 3, whatever --skip-bad says
(real processes)."""

from __future__ import annotations

import hashlib
import json
import resource
import signal
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

zstandard = pytest.importorskip("zstandard")

RECORDS = "".join(
    json.dumps({"id": i, "text": f"document number {i} about topic {i % 7} " * 8}) + "\n"
    for i in range(3000)
).encode()


def _dedup(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "neardup", "dedup", str(path), "-o", str(path) + ".out", *extra],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / f"{name}.jsonl.zst"
    p.write_bytes(data)
    return p


@pytest.mark.parametrize("skip_bad", [[], ["--skip-bad"]])
def test_a_cut_or_foreign_zst_stream_is_exit_3(tmp_path: Path, skip_bad: list[str]) -> None:
    whole = zstandard.ZstdCompressor().compress(RECORDS)
    cut = _write(tmp_path, "cut", whole[: len(whole) // 2])
    r = _dedup(cut, *skip_bad)
    assert r.returncode == 3, r.stderr
    assert "ends inside a zstd frame (truncated)" in r.stderr
    assert not (tmp_path / "cut.jsonl.zst.out").exists()
    junk = _write(tmp_path, "junk", b"plain text, not zstd\n" * 20)
    r = _dedup(junk, *skip_bad)
    assert r.returncode == 3, r.stderr
    assert "not a zstd stream, or a damaged one" in r.stderr
    assert "Traceback" not in r.stderr


def test_complete_multi_frame_and_empty_zst_streams_are_read(tmp_path: Path) -> None:
    half = len(RECORDS) // 2
    cut_at = RECORDS.rfind(b"\n", 0, half) + 1
    c = zstandard.ZstdCompressor()
    two = _write(tmp_path, "two", c.compress(RECORDS[:cut_at]) + c.compress(RECORDS[cut_at:]))
    r = _dedup(two)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("3000 documents"), r.stdout
    empty = _write(tmp_path, "empty", b"")
    r = _dedup(empty)
    assert r.returncode == 0 and r.stdout.startswith("0 documents"), r.stdout + r.stderr


def _csv(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / f"{name}.csv"
    p.write_bytes(text.encode("utf-8"))
    return p


def test_csv_rows_that_do_not_match_the_header_are_bad_records(tmp_path: Path) -> None:
    body = "".join(f"{i},row number {i} of a small table\n" for i in range(50))
    long_row = _csv(tmp_path, "long", "id,text\n" + body + "51,a,b\n")
    r = _dedup(long_row, "--id-field", "id")
    assert r.returncode == 3, r.stderr
    assert "long.csv:52: the row has 3 fields, the header 2" in r.stderr
    r = _dedup(long_row, "--id-field", "id", "--skip-bad")
    assert r.returncode == 0, r.stderr
    assert "50 documents" in r.stdout and "bad records 1" in r.stdout
    short_row = _csv(tmp_path, "short", "id,text\n" + body + "51\n")
    r = _dedup(short_row, "--id-field", "id")
    assert r.returncode == 3 and "the row has 1 field, the header 2" in r.stderr, r.stderr


def test_an_open_quote_is_an_error_not_a_swallowed_file(tmp_path: Path) -> None:
    rows = "".join(f"{i},row {i}\n" for i in range(2, 40))
    p = _csv(tmp_path, "quote", 'id,text\n1,"an open quote\n' + rows)
    for extra in ([], ["--skip-bad"]):
        r = _dedup(p, "--id-field", "id", *extra)
        assert r.returncode == 3, r.stderr
        assert "malformed CSV (unexpected end of data)" in r.stderr
        assert "close every quoted field" in r.stderr


def test_a_csv_byte_order_mark_is_not_part_of_the_first_column(tmp_path: Path) -> None:
    body = "".join(f"{i},row number {i}\n" for i in range(20))
    p = _csv(tmp_path, "bom", "\ufeffid,text\n" + body)
    r = _dedup(p, "--id-field", "id")
    assert r.returncode == 0, r.stderr
    kept = (tmp_path / "bom.csv.out" / "kept.csv").read_text(encoding="utf-8")
    assert kept.splitlines()[0].startswith("id,text")


SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample.jsonl"


def test_a_missing_input_is_named_as_missing(tmp_path: Path) -> None:
    r = _dedup(tmp_path / "no_such_file")
    assert r.returncode == 4, r.stderr
    assert "no_such_file: does not exist" in r.stderr and "Traceback" not in r.stderr


def test_a_single_txt_file_is_one_document(tmp_path: Path) -> None:
    p = tmp_path / "note.txt"
    p.write_text("one short note that is a document of its own\n", encoding="utf-8")
    r = _dedup(p)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("1 documents"), r.stdout


def test_a_folder_of_data_files_reads_every_file(tmp_path: Path) -> None:
    d = tmp_path / "shards"
    (d / "sub").mkdir(parents=True)
    lines = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)
    (d / "a.jsonl").write_text("".join(lines[:300]), encoding="utf-8")
    (d / "sub" / "b.jsonl").write_text("".join(lines[300:]), encoding="utf-8")
    (d / "README.md").write_text("not data\n", encoding="utf-8")
    r = _dedup(d, "--id-field", "id")
    assert r.returncode == 0, r.stderr
    whole = _dedup(SAMPLE, "-o", str(tmp_path / "whole"), "--id-field", "id")
    assert r.stdout.split(";")[0] == whole.stdout.split(";")[0]


def test_a_saved_datasetdict_folder_reads_every_split(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    recs = [json.loads(x) for x in SAMPLE.read_text(encoding="utf-8").splitlines()]
    parts = {"train": recs[:400], "test": recs[400:]}
    dd = datasets.DatasetDict(
        {
            name: datasets.Dataset.from_dict(
                {"id": [r["id"] for r in part], "text": [r["text"] for r in part]}
            )
            for name, part in parts.items()
        }
    )
    dd.save_to_disk(str(tmp_path / "dd"))
    r = _dedup(tmp_path / "dd", "--id-field", "id")
    assert r.returncode == 0, r.stderr
    whole = _dedup(SAMPLE, "-o", str(tmp_path / "whole"), "--id-field", "id")
    assert r.stdout.split(";")[0] == whole.stdout.split(";")[0]


def test_a_damaged_saved_dataset_is_exit_3(tmp_path: Path) -> None:
    pytest.importorskip("datasets")
    d = tmp_path / "ds"
    d.mkdir()
    (d / "state.json").write_text("{}", encoding="utf-8")
    (d / "dataset_info.json").write_text("{}", encoding="utf-8")
    r = _dedup(d)
    assert r.returncode == 3, r.stderr
    assert "not a readable saved dataset" in r.stderr and "Traceback" not in r.stderr


def test_an_unwritable_index_folder_fails_before_the_run(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a folder\n")
    r = _dedup(SAMPLE, "-o", str(tmp_path / "o"), "--save-index", str(blocker / "idx"))
    assert r.returncode == 4, r.stderr
    assert "is not a folder" in r.stderr and "a part of it is a file" in r.stderr
    assert not (tmp_path / "o").exists()


def test_spill_over_parquet_names_the_real_reason(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [json.loads(line) for line in RECORDS.splitlines()]
    src = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(rows), src)
    # It fits in memory: --spill is the wrong option here (exit 2), not a memory problem.
    r = _dedup(src, "--spill")
    assert r.returncode == 2, r.stderr
    assert f"invalid spill=True: {src} is parquet: only JSONL files are read out of core" in (
        r.stderr
    )
    assert "fix: drop --spill (this run fits in memory: about " in r.stderr
    # It does not fit: a memory problem (exit 5) whose message says what would stream.
    r = _dedup(src, "--memory-limit", "1MiB")
    assert r.returncode == 5, r.stderr
    assert f"({src} is parquet: only JSONL files are read out of core; convert it" in r.stderr
    assert "over memory_limit=1,048,576" in r.stderr
    assert not (tmp_path / "in.parquet.out").exists() and "Traceback" not in r.stderr


def test_a_null_id_or_text_is_named_as_null(tmp_path: Path) -> None:
    lines = [json.dumps({"id": i, "text": f"record {i} with a few words"}) for i in range(40)]
    lines[17] = json.dumps({"id": None, "text": "record 17 with a few words"})
    src = tmp_path / "nullid.jsonl"
    src.write_text("\n".join(lines) + "\n")
    r = _dedup(src, "--id-field", "id")
    assert r.returncode == 3, r.stderr
    assert f"{src}:18: the id field 'id' is null; fix: give every record an id" in r.stderr
    r = _dedup(src, "--id-field", "key")
    assert r.returncode == 3 and f"{src}:1: no id field 'key' (fields: id, text)" in r.stderr
    lines[17] = json.dumps({"id": 17, "text": None})
    src.write_text("\n".join(lines) + "\n")
    r = _dedup(src, "--id-field", "id")
    assert r.returncode == 3 and f"{src}:18: field 'text' is null" in r.stderr, r.stderr
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = tmp_path / "nullid.parquet"
    pq.write_table(pa.table({"id": [1, None, 3], "text": ["a b c", "d e f", "g h i"]}), table)
    r = _dedup(table, "--id-field", "id")
    assert r.returncode == 3 and f"{table}:2: row 1 has a null id 'id'" in r.stderr, r.stderr


def _limited(limit: int) -> Callable[[], None]:
    def apply() -> None:
        # A write past RLIMIT_FSIZE fails with EFBIG once SIGXFSZ is ignored: a
        # disk that fills up, without root or a small file system.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def _dedup_limited(
    limit: int, src: Path, out: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "neardup", "dedup", str(src), "-o", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        preexec_fn=_limited(limit),
    )


def _page_up(n: int) -> int:
    return -(-n // 4096) * 4096


@pytest.mark.parametrize("target", ["report.html", "stats.json", "working files"])
def test_a_write_that_does_not_fit_is_exit_4_naming_the_file(tmp_path: Path, target: str) -> None:
    from neardup.testing import synthetic_documents

    src = tmp_path / "in.jsonl"
    if target == "working files":
        docs = synthetic_documents(3000, seed=3, words=150)
        extra = ["--spill", "--no-report"]
    else:
        docs = [f"record {i} with a few words" for i in range(30)]
        extra = ["--skip-bad"] + (["--no-report"] if target == "stats.json" else [])
    with src.open("w") as fh:
        for i, text in enumerate(docs):
            fh.write(json.dumps({"id": i, "text": text}) + "\n")
            if target != "working files":
                fh.write("{not json " + "x" * 100 + "\n")  # long stats.json examples
    whole = _dedup(src, *extra)
    assert whole.returncode == 0, whole.stderr
    sizes = {p.name: p.stat().st_size for p in (tmp_path / "in.jsonl.out").iterdir()}
    # kept/duplicates are written in whole pages and cut to size after.
    others = max(
        _page_up(v) if k.endswith(".jsonl") else v for k, v in sizes.items() if k != target
    )
    if target == "working files":
        limit = others + 8192  # the outputs fit; the shingle-hash file (8 bytes a shingle) not
    else:
        assert sizes[target] > others + 256, sizes
        limit = (others + sizes[target]) // 2
    r = _dedup_limited(limit, src, tmp_path / "out", *extra)
    assert r.returncode == 4, r.stderr
    assert "Traceback" not in r.stderr
    if target == "working files":
        assert "/.neardup-work-" in r.stderr and "/data.u64: File too large" in r.stderr
        assert "or point --work-dir at a disk with room for the working files" in r.stderr
    else:
        assert f"/{target}: File too large; fix: the file grew past the largest file" in r.stderr
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".neardup-")]


@pytest.mark.parametrize("spill", [[], ["--spill"]])
def test_duplicate_ids_are_refused_or_renamed(tmp_path: Path, spill: list[str]) -> None:
    rows = [
        ("a", "one two three four five six seven"),
        ("b", "eight nine ten eleven twelve thirteen"),
        ("a", "one two three four five six seven"),
        ("a#2", "fourteen fifteen sixteen seventeen eighteen"),
    ]
    src = tmp_path / "ids.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in rows))
    r = _dedup(src, "--id-field", "id", *spill)
    assert r.returncode == 3, r.stderr
    where = "" if spill else f" ({src}:1)"  # an out-of-core run keeps no line numbers
    assert f"record 3 has id 'a', also the id of record 1{where}; fix: give each record" in (
        r.stderr
    )
    assert "pass --rename-duplicate-ids" in r.stderr
    assert not (tmp_path / "ids.jsonl.out").exists()
    r = _dedup(src, "--id-field", "id", "--rename-duplicate-ids", *spill)
    assert r.returncode == 0, r.stderr
    # 'a#2' is another record's id: the renamed record gets one that no record has.
    assert "record 3 had id 'a' of record 1, now 'a#3'" in r.stderr
    clusters = [json.loads(x) for x in (tmp_path / "ids.jsonl.out" / "clusters.jsonl").open()]
    assert clusters[0]["members"] == ["a", "a#3"]
    stats = json.loads((tmp_path / "ids.jsonl.out" / "stats.json").read_text())
    assert stats["renamed_ids"] == 1
    lines = src.read_text().splitlines(keepends=True)
    kept = (tmp_path / "ids.jsonl.out" / "kept.jsonl").read_text()
    assert kept == lines[0] + lines[1] + lines[3]  # records unchanged, input order


def test_an_id_already_in_the_saved_index_is_refused(tmp_path: Path) -> None:
    first = tmp_path / "first.jsonl"
    first.write_text(json.dumps({"id": "a", "text": "one two three four five"}) + "\n")
    idx = tmp_path / "idx"
    assert _dedup(first, "--id-field", "id", "--save-index", str(idx)).returncode == 0
    second = tmp_path / "second.jsonl"
    second.write_text(json.dumps({"id": "a", "text": "six seven eight nine ten"}) + "\n")
    r = _dedup(second, "--id-field", "id", "--against", str(idx))
    assert r.returncode == 3, r.stderr
    assert (
        f"{second}:1: record 1 has id 'a', already the id of record 1 of the saved index"
        in r.stderr
    )


def _resigned(raw: bytes, edit: Callable[[dict[str, Any]], None]) -> bytes:
    """The index file with its JSON header edited and its checksum recomputed, as a
    deliberate edit would do (the checksum is not a signature)."""
    hlen = struct.unpack("<Q", raw[12:20])[0]
    header = json.loads(raw[20 : 20 + hlen])
    edit(header)
    text = json.dumps(header, sort_keys=True).encode()
    text += b" " * (-len(text) % 8)
    body = raw[:12] + struct.pack("<Q", len(text)) + text + raw[20 + hlen : -32]
    return body + hashlib.blake2b(body, digest_size=32).digest()


@pytest.mark.slow
def test_a_tampered_index_is_bad_data_and_other_options_are_named(tmp_path: Path) -> None:
    lines = RECORDS.decode().splitlines(keepends=True)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text("".join(lines[:200]))
    second.write_text("".join(lines[200:300]))
    idx = tmp_path / "idx"
    assert _dedup(first, "--id-field", "id", "--save-index", str(idx)).returncode == 0
    raw = (idx / "index.ndx").read_bytes()

    def against(data: bytes, *extra: str) -> subprocess.CompletedProcess[str]:
        (idx / "index.ndx").write_bytes(data)
        return _dedup(second, "--id-field", "id", "--against", str(idx), "--overwrite", *extra)

    def drop_ids(h: dict[str, Any]) -> None:
        del h["meta"]["ids"]

    def other_fingerprint(h: dict[str, Any]) -> None:
        h["meta"]["config_fingerprint"] = "0123456789abcdef"

    def other_scheme(h: dict[str, Any]) -> None:
        h["meta"]["scheme"]["num_perm"] = 64

    def bad_shape(h: dict[str, Any]) -> None:
        h["arrays"][1]["shape"] = [3]

    cases = [
        (raw[:100] + bytes([raw[100] ^ 1]) + raw[101:], "checksum mismatch"),
        (_resigned(raw, drop_ids), "its content is not a consistent index (KeyError: 'ids')"),
        (_resigned(raw, other_fingerprint), "its recorded options do not match its config"),
        (_resigned(raw, other_scheme), "its scheme disagrees with its recorded options"),
        (_resigned(raw, bad_shape), "malformed header (ValueError: cannot reshape"),
    ]
    for data, reason in cases:
        r = against(data)
        assert r.returncode == 3, r.stderr
        assert f"{idx / 'index.ndx'}: {reason}" in r.stderr and "fix: restore it" in r.stderr
        assert "Traceback" not in r.stderr
    r = against(raw, "--threshold", "0.7", "--shingle", "char:5")
    assert r.returncode == 2, r.stderr
    assert (
        "the index was built with other options (--threshold: 0.8 in the index, 0.7 now; "
        "--shingle: 'word:5' in the index, 'char:5' now; --bands: 21 in the index, 32 now; "
        "--rows: 6 in the index, 4 now)" in r.stderr
    )
    assert against(raw).returncode == 0

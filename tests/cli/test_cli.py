"""Integration: the real ``neardup`` executable on real files."""

from __future__ import annotations

import csv
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from neardup import Config, find_duplicates
from neardup.testing import plant_near_duplicates, synthetic_documents

ROOT = Path(__file__).resolve().parents[2]
EXE = shutil.which("neardup") or str(Path(sys.executable).parent / "neardup")


def run(
    *args: str, check: bool = True, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([EXE, *args], capture_output=True, text=True, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def texts() -> list[str]:
    base = synthetic_documents(120, seed=21, words=60)
    out, _ = plant_near_duplicates(base, copies=60, edit_rate=[0.0, 0.01, 0.03, 0.2], seed=22)
    return out


def records(texts: list[str]) -> list[dict[str, Any]]:
    return [{"id": f"r{i:03d}", "text": t, "lang": "xx", "n": i} for i, t in enumerate(texts)]


def write_jsonl(path: Path, recs: list[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for r in recs:
            fh.write(json.dumps(r) + "\n")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def check_outputs(out: Path, texts: list[str], ext: str, id_of: Any) -> None:
    expected = find_duplicates(texts, config=Config())
    stats = json.loads((out / "stats.json").read_text())
    assert stats["documents_in"] == len(texts)
    assert stats["documents_out"] == len(expected.kept)
    for key in (
        "exact_duplicates",
        "near_duplicates",
        "cluster_size_histogram",
        "empty",
        "truncated",
        "scheme_fingerprint",
        "config_fingerprint",
        "predicted_recall_at_threshold",
        "candidate_overflow",
        "timings_s",
        "peak_memory_bytes",
        "bands",
        "rows",
    ):
        assert key in stats, key
    clusters = read_jsonl(out / "clusters.jsonl")
    assert len(clusters) == len(expected.clusters)
    for c, e in zip(clusters, expected.clusters, strict=True):
        assert c["members"] == [id_of(m) for m in e.members]
        assert c["representative"] == id_of(e.representative)
        assert len(c["edges"]) == len(c["members"]) - 1
        for edge in c["edges"]:
            assert edge["jaccard"] >= 0.8 and edge["method"] in ("exact", "identical")
    html = (out / "report.html").read_text()
    assert "<svg" in html and "http://" not in html and "https://" not in html
    assert (out / f"kept.{ext}").exists() and (out / f"duplicates.{ext}").exists()


def test_jsonl_end_to_end(tmp_path: Path, texts: list[str]) -> None:
    src = tmp_path / "in.jsonl"
    recs = records(texts)
    write_jsonl(src, recs)
    proc = run("dedup", str(src), "--output", str(tmp_path / "out"), "--id-field", "id")
    assert "documents" in proc.stdout
    # No progress bars when stderr is not a terminal; only a first run on a cold
    # kernel cache says that it compiles (tests/kernels/test_warm.py checks those lines).
    noise = ("neardup: compiling ", "neardup: kernels compiled ")
    assert [ln for ln in proc.stderr.splitlines() if not ln.startswith(noise)] == []
    out = tmp_path / "out"
    check_outputs(out, texts, "jsonl", lambda m: f"r{m:03d}")
    kept_lines = (out / "kept.jsonl").read_text().splitlines()
    originals = src.read_text().splitlines()
    expected = find_duplicates(texts, config=Config())
    # Kept records are the original lines, byte for byte, in input order.
    assert kept_lines == [originals[i] for i in expected.kept]
    dups = read_jsonl(out / "duplicates.jsonl")
    assert [d["id"] for d in dups] == [f"r{i:03d}" for i in expected.duplicates]
    for d in dups:
        assert d["lang"] == "xx" and isinstance(d["cluster"], int)
        assert d["representative"] == f"r{int(expected.duplicate_of[int(d['n'])]):03d}"


@pytest.mark.slow
def test_compressed_parquet_csv_txt_and_datasets(tmp_path: Path, texts: list[str]) -> None:
    recs = records(texts)
    gz = tmp_path / "in.jsonl.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as fh:
        for r in recs:
            fh.write(json.dumps(r) + "\n")
    run("dedup", str(gz), "-o", str(tmp_path / "gz"))
    # No --id-field: the records' field "id" is detected (tests/cli/test_cli_firstrun.py).
    check_outputs(tmp_path / "gz", texts, "jsonl", lambda m: f"r{m:03d}")

    import zstandard

    zst = tmp_path / "in.jsonl.zst"
    zst.write_bytes(
        zstandard.ZstdCompressor().compress("".join(json.dumps(r) + "\n" for r in recs).encode())
    )
    run("dedup", str(zst), "-o", str(tmp_path / "zst"))
    assert (tmp_path / "zst" / "kept.jsonl").read_bytes() == (
        tmp_path / "gz" / "kept.jsonl"
    ).read_bytes()

    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(recs), tmp_path / "in.parquet")
    run("dedup", str(tmp_path / "in.parquet"), "-o", str(tmp_path / "pq"), "--id-field", "id")
    check_outputs(tmp_path / "pq", texts, "parquet", lambda m: f"r{m:03d}")
    kept = pq.read_table(tmp_path / "pq" / "kept.parquet")
    assert kept.column_names == ["id", "text", "lang", "n"]
    dups = pq.read_table(tmp_path / "pq" / "duplicates.parquet")
    assert dups.column_names == ["id", "text", "lang", "n", "cluster", "representative"]

    with open(tmp_path / "in.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=["id", "text", "lang", "n"])
        w.writeheader()
        w.writerows(recs)
    run("dedup", str(tmp_path / "in.csv"), "-o", str(tmp_path / "csv"), "--id-field", "id")
    check_outputs(tmp_path / "csv", texts, "csv", lambda m: f"r{m:03d}")
    with open(tmp_path / "csv" / "kept.csv", encoding="utf-8") as fh:
        assert next(csv.reader(fh)) == ["id", "text", "lang", "n"]

    folder = tmp_path / "txt"
    folder.mkdir()
    for i, t in enumerate(texts):
        (folder / f"doc{i:03d}.txt").write_text(t, encoding="utf-8")
    run("dedup", str(folder), "-o", str(tmp_path / "txtout"))
    check_outputs(tmp_path / "txtout", texts, "jsonl", lambda m: f"doc{m:03d}.txt")

    import datasets

    datasets.Dataset.from_list(recs).save_to_disk(str(tmp_path / "hf"))
    run("dedup", str(tmp_path / "hf"), "-o", str(tmp_path / "hfout"), "--id-field", "id")
    check_outputs(tmp_path / "hfout", texts, "parquet", lambda m: f"r{m:03d}")


def _strip_measured(path: Path) -> bytes:
    st = json.loads(path.read_text())
    st.pop("timings_s")
    st.pop("peak_memory_bytes")
    st.pop("inputs")
    return json.dumps(st, sort_keys=True).encode()


def test_outputs_are_identical_whatever_the_workers(tmp_path: Path, texts: list[str]) -> None:
    src = tmp_path / "in.jsonl"
    write_jsonl(src, records(texts))
    run("dedup", str(src), "-o", str(tmp_path / "w1"), "--workers", "1")
    run("dedup", str(src), "-o", str(tmp_path / "w2"), "--workers", "2")
    names = sorted(os.listdir(tmp_path / "w1"))
    assert names == sorted(os.listdir(tmp_path / "w2"))
    for name in names:
        a, b = tmp_path / "w1" / name, tmp_path / "w2" / name
        if name == "stats.json":
            assert _strip_measured(a) == _strip_measured(b)
        else:
            assert a.read_bytes() == b.read_bytes(), name


@pytest.mark.slow
def test_incremental_against_equals_one_run_over_the_union(
    tmp_path: Path, texts: list[str]
) -> None:
    recs = records(texts)
    half = len(recs) // 2
    write_jsonl(tmp_path / "a.jsonl", recs[:half])
    write_jsonl(tmp_path / "b.jsonl", recs[half:])
    write_jsonl(tmp_path / "all.jsonl", recs)
    run("dedup", str(tmp_path / "all.jsonl"), "-o", str(tmp_path / "union"), "--id-field", "id")
    run(
        "dedup",
        str(tmp_path / "a.jsonl"),
        "-o",
        str(tmp_path / "ra"),
        "--id-field",
        "id",
        "--save-index",
        str(tmp_path / "idx"),
    )
    run(
        "dedup",
        str(tmp_path / "b.jsonl"),
        "-o",
        str(tmp_path / "rb"),
        "--id-field",
        "id",
        "--against",
        str(tmp_path / "idx"),
        "--save-index",
        str(tmp_path / "idx2"),
    )
    union_kept = [r["id"] for r in read_jsonl(tmp_path / "union" / "kept.jsonl")]
    inc_kept = [r["id"] for r in read_jsonl(tmp_path / "ra" / "kept.jsonl")] + [
        r["id"] for r in read_jsonl(tmp_path / "rb" / "kept.jsonl")
    ]
    assert inc_kept == union_kept
    union_dups = {
        r["id"]: r["representative"] for r in read_jsonl(tmp_path / "union" / "duplicates.jsonl")
    }
    inc_dups = {
        r["id"]: r["representative"] for r in read_jsonl(tmp_path / "ra" / "duplicates.jsonl")
    }
    inc_dups |= {
        r["id"]: r["representative"] for r in read_jsonl(tmp_path / "rb" / "duplicates.jsonl")
    }
    assert inc_dups == union_dups
    union_clusters = {
        tuple(c["members"]) for c in read_jsonl(tmp_path / "union" / "clusters.jsonl")
    }
    b_clusters = {tuple(c["members"]) for c in read_jsonl(tmp_path / "rb" / "clusters.jsonl")}
    assert b_clusters <= union_clusters
    # A different configuration is refused against that index.
    proc = run(
        "dedup",
        str(tmp_path / "b.jsonl"),
        "-o",
        str(tmp_path / "bad"),
        "--against",
        str(tmp_path / "idx"),
        "--threshold",
        "0.7",
        check=False,
    )
    assert proc.returncode == 2 and "fix:" in proc.stderr


@pytest.mark.slow
def test_bad_inputs_have_clear_errors_and_exit_codes(tmp_path: Path) -> None:
    good = json.dumps({"text": "alpha beta gamma delta epsilon zeta"})
    src = tmp_path / "bad.jsonl"
    src.write_text(good + "\n{not json\n" + good + "\n", encoding="utf-8")
    proc = run("dedup", str(src), "-o", str(tmp_path / "o1"), check=False)
    assert proc.returncode == 3
    assert f"{src}:2: malformed JSON" in proc.stderr and "fix:" in proc.stderr
    assert not (tmp_path / "o1").exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".neardup-tmp")]
    proc = run("dedup", str(src), "-o", str(tmp_path / "o2"), "--skip-bad")
    stats = json.loads((tmp_path / "o2" / "stats.json").read_text())
    assert stats["bad_records"] == 1 and stats["bad_record_examples"][0]["line"] == 2

    missing = tmp_path / "missing.jsonl"
    missing.write_text(json.dumps({"body": "x"}) + "\n")
    proc = run("dedup", str(missing), "-o", str(tmp_path / "o3"), check=False)
    assert (
        proc.returncode == 3 and "no field 'text'" in proc.stderr and "--text-field" in proc.stderr
    )

    binary = tmp_path / "latin1.jsonl"
    binary.write_bytes(b'{"text": "caf\xe9"}\n')
    proc = run("dedup", str(binary), "-o", str(tmp_path / "o4"), check=False)
    assert proc.returncode == 3 and "not UTF-8" in proc.stderr

    big = tmp_path / "big.jsonl"
    write_jsonl(big, [{"text": "word " * 500}, {"text": "small text here and there"}])
    run("dedup", str(big), "-o", str(tmp_path / "o5"), "--max-document-bytes", "100")
    assert json.loads((tmp_path / "o5" / "stats.json").read_text())["too_large"] == 1

    proc = run("dedup", str(tmp_path / "nope.jsonl"), "-o", str(tmp_path / "o6"), check=False)
    assert proc.returncode == 4 and "nope.jsonl" in proc.stderr

    proc = run("dedup", str(big), "-o", str(tmp_path / "o5"), check=False)
    assert proc.returncode == 4 and "already exists" in proc.stderr and "--overwrite" in proc.stderr
    run("dedup", str(big), "-o", str(tmp_path / "o5"), "--overwrite")

    proc = run("dedup", str(big), "-o", str(tmp_path / "o7"), "--threshold", "1.5", check=False)
    assert proc.returncode == 2 and "threshold=1.5" in proc.stderr and "fix:" in proc.stderr
    proc = run("dedup", str(big), "-o", str(tmp_path / "o7"), "--shingle", "words", check=False)
    assert proc.returncode == 2 and "word:5" in proc.stderr
    proc = run(
        "dedup",
        str(big),
        "-o",
        str(tmp_path / "o7"),
        "--num-perm",
        "31",
        "--bands",
        "8",
        check=False,
    )
    assert proc.returncode == 2 and "num_perm=31" in proc.stderr


def test_interrupted_write_leaves_no_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from neardup.batch import job

    src = tmp_path / "in.jsonl"
    write_jsonl(src, [{"text": "one two three four five six"}])

    def boom(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(job, "write_outputs", boom)
    with pytest.raises(KeyboardInterrupt):
        job.run_dedup([str(src)], str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
    assert os.listdir(tmp_path) == ["in.jsonl"]


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    write_jsonl(src, [{"text": "one two three four five six"}] * 3)
    proc = run("dedup", str(src), "-o", str(tmp_path / "out"), "--dry-run")
    assert "kept 1" in proc.stdout and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_params_and_eval(tmp_path: Path, texts: list[str]) -> None:
    proc = run(
        "params",
        "--threshold",
        "0.8",
        "--far",
        "0.3",
        "--recall",
        "0.95",
        "--budget",
        "20000",
        "-n",
        "1000000",
        "--max-perm",
        "100",
        "--png",
        str(tmp_path / "s.png"),
    )
    assert "bands=8 rows=5" in proc.stdout
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = json.loads(run("params", "--threshold", "0.8", "--json").stdout)
    assert (data["bands"], data["rows"]) == (21, 6)
    proc = run(
        "params",
        "--threshold",
        "0.5",
        "--far",
        "0.45",
        "--recall",
        "0.99",
        "--budget",
        "10",
        "--max-perm",
        "64",
        check=False,
    )
    assert proc.returncode == 2 and "fix:" in proc.stderr
    src = tmp_path / "in.jsonl"
    write_jsonl(src, records(texts))
    rep = json.loads(run("eval", str(src), "--json").stdout)
    assert rep["precision"] == 1.0 and rep["recall"] >= 0.99 and rep["truth_pairs"] > 10
    assert "pair recall" in run("eval", str(src)).stdout


def _commands() -> dict[str, list[str]]:
    from neardup.cli import main

    out = {}
    for name, cmd in main.commands.items():  # type: ignore[attr-defined]
        out[name] = [o for p in cmd.params for o in p.opts if o.startswith("--")]
    return out


@pytest.mark.slow
def test_every_command_and_option_is_documented() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for name, opts in _commands().items():
        help_text = run(name, "--help").stdout
        assert "Example:" in help_text
        assert f"neardup {name}" in readme, name
        for opt in opts:
            assert opt in help_text, (name, opt)
            assert re.search(re.escape(opt) + r"\b", readme), (name, opt)


@pytest.mark.slow
def test_out_of_core_run_equals_in_memory_run(tmp_path: Path, texts: list[str]) -> None:
    more = synthetic_documents(6000, seed=23, words=60)
    src = tmp_path / "in.jsonl"
    write_jsonl(src, [*records(texts + more), {"id": "bad", "text": ""}])
    run("dedup", str(src), "-o", str(tmp_path / "mem"), "--id-field", "id")
    # A memory limit below the in-memory plan switches to the out-of-core path.
    proc = run(
        "dedup",
        str(src),
        "-o",
        str(tmp_path / "ooc"),
        "--id-field",
        "id",
        "--memory-limit",
        "16MiB",
        "--work-dir",
        str(tmp_path / "work"),
    )
    assert "wrote" in proc.stdout
    st = json.loads((tmp_path / "ooc" / "stats.json").read_text())
    assert st["out_of_core"] is True and st["work_bytes"] > 0
    for name in ("kept.jsonl", "duplicates.jsonl", "clusters.jsonl", "report.html"):
        assert (tmp_path / "mem" / name).read_bytes() == (tmp_path / "ooc" / name).read_bytes(), (
            name
        )
    assert os.listdir(tmp_path / "work") == []  # working files are removed
    run("dedup", str(src), "-o", str(tmp_path / "forced"), "--id-field", "id", "--spill")
    # A limit too small even for the out-of-core join is refused up front.
    proc = run(
        "dedup", str(src), "-o", str(tmp_path / "tiny"), "--memory-limit", "2MiB", check=False
    )
    assert proc.returncode == 5 and "memory_limit" in proc.stderr
    assert (tmp_path / "forced" / "kept.jsonl").read_bytes() == (
        tmp_path / "mem" / "kept.jsonl"
    ).read_bytes()
    # Formats that do not stream are refused with the reason and the fix.
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(records(texts)), tmp_path / "in.parquet")
    proc = run(
        "dedup", str(tmp_path / "in.parquet"), "-o", str(tmp_path / "pq"), "--spill", check=False
    )
    assert proc.returncode == 2, proc.stderr
    assert "in.parquet is parquet: only JSONL files are read out of core" in proc.stderr
    assert "fix: drop --spill (this run fits in memory" in proc.stderr


@pytest.mark.slow
def test_tokenizer_option_chinese_edits_and_old_indexes(tmp_path: Path) -> None:
    para = (
        "自然语言处理是计算机科学领域与人工智能领域中的一个重要方向。"
        "它研究能实现人与计算机之间用自然语言进行有效通信的各种理论和方法。"
    )
    other = "今天天气很好，我们一起去公园散步，看见很多人在湖边钓鱼和聊天。"
    recs = [
        {"id": "a", "text": para},
        {"id": "b", "text": para.replace("有效", "高效")},
        {"id": "c", "text": other},
    ]
    write_jsonl(tmp_path / "zh.jsonl", recs)
    run("dedup", str(tmp_path / "zh.jsonl"), "-o", str(tmp_path / "new"))
    stats = json.loads((tmp_path / "new" / "stats.json").read_text())
    assert stats["near_duplicates"] == 1 and stats["scheme"]["tokenizer"] == 2
    run(
        *("dedup", str(tmp_path / "zh.jsonl"), "-o", str(tmp_path / "old")),
        *("--tokenizer", "1", "--save-index", str(tmp_path / "idx")),
    )
    stats = json.loads((tmp_path / "old" / "stats.json").read_text())
    assert stats["near_duplicates"] == 0 and "tokenizer" not in stats["scheme"]
    write_jsonl(tmp_path / "more.jsonl", [{"id": "d", "text": para}])
    refused = run(
        *("dedup", str(tmp_path / "more.jsonl"), "-o", str(tmp_path / "bad")),
        *("--against", str(tmp_path / "idx")),
        check=False,
    )
    assert refused.returncode == 2
    assert "--tokenizer: 1 in the index, 2 now (pass --tokenizer 1 to keep using the index" in (
        refused.stderr
    )
    kept = run(
        *("dedup", str(tmp_path / "more.jsonl"), "-o", str(tmp_path / "again")),
        *("--against", str(tmp_path / "idx"), "--tokenizer", "1"),
    )
    assert "exact duplicates 1" in kept.stdout
    bad = run(
        *("dedup", str(tmp_path / "zh.jsonl"), "-o", str(tmp_path / "x"), "--tokenizer", "3"),
        check=False,
    )
    assert bad.returncode == 2 and "tokenizer" in bad.stderr

"""A first run's command line: detected ids, grouped --help, --quiet, incremental keeps.

Every test runs the real ``neardup`` executable."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from neardup import synthetic_documents

EXE = shutil.which("neardup") or str(Path(sys.executable).parent / "neardup")


def run(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([EXE, *args], capture_output=True, text=True)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def write_jsonl(path: Path, recs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _texts() -> list[str]:
    base = synthetic_documents(30, seed=41, words=40)
    # Three pairs of near copies (one word changed) and one exact copy.
    copies = [t.replace(" ", " x ", 1) for t in base[:3]] + [base[5]]
    return base + copies


def stats_of(out: Path) -> dict[str, Any]:
    return json.loads((out / "stats.json").read_text())  # type: ignore[no-any-return]


# -- 1. ids ------------------------------------------------------------------------


def test_a_field_id_is_detected_and_reported(tmp_path: Path) -> None:
    texts = _texts()
    src = write_jsonl(
        tmp_path / "in.jsonl", [{"id": f"k{i}", "text": t} for i, t in enumerate(texts)]
    )
    proc = run("dedup", str(src), "-o", str(tmp_path / "a"))
    assert "ids: field 'id' (detected)" in proc.stdout
    st = stats_of(tmp_path / "a")
    assert (st["id_field"], st["id_field_detected"], st["id_field_fallback"]) == ("id", True, None)
    members = [m for c in read_jsonl(tmp_path / "a" / "clusters.jsonl") for m in c["members"]]
    assert members and all(isinstance(m, str) and m.startswith("k") for m in members)
    # The same as naming it, except for the "detected" flag.
    run("dedup", str(src), "-o", str(tmp_path / "b"), "--id-field", "id")
    assert (tmp_path / "a" / "clusters.jsonl").read_bytes() == (
        tmp_path / "b" / "clusters.jsonl"
    ).read_bytes()
    assert stats_of(tmp_path / "b")["id_field_detected"] is False
    # --row-ids: row numbers.
    proc = run("dedup", str(src), "-o", str(tmp_path / "c"), "--row-ids")
    assert "ids: row numbers" in proc.stdout
    st = stats_of(tmp_path / "c")
    assert (st["id_field"], st["id_field_detected"]) == (None, False)
    members = [m for c in read_jsonl(tmp_path / "c" / "clusters.jsonl") for m in c["members"]]
    assert all(isinstance(m, int) for m in members)
    # Both at once is a usage error.
    proc = run(
        "dedup", str(src), "-o", str(tmp_path / "d"), "--row-ids", "--id-field", "id", ok=False
    )
    assert proc.returncode == 2 and "--id-field" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("duplicate", "records 1 and 2 share the 'id' \"k0\""),
        ("null", "record 4's 'id' has none"),
        ("missing", "record 4's 'id' has none"),
        ("float", "record 4's 'id' is 1.5"),
    ],
)
def test_an_unusable_detected_id_falls_back_to_row_numbers(
    tmp_path: Path, case: str, reason: str
) -> None:
    recs: list[dict[str, Any]] = [{"id": f"k{i}", "text": t} for i, t in enumerate(_texts())]
    if case == "duplicate":
        recs[1]["id"] = "k0"
    elif case == "null":
        recs[3]["id"] = None
    elif case == "missing":
        del recs[3]["id"]
    else:
        recs[3]["id"] = 1.5
    src = write_jsonl(tmp_path / "in.jsonl", recs)
    outs = {}
    for mode in ("mem", "spill"):
        out = tmp_path / mode
        proc = run("dedup", str(src), "-o", str(out), *(["--spill"] if mode == "spill" else []))
        assert f"note: ids are row numbers: {reason}" in proc.stderr
        assert "ids: row numbers" in proc.stdout
        st = stats_of(out)
        assert (st["id_field"], st["id_field_detected"]) == (None, False)
        assert st["id_field_fallback"] == reason
        outs[mode] = (out / "clusters.jsonl").read_bytes()
    assert outs["mem"] == outs["spill"]
    clusters = read_jsonl(tmp_path / "mem" / "clusters.jsonl")
    assert clusters and all(isinstance(m, int) for c in clusters for m in c["members"])
    # Named explicitly, the same field keeps its strict rule for the missing id.
    if case in ("null", "missing"):
        proc = run("dedup", str(src), "-o", str(tmp_path / "x"), "--id-field", "id", ok=False)
        assert proc.returncode == 3 and "no id field 'id'" in proc.stderr


def test_ids_are_detected_in_csv_and_parquet(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = _texts()
    with open(tmp_path / "in.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["text", "id"])
        w.writerows([t, f"c{i}"] for i, t in enumerate(texts))
    run("dedup", str(tmp_path / "in.csv"), "-o", str(tmp_path / "csv"))
    assert stats_of(tmp_path / "csv")["id_field_detected"] is True
    first = read_jsonl(tmp_path / "csv" / "clusters.jsonl")[0]
    assert all(str(m).startswith("c") for m in first["members"])
    pq.write_table(
        pa.table({"id": list(range(100, 100 + len(texts))), "text": texts}), tmp_path / "i.parquet"
    )
    run("dedup", str(tmp_path / "i.parquet"), "-o", str(tmp_path / "pq"))
    assert stats_of(tmp_path / "pq")["id_field"] == "id"
    first = read_jsonl(tmp_path / "pq" / "clusters.jsonl")[0]
    assert all(m >= 100 for m in first["members"])
    # A float column named id is not an id.
    pq.write_table(pa.table({"id": [0.5] * len(texts), "text": texts}), tmp_path / "f.parquet")
    run("dedup", str(tmp_path / "f.parquet"), "-o", str(tmp_path / "pqf"))
    assert stats_of(tmp_path / "pqf")["id_field"] is None


# -- 2. --help ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "headings"),
    [
        (
            "dedup",
            [
                "Input:",
                "What is a duplicate, and which one is kept:",
                "Outputs:",
                "Performance:",
                "Engines:",
                "Vectors:",
            ],
        ),
        ("audit", ["Input:", "What is a duplicate:", "Outputs:", "Performance:"]),
        ("split", ["Input:", "What is a duplicate:", "Split:", "Outputs:", "Performance:"]),
        ("eval", ["Input:", "What is a duplicate:", "Outputs:", "Performance:"]),
    ],
)
def test_help_lists_the_options_in_groups(command: str, headings: list[str]) -> None:
    text = run(command, "--help").stdout
    found = re.findall(r"^(\S[^\n]*:)$", text, flags=re.M)
    sections = [h for h in found if not h.startswith(("Usage", "Example"))]
    assert sections[: len(headings)] == headings
    assert sections[len(headings) :] == ["Other options:"]  # --help only
    assert "Options:" not in found
    options = text[text.index("\nInput:\n") :]  # not the examples above

    def at(opt: str) -> int:
        """Where the option's own row starts (not a mention in another's help)."""
        m = re.search(rf"^  (-\w, )?{opt}[ \n]", options, flags=re.M)
        assert m is not None, opt
        return m.start()

    assert at("--text-field") < at("--threshold") < at("--workers")
    if command == "dedup":
        assert at("--threshold") < at("--output") < at("--engine")
        for opt in ("--engine", "--ray-address", "--ray-cpus", "--resume", "--cc-threshold"):
            assert at("--text-field") < at(opt) and at("--threshold") < at(opt)
        assert at("--cc-threshold") < at("--vectors")


# -- 3. --quiet --------------------------------------------------------------------


def test_quiet_keeps_the_summary_line(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [{"text": t} for t in _texts()])
    loud = run("dedup", str(src), "-o", str(tmp_path / "a"))
    quiet = run("dedup", str(src), "-o", str(tmp_path / "b"), "--quiet")
    assert quiet.stdout.replace(str(tmp_path / "b"), "") == loud.stdout.replace(
        str(tmp_path / "a"), ""
    )
    assert quiet.stdout.startswith(f"{len(_texts())} documents: kept ")
    assert quiet.stderr == ""

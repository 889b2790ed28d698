"""``neardup audit`` / ``neardup split`` options of the command line: where the
splits come from (``--split``, the inputs) and ``--lineage-veto``, through the real
executable (what the library does with them: tests/lineage/test_audit.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXE = shutil.which("neardup") or str(Path(sys.executable).parent / "neardup")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *args], capture_output=True, text=True)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(
        json.dumps({"id": i, "text": f"record {i} says something of its own", "split": "x"})
        + "\n" for i in range(4)))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("command", ["audit", "split"])
def test_where_the_splits_come_from_is_checked_before_reading(
    command: str, data: Path, tmp_path: Path
) -> None:
    out = ["-o", str(tmp_path / "out")]
    both = _run(command, str(data), "--split-field", "split", "--split", f"a={data}", *out)
    assert both.returncode == 2 and "--split and --split-field exclude each other" in both.stderr
    for bad in ("noequals", "=x.jsonl", "a="):
        proc = _run(command, "--split", bad, *out)
        assert proc.returncode == 2 and "NAME=PATH" in proc.stderr, (bad, proc.stderr)
    none = _run(command, *out)
    assert none.returncode == 2 and "Missing argument 'INPUTS...'" in none.stderr
    twice = _run(command, "--split", f"a={data}", "--split", f"b={data}", *out)
    assert twice.returncode == 2 and "names a path named already" in twice.stderr
    missing = _run(command, "--split", f"a={tmp_path / 'nope.jsonl'}", *out)
    assert missing.returncode == 4 and "does not exist" in missing.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["audit", "split"])
def test_help_lists_the_split_and_veto_options(command: str) -> None:
    text = _run(command, "--help").stdout
    for opt in ("--split NAME=PATH", "--split-field", "--lineage-veto"):
        assert opt in text, opt
    inputs = text.split("Input:")[1].split("What is a duplicate:")[0]
    assert "--split NAME=PATH" in inputs and "--lineage-veto" not in inputs


def _quoting(tmp_path: Path, quote: list[dict[str, object]]) -> Path:
    """A train record, a test record quoting it with otherwise different text, and
    unrelated records (the quote is all that joins the first two)."""
    rows = [
        {"id": "t1", "split": "train", "pol": "internal",
         "text": "The gateway west rejected the retry for request 47 after a long timeout"},
        {"id": "e1", "split": "test", "pol": ["public"], "q": quote,
         "text": "Customer wrote: it rejected the retry. Please advise on billing today"},
    ] + [
        {"id": f"u{i}", "split": "train" if i % 2 else "test",
         "text": f"unrelated note {i} about the {i * 7} north office schedules and rosters"}
        for i in range(6)
    ]
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.slow
def test_a_quote_is_a_leak_and_split_keeps_quoting_and_quoted_together(tmp_path: Path) -> None:
    data = _quoting(tmp_path, [{"source": "t1", "start": 12, "end": 42}])
    base = ["--id-field", "id", "--split-field", "split", "--fail-on-leakage"]
    plain = _run("audit", str(data), *base)
    assert plain.returncode == 0, plain.stderr  # the texts alone do not leak
    out = tmp_path / "audit"
    gate = _run("audit", str(data), *base, "--quote-field", "q", "--policy-field", "pol",
                "-o", str(out))
    assert gate.returncode == 6 and "leakage" in gate.stderr
    audit = json.loads((out / "audit.json").read_text())
    assert audit["edges"] == {"quote": 1} and audit["leakage"]["leaking_records"] == 2
    assert audit["policies"]["mixed_families"] == 1
    assert audit["policies"]["records"] == {"internal": 1, "public": 1}
    (fam,) = [json.loads(x) for x in (out / "families.jsonl").read_text().splitlines()]
    assert fam["members"] == ["t1", "e1"] and fam["policies"] == {"internal": 1, "public": 1}
    for seed in ("1", "2", "3"):
        sp = tmp_path / f"split{seed}"
        proc = _run("split", str(data), "--id-field", "id", "--quote-field", "q",
                    "--ratios", "train=0.5,test=0.5", "--seed", seed, "-o", str(sp))
        assert proc.returncode == 0, proc.stderr
        side = {}
        for name in ("train", "test"):
            for line in (sp / f"{name}.jsonl").read_text().splitlines():
                rec = json.loads(line)
                side[rec["id"]] = name
                if rec["id"] == "e1":  # records intact: the quote and the policy stay
                    assert rec["pol"] == ["public"] and rec["q"][0]["source"] == "t1"
        assert side["t1"] == side["e1"] and len(side) == 8


@pytest.mark.slow
@pytest.mark.parametrize(
    ("quote", "said"),
    [
        ({"source": "nope", "start": 0, "end": 3}, "quotes unknown record 'nope'"),
        ({"source": "t1", "start": 9, "end": 4}, "start 9 is not below end 4"),
        ({"source": "t1", "start": 0, "end": 500}, "is not a span of its 71-character text"),
        ({"source": "t1", "start": "0", "end": 3}, "must be integers"),
    ],
)
def test_bad_quote_spans_exit_3_naming_the_line(
    quote: dict[str, object], said: str, tmp_path: Path
) -> None:
    data = _quoting(tmp_path, [quote])
    for command in ("audit", "split"):
        proc = _run(command, str(data), "--id-field", "id", "--quote-field", "q",
                    "-o", str(tmp_path / command))
        assert proc.returncode == 3, proc.stderr
        assert f"{data}:2: " in proc.stderr and said in proc.stderr
        assert not (tmp_path / command).exists()

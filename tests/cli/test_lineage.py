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

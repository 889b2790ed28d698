"""--overwrite never deletes an input, and replaces a file cleanly (real processes).

An output that cannot be used is exit 4, like an existing output folder."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample.jsonl"


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "neardup", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _setup(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    shutil.copy(SAMPLE, d / "in.jsonl")
    return d


def test_an_output_folder_holding_the_input_is_refused(tmp_path: Path) -> None:
    d = _setup(tmp_path)
    for out in ("data", "data/in.jsonl", "."):
        r = _run(tmp_path, "dedup", "data/in.jsonl", "-o", out, "--overwrite")
        assert r.returncode == 4, (out, r.stderr)
        assert "is or contains the input 'data/in.jsonl'" in r.stderr, r.stderr
        assert "fix:" in r.stderr or "write the outputs to a folder" in r.stderr
    assert (d / "in.jsonl").read_bytes() == SAMPLE.read_bytes()
    assert not list(tmp_path.glob(".neardup-*")) and not list(d.glob(".neardup-*"))


def test_the_current_folder_cannot_be_the_output(tmp_path: Path) -> None:
    d = _setup(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    r = _run(work, "dedup", str(d / "in.jsonl"), "-o", ".", "--overwrite")
    assert r.returncode == 4 and "current folder" in r.stderr, r.stderr
    r = _run(work, "dedup", str(d / "in.jsonl"), "-o", "..", "--overwrite")
    assert r.returncode == 4, r.stderr
    assert (d / "in.jsonl").exists()


def test_audit_split_and_against_are_protected_too(tmp_path: Path) -> None:
    d = _setup(tmp_path)
    for cmd in (["audit", "data/in.jsonl"], ["split", "data/in.jsonl", "--seed", "1"]):
        r = _run(tmp_path, *cmd, "-o", "data", "--overwrite")
        assert r.returncode == 4 and "would delete the input" in r.stderr, (cmd, r.stderr)
    r = _run(tmp_path, "dedup", "data/in.jsonl", "-o", "out", "--save-index", "out2/idx")
    assert r.returncode == 0, r.stderr
    r = _run(tmp_path, "dedup", "data/in.jsonl", "-o", "out2", "--against", "out2/idx",
             "--overwrite")
    assert r.returncode == 4 and "out2/idx" in r.stderr, r.stderr
    assert (tmp_path / "out2" / "idx").exists() and (d / "in.jsonl").exists()


def test_overwrite_replaces_an_existing_file_without_leftovers(tmp_path: Path) -> None:
    _setup(tmp_path)
    (tmp_path / "result").write_text("an old file\n")
    r = _run(tmp_path, "dedup", "data/in.jsonl", "-o", "result", "--overwrite")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "result" / "kept.jsonl").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "result"]

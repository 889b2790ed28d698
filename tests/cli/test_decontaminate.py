"""``neardup decontaminate`` through the real executable: the gate's exit code 7,
the summary line, refused output folders and parameters."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from neardup.testing import synthetic_documents

EXE = shutil.which("neardup") or str(Path(sys.executable).parent / "neardup")
ITEMS = synthetic_documents(5, seed=21, words=30)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, "decontaminate", *args], capture_output=True, text=True)


@pytest.fixture
def data(tmp_path: Path) -> tuple[Path, Path, Path]:
    ev = tmp_path / "test_set.jsonl"
    ev.write_text(
        "".join(json.dumps({"id": f"t{i}", "text": t}) + "\n" for i, t in enumerate(ITEMS))
    )
    docs = synthetic_documents(30, seed=22, words=200)
    dirty = tmp_path / "dirty.jsonl"
    dirty.write_text(
        "".join(
            json.dumps({"text": d + (" " + ITEMS[1].upper() + "." if i == 4 else "")}) + "\n"
            for i, d in enumerate(docs)
        )
    )
    clean = tmp_path / "clean.jsonl"
    clean.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    return ev, dirty, clean


@pytest.mark.slow
def test_gate_exits_7_on_contamination_and_0_without(
    tmp_path: Path, data: tuple[Path, Path, Path]
) -> None:
    ev, dirty, clean = data
    out = tmp_path / "out"
    proc = run(str(dirty), "--against", f"bench={ev}", "-o", str(out), "--fail-on-contamination")
    assert proc.returncode == 7, proc.stderr
    assert "30 records: 1 removed, 29 kept; bench: 1/5 items in 1 records" in proc.stdout
    assert "contamination" in proc.stderr
    assert json.loads((out / "removed.jsonl").read_text())["matches"][0]["eval_id"] == "t1"
    proc = run(str(dirty), "--against", str(ev))  # no gate: reported, exit 0
    assert proc.returncode == 0 and "test_set: 1/5 items" in proc.stdout
    proc = run(str(clean), "--against", str(ev), "--fail-on-contamination")
    assert proc.returncode == 0, proc.stderr
    assert "0 removed, 30 kept" in proc.stdout


@pytest.mark.slow
def test_refusals_have_their_exit_codes(tmp_path: Path, data: tuple[Path, Path, Path]) -> None:
    ev, dirty, _ = data
    assert run(str(dirty), "--against", str(ev), "-o", str(tmp_path), "--overwrite").returncode == 4
    (tmp_path / "taken").mkdir()
    assert run(str(dirty), "--against", str(ev), "-o", str(tmp_path / "taken")).returncode == 4
    bad = run(str(dirty), "--against", str(ev), "--min-containment", "0")
    assert bad.returncode == 2 and "min_containment" in bad.stderr
    csv = tmp_path / "x.csv"
    csv.write_text("text\nhello\n")
    assert run(str(csv), "--against", str(ev)).returncode == 3
    assert run(str(dirty)).returncode == 2  # --against is required

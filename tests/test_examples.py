"""Integration: the quick start runs as a real process on the bundled data."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quickstart_runs_on_bundled_sample(tmp_path: Path) -> None:
    out = tmp_path / "qs"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert "documents in:        540" in proc.stdout
    stats = json.loads((out / "stats.json").read_text())
    assert stats["documents_in"] == 540
    assert stats["exact_duplicates"] > 0 and stats["near_duplicates"] > 0
    lines = (out / "clusters.jsonl").read_text().splitlines()
    assert len(lines) == stats["clusters"]
    first = json.loads(lines[0])
    assert first["members"][0].startswith("doc-")
    for line in lines:
        for e in json.loads(line)["edges"]:
            assert e["method"] in ("identical", "exact")
            assert e["jaccard"] >= 0.8


def test_sample_generator_is_reproducible(tmp_path: Path) -> None:
    target = tmp_path / "s.jsonl"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "make_sample_data.py"),
            "--out",
            str(target),
            "--base",
            "30",
            "--copies",
            "10",
        ],
        check=True,
        capture_output=True,
    )
    again = tmp_path / "t.jsonl"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "make_sample_data.py"),
            "--out",
            str(again),
            "--base",
            "30",
            "--copies",
            "10",
        ],
        check=True,
        capture_output=True,
    )
    assert target.read_bytes() == again.read_bytes()
    assert len(target.read_text().splitlines()) == 60

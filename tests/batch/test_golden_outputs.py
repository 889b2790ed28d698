"""neardup's outputs on fixed inputs equal the digests recorded before a change.

``tests/golden/outputs.json`` holds the digests of every file that ``dedup``
(three options), ``audit``, ``split``, ``dedup --vectors`` and ``dedup --engine
ray`` write on the inputs of ``scripts/golden_outputs.py``.  A difference means a
change altered what neardup writes; if it is meant to, record again with
``python scripts/golden_outputs.py --write tests/golden/outputs.json --ray`` and say
why in the commit.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "tests" / "golden" / "outputs.json"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "golden_outputs", ROOT / "scripts" / "golden_outputs.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.ray
def test_outputs_equal_the_recorded_digests() -> None:
    golden = _script()
    expected = json.loads(RECORD.read_text())
    got = golden.collect(ray=True)
    assert golden.compare(expected, got) == []


@pytest.mark.timeout(120)
def test_a_changed_output_is_reported(tmp_path: Path) -> None:
    golden = _script()
    expected = json.loads(RECORD.read_text())
    changed = json.loads(json.dumps(expected))
    run = changed["runs"]["dedup-sample"]
    run["files"]["kept.jsonl"] = "0" * 64
    del run["files"]["report.html"]
    changed["runs"]["audit-planted"]["exit_code"] = 6
    diffs = golden.compare(expected, changed)
    assert any(d.startswith("dedup-sample/kept.jsonl:") for d in diffs)
    assert any(d.startswith("dedup-sample/report.html:") for d in diffs)
    assert "audit-planted: exit code 0 -> 6" in diffs


def test_normalization_removes_only_the_run_folder_and_measurements(tmp_path: Path) -> None:
    golden = _script()
    stats = tmp_path / "stats.json"
    stats.write_text(
        json.dumps(
            {
                "inputs": [str(tmp_path / "a.jsonl")],
                "timings_s": {"total": 1.0},
                "peak_memory_bytes": 5,
                "clusters": 3,
            }
        )
    )
    other = tmp_path / "other"
    other.mkdir()
    stats2 = other / "stats.json"
    stats2.write_text(
        json.dumps(
            {
                "inputs": [str(other / "a.jsonl")],
                "timings_s": {"total": 2.0},
                "peak_memory_bytes": 9,
                "clusters": 3,
            }
        )
    )
    assert golden.normalized(stats, tmp_path) == golden.normalized(stats2, other)
    stats2.write_text(json.dumps({"inputs": [str(other / "a.jsonl")], "clusters": 4}))
    assert golden.normalized(stats, tmp_path) != golden.normalized(stats2, other)

"""docs/reliability.md quotes exactly the committed figures of the reliability suites."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_reliability_table_is_generated_from_the_committed_results() -> None:
    spec = importlib.util.spec_from_file_location(
        "reliability_report", ROOT / "scripts" / "reliability_report.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    figs = json.loads((ROOT / "benchmarks" / "results" / "reliability.json").read_text())
    assert mod.table(figs["figures"]) in (ROOT / "docs" / "reliability.md").read_text()
    assert figs["figures"]["fault_injection"]["acknowledged_writes_lost"] == 0
    assert figs["figures"]["schema_fuzzing"]["server_errors_5xx"] == 0

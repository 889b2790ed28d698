"""Run the service's reliability suites and write their figures.

Runs the schema fuzzing, the stateful model test, the fault injection and the
byte-damage sweeps (all part of the normal test command too), collects the figures
each one records (``record_figure`` in ``tests/service_helpers.py``), writes them to
``benchmarks/results/reliability.json`` and regenerates the table of
``docs/reliability.md`` between its markers.  Usage::

    .venv/bin/python scripts/reliability_report.py             # run the suites
    .venv/bin/python scripts/reliability_report.py --doc-only  # table from the results
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SUITES = [
    "tests/service/test_fuzz_http.py::test_schemathesis_finds_no_5xx_and_no_schema_violation",
    "tests/service/test_service_model.py",
    "tests/service/test_fault_injection.py",
    "tests/service/test_storage_faults.py",
]
BEGIN, END = "<!-- figures:begin -->", "<!-- figures:end -->"


def table(figs: dict[str, Any]) -> str:
    fz, sm, fi = figs["schema_fuzzing"], figs["state_machine"], figs["fault_injection"]
    kinds = {
        "damage_store": "store pages",
        "damage_store_wal": "store write-ahead log",
        "damage_command_log": "command log",
    }
    dmg = [(label, figs[k]) for k, label in kinds.items()]
    damaged = sum(d["bytes_damaged"] for _, d in dmg)
    rows = [
        ("schema fuzzing (schemathesis, every role and no token)",
         f"{fz['cases']:,} cases in {fz['seconds']} s: {fz['server_errors_5xx']} 5xx, "
         f"{fz['schema_violations']} response-schema violations"),
        ("stateful model test (2 tenants, exact oracle)",
         f"{sm['examples']} runs, {sm['steps']:,} steps; {sm['restarts_survived']} restarts "
         f"survived, {sm['kill9_survived']} of them after kill -9 (with the stores deleted "
         f"in {sm['actions'].get('fault_rebuild', 0)})"),
        ("fault injection (crash or EIO at each fsync / rename)",
         f"{fi['cases']} cases over {fi['io_points']} I/O points ("
         + ", ".join(f"{k} {v}" for k, v in fi["points_per_operation"].items())
         + f"): {fi['acknowledged_writes_lost']} acknowledged writes lost"),
        ("byte damage (one flipped byte per case)",
         f"{damaged:,} bytes, 0 silent: "
         + "; ".join(
             f"{label} {d['bytes_damaged']} ("
             + ", ".join(f"{n} {k}" for k, n in sorted(d["outcomes"].items()))
             + ")"
             for label, d in dmg
         )),
        ("acknowledged writes lost", "0 (every suite fails on a single loss)"),
    ]
    out = ["| suite | result |", "|---|---|"]
    out += [f"| {a} | {b} |" for a, b in rows]
    return "\n".join(out)


def write_doc(figs: dict[str, Any]) -> None:
    md = ROOT / "docs" / "reliability.md"
    text = md.read_text()
    a, b = text.index(BEGIN) + len(BEGIN), text.index(END)
    md.write_text(text[:a] + "\n" + table(figs) + "\n" + text[b:])


def main() -> int:
    results = ROOT / "benchmarks" / "results" / "reliability.json"
    if sys.argv[1:] == ["--doc-only"]:  # regenerate the table from the committed figures
        write_doc(json.loads(results.read_text())["figures"])
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "figures.jsonl"
        env = {**os.environ, "ND_RELIABILITY_OUT": str(out)}
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SUITES]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, check=False)
        if proc.returncode != 0:
            print("a reliability suite failed; nothing written", file=sys.stderr)
            return 1
        figs = {}
        for line in out.read_text().splitlines():
            rec = json.loads(line)
            figs[rec.pop("test")] = rec
    doc = {
        "date": dt.date.today().isoformat(),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "figures": figs,
    }
    results.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    write_doc(figs)
    print(table(figs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

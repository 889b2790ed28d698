"""The README's first command on a fresh clone: pip, then the first (cold) and
later (warm) runs of ``neardup dedup`` on the bundled sample, timed apart.

A fresh clone of the current commit gets a fresh virtual environment (``pip
install -e '.[cli,io]'``, timed but not counted: the README's goal is the time
*after* pip), then the README's ``neardup dedup data/sample.jsonl --output
out/sample --overwrite`` runs once cold (no compiled kernel cached on this
machine for this clone) and ``--warm`` more times.  Writes
``results/first_run.json`` with the times, the progress lines the cold run
printed, and the machine's load.  The runs have Python's bytecode caching on, as
a user's machine has it (``bench_sizes.py`` does the same): a machine that sets
``PYTHONDONTWRITEBYTECODE`` would recompile neardup's modules in every run.

    python benchmarks/first_run.py --warm 5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _common import finish, machine_info  # noqa: E402

README_RUN = ["dedup", "data/sample.jsonl", "--output", "out/sample", "--overwrite"]


def _timed(cmd: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    return time.perf_counter() - t0, proc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warm", type=int, default=5)
    ap.add_argument("--out", default=str(HERE / "results" / "first_run.json"))
    args = ap.parse_args(argv)
    out: dict[str, Any] = {"machine": machine_info(), "command": " ".join(README_RUN)}
    out["pythondontwritebytecode_cleared"] = os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None
    with tempfile.TemporaryDirectory(prefix="neardup-first-run-") as tmp:
        repo = Path(tmp) / "repo"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(repo)], check=True)
        py = repo / ".venv" / "bin" / "python"
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "venv", str(repo / ".venv")], check=True)
        subprocess.run(
            [str(py), "-m", "pip", "install", "-q", "-e", ".[cli,io]"],
            cwd=repo,
            check=True,
            capture_output=True,
        )
        out["pip_s"] = round(time.perf_counter() - t0, 2)
        exe = str(repo / ".venv" / "bin" / "neardup")
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        cold_s, cold = _timed([exe, *README_RUN], repo)
        if cold.returncode != 0:
            print(cold.stderr, file=sys.stderr)
            return 1
        out["cold_s"] = round(cold_s, 2)
        out["cold_loadavg_before"] = load
        out["cold_progress_lines"] = [
            ln for ln in cold.stderr.splitlines() if ln.startswith("neardup:")
        ]
        warm = []
        for _ in range(args.warm):
            s, proc = _timed([exe, *README_RUN], repo)
            if proc.returncode != 0:
                print(proc.stderr, file=sys.stderr)
                return 1
            warm.append(round(s, 3))
        out["warm_s"] = warm
        out["warm_best_s"] = min(warm)
        out["summary_line"] = cold.stdout.strip().splitlines()[-1]
    finish(out, out["machine"]["neardup_source_at_start"])
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "machine"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

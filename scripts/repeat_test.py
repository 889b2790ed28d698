"""Run one pytest test many times, each in a fresh process, and record the outcomes.

Tests whose outcome depends on random keys (for example the service demonstration,
which starts a server with a fresh random master secret every time) must pass every
time; this is the check.  Usage::

    .venv/bin/python scripts/repeat_test.py \\
        tests/service/test_server.py::test_seed_demonstration_over_http --runs 200 \\
        --out benchmarks/results/repeat_seed_demonstration.json

Exits 1 if any run failed.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("node", help="pytest node id, e.g. tests/test_x.py::test_y")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--out", type=Path, default=None, help="write a JSON summary here")
    args = ap.parse_args()
    failures: list[dict[str, object]] = []
    started = time.time()
    for i in range(args.runs):
        t0 = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", args.node],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        took = time.monotonic() - t0
        ok = proc.returncode == 0 and " passed" in proc.stdout
        if not ok:
            failures.append({"run": i, "returncode": proc.returncode, "tail": proc.stdout[-2000:]})
        print(f"run {i + 1}/{args.runs}: {'pass' if ok else 'FAIL'} ({took:.1f} s)", flush=True)
    summary = {
        "node": args.node,
        "runs": args.runs,
        "passed": args.runs - len(failures),
        "failed": len(failures),
        "failures": failures,
        "wall_s": round(time.time() - started, 1),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    if args.out is not None:
        args.out.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "failures"}))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())

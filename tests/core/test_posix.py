"""The batch job and the library run where POSIX file locks are missing (Windows);
the service says what it needs (``neardup.core._posix``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from neardup.core._posix import peak_rss_bytes, require_file_locks
from neardup.core.leftovers import OWNER_FILE, sweep

ROOT = Path(__file__).resolve().parents[2]
# A fresh interpreter in which ``import fcntl`` and ``import resource`` fail, as on
# Windows.
WITHOUT_POSIX = "import sys; sys.modules['fcntl'] = None; sys.modules['resource'] = None\n"


def run_without_posix(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_POSIX + code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )


@pytest.mark.timeout(300)
def test_library_and_batch_job_run_without_fcntl_and_resource(tmp_path: Path) -> None:
    code = f"""
import json, neardup
from neardup.batch.job import run_dedup
r = neardup.find_duplicates(["a b c d e f g", "a b c d e f g", "x y z"])
stats = run_dedup([{str(ROOT / "data" / "sample.jsonl")!r}], "out")
print(json.dumps({{"clusters": len(r.clusters), "stats_clusters": stats.clusters,
                  "peak": stats.stats["peak_memory_bytes"]}}))
"""
    proc = run_without_posix(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["clusters"] == 1
    assert got["stats_clusters"] > 0
    assert got["peak"] is None  # unmeasurable there, said as null
    assert (tmp_path / "out" / "kept.jsonl").exists()


def test_service_features_name_what_they_need(tmp_path: Path) -> None:
    code = """
from neardup.core._posix import require_file_locks
try:
    require_file_locks("the service's key file")
except Exception as exc:
    print(type(exc).__name__, exc)
"""
    proc = run_without_posix(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.strip()
    assert out.startswith("NeardupError the service's key file needs POSIX file locks")
    assert "fix: run it on Linux or macOS" in out


def test_without_locks_a_sweep_reports_and_removes_nothing(tmp_path: Path) -> None:
    left = tmp_path / ".neardup-tmp-abc"
    left.mkdir()
    (left / OWNER_FILE).write_text(json.dumps({"pid": 1, "host": os.uname().nodename}))
    code = f"""
from neardup.core.leftovers import sweep
lines = []
print(sweep({str(tmp_path)!r}, lines.append))
print(lines)
"""
    proc = run_without_posix(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    removed, said = proc.stdout.strip().splitlines()
    assert removed == "[]"
    assert "cannot tell whether its run is alive" in said
    assert left.is_dir()
    # With locks (here), the same dead run's folder is removed.
    assert sweep(str(tmp_path), lambda s: None) == [str(left)]


def test_here_the_posix_features_are_present() -> None:
    assert require_file_locks("x") is not None
    peak = peak_rss_bytes()
    assert peak is not None and peak > 10 * 2**20

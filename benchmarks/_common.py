"""Helpers shared by the benchmark scripts: peer shingling, timing, machine info, JSON."""

from __future__ import annotations

import gc
import hashlib
import importlib.util
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

WORD = re.compile(r"\w+")
K = 5
NUM_PERM = 128
SEED = 42

_ENV_VARS = (
    "PYTHONDONTWRITEBYTECODE",
    "NUMBA_NUM_THREADS",
    "NUMBA_THREADING_LAYER",
    "NUMBA_CACHE_DIR",
    "RAYON_NUM_THREADS",
    "OMP_NUM_THREADS",
    "OPENBLAS_CORETYPE",
)


def py_shingles(text: str, k: int = K) -> list[str]:
    """Word k-grams as users build them for datasketch/rensa: ``\\w+`` tokens of the
    casefolded text joined by one space (one shingle of all tokens when fewer than k)."""
    toks = WORD.findall(text.casefold())
    if len(toks) < k:
        return [" ".join(toks)] if toks else []
    return [" ".join(toks[i : i + k]) for i in range(len(toks) - k + 1)]


def utf8_bytes(texts: list[str]) -> int:
    return sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)


def timed(fn: Callable[[], object]) -> float:
    """Seconds for one call, GC collected before and disabled during (as ``timeit`` does)."""
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    finally:
        gc.enable()


def summarize(runs: list[float], n_docs: int, n_bytes: int) -> dict[str, Any]:
    best = min(runs)
    med = statistics.median(runs)
    return {
        "n_docs": n_docs,
        "bytes": n_bytes,
        "best_s": round(best, 6),
        "median_s": round(med, 6),
        "runs_s": [round(r, 6) for r in runs],
        "docs_per_s": round(n_docs / best, 1) if best > 0 else None,
        "docs_per_s_median": round(n_docs / med, 1) if med > 0 else None,
        "mb_per_s": round(n_bytes / best / 1e6, 3) if best > 0 else None,
        "mb_per_s_median": round(n_bytes / med / 1e6, 3) if med > 0 else None,
    }


def dist_version(dist: str) -> str | None:
    """The installed version of distribution ``dist``, or None when it is absent."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return None


_SNAPSHOT_ENV = "NEARDUP_BENCH_SNAPSHOT"


def _source_dir() -> Path:
    spec = importlib.util.find_spec("neardup")
    if spec is None or spec.origin is None:
        raise SystemExit("neardup is not importable: install it (pip install -e .)")
    return Path(spec.origin).resolve().parent


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(root.glob("*.py")):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _git_info(root: Path) -> dict[str, Any]:
    git = ["git", "-C", str(root)]
    try:
        commit = subprocess.run(
            [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            [*git, "status", "--porcelain", "--", "."], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return {}
    return {"git_commit": commit, "git_dirty": bool(dirty)}


def neardup_source() -> dict[str, Any]:
    """Which neardup is measured: digest of the imported source files, path, git commit.

    Recorded at the start and the end of a run so that a run whose library changed
    underneath it is flagged (``source_changed_during_run``).
    """
    root = _source_dir()
    snap = os.environ.get(_SNAPSHOT_ENV)
    out: dict[str, Any] = {"sha256": _digest(root), "snapshot": bool(snap),
                           "imported_from": str(root)}
    if snap:
        out.update(json.loads(snap))
    else:
        out["path"] = str(root)
        out.update(_git_info(root))
    return out


def run_in_snapshot(script: str, argv: list[str] | None, *, skip: bool = False) -> int | None:
    """Re-run ``script`` (with ``argv``, default this process's arguments) against a
    frozen copy of neardup's source.

    The library may be edited while a benchmark runs (and its subprocesses would then
    import newer code than the parent); the copy pins one version for the whole run.
    Returns the child's exit code, or None when this process is to measure: already
    inside a snapshot, or ``skip`` (``--no-snapshot``, ``--quick``)::

        rc = run_in_snapshot(__file__, argv, skip=a.no_snapshot or a.quick)
        if rc is not None:
            return rc
    """
    if skip or os.environ.get(_SNAPSHOT_ENV):
        return None
    if argv is None:
        argv = sys.argv[1:]
    src = _source_dir()
    with tempfile.TemporaryDirectory(prefix="neardup-bench-src-") as tmp:
        shutil.copytree(src, Path(tmp) / "neardup", ignore=shutil.ignore_patterns("__pycache__"))
        info = {"path": str(src), "sha256_at_copy": _digest(Path(tmp) / "neardup"),
                **_git_info(src)}
        env = {
            **os.environ,
            _SNAPSHOT_ENV: json.dumps(info, sort_keys=True),
            "PYTHONPATH": os.pathsep.join(p for p in (tmp, os.environ.get("PYTHONPATH")) if p),
        }
        print(f"measuring a snapshot of {src} (git {info.get('git_commit', '?')}"
              f"{', dirty' if info.get('git_dirty') else ''})", file=sys.stderr, flush=True)
        return subprocess.run([sys.executable, script, *argv], env=env, check=False).returncode


def finish(results: dict[str, Any], start_source: dict[str, Any]) -> None:
    """End-of-run bookkeeping: load average and whether neardup changed meanwhile."""
    end = neardup_source()
    results["machine"]["neardup_source_at_end"] = end
    results["source_changed_during_run"] = end.get("sha256") != start_source.get("sha256")
    if results["source_changed_during_run"]:
        print("WARNING: neardup's source changed during the run; rerun", file=sys.stderr)
    if hasattr(os, "getloadavg"):
        results["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]


def write_results(path: Path, results: dict[str, Any], t_start: float | None = None) -> None:
    """End of a run: :func:`finish` (against ``results["machine"]``'s start), then
    ``total_wall_s`` since ``t_start`` (a ``time.perf_counter()`` reading) when given,
    then the JSON file (:func:`write_json`) and a line on stderr saying where."""
    finish(results, results["machine"]["neardup_source_at_start"])
    took = ""
    if t_start is not None:
        results["total_wall_s"] = round(time.perf_counter() - t_start, 2)
        took = f" in {results['total_wall_s']} s"
    write_json(path, results)
    print(f"wrote {path}{took}", file=sys.stderr)


def ratios(timing: dict[str, dict[str, Any]], base: str) -> dict[str, float]:
    """``{"<name>_over_<base>": best_s / base's best_s}`` for every other timed entry
    (entries without a time, or a base without one, give no ratio).

    >>> ratios({"a": {"best_s": 1.0}, "b": {"best_s": 2.5}}, "a")
    {'b_over_a': 2.5}
    """
    b = timing.get(base, {}).get("best_s")
    return {f"{k}_over_{base}": round(v["best_s"] / b, 3)
            for k, v in timing.items() if k != base and b and v.get("best_s")}


def machine_info() -> dict[str, Any]:
    import numba

    info: dict[str, Any] = {
        "cpu_model": _cpu_model(),
        "nproc": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu_count": os.cpu_count(),
        "mem_total_gib": _mem_total_gib(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "numba_num_threads": numba.get_num_threads(),
        "versions": {
            name: dist_version(name) for name in ("neardup", "numpy", "numba", "rensa", "datasketch")
        },
        "env": {v: os.environ[v] for v in _ENV_VARS if v in os.environ},
        "date_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "neardup_source_at_start": neardup_source(),
    }
    if hasattr(os, "getloadavg"):
        info["loadavg_at_start"] = [round(x, 2) for x in os.getloadavg()]
    return info


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")

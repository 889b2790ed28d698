"""The benchmark scripts still run (tiny inputs; nothing is asserted about time)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.parametrize("script", ["bench_recall.py", "bench_end_to_end.py"])
def test_benchmark_quick_run(script: str, tmp_path: Path) -> None:
    pytest.importorskip("rensa")
    pytest.importorskip("datasketch")
    out = tmp_path / "r.json"
    args = [sys.executable, str(ROOT / "benchmarks" / script), "--quick", "--out", str(out)]
    if script == "bench_end_to_end.py":
        args.append("--skip-scale")
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=600)
    data = json.loads(out.read_text())
    assert data["truth"] and data["machine"]
    if script == "bench_end_to_end.py":
        q = data["quality"]["neardup_lsh"]
        assert q["edge_check"]["precision"] == 1.0


def test_vector_benchmark_quick_run(tmp_path: Path) -> None:
    pytest.importorskip("faiss")
    out = tmp_path / "v.json"
    args = [sys.executable, str(ROOT / "benchmarks" / "bench_vectors.py"), "--quick", "--out",
            str(out)]
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=600)
    data = json.loads(out.read_text())
    nd = data["neardup"]
    assert nd["edge_check"]["precision"] == 1.0
    assert nd["recall_same_cluster"] >= 0.95
    assert data["faiss_lsh_128"]["queries_searched"] == 5000


@pytest.mark.slow
def test_service_benchmark_quick_run(tmp_path: Path) -> None:
    pytest.importorskip("datasketch")
    out = tmp_path / "s.json"
    args = [sys.executable, str(ROOT / "benchmarks" / "bench_service.py"), "--quick", "--out",
            str(out)]
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=600)
    data = json.loads(out.read_text())
    assert data["neardup"]["upsert_closed"]["errors"] == 0
    assert data["neardup"]["recall"]["probes"] > 0 and data["ratios"]


@pytest.mark.slow
def test_service_locust_benchmark_quick_run(tmp_path: Path) -> None:
    import importlib.util

    # Not imported here: locust patches the standard library (gevent) when imported.
    if importlib.util.find_spec("locust") is None:
        pytest.skip("locust is not installed (the bench extra)")
    out = tmp_path / "l.json"
    args = [sys.executable, str(ROOT / "benchmarks" / "bench_service_locust.py"), "--quick",
            "--root", str(tmp_path / "data"), "--out", str(out)]
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=600)
    runs = json.loads(out.read_text())["runs"]
    assert {(r["kind"], r["loop"]) for r in runs} == {
        (k, loop) for k in ("candidates", "decide", "upsert") for loop in ("closed", "open")
    }
    assert all(r["errors"] == 0 and r["requests"] > 0 for r in runs)


@pytest.mark.slow
@pytest.mark.ray
def test_ray_benchmark_quick_run(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    out = tmp_path / "ray.json"
    args = [sys.executable, str(ROOT / "benchmarks" / "bench_ray.py"), "--quick", "--shards", "3",
            "--out", str(out)]
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=900)
    data = json.loads(out.read_text())
    for name in ("ray", "ray_distributed_cc"):
        assert data["runs"][name]["clusters_identical"] and data["runs"][name]["kept_identical"]
    assert data["runs"]["ray_distributed_cc"]["engine"]["components"]["path"] == (
        "large-star/small-star"
    )
    assert data["projection"]["projected_wall_h"] > 0

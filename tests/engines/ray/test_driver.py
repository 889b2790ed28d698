"""``--engine ray`` gives the local engine's answer, and resumes after a crash.

The tests marked ``ray`` start a local Ray with 2 CPUs (once per module for the
library tests; each CLI subprocess starts its own).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from neardup import Config, ShingleSpec, run_dedup
from neardup.testing import plant_near_duplicates, synthetic_documents

EXE = str(Path(sys.executable).parent / "neardup")


def _corpus(seed: int, n_base: int = 300, copies: int = 240) -> list[str]:
    base = synthetic_documents(n_base, seed=seed, words=50, vocabulary=3000)
    # A third of the documents in Cyrillic letters, for the per-language counts.
    base = [d.replace("w", "ш") if i % 3 == 1 else d for i, d in enumerate(base)]
    texts, _ = plant_near_duplicates(
        base, copies=copies, edit_rate=[0.0, 0.02, 0.05, 0.1, 0.25], seed=seed + 1
    )
    rng = random.Random(seed + 2)
    # Exact duplicates that differ only in case and spacing, and empty documents.
    texts += ["  " + texts[rng.randrange(len(texts))].upper() + " " for _ in range(30)]
    texts += ["", "   ", "\n"]
    rng.shuffle(texts)
    return texts


def _write_shards(folder: Path, texts: list[str], shards: int, fmt: str = "jsonl") -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for s in range(shards):
        recs = [{"doc": f"s{s}-{i}", "text": t, "n": i} for i, t in enumerate(texts[s::shards])]
        if fmt == "jsonl":
            p = folder / f"part-{s}.jsonl"
            p.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            p = folder / f"part-{s}.parquet"
            pq.write_table(pa.Table.from_pylist(recs), p)
        paths.append(str(p))
    return paths


def _concat(folder: Path) -> bytes:
    return b"".join((folder / f).read_bytes() for f in sorted(os.listdir(folder)))


def _assert_same(local: Path, ray_out: Path, fmt: str = "jsonl") -> dict[str, Any]:
    a = (local / "clusters.jsonl").read_text(encoding="utf-8").splitlines()
    b = (ray_out / "clusters.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(a) > 10
    assert sorted(a) == sorted(b)
    assert a == b  # even the order: clusters are numbered by smallest member
    if fmt == "jsonl":
        assert (local / "kept.jsonl").read_bytes() == _concat(ray_out / "kept")
        assert (local / "duplicates.jsonl").read_bytes() == _concat(ray_out / "duplicates")
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        for name in ("kept", "duplicates"):
            want = pq.read_table(local / f"{name}.parquet")
            got = pa.concat_tables(
                [pq.read_table(ray_out / name / f) for f in sorted(os.listdir(ray_out / name))]
            )
            assert want.equals(got), name
    stats_l = json.loads((local / "stats.json").read_text())
    stats_r = json.loads((ray_out / "stats.json").read_text())
    for k in ("documents_in", "documents_out", "exact_duplicates", "near_duplicates", "clusters"):
        assert stats_l[k] == stats_r[k], k
    assert stats_l["cluster_size_histogram"] == stats_r["cluster_size_histogram"]
    assert stats_l["by_language"] == stats_r["by_language"]
    assert {"Latin", "Cyrillic", "none"} <= set(stats_r["by_language"])
    return stats_r


@pytest.mark.slow
@pytest.mark.ray
def test_ray_equals_local_with_planted_duplicates(tmp_path: Path, ray_session: Any) -> None:
    from neardup.engines.ray import run_dedup_ray

    texts = _corpus(11)
    inputs = _write_shards(tmp_path / "in", texts, shards=3)
    cfg = Config(threshold=0.7, shingle=ShingleSpec(k=3))
    run_dedup(inputs, str(tmp_path / "local"), config=cfg, id_field="doc", report=False)
    run = run_dedup_ray(inputs, str(tmp_path / "ray"), config=cfg, id_field="doc", partitions=3)
    _assert_same(tmp_path / "local", tmp_path / "ray")
    assert run.stats["engine"]["components"]["path"] == "driver-union-find"
    assert run.exact_duplicates >= 30 and (run.near_duplicates or 0) > 50
    assert run.stats["empty"] == 3 and run.output == str(tmp_path / "ray")
    assert not (tmp_path / "ray.neardup-work").exists()  # work folder removed at the end
    # Another partitioning of every shuffle, inputs named by an fsspec URL glob:
    # byte-identical outputs.
    url = "file://" + str(tmp_path / "in" / "part-*.jsonl")
    run_dedup_ray([url], str(tmp_path / "ray7"), config=cfg, id_field="doc", partitions=7)
    for name in ("clusters.jsonl", "stats.json"):
        assert (tmp_path / "ray7" / name).exists()
    assert (tmp_path / "ray7" / "clusters.jsonl").read_bytes() == (
        tmp_path / "ray" / "clusters.jsonl"
    ).read_bytes()
    assert _concat(tmp_path / "ray7" / "kept") == _concat(tmp_path / "ray" / "kept")
    assert _concat(tmp_path / "ray7" / "duplicates") == _concat(tmp_path / "ray" / "duplicates")


@pytest.mark.slow
@pytest.mark.ray
def test_ray_distributed_components_rounds_and_cap(tmp_path: Path, ray_session: Any) -> None:
    """The distributed components path forced on a small input, bands in many
    rounds, a tight candidate cap (so the cap's cut matters) and keep=longest,
    on Parquet shards without an id field."""
    from neardup.engines.ray import run_dedup_ray

    texts = _corpus(12, n_base=200, copies=200)
    inputs = _write_shards(tmp_path / "in", texts, shards=2, fmt="parquet")
    cfg = Config(threshold=0.6, shingle=ShingleSpec(k=2), max_candidates=2)
    run_dedup(inputs, str(tmp_path / "local"), config=cfg, keep="longest", report=False)
    stats = run_dedup_ray(
        inputs,
        str(tmp_path / "ray"),
        config=cfg,
        keep="longest",
        cc_threshold=0,
        round_bytes=40 * 1024,
        partitions=4,
    ).stats
    _assert_same(tmp_path / "local", tmp_path / "ray", fmt="parquet")
    cc = stats["engine"]["components"]
    assert cc["path"] == "large-star/small-star" and cc["rounds"] >= 2
    assert stats["engine"]["band_rounds"] > 1
    assert stats["candidate_overflow"] > 0
    local = json.loads((tmp_path / "local" / "stats.json").read_text())
    assert local["candidate_overflow"] == stats["candidate_overflow"]


def _session_pids(sid: int) -> list[int]:
    out = subprocess.run(["ps", "-eo", "pid=,sid="], capture_output=True, text=True).stdout
    pids = []
    for line in out.splitlines():
        pid, s = line.split()
        if int(s) == sid:
            pids.append(int(pid))
    return pids


def _kill_session(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the driver and the Ray processes it started (all in its session)."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for pid in _session_pids(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.ray
def test_resume_after_killing_the_driver(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    texts = _corpus(13)
    inputs = _write_shards(tmp_path / "in", texts, shards=4)
    work = tmp_path / "work"
    opts = ["--threshold", "0.7", "--shingle", "word:3", "--id-field", "doc", "--quiet"]
    ray_args = [*inputs, "-o", str(tmp_path / "ray"), *opts, "--engine", "ray", "--ray-cpus", "2"]
    ray_args += ["--work-dir", str(work), "--cc-threshold", "0"]
    proc = subprocess.Popen(
        [EXE, "dedup", *ray_args],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    manifest = work / "manifest.json"
    deadline = time.monotonic() + 300
    finished: dict[str, Any] = {}
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if manifest.exists():
                try:
                    finished = json.loads(manifest.read_text())["stages"]
                except ValueError:  # pragma: no cover - replaced atomically, never torn
                    finished = {}
                if "exact" in finished:
                    break
            time.sleep(0.02)
    finally:
        _kill_session(proc)
    assert "exact" in finished, "the run ended before it could be killed"
    assert not (tmp_path / "ray").exists()  # no complete-looking output
    stamps = {k: v["finished_at"] for k, v in finished.items()}

    # Resuming with other options is refused (the manifest belongs to another run).
    bad = subprocess.run(
        [EXE, "dedup", *ray_args, "--resume", "--seed", "7"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "another run" in bad.stderr

    done = subprocess.run(
        [EXE, "dedup", *ray_args, "--resume"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    stats = json.loads((tmp_path / "ray" / "stats.json").read_text())
    reused = stats["engine"]["reused_stages"]
    assert set(stamps) <= set(reused)  # every finished stage was reused ...
    assert (
        "features" not in stats["timings_s"] and "exact" not in stats["timings_s"]
    )  # ... not redone
    assert stats["engine"]["components"]["path"] == "large-star/small-star"
    subprocess.run(
        [EXE, "dedup", *inputs, "-o", str(tmp_path / "local"), *opts, "--no-report"], check=True
    )
    _assert_same(tmp_path / "local", tmp_path / "ray")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--engine", "ray", "--against", "idx"], "not available with --engine ray"),
        (["--engine", "ray", "--method", "exact"], "not available with --engine ray"),
        (["--resume"], "only used with --engine ray"),
        (["--ray-address", "auto"], "only used with --engine ray"),
    ],
)
def test_cli_refuses_options_that_do_not_apply(
    tmp_path: Path, extra: list[str], message: str
) -> None:
    src = _write_shards(tmp_path / "in", ["some text here", "other words"], shards=1)
    proc = subprocess.run(
        [EXE, "dedup", *src, "-o", str(tmp_path / "out"), *extra], capture_output=True, text=True
    )
    assert proc.returncode == 2 and message in proc.stderr
    assert not (tmp_path / "out").exists()

"""``neardup decontaminate --engine ray`` writes the local job's outputs.

The library tests share one local Ray with 2 CPUs; the CLI test's subprocess
starts its own.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from neardup import InputError
from neardup.lineage.decontam import DecontamConfig
from neardup.lineage.decontam_job import run_decontaminate
from neardup.testing import synthetic_documents

EXE = str(Path(sys.executable).parent / "neardup")
ITEMS = synthetic_documents(12, seed=31, words=40)

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def _shards(folder: Path) -> tuple[list[str], Path]:
    """Four training inputs (plain, gzip, Parquet, one without contamination) in
    which every seventh record holds an evaluation item, and the evaluation set."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    folder.mkdir()
    paths = []
    for s in range(4):
        recs = []
        for i, t in enumerate(synthetic_documents(40, seed=40 + s, words=300)):
            if s != 3 and i % 7 == 2:
                w = t.split(" ")
                t = " ".join([*w[:50], ITEMS[(i + s) % len(ITEMS)], *w[50:]])
            recs.append({"text": t, "n": i, "site": f"s{i % 3}.example"})
        lines = b"".join(json.dumps(r).encode() + b"\n" for r in recs)
        if s == 0:
            p = folder / "a.jsonl"
            p.write_bytes(lines)
        elif s == 1:
            p = folder / "b.jsonl.gz"
            p.write_bytes(gzip.compress(lines))
        elif s == 2:
            p = folder / "c.parquet"
            pq.write_table(pa.Table.from_pylist(recs), p, row_group_size=8)
        else:
            p = folder / "d.jsonl"
            p.write_bytes(lines)
        paths.append(str(p))
    ev = folder.parent / "eval.jsonl"
    ev.write_text(
        "".join(json.dumps({"id": f"e{i}", "text": t}) + "\n" for i, t in enumerate(ITEMS))
    )
    return paths, ev


def test_ray_writes_the_local_outputs(tmp_path: Path, ray_session: Any) -> None:
    from neardup.engines.ray.decontam import run_decontaminate_ray

    paths, ev = _shards(tmp_path / "train")
    cfg = DecontamConfig(batch_bytes=8192)
    common: dict[str, Any] = {"config": cfg, "source_field": "site"}
    local = run_decontaminate(paths, [("bench", str(ev))], str(tmp_path / "local"), **common)
    seen: list[tuple[int, int]] = []
    on_ray = run_decontaminate_ray(
        paths,
        [("bench", str(ev))],
        str(tmp_path / "ray"),
        progress=lambda d, b: seen.append((d, b)),
        **common,
    )
    assert local.removed == 18 and local.documents == 160
    assert (on_ray.documents, on_ray.removed, on_ray.kept, on_ray.bad) == (
        local.documents,
        local.removed,
        local.kept,
        local.bad,
    )
    a, b = tmp_path / "local", tmp_path / "ray"
    assert sorted(p.name for p in b.iterdir()) == sorted(p.name for p in a.iterdir())
    for name in ("a.jsonl", "b.jsonl.gz", "c.parquet", "d.jsonl"):
        if name.endswith(".parquet"):
            pq = pytest.importorskip("pyarrow.parquet")
            assert pq.read_table(b / "clean" / name).equals(pq.read_table(a / "clean" / name))
        else:
            want = (a / "clean" / name).read_bytes()
            got = (b / "clean" / name).read_bytes()
            if name.endswith(".gz"):
                want, got = gzip.decompress(want), gzip.decompress(got)
            assert got == want, name
    assert (b / "removed.jsonl").read_bytes() == (a / "removed.jsonl").read_bytes()
    rl = json.loads((a / "report.json").read_text())
    rr = json.loads((b / "report.json").read_text())
    for k in ("parameters", "training", "sets", "examples"):
        if k == "parameters":
            assert {**rr[k], "config_fingerprint": 0} == {**rl[k], "config_fingerprint": 0}
        else:
            assert rr[k] == rl[k], k
    assert seen[-1] == (160, rl["training"]["bytes"])
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_errors_of_a_worker_reach_the_caller_as_themselves(
    tmp_path: Path, ray_session: Any
) -> None:
    from neardup.engines.ray.decontam import run_decontaminate_ray

    paths, ev = _shards(tmp_path / "train")
    bad = tmp_path / "train" / "e.jsonl"
    bad.write_text('{"text": "fine words here"}\n{not json\n')
    with pytest.raises(InputError, match=r"e\.jsonl"):
        run_decontaminate_ray([*paths, str(bad)], [("b", str(ev))], str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
    assert not list(tmp_path.glob(".neardup-*"))
    res = run_decontaminate_ray([*paths, str(bad)], [("b", str(ev))], None, skip_bad=True)
    assert (res.documents, res.bad) == (161, 1)


def test_cli_engine_ray_gate(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    paths, ev = _shards(tmp_path / "train")
    out = tmp_path / "out"
    args = [EXE, "decontaminate", *paths, "--against", f"bench={ev}", "-o", str(out)]
    proc = subprocess.run(
        [*args, "--engine", "ray", "--ray-cpus", "2", "--fail-on-contamination", "--quiet"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 7, proc.stderr
    assert "160 records: 18 removed, 142 kept" in proc.stdout
    assert len((out / "removed.jsonl").read_text().splitlines()) == 18
    proc = subprocess.run(
        [*args[:-2], "--ray-cpus", "2"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2 and "--engine ray" in proc.stderr

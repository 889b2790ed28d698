"""The vector batch job: .npy / Parquet / JSONL in, kept/duplicates/clusters/stats/report out,
through the library and through the real ``neardup`` executable."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from neardup import InputError, VectorConfig, find_vector_duplicates
from neardup.batch.vjob import read_vectors, run_vector_dedup

EXE = shutil.which("neardup") or str(Path(sys.executable).parent / "neardup")


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([EXE, *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def X() -> np.ndarray:
    rng = np.random.default_rng(11)
    A = rng.standard_normal((600, 32)).astype(np.float32)
    A[400:500] = A[:100] + 0.08 * rng.standard_normal((100, 32)).astype(np.float32)
    A[500:520] = A[:20]  # identical copies
    return A


def _digest(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.name != "stats.json"
    }


@pytest.mark.slow
def test_npy_via_cli_matches_the_library(tmp_path: Path, X: np.ndarray) -> None:
    np.save(tmp_path / "v.npy", X)
    out = tmp_path / "out"
    proc = _run(
        "dedup", str(tmp_path / "v.npy"), "--output", str(out), "--vectors", "-",
        "--metric", "cosine", "--threshold", "0.9",
    )
    assert "600 vectors" in proc.stdout
    lib = find_vector_duplicates(X, VectorConfig(threshold=0.9))
    kept = np.load(out / "kept.npy", allow_pickle=False)
    kept_ids = np.load(out / "kept_ids.npy", allow_pickle=False)
    assert kept_ids.tolist() == lib.kept.tolist()
    assert np.array_equal(kept, X[lib.kept])
    dups = [json.loads(x) for x in (out / "duplicates.jsonl").read_text().splitlines()]
    assert [d["id"] for d in dups] == lib.duplicates.tolist()
    assert all(d["representative"] < d["id"] for d in dups)
    stats = json.loads((out / "stats.json").read_text())
    assert stats["documents_in"] == 600
    assert stats["exact_duplicates"] == 20
    assert stats["near_duplicates"] == len(lib.duplicates) >= 120
    assert stats["predicted_recall_at_threshold"] >= 0.995
    assert stats["config_fingerprint"] == lib.config.fingerprint
    clusters = [json.loads(x) for x in (out / "clusters.jsonl").read_text().splitlines()]
    for c in clusters:
        assert len(c["edges"]) == len(c["members"]) - 1
        for e in c["edges"]:
            a, b = X[e["a"]].astype(np.float64), X[e["b"]].astype(np.float64)
            exact = a @ b / np.linalg.norm(a) / np.linalg.norm(b)
            assert e["cosine"] == pytest.approx(exact, abs=1e-9) and e["cosine"] >= 0.9
    html = (out / "report.html").read_text()
    assert "<svg" in html and "Candidate probability" in html and "http" not in html


def test_parquet_keeps_fields_and_is_deterministic(tmp_path: Path, X: np.ndarray) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    ids = [f"img-{i}" for i in range(len(X))]
    table = pa.table(
        {
            "id": ids,
            "embedding": pa.array(list(X), type=pa.list_(pa.float32())),
            "caption": [f"caption {i}" for i in range(len(X))],
        }
    )
    pq.write_table(table, tmp_path / "e.parquet")
    outs = []
    for w in ("1", "2"):
        out = tmp_path / f"out{w}"
        _run(
            "dedup", str(tmp_path / "e.parquet"), "-o", str(out), "--vectors", "embedding",
            "--id-field", "id", "--text-field", "caption", "--threshold", "0.9", "--workers", w,
        )
        outs.append(_digest(out))
    assert outs[0] == outs[1]
    kept = pq.read_table(tmp_path / "out1" / "kept.parquet")
    dups = pq.read_table(tmp_path / "out1" / "duplicates.parquet")
    assert kept.column_names == ["id", "embedding", "caption"]
    assert set(dups.column_names) == {"id", "embedding", "caption", "cluster", "representative"}
    assert kept.num_rows + dups.num_rows == len(X)
    assert "img-0" in kept.column("id").to_pylist()
    assert "caption 400" in (tmp_path / "out1" / "report.html").read_text()


def test_jsonl_dense_bags_and_bad_records(tmp_path: Path, X: np.ndarray) -> None:
    dense = tmp_path / "d.jsonl"
    with dense.open("w") as fh:
        for i in range(120):
            vec = X[i].tolist() if i != 7 else [0.0] * 32
            fh.write(json.dumps({"id": i, "v": vec}) + "\n")
    with pytest.raises(InputError, match=r"d\.jsonl:8: is a zero vector"):
        read_vectors([str(dense)], field_name="v")
    vc = read_vectors([str(dense)], field_name="v", skip_bad=True)
    assert len(vc) == 119 and len(vc.bad) == 1
    # l2 has no angle to lose: the zero vector is an ordinary point there
    assert len(read_vectors([str(dense)], field_name="v", metric="l2")) == 120
    proc = _run("dedup", str(dense), "-o", str(tmp_path / "o"), "--vectors", "v", check=False)
    assert proc.returncode != 0 and "zero vector" in proc.stderr and "fix:" in proc.stderr
    bags = tmp_path / "b.jsonl"
    with bags.open("w") as fh:
        for i in range(40):
            feats = {"brand": 2.0, f"color{i % 20}": 1.0}
            fh.write(json.dumps({"sku": f"s{i}", "f": feats}) + "\n")
    st = run_vector_dedup(
        [str(bags)], str(tmp_path / "ob"), vectors_field="f", id_field="sku",
        config=VectorConfig(threshold=0.99),
    )
    assert st.stats["kind"] == "weighted-bags" and st.near_duplicates == 20
    first = json.loads((tmp_path / "ob" / "duplicates.jsonl").read_text().splitlines()[0])
    assert first["sku"] == "s20" and first["representative"] == "s0"
    wrong = tmp_path / "w.jsonl"
    wrong.write_text(json.dumps({"v": [1.0, 2.0]}) + "\n" + json.dumps({"v": [1.0]}) + "\n")
    with pytest.raises(InputError, match="dimension 1, expected 2"):
        read_vectors([str(wrong)], field_name="v")


def test_refusals_are_clear(tmp_path: Path, X: np.ndarray) -> None:
    np.save(tmp_path / "v.npy", X)
    for extra in (["--method", "exact"], ["--against", str(tmp_path)]):
        proc = _run(
            "dedup", str(tmp_path / "v.npy"), "-o", str(tmp_path / "o"), "--vectors", "x",
            *extra, check=False,
        )
        assert proc.returncode != 0 and "not available with --vectors" in proc.stderr
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="npy"):
        read_vectors([str(tmp_path / "obj.npy")], field_name="x")  # never unpickled
    proc = _run(
        "dedup", str(tmp_path / "v.npy"), "-o", str(tmp_path / "o2"), "--vectors", "x",
        "--dry-run",
    )
    assert not (tmp_path / "o2").exists() and "600 vectors" in proc.stdout


def test_l2_and_hamming_radius_via_cli(tmp_path: Path, X: np.ndarray) -> None:
    np.save(tmp_path / "v.npy", X)
    _run(
        "dedup", str(tmp_path / "v.npy"), "-o", str(tmp_path / "l2"), "--vectors", "-",
        "--metric", "l2", "--threshold", "1.0",
    )
    st = json.loads((tmp_path / "l2" / "stats.json").read_text())
    assert st["scheme"] == "pstable-l2-v1" and st["near_duplicates"] >= 120
    _run(
        "dedup", str(tmp_path / "v.npy"), "-o", str(tmp_path / "hr"), "--vectors", "-",
        "--threshold", "0.9", "--hamming-radius", "40", "--bits", "256",
    )
    st = json.loads((tmp_path / "hr" / "stats.json").read_text())
    assert st["hamming_radius"] == 40 and st["near_duplicates"] >= 120


def test_params_for_vector_families() -> None:
    from neardup import candidate_probability
    from neardup.vectors import hyperplane_collision

    out = json.loads(
        _run(
            "params", "--metric", "cosine", "--threshold", "0.9", "--far", "0.0",
            "--budget", "10", "--recall", "0.995", "-n", "100000", "--json",
        ).stdout
    )
    assert out["within_budget"] and out["expected_far_candidates"] <= 10
    assert candidate_probability(hyperplane_collision(0.9), out["bands"], out["rows"]) >= 0.995
    probs = [r["p"] for r in out["table"]]
    assert probs == sorted(probs)  # monotone in cosine
    l2 = json.loads(
        _run("params", "--metric", "l2", "--threshold", "1.0", "-n", "1000", "--json").stdout
    )
    assert l2["width"] > 0
    dists = [r["p"] for r in l2["table"]]
    assert dists == sorted(dists, reverse=True)  # decreasing in distance


def test_weighted_jaccard_bags_via_cli(tmp_path: Path) -> None:
    bags = tmp_path / "p.jsonl"
    with bags.open("w") as fh:
        for i in range(30):
            feats = {"brand:acme": 3.0, f"size:{i % 10}": 1.0, "color:red": 1.0}
            fh.write(json.dumps({"id": f"p{i}", "features": feats}) + "\n")
        fh.write(json.dumps({"id": "neg", "features": {"x": -1.0}}) + "\n")
    base = ["dedup", str(bags), "--vectors", "features", "--id-field", "id",
            "--metric", "weighted_jaccard", "--threshold", "0.9"]
    proc = _run(*base, "-o", str(tmp_path / "o"), check=False)
    assert proc.returncode != 0 and "negative weight" in proc.stderr
    _run(*base, "-o", str(tmp_path / "o"), "--skip-bad")
    st = json.loads((tmp_path / "o" / "stats.json").read_text())
    assert st["scheme"] == "icws-v1" and st["near_duplicates"] == 20 and st["bad_records"] == 1
    c = json.loads((tmp_path / "o" / "clusters.jsonl").read_text().splitlines()[0])
    assert c["members"] == ["p0", "p10", "p20"]
    assert all(e["weighted_jaccard"] == 1.0 for e in c["edges"])

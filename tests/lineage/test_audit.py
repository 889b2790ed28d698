"""Integration: ``neardup audit`` and ``neardup split`` through the real executable."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from neardup.testing import synthetic_documents

EXE = shutil.which("neardup") or str(Path(sys.executable).parent / "neardup")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *args], capture_output=True, text=True)


def _write(path: Path, leak: bool) -> Path:
    docs = synthetic_documents(40, seed=5, words=30)
    with path.open("w") as fh:
        for i, d in enumerate(docs):
            fh.write(json.dumps({"id": f"d{i}", "text": d, "split": "train",
                                 "src": "web" if i % 2 else "forum"}) + "\n")
        for i in range(5):  # revisions of d0..d4 (one word edited)
            w = docs[i].split()
            w[3] = "changed"
            split = "test" if leak else "train"
            fh.write(json.dumps({"id": f"r{i}", "text": " ".join(w), "split": split,
                                 "src": "web"}) + "\n")
        lone = {"id": "t0", "text": "an unrelated test item about tea", "split": "test"}
        fh.write(json.dumps(lone) + "\n")
    return path


def test_audit_reports_leakage_and_gates_on_it(tmp_path: Path) -> None:
    data = _write(tmp_path / "leak.jsonl", leak=True)
    out = tmp_path / "audit"
    args = ["audit", str(data), "--id-field", "id", "--split-field", "split",
            "--source-field", "src", "--shingle", "word:3", "--threshold", "0.7"]
    proc = _run(*args, "-o", str(out), "--fail-on-leakage")
    assert proc.returncode == 6, proc.stderr
    assert "leakage" in proc.stderr
    audit = json.loads((out / "audit.json").read_text())
    assert audit["leakage"]["pairs"] == {"test->train": 5, "train->test": 5}
    assert audit["leakage"]["by"]["source"] == {"forum": 3, "web": 7}
    fams = [json.loads(x) for x in (out / "families.jsonl").read_text().splitlines()]
    assert len(fams) == 5 and all(f["size"] == 2 for f in fams)
    edge = fams[0]["edges"][0]
    assert edge["kind"] == "near" and edge["score"] >= 0.7 and edge["spans_a"]
    html = (out / "report.html").read_text()
    assert "Cross-split leakage" in html and "http" not in html
    # without the flag the same leak is reported, not fatal
    assert _run(*args).returncode == 0
    clean = _write(tmp_path / "clean.jsonl", leak=False)
    proc = _run("audit", str(clean), "--id-field", "id", "--split-field", "split",
                "--shingle", "word:3", "--threshold", "0.7", "--fail-on-leakage")
    assert proc.returncode == 0 and "leaking records 0" in proc.stdout


@pytest.mark.slow
def test_split_keeps_families_whole_and_honours_decisions(tmp_path: Path) -> None:
    data = _write(tmp_path / "d.jsonl", leak=True)
    out = tmp_path / "split"
    proc = _run("split", str(data), "--id-field", "id", "--ratios", "train=0.7,test=0.3",
                "--seed", "11", "--shingle", "word:3", "--threshold", "0.7", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    where = {}
    for name in ("train", "test"):
        for line in (out / f"{name}.jsonl").read_text().splitlines():
            where[json.loads(line)["id"]] = name
    assert len(where) == 46
    for i in range(5):
        assert where[f"d{i}"] == where[f"r{i}"]
    rep = json.loads((out / "split.json").read_text())
    assert abs(rep["achieved"]["test"] - 0.3) < 0.05
    again = tmp_path / "split2"
    _run("split", str(data), "--id-field", "id", "--ratios", "train=0.7,test=0.3", "--seed",
         "11", "--shingle", "word:3", "--threshold", "0.7", "-o", str(again))
    assert (again / "train.jsonl").read_bytes() == (out / "train.jsonl").read_bytes()
    decisions = tmp_path / "dec.jsonl"
    decisions.write_text("\n".join(
        json.dumps({"a": f"d{i}", "b": f"r{i}", "decision": "split"}) for i in range(5)) + "\n")
    proc = _run("audit", str(data), "--id-field", "id", "--split-field", "split",
                "--shingle", "word:3", "--threshold", "0.7", "--decisions", str(decisions),
                "--fail-on-leakage")
    assert proc.returncode == 0, proc.stdout + proc.stderr  # reviewers cut every leak
    bad = _run("split", str(data), "--ratios", "train=x", "-o", str(tmp_path / "x"))
    assert bad.returncode == 2 and "fix:" in bad.stderr


def test_audit_csv_lineage_and_ignore_boilerplate(tmp_path: Path) -> None:
    import csv

    footer = " ".join(f"legal{i}" for i in range(40))
    rows = [{"id": f"k{i}", "text": f"ticket {i} printer jam on floor {i} " + footer,
             "origin": f"o{i}", "split": "train" if i < 15 else "test"} for i in range(30)]
    rows.append({"id": "rev", "text": "a rewrite sharing no words", "origin": "o0",
                 "split": "test"})
    path = tmp_path / "t.csv"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["id", "text", "origin", "split"])
        w.writeheader()
        w.writerows(rows)
    base = ["audit", str(path), "--id-field", "id", "--split-field", "split",
            "--shingle", "word:3", "--threshold", "0.6"]
    plain = _run(*base, "-o", str(tmp_path / "a"))
    assert plain.returncode == 0, plain.stderr
    a = json.loads((tmp_path / "a" / "audit.json").read_text())
    assert a["edges_depending_on_boilerplate"] > 0 and a["leakage"]["leaking_records"] > 0
    ign = _run(*base, "-o", str(tmp_path / "b"), "--ignore-boilerplate", "--fail-on-leakage")
    b = json.loads((tmp_path / "b" / "audit.json").read_text())
    assert b["dropped_by_boilerplate"] > 0 and b["families"] == 0
    assert ign.returncode == 0
    lin = _run(*base, "-o", str(tmp_path / "c"), "--origin-field", "origin", "--fail-on-leakage")
    c = json.loads((tmp_path / "c" / "audit.json").read_text())
    assert lin.returncode == 6  # k0 (train) and its rewrite (test) share an origin
    assert c["edges"] == {"lineage": 1} and c["overridden_by_lineage"] > 0


def test_audit_and_split_read_parquet_provenance(tmp_path: Path) -> None:
    import pytest

    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    docs = synthetic_documents(20, seed=9, words=30)
    texts = [*docs, docs[0] + " extra", docs[1]]
    table = pa.table({
        "id": [f"p{i}" for i in range(len(texts))],
        "body": texts,
        "part": ["train"] * 20 + ["test", "test"],
        "lang": ["en"] * 22,
    })
    pq.write_table(table, tmp_path / "d.parquet")
    proc = _run("audit", str(tmp_path / "d.parquet"), "--text-field", "body", "--id-field", "id",
                "--split-field", "part", "--language-field", "lang", "--shingle", "word:3",
                "-o", str(tmp_path / "a"), "--fail-on-leakage")
    assert proc.returncode == 6
    a = json.loads((tmp_path / "a" / "audit.json").read_text())
    assert a["exact_duplicates"] == 1 and a["leakage"]["by"]["language"] == {"en": 4}
    assert a["near_duplicate_candidates"] >= 1
    out = tmp_path / "s"
    assert _run("split", str(tmp_path / "d.parquet"), "--text-field", "body", "--id-field", "id",
                "--ratios", "train=0.5,test=0.5", "--shingle", "word:3", "-o",
                str(out)).returncode == 0
    where = {}
    for name in ("train", "test"):
        for i in pq.read_table(out / f"{name}.parquet").column("id").to_pylist():
            where[i] = name
    assert where["p0"] == where["p20"] and where["p1"] == where["p21"] and len(where) == 22


def test_split_seed_changes_the_draw_not_the_families(tmp_path: Path) -> None:
    data = _write(tmp_path / "d.jsonl", leak=True)
    reps = []
    for seed in ("1", "2"):
        out = tmp_path / f"s{seed}"
        assert _run("split", str(data), "--id-field", "id", "--ratios", "train=0.5,test=0.5",
                    "--seed", seed, "--shingle", "word:3", "--threshold", "0.7",
                    "-o", str(out)).returncode == 0
        reps.append(json.loads((out / "split.json").read_text()))
    assert reps[0]["config_fingerprint"] == reps[1]["config_fingerprint"]
    assert reps[0]["families"] == reps[1]["families"]


def test_audit_counts_records_families_and_leaks_per_language(tmp_path: Path) -> None:
    from neardup import Config, ShingleSpec
    from neardup.lineage.audit import run_audit

    def cyrillic(text: str) -> str:
        return "".join(chr(0x430 + ord(c) - 97) if "a" <= c <= "z" else c for c in text)

    rows = []
    for name, write, leak in (("Latin", str, 3), ("Cyrillic", cyrillic, 0)):
        docs = [write(d.lower()) for d in synthetic_documents(10, seed=7, words=30)]
        for i, d in enumerate(docs):
            rows.append({"id": f"{name}{i}", "text": d, "split": "train"})
        for i in range(2 if name == "Cyrillic" else leak):  # revisions of the first ones
            w = docs[i].split()
            w[3] = write("changed")
            rows.append({"id": f"{name}r{i}", "text": " ".join(w),
                         "split": "test" if name == "Latin" else "train",
                         **({"lang": "ru"} if name == "Cyrillic" else {})})
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    cfg = Config(shingle=ShingleSpec(kind="word", k=3), threshold=0.7)
    report = run_audit([str(data)], str(tmp_path / "out"), config=cfg, id_field="id",
                       fields={"split": "split", "language": "lang"})
    audit = json.loads((tmp_path / "out" / "audit.json").read_text())
    assert audit["language_field"] == "lang"
    # The revisions with lang "ru" count there; their originals have no field.
    assert audit["by_language"] == {
        "Cyrillic": {"records": 10, "records_in_families": 2, "leaking_records": 0},
        "Latin": {"records": 13, "records_in_families": 6, "leaking_records": 6},
        "ru": {"records": 2, "records_in_families": 2, "leaking_records": 0},
    }
    assert report.leaking_records == 6
    html = (tmp_path / "out" / "report.html").read_text()
    assert "<section class='languages'>" in html and "<td>ru</td>" in html

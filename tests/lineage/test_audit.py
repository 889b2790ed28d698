"""Integration: ``neardup audit`` and ``neardup split`` through the real executable."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from collections import defaultdict
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
    lin = _run(*base, "-o", str(tmp_path / "c"), "--origin-field", "origin", "--fail-on-leakage",
               "--lineage-veto")
    c = json.loads((tmp_path / "c" / "audit.json").read_text())
    assert lin.returncode == 6  # k0 (train) and its rewrite (test) share an origin
    assert c["edges"] == {"lineage": 1} and c["lineage_veto"] is True
    vetoed = c["lineage_vetoed_edges"]
    assert vetoed["count"] == a["near_edges"] and len(vetoed["examples"]) == 5
    assert all(x["a"].startswith("k") and x["score"] >= 0.6 for x in vetoed["examples"])
    assert "lineage veto on: " in lin.stdout and "--lineage-veto dropped" in lin.stderr
    page = (tmp_path / "c" / "report.html").read_text()
    assert f"Lineage veto on: {vetoed['count']} near edges" in page
    assert f"{vetoed['examples'][0]['score']:.3f}" in page
    # without the veto, different origins do not hide the text edges
    both = _run(*base, "-o", str(tmp_path / "d"), "--origin-field", "origin")
    d = json.loads((tmp_path / "d" / "audit.json").read_text())
    assert both.returncode == 0 and "lineage veto" not in both.stdout
    assert d["lineage_veto"] is False and d["lineage_vetoed_edges"]["count"] == 0
    assert d["edges"] == {"lineage": 1, "near": a["near_edges"]}
    assert "Lineage veto on" not in (tmp_path / "d" / "report.html").read_text()


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


@pytest.mark.slow
def test_exact_copies_across_origins_leak_whatever_the_veto(tmp_path: Path) -> None:
    """The repro of issue 24: one text in train and test under two origin ids."""
    mini = tmp_path / "mini.jsonl"
    text = "the quick brown fox jumps over the lazy dog near the river bank today"
    mini.write_text("".join(
        json.dumps({"id": i, "text": text, "split": s, "origin": o}) + "\n"
        for i, s, o in (("a", "train", "o1"), ("b", "test", "o2"))))
    args = ["audit", str(mini), "--id-field", "id", "--split-field", "split",
            "--origin-field", "origin", "--fail-on-leakage"]
    for veto in ((), ("--lineage-veto",)):
        out = tmp_path / f"out{len(veto)}"
        proc = _run(*args, *veto, "-o", str(out))
        assert proc.returncode == 6, proc.stdout + proc.stderr
        assert proc.stdout.startswith("2 records: 1 families (2 records)")
        assert "leaking records 2 in 1 families" in proc.stdout
        (fam,) = [json.loads(x) for x in (out / "families.jsonl").read_text().splitlines()]
        assert fam["members"] == ["a", "b"] and fam["splits"] == {"test": 1, "train": 1}
        assert [e["kind"] for e in fam["edges"]] == ["exact"]
        audit = json.loads((out / "audit.json").read_text())
        assert audit["lineage_veto"] is bool(veto)
        assert audit["lineage_vetoed_edges"] == {"count": 0, "examples": []}


def _one_origin_per_record(path: Path) -> dict[str, list[tuple[str, str]]]:
    """300 records, each with an origin of its own: 259 distinct documents and 41
    planted relatives (5 exact copies, 30 one-word edits, 3 negated and 3
    number-changed); returns the planted (id, id) pairs by kind."""
    base = synthetic_documents(259, seed=24, words=80)
    rng = random.Random(24)
    parents = rng.sample(range(len(base)), 41)
    kinds = ["exact"] * 5 + ["one-word"] * 30 + ["negated"] * 3 + ["number"] * 3
    texts = list(base)
    pairs: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for p, kind in zip(parents, kinds, strict=True):
        if kind in ("negated", "number"):
            texts[p] = f"{base[p]} and order 47 was shipped on time to the north gate"
        w = texts[p].split()
        if kind == "one-word":
            w[rng.randrange(len(w))] = "changed"
        elif kind == "negated":
            w[w.index("was") + 1 : w.index("was") + 1] = ["not"]
        elif kind == "number":
            w[w.index("47")] = "48"
        pairs[kind].append((p, len(texts)))
        texts.append(" ".join(w))
    order = list(range(len(texts)))
    rng.shuffle(order)  # relatives are not neighbours in the file
    rid = {i: f"r{k:03d}" for k, i in enumerate(order)}
    with path.open("w") as fh:
        for i in order:
            fh.write(json.dumps({"id": rid[i], "text": texts[i], "origin": f"o{i}"}) + "\n")
    return {k: [(rid[a], rid[b]) for a, b in v] for k, v in pairs.items()}


def _where(out: Path, names: tuple[str, ...]) -> dict[str, str]:
    return {json.loads(line)["id"]: name for name in names
            for line in (out / f"{name}.jsonl").read_text().splitlines()}


@pytest.mark.slow
def test_split_with_an_origin_per_record_keeps_copies_and_edits_together(tmp_path: Path) -> None:
    from neardup import Config, find_duplicates

    data = tmp_path / "d.jsonl"
    planted = _one_origin_per_record(data)
    recs = [json.loads(x) for x in data.read_text().splitlines()]
    assert len(recs) == 300 and len({r["origin"] for r in recs}) == 300
    truth = find_duplicates([r["text"] for r in recs], config=Config(), method="exact")
    related = {(recs[e.a]["id"], recs[e.b]["id"]) for e in truth.edges}
    related |= {(b, a) for a, b in related}
    assert all(p in related for v in planted.values() for p in v)  # all >= the threshold
    names = ("train", "valid", "test")
    base = ["split", str(data), "--id-field", "id", "--origin-field", "origin",
            "--ratios", "train=0.8,valid=0.1,test=0.1", "--seed", "3"]
    proc = _run(*base, "-o", str(tmp_path / "s"))
    assert proc.returncode == 0, proc.stderr
    where = _where(tmp_path / "s", names)
    assert len(where) == 300
    assert [p for p in related if where[p[0]] != where[p[1]]] == []
    # the round trip: the split's own files, audited as splits, do not leak
    files = [str(tmp_path / "s" / f"{n}.jsonl") for n in names]
    proc = _run("audit", *files, "--id-field", "id", "--origin-field", "origin",
                "--fail-on-leakage", "-o", str(tmp_path / "a"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "splits from the inputs: train, valid, test" in proc.stdout
    audit = json.loads((tmp_path / "a" / "audit.json").read_text())
    rep = json.loads((tmp_path / "s" / "split.json").read_text())
    assert audit["leakage"]["splits"] == {k: v for k, v in rep["records"].items() if v}
    assert audit["input_splits"] == {n: [f] for n, f in zip(names, files, strict=True)}
    assert audit["families"] == rep["families_with_2_or_more"] >= 41
    # the old rule (behind --lineage-veto) separates edits but never an exact copy,
    # and the gate on its output finds the leak
    proc = _run(*base, "--lineage-veto", "-o", str(tmp_path / "v"))
    assert proc.returncode == 0 and "lineage veto on: " in proc.stdout, proc.stderr
    vrep = json.loads((tmp_path / "v" / "split.json").read_text())
    assert vrep["lineage_veto"] is True and vrep["lineage_vetoed_edges"]["count"] >= 36
    vwhere = _where(tmp_path / "v", names)
    assert all(vwhere[a] == vwhere[b] for a, b in planted["exact"])
    assert any(vwhere[a] != vwhere[b] for a, b in planted["one-word"])
    vfiles = [str(tmp_path / "v" / f"{n}.jsonl") for n in names]
    proc = _run("audit", *vfiles, "--id-field", "id", "--origin-field", "origin",
                "--fail-on-leakage")
    assert proc.returncode == 6, proc.stdout + proc.stderr


def _split_files(tmp_path: Path, leak: bool) -> tuple[Path, Path]:
    """train.jsonl and test.jsonl without a split field; with ``leak``, test holds
    one-word edits of three train records."""
    docs = synthetic_documents(30, seed=7, words=80)
    train, test = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    train.write_text("".join(json.dumps({"id": f"t{i}", "text": d}) + "\n"
                             for i, d in enumerate(docs[:25])))
    held = docs[25:]
    if leak:
        held = [" ".join([*d.split()[:40], "changed", *d.split()[41:]]) for d in docs[:3]] + held
    test.write_text("".join(json.dumps({"id": f"e{i}", "text": d}) + "\n"
                            for i, d in enumerate(held)))
    return train, test


@pytest.mark.slow
def test_audit_takes_the_splits_from_the_files(tmp_path: Path) -> None:
    train, test = _split_files(tmp_path, leak=True)
    proc = _run("audit", str(train), str(test), "--id-field", "id", "--fail-on-leakage",
                "-o", str(tmp_path / "a"))
    assert proc.returncode == 6, proc.stdout + proc.stderr
    assert "test->train: 3; train->test: 3; splits from the inputs: train, test" in proc.stdout
    audit = json.loads((tmp_path / "a" / "audit.json").read_text())
    assert audit["leakage"]["splits"] == {"test": 8, "train": 25}
    assert audit["input_splits"] == {"train": [str(train)], "test": [str(test)]}
    assert audit["fields"] == {}
    fams = [json.loads(x) for x in (tmp_path / "a" / "families.jsonl").read_text().splitlines()]
    assert sorted(f["members"] for f in fams) == [["t0", "e0"], ["t1", "e1"], ["t2", "e2"]]
    # --split NAME=PATH names them (here the other way round), alone or with INPUTS
    proc = _run("audit", "--split", f"eval={train}", "--split", f"fit={test}", "--id-field", "id")
    assert proc.returncode == 0 and "eval->fit: 3; fit->eval: 3" in proc.stdout, proc.stderr
    proc = _run("audit", str(train), "--split", f"fit={test}", "--id-field", "id")
    assert "fit->train: 3; train->fit: 3" in proc.stdout, proc.stderr
    # one input without --split has no splits: nothing can leak
    proc = _run("audit", str(train), "--id-field", "id", "--fail-on-leakage")
    assert proc.returncode == 0 and "splits from" not in proc.stdout, proc.stderr
    clean_dir = tmp_path / "clean"
    clean_dir.mkdir()
    ctrain, ctest = _split_files(clean_dir, leak=False)
    proc = _run("audit", str(ctrain), str(ctest), "--id-field", "id", "--fail-on-leakage")
    assert proc.returncode == 0 and "leaking records 0" in proc.stdout, proc.stderr


@pytest.mark.slow
def test_a_saved_datasetdict_is_audited_and_split_by_its_split_names(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    pq = pytest.importorskip("pyarrow.parquet")
    train, test = _split_files(tmp_path, leak=True)
    parts = {n: [json.loads(x) for x in p.read_text().splitlines()]
             for n, p in (("train", train), ("test", test))}
    dd = datasets.DatasetDict({
        n: datasets.Dataset.from_dict({k: [r[k] for r in rs] for k in ("id", "text")})
        for n, rs in parts.items()
    })
    dd.save_to_disk(str(tmp_path / "dd"))
    proc = _run("audit", str(tmp_path / "dd"), "--id-field", "id", "--fail-on-leakage",
                "-o", str(tmp_path / "a"))
    assert proc.returncode == 6, proc.stdout + proc.stderr
    audit = json.loads((tmp_path / "a" / "audit.json").read_text())
    assert audit["leakage"]["pairs"] == {"test->train": 3, "train->test": 3}
    assert audit["input_splits"] == {n: [str(tmp_path / "dd" / n)] for n in ("train", "test")}
    # re-split it: split.json says where the old splits went, and the new split
    # files (Parquet) pass the gate
    out = tmp_path / "s"
    proc = _run("split", str(tmp_path / "dd"), "--id-field", "id", "--ratios",
                "train=0.7,test=0.3", "-o", str(out))
    assert proc.returncode == 0 and "splits from the inputs: train, test" in proc.stdout
    rep = json.loads((out / "split.json").read_text())
    moved = rep["from_splits"]
    assert sum(moved["train"].values()) == 25 and sum(moved["test"].values()) == 8
    assert sum(pq.read_table(out / f"{n}.parquet").num_rows for n in ("train", "test")) == 33
    proc = _run("audit", str(out / "train.parquet"), str(out / "test.parquet"), "--id-field",
                "id", "--fail-on-leakage")
    assert proc.returncode == 0 and "leaking records 0" in proc.stdout, proc.stderr


def test_run_audit_takes_one_split_per_input_and_not_with_a_split_field(tmp_path: Path) -> None:
    from neardup import Config, InvalidConfig, ShingleSpec
    from neardup.lineage.audit import run_audit

    train, test = _split_files(tmp_path, leak=True)
    inputs = [str(train), str(test)]
    cfg = Config(shingle=ShingleSpec(kind="word", k=3))
    res = run_audit(inputs, None, fields={}, config=cfg, id_field="id",
                    input_splits=["fit", "eval"])
    assert res.leakage["pairs"] == {"eval->fit": 3, "fit->eval": 3}
    assert res.audit["input_splits"] == {"fit": [str(train)], "eval": [str(test)]}
    with pytest.raises(InvalidConfig, match="need one per input"):
        run_audit(inputs, None, fields={}, input_splits=["fit"])
    with pytest.raises(InvalidConfig, match="given together with a split field"):
        run_audit(inputs, None, fields={"split": "split"}, input_splits=["fit", "eval"])


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

"""docs/outputs.md documents every key of the stats.json and audit.json that real runs write."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from neardup.testing import plant_near_duplicates, synthetic_documents

ROOT = Path(__file__).resolve().parents[1]
EXE = shutil.which("neardup") or str(Path(sys.executable).parent / "neardup")
DOC = ROOT / "docs" / "outputs.md"
MAPS = {"cluster_size_histogram", "cluster_sizes"}  # keys are cluster sizes
LABELS = {"by_language"}  # keys are languages, each a map of counts


def run(*args: str) -> None:
    proc = subprocess.run([EXE, "dedup", *args, "--no-report"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def dotted(d: dict[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for k, v in d.items():
        path = prefix + k
        out.add(path)
        if k in MAPS:
            out |= {f"{path}.<size>" for _ in v}
        elif k in LABELS:
            for counts in v.values():
                out.add(f"{path}.<language>")
                out |= dotted(counts, f"{path}.<language>.")
        elif isinstance(v, dict):
            out |= dotted(v, path + ".")
    return out


def documented(title: str) -> set[str]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split(f"\n## {title}\n")[1].split("\n## ")[0]
    return set(re.findall(r"^\| `([^`]+)` \|", section, flags=re.M))


@pytest.mark.slow
def test_every_stats_key_is_documented_and_every_documented_key_is_written(
    tmp_path: Path,
) -> None:
    base = synthetic_documents(150, seed=31, words=40)
    texts, _ = plant_near_duplicates(base, copies=60, edit_rate=[0.0, 0.02, 0.05], seed=32)
    src = tmp_path / "in.jsonl"
    lines = [json.dumps({"id": f"t{i}", "text": t}) for i, t in enumerate(texts)]
    src.write_text("\n".join([*lines, "{not json", json.dumps({"id": "e", "text": ""})]) + "\n")
    runs = {
        "lsh": ["--skip-bad"],
        "exact": ["--skip-bad", "--method", "exact"],
        "spill": ["--skip-bad", "--spill"],
    }
    seen: set[str] = set()
    for name, opts in runs.items():
        run(str(src), "-o", str(tmp_path / name), *opts)
        stats = json.loads((tmp_path / name / "stats.json").read_text())
        seen |= dotted(stats)
        # The relations the page states.
        assert (
            stats["documents_out"] + stats["exact_duplicates"] + stats["near_duplicates"]
            == stats["documents_in"]
        )
        assert sum(stats["cluster_size_histogram"].values()) == stats["clusters"]
        langs = stats["by_language"].values()
        assert sum(c["documents"] for c in langs) == stats["documents_in"]
        removed = stats["exact_duplicates"] + stats["near_duplicates"]
        assert sum(c["duplicates"] for c in langs) == removed
        kept = (tmp_path / name / "kept.jsonl").read_text().splitlines()
        assert len(kept) == stats["documents_out"]
        assert stats["verified_pairs"] == stats["candidate_pairs"]
        assert stats["bad_records"] == 1 and stats["empty"] == 1
    assert seen == documented("`neardup dedup` (text)")

    vec = tmp_path / "v.jsonl"
    rows = [[float((i * 7 + j * 3) % 11 + 1) for j in range(8)] for i in range(60)]
    rows += [[x + 0.001 for x in r] for r in rows[:10]] + [rows[0]]
    vec.write_text("".join(json.dumps({"emb": r}) + "\n" for r in rows))
    run(str(vec), "-o", str(tmp_path / "vec"), "--vectors", "emb", "--threshold", "0.99")
    vstats = json.loads((tmp_path / "vec" / "stats.json").read_text())
    assert vstats["documents_out"] + vstats["duplicates"] == vstats["compared"]
    assert vstats["exact_scores"] == vstats["candidate_checks"] - vstats["prefiltered"]
    assert dotted(vstats) == documented("`neardup dedup --vectors FIELD`")


AUDIT_MAPS = {  # maps of audit.json whose keys vary, and the placeholder of a key
    "fields": "<name>",
    "edges": "<kind>",
    "input_splits": "<split>",
    "leakage.splits": "<split>",
    "leakage.pairs": "<A->B>",
    "leakage.by": "<slice>",
    "leakage.by.<slice>": "<value>",
    "by_language": "<language>",
    "policies.records": "<policy>",
}


def audit_dotted(d: dict[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for k, v in d.items():
        path = prefix + AUDIT_MAPS.get(prefix.rstrip("."), k)
        out.add(path)
        if isinstance(v, dict):
            out |= audit_dotted(v, path + ".")
    return out


@pytest.mark.slow
def test_every_audit_key_is_documented_and_every_documented_key_is_written(
    tmp_path: Path,
) -> None:
    base = synthetic_documents(60, seed=41, words=60)
    texts, parents = plant_near_duplicates(base, copies=30, edit_rate=[0.0, 0.02], seed=42)
    rows = []
    for i, (t, p) in enumerate(zip(texts, parents, strict=True)):
        rows.append({
            "id": f"a{i}", "text": t, "split": "test" if i % 4 == 0 else "train",
            "origin": f"o{p if p >= 0 and i % 3 else i}", "src": "web" if i % 2 else "forum",
            "lang": "en", "tpl": "t1", "at": f"2024-0{1 + i % 9}-01", "label": str(i % 2),
            "pol": ["team-a", "team-b"] if i % 5 == 0 else "public",
        })
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{bad\n")
    flags = ["--id-field", "id", "--split-field", "split", "--origin-field", "origin",
             "--source-field", "src", "--language-field", "lang", "--template-field", "tpl",
             "--captured-at-field", "at", "--label-field", "label", "--skip-bad",
             "--policy-field", "pol"]
    seen: set[str] = set()
    for name, extra in (("plain", []), ("veto", ["--lineage-veto"])):
        proc = subprocess.run([EXE, "audit", str(src), *flags, *extra, "-o",
                               str(tmp_path / name)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        audit = json.loads((tmp_path / name / "audit.json").read_text())
        seen |= audit_dotted(audit)
        fams = (tmp_path / name / "families.jsonl").read_text().splitlines()
        assert len(fams) == audit["families"]
        assert sum(json.loads(f)["size"] for f in fams) == audit["records_in_families"]
        assert audit["edges"].get("near", 0) == audit["near_edges"]
        leak = audit["leakage"]
        assert leak["leaking_records"] == sum(leak["pairs"].values()) > 0
    assert audit["lineage_veto"] and audit["lineage_vetoed_edges"]["examples"]
    for split in ("train", "test"):
        (tmp_path / f"{split}.jsonl").write_text("".join(
            json.dumps(r) + "\n" for r in rows if r["split"] == split))
    proc = subprocess.run([EXE, "audit", str(tmp_path / "train.jsonl"),
                           str(tmp_path / "test.jsonl"), "-o", str(tmp_path / "files")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    audit = json.loads((tmp_path / "files" / "audit.json").read_text())
    assert audit["input_splits"] == {s: [str(tmp_path / f"{s}.jsonl")] for s in ("train", "test")}
    seen |= audit_dotted(audit)
    assert seen == documented("`neardup audit` (`audit.json`)")

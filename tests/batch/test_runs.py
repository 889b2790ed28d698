"""A batch run answers with a frozen DedupRun: named counts and the stats.json mapping."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from neardup import run_dedup
from neardup.batch.runs import DedupRun


def test_run_dedup_answers_with_the_counts_of_stats_json(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    texts = ["one two three four five six", "one two three four five six", "seven eight"]
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    run = run_dedup([str(src)], str(tmp_path / "out"), report=False)
    assert isinstance(run, DedupRun) and run.output == str(tmp_path / "out")
    on_disk = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert (run.documents_in, run.documents_out, run.exact_duplicates) == (3, 2, 1)
    assert (run.near_duplicates, run.clusters, run.bad_records) == (0, 1, 0)
    assert {k: run.stats[k] for k in ("documents_in", "clusters")} == {
        k: on_disk[k] for k in ("documents_in", "clusters")
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.documents_in = 4  # type: ignore[misc]
    dry = run_dedup([str(src)], str(tmp_path / "dry"), dry_run=True)
    assert dry.output is None and not (tmp_path / "dry").exists()


def test_counts_a_run_did_not_make_are_none() -> None:
    run = DedupRun.from_stats({"documents_in": 5, "exact_duplicates": 1}, None)
    assert run.documents_out is None and run.clusters is None and run.bad_records == 0

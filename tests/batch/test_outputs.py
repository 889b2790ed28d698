"""neardup.batch.outputs: an output folder appears whole or not at all."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from neardup import NeardupIOError
from neardup.batch.outputs import commit_output, finish_output, writing


def _folder(path: Path, content: str) -> None:
    path.mkdir()
    (path / "kept.jsonl").write_text(content)


def test_commit_replaces_an_old_output_whole(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _folder(out, "old\n")
    tmp = tmp_path / ".neardup-tmp-1"
    _folder(tmp, "new\n")
    commit_output(str(tmp), str(out))
    assert (out / "kept.jsonl").read_text() == "new\n"
    assert not tmp.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # the old folder is gone


def test_finish_writes_stats_with_total_time_then_commits(tmp_path: Path) -> None:
    tmp = tmp_path / ".neardup-tmp-2"
    _folder(tmp, "")
    stats: dict[str, object] = {"timings_s": {"read": 0.1}, "documents": 3}
    finish_output(str(tmp), str(tmp_path / "out"), stats, time.perf_counter())
    got = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert got["documents"] == 3 and got["timings_s"]["total"] >= 0
    assert "peak_memory_bytes" in got


def test_writing_names_the_path_of_an_os_error(tmp_path: Path) -> None:
    target = str(tmp_path / "nowhere" / "stats.json")
    with pytest.raises(NeardupIOError) as info, writing(target):
        open(target, "w").close()
    assert os.path.basename(target) in str(info.value)

"""Damaged inputs end in a clear message and exit 3, whatever --skip-bad says
(real processes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

zstandard = pytest.importorskip("zstandard")

RECORDS = "".join(
    json.dumps({"id": i, "text": f"document number {i} about topic {i % 7} " * 8}) + "\n"
    for i in range(3000)
).encode()


def _dedup(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "neardup", "dedup", str(path), "-o", str(path) + ".out", *extra],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / f"{name}.jsonl.zst"
    p.write_bytes(data)
    return p


@pytest.mark.parametrize("skip_bad", [[], ["--skip-bad"]])
def test_a_cut_or_foreign_zst_stream_is_exit_3(tmp_path: Path, skip_bad: list[str]) -> None:
    whole = zstandard.ZstdCompressor().compress(RECORDS)
    cut = _write(tmp_path, "cut", whole[: len(whole) // 2])
    r = _dedup(cut, *skip_bad)
    assert r.returncode == 3, r.stderr
    assert "ends inside a zstd frame (truncated)" in r.stderr
    assert not (tmp_path / "cut.jsonl.zst.out").exists()
    junk = _write(tmp_path, "junk", b"plain text, not zstd\n" * 20)
    r = _dedup(junk, *skip_bad)
    assert r.returncode == 3, r.stderr
    assert "not a zstd stream, or a damaged one" in r.stderr
    assert "Traceback" not in r.stderr


def test_complete_multi_frame_and_empty_zst_streams_are_read(tmp_path: Path) -> None:
    half = len(RECORDS) // 2
    cut_at = RECORDS.rfind(b"\n", 0, half) + 1
    c = zstandard.ZstdCompressor()
    two = _write(tmp_path, "two", c.compress(RECORDS[:cut_at]) + c.compress(RECORDS[cut_at:]))
    r = _dedup(two)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("3000 documents"), r.stdout
    empty = _write(tmp_path, "empty", b"")
    r = _dedup(empty)
    assert r.returncode == 0 and r.stdout.startswith("0 documents"), r.stdout + r.stderr

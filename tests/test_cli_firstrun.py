"""A first run's command line: detected ids, grouped --help, --quiet, incremental keeps.

Every test runs the real ``neardup`` executable."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from neardup import synthetic_documents

EXE = shutil.which("neardup") or str(Path(sys.executable).parent / "neardup")


def run(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([EXE, *args], capture_output=True, text=True)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def write_jsonl(path: Path, recs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _texts() -> list[str]:
    base = synthetic_documents(30, seed=41, words=40)
    # Three pairs of near copies (one word changed) and one exact copy.
    copies = [t.replace(" ", " x ", 1) for t in base[:3]] + [base[5]]
    return base + copies


def stats_of(out: Path) -> dict[str, Any]:
    return json.loads((out / "stats.json").read_text())  # type: ignore[no-any-return]


# -- 2. --help ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "headings"),
    [
        (
            "dedup",
            [
                "Input:",
                "What is a duplicate, and which one is kept:",
                "Outputs:",
                "Performance:",
                "Engines:",
                "Vectors:",
            ],
        ),
        ("audit", ["Input:", "What is a duplicate:", "Outputs:", "Performance:"]),
        ("split", ["Input:", "What is a duplicate:", "Split:", "Outputs:", "Performance:"]),
        ("eval", ["Input:", "What is a duplicate:", "Outputs:", "Performance:"]),
    ],
)
def test_help_lists_the_options_in_groups(command: str, headings: list[str]) -> None:
    text = run(command, "--help").stdout
    found = re.findall(r"^(\S[^\n]*:)$", text, flags=re.M)
    sections = [h for h in found if not h.startswith(("Usage", "Example"))]
    assert sections[: len(headings)] == headings
    assert sections[len(headings) :] == ["Other options:"]  # --help only
    assert "Options:" not in found
    options = text[text.index("\nInput:\n") :]  # not the examples above

    def at(opt: str) -> int:
        """Where the option's own row starts (not a mention in another's help)."""
        m = re.search(rf"^  (-\w, )?{opt}[ \n]", options, flags=re.M)
        assert m is not None, opt
        return m.start()

    assert at("--text-field") < at("--threshold") < at("--workers")
    if command == "dedup":
        assert at("--threshold") < at("--output") < at("--engine")
        for opt in ("--engine", "--ray-address", "--ray-cpus", "--resume", "--cc-threshold"):
            assert at("--text-field") < at(opt) and at("--threshold") < at(opt)
        assert at("--cc-threshold") < at("--vectors")

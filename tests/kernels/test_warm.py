"""Kernels compiled ahead, in parallel, once per machine; nothing compiles silently."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from neardup import InvalidConfig, compile_kernels
from neardup.kernels._manifest import kernel_groups
from neardup.kernels._manifest import numba_type as _type

SRC = Path(__file__).resolve().parents[2] / "src" / "neardup"
GROUPS = kernel_groups()
SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample.jsonl"


def test_the_manifest_names_kernels_that_exist_with_types_that_decode() -> None:
    from numba.core.registry import CPUDispatcher

    from neardup.kernels._kernel import Kernel

    assert {"dedup", "dedup-index", "dedup-exact", "library", "vectors", "service"} <= set(
        GROUPS
    )
    for group, entries in GROUPS.items():
        assert entries, group
        for module, name, specs, seconds in entries:
            disp = getattr(importlib.import_module(f"neardup.{module}"), name)
            assert isinstance(disp, Kernel), (group, module, name)
            assert isinstance(disp.dispatcher, CPUDispatcher), (group, module, name)
            for spec in specs:
                _type(spec)
            assert seconds >= 0


def test_unknown_group_or_process_count_is_refused() -> None:
    with pytest.raises(InvalidConfig, match="is not a kernel group"):
        compile_kernels(["nope"])
    with pytest.raises(InvalidConfig, match="at least 1"):
        compile_kernels(["dedup"], processes=0)


def test_type_spellings_outside_the_known_ones_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown scalar type"):
        _type("__import__")
    with pytest.raises(ValueError, match="unknown type spelling"):
        _type(["eval", "x"])


def _fresh_copy(tmp_path: Path) -> dict[str, str]:
    """neardup's source without any numba cache: a machine's first run."""
    shutil.copytree(SRC, tmp_path / "src" / "neardup", ignore=shutil.ignore_patterns("__pycache__"))
    return {**os.environ, "PYTHONPATH": str(tmp_path / "src")}


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "neardup", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_first_run_compiles_ahead_on_every_core_and_nothing_later(tmp_path: Path) -> None:
    """The vector path (the smallest group): the first run compiles the manifest's
    kernels in worker processes with one progress line, and the run itself
    compiles nothing more (the manifest matches what the run calls)."""
    env = _fresh_copy(tmp_path)
    x = np.random.default_rng(0).normal(size=(200, 16)).astype(np.float32)
    np.save(tmp_path / "emb.npy", x)
    argv = ["dedup", str(tmp_path / "emb.npy"), "--vectors", "-", "--metric", "cosine"]
    first = _cli(env, *argv, "-o", str(tmp_path / "a"), "--threshold", "0.9")
    assert first.returncode == 0, first.stderr
    lines = [ln for ln in first.stderr.splitlines() if ln.startswith("neardup: compiling")]
    n = len(GROUPS["vectors"])
    m = re.match(r"neardup: compiling (\d+) kernels for this machine", lines[0])
    assert m is not None and 1 <= int(m.group(1)) <= n, lines
    assert len(lines) == 1, lines  # nothing compiled lazily, unannounced or not
    assert "later runs start at once" in first.stderr
    second = _cli(env, *argv, "-o", str(tmp_path / "b"), "--threshold", "0.9")
    assert second.returncode == 0, second.stderr
    assert "compiling" not in second.stderr
    done = _cli(env, "compile", "--group", "vectors")
    assert done.returncode == 0, done.stderr
    assert f"{n} kernels of vectors: 0 compiled" in done.stdout


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_readme_first_command_path_compiles_ahead_only(tmp_path: Path) -> None:
    """The README's first command on a fresh cache: kernels come from the
    ``dedup`` group, compiled ahead; the run announces no lazy compile."""
    env = _fresh_copy(tmp_path)
    run = _cli(env, "dedup", str(SAMPLE), "--output", str(tmp_path / "out"))
    assert run.returncode == 0, run.stderr
    lines = [ln for ln in run.stderr.splitlines() if ln.startswith("neardup: compiling")]
    assert len(lines) == 1 and "kernels for this machine" in lines[0], lines
    assert (tmp_path / "out" / "kept.jsonl").exists()
    # The next run takes every kernel from the native module: numba is never loaded
    # (-X importtime lists every module the process imports, on stderr).
    out = str(tmp_path / "again")
    again = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "neardup", "dedup", str(SAMPLE), "-o", out],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert again.returncode == 0, again.stderr
    assert "neardup: compiling" not in again.stderr
    imported = [ln.rsplit("|", 1)[-1].strip() for ln in again.stderr.splitlines()]
    assert "numpy" in imported
    assert not [m for m in imported if m.split(".")[0] in ("numba", "llvmlite")]
    a = (tmp_path / "out" / "clusters.jsonl").read_bytes()
    assert a == (tmp_path / "again" / "clusters.jsonl").read_bytes()

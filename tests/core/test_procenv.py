"""neardup.core.procenv: defaults for native libraries, never over a user's setting."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from neardup.core.procenv import process_defaults


def test_defaults_are_set_when_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    process_defaults()
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"


def test_an_explicit_setting_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    process_defaults()
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
    assert os.environ["OPENBLAS_NUM_THREADS"] == "4"


def test_importing_the_library_changes_no_environment() -> None:
    code = (
        "import os; before = dict(os.environ); import neardup, neardup.batch.job, "
        "neardup.service.manager; print(dict(os.environ) == before)"
    )
    env = {
        k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OPENBLAS_NUM_THREADS")
    }
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert out.stdout.strip() == "True"

"""Run code in a new interpreter of this environment: what a fresh process imports
and loads, which a test process that has imported everything cannot show."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping


def fresh_python(code: str, env: Mapping[str, str] | None = None) -> str:
    """The standard output of ``python -c code``; a non-zero exit fails the test
    (``CalledProcessError``, with the child's stderr)."""
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        env=None if env is None else dict(env),
    )
    if out.returncode != 0:
        raise subprocess.CalledProcessError(out.returncode, out.args, out.stdout, out.stderr)
    return out.stdout

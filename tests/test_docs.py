"""The README contract: two commands, and .ci/run runs the test one verbatim."""

from __future__ import annotations

import re
from pathlib import Path

import neardup

ROOT = Path(__file__).resolve().parents[1]


def _shell_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```sh\n(.*?)\n```", text, flags=re.S)


def test_quick_start_has_exactly_two_commands() -> None:
    quick = (ROOT / "README.md").read_text(encoding="utf-8").split("## Quick start")[1]
    quick = quick.split("\n## ")[0]
    blocks = re.findall(r"```sh\n(.*?)\n```", quick, flags=re.S)
    assert len(blocks) == 2
    assert all("\n" not in b.strip() for b in blocks)
    assert "neardup dedup data/sample.jsonl" in blocks[0]
    assert "pytest" in blocks[1]


def test_ci_runs_the_readme_test_command() -> None:
    test_cmd = _shell_blocks()[1].strip()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert test_cmd in ci.splitlines()


def test_no_registry_hosts_in_scripts() -> None:
    pattern = re.compile(r"(pypi\.org|files\.pythonhosted|registry\.npmjs|deb\.debian)")
    for path in [
        ROOT / ".ci" / "run",
        ROOT / "pyproject.toml",
        *ROOT.glob("scripts/*"),
        *ROOT.glob("benchmarks/*.py"),
    ]:
        assert not pattern.search(path.read_text(encoding="utf-8")), path


def test_every_error_is_documented_in_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in neardup.__all__:
        obj = getattr(neardup, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert f"`{name}`" in readme, name


def test_quick_start_command_runs(tmp_path: Path) -> None:
    """The first README command's job, from another folder, through the executable."""
    import shutil
    import subprocess
    import sys

    exe = shutil.which("neardup") or str(Path(sys.executable).parent / "neardup")
    cmd = _shell_blocks()[0].split("&&")[-1].strip().split()
    assert cmd[0].endswith("neardup")
    args = [str(ROOT / a) if a.startswith("data/") else a for a in cmd[1:]]
    args = [str(tmp_path / a) if a.startswith("out/") else a for a in args]
    proc = subprocess.run([exe, *args], capture_output=True, text=True, check=True)
    assert "540 documents" in proc.stdout
    assert (tmp_path / "out" / "sample" / "report.html").exists()

"""neardup.core.leftovers: a run's temporary folders are locked while it lives,
swept once it has ended (never before), and removed on SIGINT/SIGTERM."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from neardup.core import leftovers
from neardup.core.leftovers import (
    CLAIM_PREFIX,
    OWNER_FILE,
    disown,
    owned_folder,
    release,
    sweep,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file locks")

SRC = str(Path(leftovers.__file__).resolve().parents[2])

HOLDER = """
import sys, time
from neardup.core.leftovers import owned_folder, install_signal_handlers
install_signal_handlers()
path = owned_folder(".neardup-tmp-", sys.argv[1], "the outputs being written ({path})")
with open(path + "/payload", "w") as fh:
    fh.write("x" * 1000)
print(path, flush=True)
time.sleep(60)
"""


def _holder(parent: Path) -> tuple[subprocess.Popen[str], str]:
    env = dict(os.environ, PYTHONPATH=SRC)
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(parent)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    path = proc.stdout.readline().strip()
    assert path, proc.stderr.read() if proc.stderr else ""
    return proc, path


def _dead_folder(parent: Path, name: str, host: str | None = None) -> Path:
    """A folder as a run that was killed leaves it: an unlocked owner file."""
    d = parent / name
    d.mkdir()
    (d / "work.bin").write_bytes(b"\0" * 2500)
    rec = {"pid": 999999, "host": host or socket.gethostname(), "started": "2020-01-01T00:00:00Z"}
    (d / OWNER_FILE).write_text(json.dumps(rec) + "\n")
    return d


def test_a_dead_runs_folders_are_swept_and_reported(tmp_path: Path) -> None:
    tmp = _dead_folder(tmp_path, ".neardup-tmp-abc")
    work = _dead_folder(tmp_path, ".neardup-work-def")
    other = tmp_path / "keep-me"
    other.mkdir()
    (other / OWNER_FILE).write_text("{}")
    said: list[str] = []
    removed = sweep(str(tmp_path), say=said.append)
    assert removed == [str(tmp), str(work)]
    assert not tmp.exists() and not work.exists() and other.exists()
    assert len(said) == 2
    assert str(tmp) in said[0] and "pid 999999" in said[0]
    assert re.search(r"\(2\.[5-9] kB\)", said[0])


def test_a_live_runs_folder_is_not_swept_until_it_ends(tmp_path: Path) -> None:
    proc, path = _holder(tmp_path)
    try:
        said: list[str] = []
        assert sweep(str(tmp_path), say=said.append) == []
        assert os.path.isdir(path) and said == []
        owner = json.loads(Path(path, OWNER_FILE).read_text())
        assert owner["pid"] == proc.pid and owner["host"] == socket.gethostname()
    finally:
        proc.kill()  # like kill -9: no clean-up ran, the lock died with it
        proc.wait()
    assert os.path.isdir(path)
    said = []
    assert sweep(str(tmp_path), say=said.append) == [path]
    assert not os.path.exists(path) and f"pid {proc.pid}" in said[0]


def test_sigterm_removes_the_runs_folders_and_exits_143(tmp_path: Path) -> None:
    proc, path = _holder(tmp_path)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=20)
    assert proc.returncode == 143
    assert not os.path.exists(path)
    assert "stopped by SIGTERM" in err and path in err and "no output was changed" in err


def test_a_folder_of_another_host_is_left_and_mentioned(tmp_path: Path) -> None:
    d = _dead_folder(tmp_path, ".neardup-old-x", host="some-other-host.invalid")
    said: list[str] = []
    assert sweep(str(tmp_path), say=said.append) == []
    assert d.exists() and len(said) == 1 and "some-other-host.invalid" in said[0]


def test_a_folder_without_owner_file_is_only_mentioned_once_old(tmp_path: Path) -> None:
    d = tmp_path / ".neardup-tmp-old"
    d.mkdir()
    (d / "kept.jsonl").write_text("{}\n")
    said: list[str] = []
    assert sweep(str(tmp_path), say=said.append) == [] and said == []  # maybe being created
    old = time.time() - 120
    os.utime(d, (old, old))
    assert sweep(str(tmp_path), say=said.append) == []
    assert d.exists() and len(said) == 1 and "no owner record" in said[0]


def test_an_old_empty_folder_without_owner_file_is_removed(tmp_path: Path) -> None:
    # What a run killed between deleting its owner file and its folder leaves.
    d = tmp_path / ".neardup-work-emptied"
    d.mkdir()
    said: list[str] = []
    assert sweep(str(tmp_path), say=said.append) == [] and d.exists()
    old = time.time() - 120
    os.utime(d, (old, old))
    assert sweep(str(tmp_path), say=said.append) == [str(d)]
    assert not d.exists() and len(said) == 1 and "removed" in said[0]


def test_a_symlink_with_the_prefix_is_not_followed(tmp_path: Path) -> None:
    target = _dead_folder(tmp_path, "elsewhere")
    (tmp_path / ".neardup-tmp-link").symlink_to(target)
    assert sweep(str(tmp_path), say=lambda _s: None) == []
    assert (target / "work.bin").exists()


def test_own_folders_release_and_disown(tmp_path: Path) -> None:
    a = owned_folder(".neardup-tmp-", str(tmp_path), "a")
    b = owned_folder(".neardup-work-", str(tmp_path), "b")
    assert os.path.basename(a).startswith(".neardup-tmp-")
    assert os.path.exists(os.path.join(a, OWNER_FILE))
    # This process's own folders are never swept.
    assert sweep(str(tmp_path), say=lambda _s: None) == []
    release(a)
    assert not os.path.exists(a)
    disown(b)
    assert os.path.isdir(b) and not os.path.exists(os.path.join(b, OWNER_FILE))
    assert b not in leftovers._held
    release(b)
    assert not os.path.exists(b)


def test_sweep_of_a_missing_parent_is_empty(tmp_path: Path) -> None:
    assert sweep(str(tmp_path / "nope")) == []


def _age(path: Path, seconds: float = 120) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_new_folder_is_claimed_before_it_gets_its_working_name(tmp_path: Path) -> None:
    a = owned_folder(".neardup-tmp-", str(tmp_path), "the outputs ({path})")
    names = sorted(os.listdir(tmp_path))
    assert names == [os.path.basename(a)]  # no claim folder is left behind
    assert os.listdir(a) == [OWNER_FILE]
    assert leftovers._held[a][1] == f"the outputs ({a})"
    release(a)


def test_a_killed_runs_claim_folder_is_removed_once_a_minute_old(tmp_path: Path) -> None:
    empty = tmp_path / (CLAIM_PREFIX + "a")
    empty.mkdir()
    half = tmp_path / (CLAIM_PREFIX + "b")
    half.mkdir()
    (half / (OWNER_FILE + ".new")).write_text('{"pid": 1')
    said: list[str] = []
    assert sweep(str(tmp_path), say=said.append) == [] and said == []  # maybe being claimed
    _age(empty)
    _age(half)
    removed = sweep(str(tmp_path), say=said.append)
    assert sorted(removed) == [str(empty), str(half)] and len(said) == 2
    assert os.listdir(tmp_path) == []


def test_a_claim_folder_with_other_files_is_left(tmp_path: Path) -> None:
    odd = tmp_path / (CLAIM_PREFIX + "c")
    odd.mkdir()
    (odd / "data.bin").write_bytes(b"x")
    _age(odd)
    assert sweep(str(tmp_path), say=lambda _s: None) == []
    assert (odd / "data.bin").exists()


def test_a_claim_folder_whose_owner_died_is_swept_as_any_dead_runs(tmp_path: Path) -> None:
    d = _dead_folder(tmp_path, CLAIM_PREFIX + "d")
    assert sweep(str(tmp_path), say=lambda _s: None) == [str(d)]


def test_a_taken_working_name_is_never_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The claim's suffix names the working folder; if that name is taken (an empty
    # folder included, which rename() would replace) another name is drawn.
    taken_full = tmp_path / ".neardup-tmp-same"
    taken_full.mkdir()
    (taken_full / "payload").write_text("keep")
    taken_empty = tmp_path / ".neardup-tmp-same2"
    taken_empty.mkdir()
    calls = iter(["same", "same2"])

    def fixed_mkdtemp(prefix: str, dir: str) -> str:
        path = os.path.join(dir, prefix + next(calls))
        os.mkdir(path)
        return path

    monkeypatch.setattr(tempfile, "mkdtemp", fixed_mkdtemp)
    a = owned_folder(".neardup-tmp-", str(tmp_path), "a")
    b = owned_folder(".neardup-tmp-", str(tmp_path), "b")
    assert {a, b}.isdisjoint({str(taken_full), str(taken_empty)})
    assert (taken_full / "payload").read_text() == "keep" and taken_empty.is_dir()
    assert all(os.path.exists(os.path.join(p, OWNER_FILE)) for p in (a, b))
    release(a)
    release(b)


CHURN = """
import sys
import tempfile
from neardup.core.leftovers import owned_folder, release
print("go", flush=True)
while True:
    release(owned_folder(".neardup-work-", sys.argv[1], "w"))
"""


@pytest.mark.timeout(60)
def test_kill_9_at_any_moment_leaves_nothing_a_sweep_keeps(tmp_path: Path) -> None:
    # Killed at random points of create/claim/rename/release, a run leaves at most
    # a claim folder or a working folder with an unlocked owner: all swept.
    env = dict(os.environ, PYTHONPATH=SRC)
    for delay in (0.05, 0.11, 0.17, 0.23, 0.31):
        proc = subprocess.Popen(
            [sys.executable, "-c", CHURN, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "go"
        time.sleep(delay)
        proc.kill()
        proc.wait()
        proc.stdout.close()
    for name in os.listdir(tmp_path):
        _age(tmp_path / name)
    sweep(str(tmp_path), say=lambda _s: None)
    assert os.listdir(tmp_path) == []

"""A ``neardup dedup`` process stopped at any moment (SIGKILL, SIGTERM, SIGINT) never
leaves a partial output; SIGINT/SIGTERM end it in one line with 130/143 and no
leftover folder; the next run removes what a killed run left, and says so."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from neardup.core.leftovers import OWNER_FILE, owned_folder, release
from neardup.testing import plant_near_duplicates, synthetic_documents

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")

OUTPUTS = {"kept.jsonl", "duplicates.jsonl", "clusters.jsonl", "stats.json", "report.html"}


def _corpus(path: Path, n: int) -> int:
    docs = synthetic_documents(n, seed=7, words=150)
    texts, _ = plant_near_duplicates(docs, copies=2, edit_rate=0.05, seed=8)
    with path.open("w", encoding="utf-8") as fh:
        for i, t in enumerate(texts):
            fh.write(json.dumps({"id": i, "text": t}) + "\n")
    return len(texts)


def _start(corpus: Path, out: Path, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "neardup", "dedup", str(corpus), "-o", str(out)]
    return subprocess.Popen(
        [*cmd, "--overwrite", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _handlers_installed(proc: subprocess.Popen[str]) -> None:
    """Wait until the process catches SIGTERM: its own code runs.  Before that (the
    interpreter starting, ~20 ms) signals act as on any Python program."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        with open(f"/proc/{proc.pid}/status", encoding="ascii") as fh:
            caught = next(int(ln.split()[1], 16) for ln in fh if ln.startswith("SigCgt:"))
        if caught & (1 << (signal.SIGTERM - 1)):
            return
        time.sleep(0.002)


def _leftovers(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if p.name.startswith(".neardup-")}


def _check_output(out: Path, n: int) -> None:
    """The output is absent or complete: every file, stats.json whole."""
    if not out.exists():
        return
    assert {p.name for p in out.iterdir()} == OUTPUTS
    stats = json.loads((out / "stats.json").read_text())
    assert stats["documents_in"] == n
    assert len((out / "kept.jsonl").read_text().splitlines()) == stats["documents_out"]


@pytest.mark.slow
def test_runs_stopped_at_random_moments_leave_no_partial_output(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    n = _corpus(corpus, 12000)
    work = tmp_path / "runs"
    work.mkdir()
    out = work / "out"
    first = _start(corpus, out)
    _handlers_installed(first)
    t0 = time.monotonic()
    _, err = first.communicate(timeout=120)
    duration = time.monotonic() - t0
    assert first.returncode == 0, err
    _check_output(out, n)
    shutil.rmtree(out)  # also runs that start with no output at all

    rng = random.Random(20261205)
    sigs = [signal.SIGKILL, signal.SIGTERM, signal.SIGINT] * 4
    rng.shuffle(sigs)
    pending: set[str] = set()  # left by a killed run, not yet removed
    outcomes: list[tuple[str, float, int]] = []
    for k, sig in enumerate(sigs):
        delay = rng.uniform(0.0, duration * 1.2)
        proc = _start(corpus, out, *(["--spill"] if k % 2 else []))
        _handlers_installed(proc)
        time.sleep(delay)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        outcomes.append((sig.name, round(delay, 2), proc.returncode))
        assert "Traceback" not in err and "SystemError" not in err, err
        for name in list(pending):
            if f"removed {work / name} (" in err:
                pending.discard(name)
        _check_output(out, n)
        if proc.returncode == 0:
            pending.clear()  # it swept at its start
            continue
        if sig == signal.SIGKILL:
            assert proc.returncode == -signal.SIGKILL
            pending |= _leftovers(work)
            continue
        code = 130 if sig == signal.SIGINT else 143
        assert proc.returncode == code, (sig, err)
        lines = [ln for ln in err.splitlines() if ln.startswith("neardup: stopped by")]
        assert len(lines) == 1 and sig.name in lines[0], err
        assert _leftovers(work) <= pending, (err, _leftovers(work), pending)

    # The next run removes what the killed runs left, says so, and succeeds.
    left = _leftovers(work)
    final = _start(corpus, out)
    stdout, err = final.communicate(timeout=120)
    assert final.returncode == 0, err
    for name in left:
        assert f"removed {work / name} (" in err, (name, err)
    assert _leftovers(work) == set()
    _check_output(out, n)
    assert stdout.startswith(f"{n} documents"), stdout
    # Every kind of ending happened at least once over the seeded moments.
    assert {rc for _, _, rc in outcomes} >= {-9, 130, 143}, outcomes


def test_a_killed_runs_folders_are_removed_by_the_next_run(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    n = _corpus(corpus, 6000)
    work = tmp_path / "runs"
    work.mkdir()
    proc = _start(corpus, work / "out", "--spill")
    deadline = time.monotonic() + 60
    # Killed once its working folder is claimed (owner file in place): a folder seen
    # between its mkdir and its claim has no owner yet, and the next run leaves
    # such a young unowned folder alone (it may belong to a run just starting).
    while not any(
        name.startswith(".neardup-work-") and (work / name / OWNER_FILE).exists()
        for name in _leftovers(work)
    ):
        assert proc.poll() is None and time.monotonic() < deadline, "no working folder seen"
        time.sleep(0.002)
    proc.kill()
    proc.communicate(timeout=60)
    left = _leftovers(work)
    assert {name.rsplit("-", 1)[0] for name in left} == {".neardup-tmp", ".neardup-work"}, left
    r = subprocess.run(
        [sys.executable, "-m", "neardup", "dedup", str(corpus), "-o", str(work / "out")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    for name in left:
        line = next(ln for ln in r.stderr.splitlines() if str(work / name) in ln)
        assert line.startswith(f"neardup: removed {work / name} ("), line
        assert f"left by an earlier run that did not finish (pid {proc.pid}, started " in line
    assert _leftovers(work) == set()
    _check_output(work / "out", n)


def test_a_live_runs_folder_is_never_removed_and_an_unowned_one_is_named(
    tmp_path: Path,
) -> None:
    corpus = tmp_path / "corpus.jsonl"
    n = _corpus(tmp_path / "corpus.jsonl", 200)
    # This test process owns the folder (its owner file stays locked): a live run.
    live = owned_folder(".neardup-work-", str(tmp_path), "a live run's folder")
    unowned = tmp_path / ".neardup-tmp-legacy"
    unowned.mkdir()
    (unowned / "kept.jsonl").write_text("x" * 1000)
    old = time.time() - 3600
    os.utime(unowned, (old, old))
    try:
        r = subprocess.run(
            [sys.executable, "-m", "neardup", "dedup", str(corpus), "-o", str(tmp_path / "o")],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith(f"{n} documents")
        assert os.path.isfile(os.path.join(live, OWNER_FILE))
        assert f"left {unowned} (1.0 kB): it has no owner record" in r.stderr, r.stderr
        assert unowned.exists() and live not in r.stderr
        assert not (tmp_path / "o" / OWNER_FILE).exists()
    finally:
        release(live)
    assert not os.path.exists(live)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_the_exit_codes_of_a_stop_are_documented(sig: signal.Signals) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert f"{128 + sig} stopped by {sig.name}" in readme


def test_ctrl_c_while_the_kernels_compile_ends_every_process(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    _corpus(corpus, 100)
    # A fresh kernel cache: this run compiles first, in worker processes.
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "neardup", "dedup", str(corpus), "-o", str(tmp_path / "o")]
    proc = subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stderr is not None
    first = proc.stderr.readline()
    assert "compiling" in first, first
    time.sleep(1.0)  # the workers are compiling
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
    # Workers left behind would hold the pipes open: communicate would time out.
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the left workers are in its group
        raise
    assert proc.returncode == 130, err
    assert "neardup: stopped by SIGINT; no output was changed" in err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert not (tmp_path / "o").exists()

"""Temporary folders a run owns, their removal on SIGINT/SIGTERM, and the ones dead
runs left behind.

A batch run writes into ``.neardup-tmp-*`` (its outputs before the final rename) and
``.neardup-work-*`` (out-of-core working files) beside its output, and renames a
replaced output to ``.neardup-old-*`` before removing it.  Each such folder holds an
owner file, ``.neardup-owner``, that the run keeps locked (``flock``) for as long as
the folder is its own; the lock ends with the process however it ends (``kill -9``
included), so a folder whose owner file can be locked belongs to no running process.

* :func:`owned_folder` creates such a folder, :func:`release` removes it,
  :func:`disown` gives it up (before it is renamed into place).
* :func:`sweep` removes, from one parent folder, the folders of runs that ended,
  and says so on stderr (one line each: the path and its size).  It never removes
  a folder whose owner file is locked (a live run), nor one whose owner ran on
  another host; folders with no owner file (made by an older neardup) are only
  mentioned, once they are a minute old, unless empty (a run killed while removing
  one: the owner file goes last), which are removed.  A folder is created as
  ``.neardup-claim-*``, claimed there, and only then renamed to its working name, so
  a working folder always has its owner file; a claim folder a killed run left
  (empty but for a half-written owner file) is removed once a minute old.
* :func:`install_signal_handlers` (the ``neardup dedup`` command) makes SIGINT and
  SIGTERM remove the folders this process owns, print one line, and end the
  process with status 130 or 143, also while a compiled kernel runs.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType

from neardup.core._posix import file_locks

__all__ = [
    "CLAIM_PREFIX",
    "OWNER_FILE",
    "PREFIXES",
    "adopt",
    "critical",
    "disown",
    "handlers_installed",
    "install_signal_handlers",
    "note_written",
    "owned_folder",
    "release",
    "sweep",
]

OWNER_FILE = ".neardup-owner"
PREFIXES = (".neardup-tmp-", ".neardup-work-", ".neardup-old-")
#: Where :func:`owned_folder` creates a folder before it has an owner file.
CLAIM_PREFIX = ".neardup-claim-"
# A claim folder with no owner file may be one another run is creating right now.
_UNOWNED_GRACE_S = 60.0
_NAME_ATTEMPTS = 100

# folder -> (fd of its locked owner file, what it is, for the exit message)
_held: dict[str, tuple[int, str]] = {}
_critical_depth = 0
_pending: list[int] = []
_written: list[str] = []


@contextlib.contextmanager
def critical() -> Iterator[None]:
    """Hold SIGINT/SIGTERM (with :func:`install_signal_handlers`) until the block ends.

    For steps that must not be cut in two: creating a folder and its owner file,
    the two renames that put an output in place.  A signal that came meanwhile is
    acted on when the block ends."""
    global _critical_depth
    _critical_depth += 1
    try:
        yield
    finally:
        _critical_depth -= 1
        if _critical_depth == 0 and _pending:
            _stop(_pending[0])


def _hostname() -> str:
    """This machine's name, as :func:`socket.gethostname` gives it."""
    # os.uname is the same system call; socket and secrets are not imported at the
    # start of every run for one name and one random suffix.
    uname = getattr(os, "uname", None)
    if uname is not None:
        return str(uname().nodename)
    import socket  # pragma: no cover - not POSIX

    return socket.gethostname()  # pragma: no cover


def _owner_record() -> dict[str, object]:
    return {
        "pid": os.getpid(),
        "host": _hostname(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "argv": sys.argv[:8],
    }


def _claim(path: str, what: str) -> None:
    # Locked under a temporary name, then renamed: a sweeper only ever sees an
    # owner file that is already locked.
    new = os.path.join(path, OWNER_FILE + ".new")
    fd = os.open(new, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    fcntl = file_locks()
    try:
        if fcntl is not None:  # else no lock: sweep() then removes nothing
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, json.dumps(_owner_record()).encode() + b"\n")
        os.rename(new, os.path.join(path, OWNER_FILE))
    except BaseException:
        os.close(fd)
        raise
    _held[path] = (fd, what)


def owned_folder(prefix: str, parent: str, what: str) -> str:
    """A new folder ``parent/<prefix>XXXX`` locked as this process's own.

    The folder is made as ``parent/.neardup-claim-XXXX``, its owner file locked
    there, and then renamed to its working name: no process ever sees a working
    folder without its owner, and a run killed half-way leaves only an empty claim
    folder that :func:`sweep` removes.  ``what`` names the folder in the message
    printed if a signal ends the run (``{path}`` in it is replaced by the folder's
    path).  Raises OSError as :func:`tempfile.mkdtemp` does."""
    with critical():
        claim = tempfile.mkdtemp(prefix=CLAIM_PREFIX, dir=parent)
        try:
            _claim(claim, what)
            path = _rename_claimed(claim, prefix, parent)
        except BaseException:
            release(claim)
            raise
        fd, _what = _held.pop(claim)
        _held[path] = (fd, what.replace("{path}", path))
    return path


def _rename_claimed(claim: str, prefix: str, parent: str) -> str:
    suffix = os.path.basename(claim)[len(CLAIM_PREFIX) :]
    for attempt in range(_NAME_ATTEMPTS):
        path = os.path.join(parent, prefix + (suffix if attempt == 0 else os.urandom(6).hex()))
        if os.path.lexists(path):
            continue
        try:
            # POSIX rename replaces an *empty* directory: lexists() above and the
            # owner file every working folder has keep that from happening to a
            # folder that is in use; ENOTEMPTY/EEXIST mean another one took the name.
            os.rename(claim, path)
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                continue
            raise
        return path
    raise FileExistsError(errno.EEXIST, f"no free name for a {prefix}* folder", parent)


def adopt(path: str, what: str) -> None:
    """Lock an existing folder (a replaced output renamed aside) as this process's own;
    best effort: a folder that cannot take an owner file is left unowned."""
    with contextlib.suppress(OSError):
        _claim(path, what)


def note_written(output: str) -> None:
    """Record that ``output`` is complete and in place (for the exit message)."""
    _written.append(output)


def disown(path: str) -> None:
    """Give up ``path`` without removing it: its owner file is deleted (so it does
    not end up in a finished output) and the lock released."""
    held = _held.pop(path, None)
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(path, OWNER_FILE))
    if held is not None:
        os.close(held[0])


def release(path: str) -> None:
    """Remove the folder ``path`` (if it is there) and give it up."""
    with critical():
        _remove(path)
        held = _held.pop(path, None)
        if held is not None:
            os.close(held[0])


def _remove(path: str) -> None:
    # The owner file goes last: a process killed half-way through leaves a folder
    # that still names its (now dead) owner, which the next sweep removes, rather
    # than an unowned one it may only mention.  A writer thread may add a file
    # while the tree is being removed: try again.
    if os.path.islink(path) or not os.path.isdir(path):
        with contextlib.suppress(OSError):
            os.unlink(path)
        return
    for _ in range(3):
        try:
            names = os.listdir(path)
        except FileNotFoundError:
            return
        except OSError:
            names = []
        for name in names:
            if name == OWNER_FILE:
                continue
            entry = os.path.join(path, name)
            if os.path.isdir(entry) and not os.path.islink(entry):
                shutil.rmtree(entry, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry)
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(path, OWNER_FILE))
        with contextlib.suppress(OSError):
            os.rmdir(path)
        if not os.path.lexists(path):
            return
    shutil.rmtree(path, ignore_errors=True)


def _size(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _human(n: int) -> str:
    size = float(n)
    for unit in ("bytes", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{n} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} bytes"  # pragma: no cover - the loop always returns


def _say(line: str) -> None:
    # os.write, not print: this may run in a signal handler that interrupted a print.
    with contextlib.suppress(OSError):
        os.write(2, (line.rstrip("\n") + "\n").encode("utf-8", "replace"))


def sweep(parent: str, say: Callable[[str], None] = _say) -> list[str]:
    """Remove the ``.neardup-tmp-*``/``.neardup-work-*``/``.neardup-old-*`` folders in
    ``parent`` whose owner process has ended; return their paths.

    Each removal, and each folder left because it has no owner file, is one line
    through ``say`` (stderr by default).  Folders of live runs are not touched."""
    try:
        names = sorted(os.listdir(parent))
    except OSError:
        return []
    removed: list[str] = []
    here = _hostname()
    fcntl = file_locks()
    for name in names:
        if not name.startswith((*PREFIXES, CLAIM_PREFIX)):
            continue
        path = os.path.join(parent, name)
        if path in _held or not os.path.isdir(path) or os.path.islink(path):
            continue
        try:
            fd = os.open(os.path.join(path, OWNER_FILE), os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            if name.startswith(CLAIM_PREFIX):
                removed.extend(_stale_claim(path, say))
            else:
                removed.extend(_unowned(path, say))
            continue
        except OSError:
            continue
        try:
            if fcntl is None:
                say(
                    f"neardup: left {path} ({_human(_size(path))}): without POSIX file "
                    "locks this platform cannot tell whether its run is alive; delete it "
                    "if no neardup run is using it"
                )
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    continue  # a live run's folder
                raise
            owner = _read_owner(fd)
            if owner.get("host", here) != here:
                say(
                    f"neardup: left {path} ({_human(_size(path))}): its run was on host "
                    f"{owner.get('host')}, which this run cannot check; delete it if that "
                    "run has ended"
                )
                continue
            size = _size(path)
            _remove(path)
            if not os.path.lexists(path):
                removed.append(path)
                say(
                    f"neardup: removed {path} ({_human(size)}), left by an earlier run that "
                    f"did not finish (pid {owner.get('pid', '?')}, started "
                    f"{owner.get('started', '?')})"
                )
        except OSError:
            continue
        finally:
            os.close(fd)
    return removed


def _read_owner(fd: int) -> dict[str, object]:
    try:
        data = os.pread(fd, 4096, 0)
        rec = json.loads(data)
    except (OSError, ValueError):
        return {}
    return rec if isinstance(rec, dict) else {}


def _age(path: str) -> float | None:
    try:
        return time.time() - os.stat(path).st_mtime
    except OSError:
        return None


def _stale_claim(path: str, say: Callable[[str], None]) -> list[str]:
    """Remove a claim folder a run was killed in before it locked its owner file.

    Such a folder holds at most a half-written ``.neardup-owner.new``: no data."""
    return _remove_if_bare(path, {OWNER_FILE + ".new"}, say) if _old(path) else []


def _unowned(path: str, say: Callable[[str], None]) -> list[str]:
    """An old folder without owner file: removed when empty (a run killed between
    deleting its owner file and its folder), else only mentioned."""
    if not _old(path):
        return []
    removed = _remove_if_bare(path, set(), say)
    if not removed:
        say(
            f"neardup: left {path} ({_human(_size(path))}): it has no owner record (made "
            "by an older neardup?); delete it if no neardup run is using it"
        )
    return removed


def _old(path: str) -> bool:
    # Younger folders may be being claimed or cleaned up this instant.
    age = _age(path)
    return age is not None and age >= _UNOWNED_GRACE_S


def _remove_if_bare(path: str, allowed: set[str], say: Callable[[str], None]) -> list[str]:
    """Remove the folder ``path`` if it holds nothing but ``allowed`` names (no data
    of any run); ``[path]`` if it is gone.  ``rmdir`` refuses a folder that gained
    an entry meanwhile, so nothing written by a live run is ever deleted."""
    with contextlib.suppress(OSError):
        names = set(os.listdir(path))
        if names <= allowed:
            for name in names:
                os.unlink(os.path.join(path, name))
            os.rmdir(path)
    if os.path.lexists(path):
        return []
    say(f"neardup: removed {path}, an empty folder of an earlier run that was stopped")
    return [path]


_SIGNAL_NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}


def _stop(signum: int) -> None:
    """Remove the folders this process owns, say so in one line, end with 128+signum."""
    global _critical_depth
    _critical_depth += 1  # a second signal meanwhile waits, and is never acted on
    gone = []
    for path, (_fd, what) in list(_held.items()):
        _remove(path)
        gone.append(what)
    _end_children()
    name = _SIGNAL_NAMES.get(signal.Signals(signum), f"signal {signum}")
    done = f"; removed {', '.join(gone)}" if gone else ""
    if _written:
        state = f"{', '.join(_written)} had been written completely before it"
    else:
        state = "no output was changed"
    _say(f"neardup: stopped by {name}{done}; {state}")
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    os._exit(128 + signum)


def _end_children() -> None:
    """Kill this process's multiprocessing children (kernel-compiling workers): they
    would outlive it, holding its output pipes."""
    mp = sys.modules.get("multiprocessing")
    if mp is None:
        return
    with contextlib.suppress(Exception):
        for child in mp.active_children():
            child.kill()


def handlers_installed() -> bool:
    """Whether :func:`install_signal_handlers` ran in this process."""
    return signal.getsignal(signal.SIGINT) is _on_signal


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    if _critical_depth:
        _pending.append(signum)
        return
    _stop(signum)


def install_signal_handlers() -> None:
    """Make SIGINT and SIGTERM end this process cleanly (main thread only).

    The handler removes the folders this process owns and ends the process at once
    (exit 130 for SIGINT, 143 for SIGTERM) without unwinding the stack: an exception
    raised while a compiled kernel's dispatcher runs came back as ``SystemError``.
    Inside :func:`critical` the signal waits for the block to end."""
    if threading.current_thread() is not threading.main_thread():
        return  # signal.signal works in the main thread only
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _on_signal)

"""An output folder, committed whole: written into a temporary folder beside it,
fsynced, and renamed into place, so a reader sees the old or the new complete folder.

Used by every job that writes a folder (dedup, the vector job, audit and split, the
Ray engine).  A signal under the command line waits while the folder is swapped
(:func:`neardup.core.leftovers.critical`); a run killed outright leaves its
temporary folder with a locked owner file for the next run to sweep.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from neardup.core._errors import NeardupIOError
from neardup.core._posix import peak_rss_bytes
from neardup.core.leftovers import OWNER_FILE, adopt, critical, disown, note_written, release

__all__ = ["commit_output", "finish_output", "write_json", "writing"]


def _fsync_tree(path: str) -> None:
    for name in os.listdir(path):
        full = os.path.join(path, name)
        if name == OWNER_FILE:
            continue  # removed before the rename: never part of an output
        if os.path.isfile(full):
            fd = os.open(full, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def commit_output(tmp: str, output: str) -> None:
    """Put the complete folder ``tmp`` in place as ``output`` (replacing it).

    A signal (SIGINT/SIGTERM under the CLI) waits while the output is being
    swapped, so ``output`` is always the old or the new complete folder."""
    with writing(output):
        _swap(tmp, output)


def _swap(tmp: str, output: str) -> None:
    _fsync_tree(tmp)
    parent = os.path.dirname(os.path.abspath(output))
    old = None
    with critical():
        disown(tmp)
        _fsync_dir(tmp)  # the owner file's removal
        if os.path.exists(output):
            old = tempfile.mkdtemp(prefix=".neardup-old-", dir=parent)
            os.rmdir(old)
            os.rename(output, old)
            if os.path.isdir(old) and not os.path.islink(old):
                adopt(old, f"the replaced output {old}")
        os.rename(tmp, output)
        note_written(output)
    _fsync_dir(parent)
    if old is not None:
        if os.path.isdir(old) and not os.path.islink(old):
            release(old)
        else:
            # An output that was a file (or a link) is replaced like a folder is.
            with contextlib.suppress(OSError):
                os.unlink(old)


@contextlib.contextmanager
def writing(path: str, where_else: str | None = None) -> Iterator[None]:
    """Raise an OSError of the block as :class:`NeardupIOError` naming ``path`` (or the
    file the error names): a full disk is exit 4 with its fix, not a traceback."""
    try:
        yield
    except NeardupIOError:
        raise
    except OSError as exc:
        raise NeardupIOError(exc.filename or path, exc, where_else) from exc


def write_json(path: str, doc: Any) -> None:
    """``doc`` as the JSON file ``path`` of a run's outputs (indented, keys sorted)."""
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2, sort_keys=True)
        fh.write("\n")


def finish_output(tmp: str, output: str, stats: dict[str, Any], t_start: float) -> None:
    stats["timings_s"]["total"] = round(time.perf_counter() - t_start, 6)
    stats["peak_memory_bytes"] = peak_rss_bytes()
    path = os.path.join(tmp, "stats.json")
    with writing(path):
        write_json(path, stats)
    commit_output(tmp, output)

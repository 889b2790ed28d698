"""An output folder, committed whole: written into a temporary folder beside it,
fsynced, and renamed into place, so a reader sees the old or the new complete folder.

Used by every job that writes a folder (dedup, the vector job, audit and split, the
Ray engine).  A signal under the command line waits while the folder is swapped
(:func:`neardup.core.leftovers.critical`); a run killed outright leaves its
temporary folder with a locked owner file for the next run to sweep.

Before a run writes anything, :func:`prepare_output` refuses an existing output
(unless overwriting) or one whose replacement would delete an input
(:func:`check_output`), and makes the temporary folder; :func:`check_writable`
checks that a folder can be made where a run will want one.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from typing import Any

from neardup.core._errors import InvalidConfig, NeardupIOError
from neardup.core._posix import peak_rss_bytes
from neardup.core.leftovers import (
    OWNER_FILE,
    adopt,
    critical,
    disown,
    note_written,
    owned_folder,
    release,
    sweep,
)
from neardup.core.persist import fsync_dir

__all__ = [
    "ClusterLines",
    "check_output",
    "check_writable",
    "commit_output",
    "finish_output",
    "prepare_output",
    "staged_output",
    "write_clusters",
    "write_json",
    "writing",
]


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


def _local_root(path: str) -> str | None:
    """The local file or folder an input names (a glob: its fixed leading folder);
    None for a URL."""
    if "://" in path:
        return None
    fixed: list[str] = []
    for part in path.split(os.sep):
        if any(c in part for c in "*?["):
            break
        fixed.append(part)
    root = os.sep.join(fixed) or "."
    return os.path.realpath(root)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def check_output(output: str, protect: Sequence[str] = ()) -> None:
    """Refuse an ``output`` whose replacement would delete or move what a run reads.

    ``--overwrite`` replaces the whole output folder, so it must not be, or
    contain, an input (``protect``: inputs, indexes read), nor hold the working
    folder (``-o .``).  Raises :class:`InvalidConfig` naming the path; called
    before anything is read or written.
    """
    out = os.path.realpath(output)
    for p in protect:
        root = _local_root(p)
        if root is not None and _inside(root, out):
            raise InvalidConfig(
                "output",
                output,
                f"is or contains the input {p!r}: replacing it would delete the input",
                "write the outputs to a folder that holds no input",
            )
    if _inside(os.path.realpath(os.getcwd()), out):
        raise InvalidConfig(
            "output",
            output,
            "is the current folder or one of its parents: it cannot be replaced",
            "write the outputs to a new subfolder, for example -o out/",
        )


def check_writable(path: str) -> None:
    """Raise :class:`NeardupIOError` naming ``path`` unless a folder can be created
    there (its nearest existing ancestor is a writable folder) or already is one.

    Run before a job starts, so that an unwritable ``--save-index`` or
    ``--work-dir`` fails in a second, not after the whole run."""
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        raise NeardupIOError(path, OSError(errno.ENOTDIR, f"{probe} is not a folder"))
    if not os.access(probe, os.W_OK | os.X_OK):
        raise NeardupIOError(path, OSError(errno.EACCES, f"{probe} is not writable"))


def prepare_output(output: str, overwrite: bool, protect: Sequence[str] = ()) -> str:
    """Refuse an existing ``output`` unless ``overwrite``, or one that would delete
    an input (:func:`check_output`); return a fresh temp folder beside it."""
    check_output(output, protect)
    if os.path.exists(output) and not overwrite:
        raise InvalidConfig(
            "output", output, "already exists", "choose a new folder or pass --overwrite"
        )
    parent = os.path.dirname(os.path.abspath(output)) or "."
    try:
        os.makedirs(parent, exist_ok=True)
        sweep(parent)
        tmp = owned_folder(
            ".neardup-tmp-", parent, f"the unfinished output for {output} ({{path}})"
        )
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes 0700; the result is an ordinary folder
        return tmp
    except OSError as exc:
        raise NeardupIOError(parent, exc) from exc


@contextlib.contextmanager
def staged_output(
    output: str | None, overwrite: bool, protect: Sequence[str] = ()
) -> Iterator[str | None]:
    """The temporary folder :func:`prepare_output` makes for ``output`` (None when
    ``output`` is None: a run that writes nothing), removed when the block ends.

    The block puts the folder in place with :func:`commit_output` (or
    :func:`finish_output`); a committed folder has moved, so what is removed is
    only an unfinished one, left by an error or an interruption."""
    tmp = None if output is None else prepare_output(output, overwrite, protect)
    try:
        yield tmp
    finally:
        if tmp is not None:
            release(tmp)


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
        fsync_dir(tmp)  # the owner file's removal
        if os.path.exists(output):
            old = tempfile.mkdtemp(prefix=".neardup-old-", dir=parent)
            os.rmdir(old)
            os.rename(output, old)
            if os.path.isdir(old) and not os.path.islink(old):
                adopt(old, f"the replaced output {old}")
        os.rename(tmp, output)
        note_written(output)
    fsync_dir(parent)
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


class ClusterLines:
    """``clusters.jsonl`` lines of text and vector clusters alike.

    Each line is exactly ``json.dumps(rec, ensure_ascii=False, sort_keys=True)`` of
    ``{"cluster", "representative", "members", "edges"}`` with records named by
    their ids, and each edge ``{"a", "b", "band", "estimate", <score>, "method"}``
    where ``<score>`` is ``jaccard`` for text and the metric's name for vectors.
    The line is assembled from pieces (each id encoded once) instead of encoding
    the nested dicts, which matters at millions of clusters.

    >>> from neardup.graph.cluster import Cluster, Edge
    >>> e = Edge(a=0, b=1, score=0.8, estimate=0.75, band=3)
    >>> c = Cluster(id=0, representative=0, members=(0, 1), edges=(e,))
    >>> line = ClusterLines(["x", "y"]).line(0, c)
    >>> line == json.dumps(json.loads(line), ensure_ascii=False, sort_keys=True)
    True
    >>> json.loads(line)["edges"][0]["jaccard"]
    0.8
    """

    def __init__(self, ids: Sequence[Any]) -> None:
        self._ids = ids
        self._encode = json.JSONEncoder(ensure_ascii=False, sort_keys=True).encode
        self._memo: dict[Any, str] = {}
        self._formats: dict[str, str] = {}
        self._strs: dict[str, str] = {}
        self._filled: dict[tuple[Any, ...], str] = {}

    def _value(self, v: Any) -> str:
        t = type(v)
        if t is str:  # most ids: a memo keyed by the string itself, no tuple
            got_str = self._strs.get(v)
            if got_str is None:
                got_str = self._strs[v] = self._encode(v)
            return got_str
        if t is int:
            return str(v)
        if t is float and math.isfinite(v):
            return repr(v)  # json spells finite floats with float.__repr__
        if v is None:
            return "null"
        key = (t, v)
        got = self._memo.get(key)
        if got is None:
            got = self._memo[key] = self._encode(v)
        return got

    def _edge_format(self, metric: str) -> str:
        """The ``str.format`` template of an edge whose score is named ``metric``:
        the keys encoded and sorted once, not once per edge."""
        got = self._formats.get(metric)
        if got is None:
            slot = {"a": "a", "b": "b", "band": "band", "estimate": "estimate", "method": "method"}
            slot[metric] = "score"
            parts = [
                self._encode(k).replace("{", "{{").replace("}", "}}") + ": {" + slot[k] + "}"
                for k in sorted(slot)
            ]
            got = self._formats[metric] = "{{" + ", ".join(parts) + "}}"
        return got

    def _edge(self, e: Any) -> str:
        ids, val = self._ids, self._value
        if e.band is None:
            # Exact copies (no band): their other fields take a handful of values,
            # so each combination's template is filled once and then only a, b.
            # Keyed by the encoded values (1 == 1.0 == True, 0.0 == -0.0).
            estimate, score = val(e.estimate), val(e.score)
            key = (e.metric, estimate, score, e.method)
            tpl = self._filled.get(key)
            if tpl is None:
                # NUL never occurs in encoded JSON: it marks where a and b go.
                filled = self._edge_format(e.metric).format(
                    a="\0a",
                    b="\0b",
                    band="null",
                    estimate=estimate,
                    score=score,
                    method=val(e.method),
                )
                braced = filled.replace("{", "{{").replace("}", "}}")
                tpl = self._filled[key] = braced.replace("\0a", "{a}").replace("\0b", "{b}")
            return tpl.format(a=val(ids[e.a]), b=val(ids[e.b]))
        return self._edge_format(e.metric).format(
            a=val(ids[e.a]),
            b=val(ids[e.b]),
            band=val(e.band),
            estimate=val(e.estimate),
            score=val(e.score),
            method=val(e.method),
        )

    def line(self, new_id: int, c: Any) -> str:
        """The line of cluster ``c`` (a text or vector cluster) numbered ``new_id``."""
        ids, val = self._ids, self._value
        edges = ", ".join([self._edge(e) for e in c.edges])
        members = ", ".join([val(ids[m]) for m in c.members])
        return (
            f'{{"cluster": {new_id}, "edges": [{edges}], "members": [{members}], '
            f'"representative": {val(ids[c.representative])}}}'
        )


def write_clusters(
    tmp: str, clusters: Sequence[Any], ids: Sequence[Any], numbers: Sequence[int] | None = None
) -> None:
    """Write ``tmp/clusters.jsonl``: cluster ``k`` is numbered ``numbers[k]`` (its
    position when ``numbers`` is None)."""
    lines = ClusterLines(ids)
    path = os.path.join(tmp, "clusters.jsonl")
    with writing(path), open(path, "w", encoding="utf-8") as fh:
        for lo in range(0, len(clusters), 4096):
            chunk = clusters[lo : lo + 4096]
            fh.write(
                "".join(
                    lines.line(lo + k if numbers is None else numbers[lo + k], c) + "\n"
                    for k, c in enumerate(chunk)
                )
            )

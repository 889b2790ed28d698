"""Which files an input names, what format each is, which split it stands for
(:func:`split_inputs`), and their bytes decompressed.

Used by every reader (:mod:`neardup.io.corpus`), the id detection
(:mod:`neardup.io._ids`) and the vector job: one place that knows the suffixes
(``.jsonl``/``.ndjson``/``.json``, ``.parquet``, ``.csv``, ``.txt``, saved
datasets; ``.gz`` and ``.zst`` compression).

>>> strip_compression("shard-0001.JSONL.gz")
('shard-0001.jsonl', '.gz')
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import json
import os
from collections.abc import Iterator, Sequence
from typing import IO, Any

from neardup.core._errors import InputError, InvalidConfig, NeardupIOError

__all__ = [
    "JSONL_SUFFIXES",
    "decompressing",
    "detect_format",
    "iter_lines",
    "open_binary",
    "resolve_inputs",
    "split_inputs",
    "split_name",
    "strip_compression",
]

JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")


def strip_compression(name: str) -> tuple[str, str | None]:
    lower = name.lower()
    for ext in (".gz", ".zst"):
        if lower.endswith(ext):
            return lower[: -len(ext)], ext
    return lower, None


_DATA_SUFFIXES = (*JSONL_SUFFIXES, ".parquet", ".csv")


def _data_file(name: str) -> bool:
    base, _ = strip_compression(name)
    return base.endswith(_DATA_SUFFIXES)


def resolve_inputs(paths: Sequence[str]) -> list[str]:
    """The files and saved datasets that ``paths`` name, in a stable order.

    A folder of data files (JSONL, Parquet, CSV; compressed or not) stands for
    those files, sorted by path; a saved ``DatasetDict`` (``dataset_dict.json``)
    for every split's folder, in the order it lists them; anything else as it
    is.  A path that does not exist (and is not a URL or a glob) is a
    :class:`NeardupIOError` naming it, before anything is read.

    >>> resolve_inputs(["data/sample.jsonl"])  # doctest: +SKIP
    ['data/sample.jsonl']
    """
    out: list[str] = []
    for path in paths:
        if "://" in path or any(c in path for c in "*?["):
            out.append(path)
            continue
        if not os.path.exists(path):
            raise NeardupIOError(path, FileNotFoundError(errno.ENOENT, "does not exist"))
        if not os.path.isdir(path):
            out.append(path)
            continue
        splits = _dataset_dict_splits(path)
        if splits is not None:
            out.extend(os.path.join(path, name) for name in splits)
            continue
        if detect_format(path, expand=True) != "files":
            out.append(path)
            continue
        try:
            out.extend(
                sorted(
                    os.path.join(d, f)
                    for d, _dirs, fs in os.walk(path)
                    for f in fs
                    if _data_file(f)
                )
            )
        except OSError as exc:
            raise NeardupIOError(path, exc) from exc
    return out


def _dataset_dict_splits(path: str) -> list[str] | None:
    """The split names a saved ``DatasetDict`` folder lists, in its order; None
    when ``path`` is not one."""
    listing = os.path.join(path, "dataset_dict.json")
    if not os.path.isdir(path) or not os.path.exists(listing):
        return None
    try:
        with open(listing, encoding="utf-8") as fh:
            return [str(name) for name in json.load(fh)["splits"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(
            listing, None, f"not a readable DatasetDict listing ({exc})",
            "save the dataset again with DatasetDict.save_to_disk",
        ) from exc


def split_name(path: str) -> str:
    """The split an input stands for by its name: a folder's name, or a file's name
    without its compression and format suffixes.

    >>> split_name("data/test.jsonl.gz"), split_name("out/valid.parquet"), split_name("hf/train/")
    ('test', 'valid', 'train')
    """
    base = os.path.basename(os.path.normpath(path))
    if os.path.isdir(path):
        return base
    plain, comp = strip_compression(base)
    base = base[: len(plain)] if comp else base  # keep the name's case
    for suffix in (*_DATA_SUFFIXES, ".txt"):
        if plain.endswith(suffix) and len(plain) > len(suffix):
            return base[: -len(suffix)]
    return base


def split_inputs(
    paths: Sequence[str], named: Sequence[tuple[str, str]] = ()
) -> tuple[list[str], list[str | None] | None]:
    """The files :func:`resolve_inputs` reads for ``paths`` and the ``named``
    ``(split, path)`` pairs, with the split each file's records belong to.

    The rule: an *input* is a path as given, except that a saved ``DatasetDict``
    folder stands for each of its splits.  When ``named`` is not empty or there are
    two or more inputs, every input names a split: the name given with it in
    ``named``, else a DatasetDict split's own name, else :func:`split_name` of the
    path (``train.jsonl`` → ``train``, a folder → its name); every file of an
    input (a folder's data files) gets its split.  With one input and nothing
    named, the splits are None (the records have none).  A path both in ``paths``
    and ``named`` is read once, with its given name; ``named`` paths not in
    ``paths`` come after them.

    >>> split_inputs(["a/train.jsonl", "a/test.jsonl"])  # doctest: +SKIP
    (['a/train.jsonl', 'a/test.jsonl'], ['train', 'test'])
    """
    given: dict[str, str] = {}
    for name, p in named:
        key = os.path.normpath(p)
        if not name or given.get(key, name) != name:
            raise InvalidConfig(
                "split", f"{name}={p}", "has an empty name, or names a path named already",
                "name each path once, with a non-empty name (--split NAME=PATH)",
            )
        given[key] = name
    listed = {os.path.normpath(p) for p in paths}
    entries: list[tuple[str | None, str]] = [(given.get(os.path.normpath(p)), p) for p in paths]
    entries += [(name, p) for p, name in given.items() if p not in listed]
    inputs: list[tuple[str | None, str]] = []
    for given_name, p in entries:
        dd = None if "://" in p else _dataset_dict_splits(p)
        if dd is None:
            inputs.append((given_name, p))
        else:
            inputs += [(given_name or s, os.path.join(p, s)) for s in dd]
    use = bool(named) or len(inputs) >= 2
    files: list[str] = []
    splits: list[str | None] = []
    for given_name, p in inputs:
        got = resolve_inputs([p])
        files += got
        splits += [(given_name or split_name(p)) if use else None] * len(got)
    return files, splits if use else None


def detect_format(path: str, *, expand: bool = False) -> str:
    """The format family of ``path`` (see the module docs), or InputError.

    With ``expand``, a folder of data files is ``"files"`` (see
    :func:`resolve_inputs`) instead of an error."""
    if os.path.isdir(path):
        if os.path.exists(os.path.join(path, "dataset_info.json")) or os.path.exists(
            os.path.join(path, "state.json")
        ):
            return "hf"
        data = False
        for _root, _dirs, files in os.walk(path):
            if any(f.endswith(".txt") for f in files):
                return "txt"
            data = data or any(_data_file(f) for f in files)
        if data and expand:
            return "files"
        raise InputError(
            path,
            None,
            "a folder with no .txt file, data file or saved dataset that neardup reads"
            if not data
            else "a folder of data files (pass the folder to the command line, or its files)",
            "point at .txt files, a Dataset.save_to_disk folder, or data files",
        )
    base, _ = strip_compression(os.path.basename(path))
    if base.endswith(".txt"):
        return "txt"
    if base.endswith(JSONL_SUFFIXES):
        return "jsonl"
    if base.endswith(".parquet"):
        return "parquet"
    if base.endswith(".csv"):
        return "csv"
    if not os.path.exists(path) and "://" not in path:
        raise InputError(path, None, "does not exist", "check the path")
    raise InputError(
        path,
        None,
        "unknown input format",
        "use .jsonl/.json/.ndjson (optionally .gz/.zst), .parquet, .csv, "
        "a folder of .txt files, or a saved Hugging Face dataset",
    )


class _ZstdReader(io.RawIOBase):
    """A zstd stream, frame after frame, that tells a complete stream from a cut
    or damaged one: reading ends with ``EOFError`` when the file ends inside a
    frame, and turns the decompressor's errors into ``EOFError`` too (zstandard's
    own stream reader returns a truncated stream as if it had ended)."""

    def __init__(self, fh: IO[bytes], zstd: Any) -> None:
        self._fh, self._zstd = fh, zstd
        self._d = zstd.ZstdDecompressor().decompressobj()
        self._buf = b""
        self._pos = 0
        self._in_frame = False

    def readable(self) -> bool:
        return True

    def _fill(self) -> bool:
        if self._pos >= len(self._buf):
            self._buf, self._pos = b"", 0
        while not self._buf:
            chunk = self._fh.read(1 << 20)
            if not chunk:
                if self._in_frame:
                    raise EOFError("the file ends inside a zstd frame (truncated)")
                return False
            while chunk:
                self._in_frame = True
                try:
                    self._buf += self._d.decompress(chunk)
                except self._zstd.ZstdError as exc:
                    raise EOFError(f"not a zstd stream, or a damaged one: {exc}") from None
                chunk = b""
                if self._d.eof:
                    # A frame ended; what follows is the next frame (or nothing).
                    self._in_frame = False
                    chunk = self._d.unused_data
                    self._d = self._zstd.ZstdDecompressor().decompressobj()
        return True

    def readinto(self, b: Any) -> int:
        if not self._fill():
            return 0
        n = min(len(b), len(self._buf) - self._pos)
        b[:n] = self._buf[self._pos : self._pos + n]
        self._pos += n
        return n

    def close(self) -> None:
        self._fh.close()
        super().close()


def open_binary(path: str) -> IO[bytes]:
    _, comp = strip_compression(path)
    try:
        if comp == ".gz":
            return gzip.open(path, "rb")  # type: ignore[return-value]
        if comp == ".zst":
            try:
                import zstandard
            except ImportError as exc:
                raise InputError(
                    path,
                    None,
                    "reading .zst needs the zstandard package",
                    "pip install 'neardup[io]'",
                ) from exc
            fh = open(path, "rb")  # noqa: SIM115 - closed by the reader
            return io.BufferedReader(_ZstdReader(fh, zstandard), buffer_size=1 << 20)
        return open(path, "rb")
    except OSError as exc:
        raise NeardupIOError(path, exc) from exc


@contextlib.contextmanager
def decompressing(path: str) -> Iterator[None]:
    """Raise an error of reading ``path``'s bytes (from :func:`open_binary`) in the
    block as :class:`InputError`: a truncated or corrupt compressed file is named
    with its fix, not a traceback."""
    try:
        yield
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise InputError(
            path,
            None,
            f"cannot decompress ({exc})",
            "check that the file is complete and not corrupted",
        ) from exc


def iter_lines(path: str) -> Iterator[tuple[int, bytes]]:
    with open_binary(path) as raw, decompressing(path):
        yield from enumerate(raw, start=1)

"""Durable, checksummed, versioned files — never pickle.

Container layout (little-endian):

    b"NEARDUP\\0" | u32 format version | u64 header length | header (UTF-8 JSON)
    | arrays, each 8-byte aligned | 32-byte BLAKE2b digest of everything before it

The header names the content kind, the scheme descriptor and every array's dtype,
shape and offset.  Reading checks the magic, version, lengths and digest before
any array is used, and refuses damaged files with :class:`~neardup.CorruptFile`.
Writing is atomic: a temporary file in the same directory is written and
fsynced, renamed over the target, and the directory is fsynced.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import struct
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.core._errors import CorruptFile, NeardupIOError
from neardup.core._fingerprint import FORMAT_VERSION

__all__ = [
    "atomic_file",
    "atomic_write",
    "fsync_dir",
    "read_container",
    "read_format_file",
    "write_container",
]

MAGIC = b"NEARDUP\x00"
_DIGEST = 32
_ALLOWED_DTYPES = {"<u1", "<u4", "<u8", "<i8", "|b1", "|u1"}


def atomic_write(path: str, payload: bytes) -> None:
    """Write ``payload`` to ``path`` atomically and durably."""
    with atomic_file(path) as tmp, open(tmp, "wb") as fh:
        fh.write(payload)


@contextlib.contextmanager
def atomic_file(path: str, *, suffix: str = "", private: bool = True) -> Iterator[str]:
    """A temporary file beside ``path`` to write; when the block ends without an
    error it is fsynced and renamed over ``path`` and the folder is fsynced, so
    ``path`` is either the old file or the whole new one after a crash.  On an
    error the temporary file is removed; an ``OSError`` becomes
    :class:`~neardup.NeardupIOError` naming ``path``.

    ``private`` files (the default: keys, stores, snapshots) are readable by
    their owner only; others (a user's outputs) get the permissions the umask
    gives any new file.

    >>> import os, tempfile
    >>> target = os.path.join(tempfile.mkdtemp(), "out.bin")
    >>> with atomic_file(target) as tmp, open(tmp, "wb") as fh:
    ...     _ = fh.write(b"data")
    >>> open(target, "rb").read()
    b'data'
    """
    directory = os.path.dirname(os.path.abspath(path))
    try:
        if private:
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=directory)
        else:
            tmp = os.path.join(directory, f".tmp-{secrets.token_hex(8)}{suffix}")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        os.close(fd)
        try:
            yield tmp
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        fsync_dir(directory)
    except OSError as exc:
        raise NeardupIOError(path, exc) from exc


def fsync_dir(directory: str) -> None:
    """Make ``directory``'s entries durable (a file renamed into it, created or
    removed survives a crash once this returns); ``OSError`` is the caller's."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_format_file(
    path: str,
    fmt: str,
    what: str,
    *,
    not_json: str = "not JSON",
    missing: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON object in the file ``path`` whose ``"format"`` is ``fmt``.

    An unreadable file raises :class:`~neardup.NeardupIOError`; a file that is not
    JSON raises :class:`~neardup.CorruptFile` ("``not_json`` (the parser's
    message)"), as does another document ("not ``what`` (format must be ``fmt``)").
    ``missing``: the document of an absent file (None: absence is an error).
    """
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError as exc:
        if missing is None:
            raise NeardupIOError(path, exc) from exc
        doc = missing
    except OSError as exc:
        raise NeardupIOError(path, exc) from exc
    except ValueError as exc:
        raise CorruptFile(path, f"{not_json} ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("format") != fmt:
        raise CorruptFile(path, f"not {what} (format must be {fmt})")
    return doc


def write_container(
    path: str, kind: str, meta: dict[str, Any], arrays: dict[str, npt.NDArray[Any]]
) -> None:
    specs = []
    blobs = []
    offset = 0
    for name, arr in arrays.items():
        a = np.ascontiguousarray(arr)
        dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
        a = a.astype(dt, copy=False)
        raw = a.tobytes()
        pad = (-len(raw)) % 8
        specs.append(
            {
                "name": name,
                "dtype": a.dtype.str,
                "shape": list(a.shape),
                "offset": offset,
                "nbytes": len(raw),
            }
        )
        blobs.append(raw + b"\x00" * pad)
        offset += len(raw) + pad
    header = json.dumps({"kind": kind, "meta": meta, "arrays": specs}, sort_keys=True).encode()
    header += b" " * ((-len(header)) % 8)
    body = MAGIC + struct.pack("<IQ", FORMAT_VERSION, len(header)) + header + b"".join(blobs)
    atomic_write(path, body + hashlib.blake2b(body, digest_size=_DIGEST).digest())


def read_container(path: str, kind: str) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise NeardupIOError(path, exc) from exc
    pre = len(MAGIC) + 12
    if len(data) < pre + _DIGEST or not data.startswith(MAGIC):
        raise CorruptFile(path, "not a neardup file (bad magic or too short)")
    body, digest = data[:-_DIGEST], data[-_DIGEST:]
    if hashlib.blake2b(body, digest_size=_DIGEST).digest() != digest:
        raise CorruptFile(path, "checksum mismatch: the file is damaged or truncated")
    version, hlen = struct.unpack("<IQ", body[len(MAGIC) : pre])
    if version != FORMAT_VERSION:
        raise CorruptFile(
            path, f"format version {version} is not supported (this build reads {FORMAT_VERSION})"
        )
    if pre + hlen > len(body):
        raise CorruptFile(path, "header length past the end of the file")
    try:
        header = json.loads(body[pre : pre + hlen])
    except ValueError as exc:
        raise CorruptFile(path, f"header is not JSON ({exc})") from exc
    if header.get("kind") != kind:
        raise CorruptFile(path, f"holds {header.get('kind')!r}, expected {kind!r}")
    try:
        return header["meta"], _arrays(path, body, pre + hlen, header["arrays"])
    except (KeyError, TypeError, ValueError) as exc:
        # A header edited and re-checksummed: the checksum is no signature.
        raise CorruptFile(path, f"malformed header ({type(exc).__name__}: {exc})") from exc


def _arrays(path: str, body: bytes, base: int, specs: Any) -> dict[str, npt.NDArray[Any]]:
    arrays: dict[str, npt.NDArray[Any]] = {}
    for spec in specs:
        if spec["dtype"] not in _ALLOWED_DTYPES:
            raise CorruptFile(path, f"array {spec['name']!r} has unsupported dtype {spec['dtype']}")
        start = base + int(spec["offset"])
        end = start + int(spec["nbytes"])
        if start < base or end < start or end > len(body):
            raise CorruptFile(path, f"array {spec['name']!r} runs past the end of the file")
        arr = np.frombuffer(body[start:end], dtype=np.dtype(spec["dtype"]))
        arrays[spec["name"]] = arr.reshape(spec["shape"]).copy()
    return arrays

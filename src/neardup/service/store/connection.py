"""The feature store's SQLite plumbing: errors classified, one connection shared by threads."""

from __future__ import annotations

import errno
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from neardup.core._errors import CorruptFile, NeardupIOError

# SQLite result codes of the environment (full disk, permissions, locks, write
# errors): rebuilding the store would fail the same way, so they are not damage.
# Every other code (SQLITE_CORRUPT, SQLITE_NOTADB, ...) and the read errors below
# (a bad sector) say the *file* is damaged: the store is set aside and rebuilt.
_DAMAGE_EXTENDED = {
    sqlite3.SQLITE_IOERR_READ,
    sqlite3.SQLITE_IOERR_SHORT_READ,
    getattr(sqlite3, "SQLITE_IOERR_CORRUPTFS", 8458),
    getattr(sqlite3, "SQLITE_IOERR_DATA", 8202),
}
_ENVIRONMENT_CODES = {
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_PERM,
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_BUSY,
    sqlite3.SQLITE_LOCKED,
    sqlite3.SQLITE_NOMEM,
}


def store_error(path: str, exc: sqlite3.Error, what: str) -> CorruptFile | NeardupIOError:
    """The neardup error for a SQLite error on the store at ``path``.

    :class:`CorruptFile` when SQLite reports damage (or an error it gives no code
    for), :class:`NeardupIOError` when it reports the environment (I/O on write,
    full disk, permissions, locks).
    """
    code = getattr(exc, "sqlite_errorcode", None)
    name = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
    detail = f"{what} ({name}: {exc})"
    if code is not None and code not in _DAMAGE_EXTENDED and code & 0xFF in _ENVIRONMENT_CODES:
        return NeardupIOError(path, OSError(errno.EIO, detail))
    return CorruptFile(path, detail)


class Cursor:
    """A cursor whose every call into SQLite holds the connection's lock."""

    __slots__ = ("_cur", "_lock")

    def __init__(self, cur: sqlite3.Cursor, lock: threading.RLock) -> None:
        self._cur, self._lock = cur, lock

    @property
    def rowcount(self) -> int:
        return self._cur.rowcount

    def fetchone(self) -> Any:
        with self._lock:
            return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        with self._lock:
            return self._cur.fetchall()

    def __iter__(self) -> Iterator[Any]:
        while True:
            with self._lock:
                rows = self._cur.fetchmany(256)
            if not rows:
                return
            yield from rows


class Serialized:
    """One SQLite connection shared by threads, one call into SQLite at a time.

    The row-checksum triggers call a Python function (``nd_rowmix``) from inside
    ``sqlite3_step``: the writing thread holds the connection's mutex and waits for
    the GIL, while a reading thread that holds the GIL waits for that mutex in a
    fetch (CPython's sqlite3 fetches without releasing the GIL) — a deadlock.  A
    Python lock taken around every call breaks it: a thread waiting for the lock
    has released the GIL.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._lock = threading.RLock()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        with self._lock:
            return Cursor(self._conn.execute(sql, params), self._lock)

    def executescript(self, script: str) -> None:
        with self._lock:
            self._conn.executescript(script)

    def create_function(self, name: str, narg: int, func: Any, *, deterministic: bool) -> None:
        with self._lock:
            self._conn.create_function(name, narg, func, deterministic=deterministic)

    def backup(self, target: sqlite3.Connection) -> None:
        with self._lock:
            self._conn.backup(target)

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def signed(h: int) -> int:
    return h - (1 << 64) if h >= 1 << 63 else h


def unsigned(h: int) -> int:
    return h + (1 << 64) if h < 0 else h

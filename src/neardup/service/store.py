"""The per-tenant feature store: canonical features in SQLite (WAL), sealed at rest.

One row per stored item version: its position in the band index, the item id,
the exact-content hash, the sorted distinct shingle hashes, optionally the
normalized text (only when the tenant retains text), and the band keys (so the
in-memory index is rebuilt without re-hashing).  Every value a request sent is
sealed with the tenant's store key; ids are sealed deterministically so that
lookups and joins work on the sealed bytes (see :mod:`neardup.service.storeformat`,
which also upgrades stores of the first format).

The store is *derived* state: every change is first written to the command log
(:mod:`neardup.service.cmdlog`), and ``meta.applied_seq`` records the last command
applied, in the same transaction as the change.  Replaying a command whose
sequence number is not above ``applied_seq`` is a no-op, so replaying the log
twice gives the same state.

**Self-verifying.**  SQLite checks its page structure, not what the rows say: a
flipped byte in a row (a band key, a tombstone, an id, an idempotent response,
``applied_seq``) reads back as valid.  So every table carries a **row checksum**:
the XOR of a keyless 64-bit BLAKE2b digest of each row (table name, every column,
typed), kept in ``nd_rowsums`` by triggers in the same transaction as the change
(every INSERT, UPDATE, DELETE and REPLACE, whoever writes it).  Opening the store
verifies, before anything is read from it:

1. ``PRAGMA integrity_check``: every page, every index entry against its row;
2. the schema: every ``sqlite_master`` entry is one this version creates (a
   renamed table or column, or an edited trigger, is damage);
3. every table's rows against its checksum (a full read of the store).

Any failure is a :class:`~neardup.CorruptFile` naming the file (the tenant then
sets the store aside and rebuilds it from a snapshot and the command log).  A
store written before the checksums existed is adopted on its first open: its
checksums are computed from its content after the integrity check passes.
Measured on a 173 MB store of 50,000 items (150,000 rows): integrity check
0.13-0.24 s warm, row checksums 0.65-1.0 s warm; cold, reading the file
dominates (2.7 s at this machine's disk).  The checksums detect damage, not
tampering (they are keyless; the sealed values are authenticated for that).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.core._errors import CorruptFile, NeardupIOError
from neardup.service._crypto import Sealer
from neardup.service.storeformat import (
    FORMAT,
    SCHEMA,
    SCHEMA_V1,
    SUMS,
    RowSeal,
    norm_sql,
    row_digest,
    rowmix,
    schema_parts,
    upgrade_v1,
)

__all__ = ["FeatureStore", "StoredItem", "store_error"]

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


class _Cursor:
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


class _Serialized:
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

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Cursor:
        with self._lock:
            return _Cursor(self._conn.execute(sql, params), self._lock)

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


def _signed(h: int) -> int:
    return h - (1 << 64) if h >= 1 << 63 else h


def _unsigned(h: int) -> int:
    return h + (1 << 64) if h < 0 else h


@dataclass(frozen=True, slots=True)
class StoredItem:
    """The current version of an item."""

    pos: int
    item_id: str
    version: int
    content_hash: int
    n_shingles: int
    tombstone_epoch: int | None
    media_type: str | None
    source_time: str | None

    @property
    def live(self) -> bool:
        return self.tombstone_epoch is None


class FeatureStore:
    """SQLite feature store of one tenant (see the module docstring)."""

    def __init__(self, path: str, sealer: Sealer, tenant: str) -> None:
        """Open (creating if absent) and verify the store (see the module docstring).

        Every read made here — the SQLite header, the integrity check, the schema,
        the row checksums and the ``meta`` rows — runs before the store is used, and
        any failure is raised as :class:`~neardup.CorruptFile` naming ``path``
        (damage: the caller may set the file aside and rebuild it) or
        :class:`~neardup.NeardupIOError` (the disk or the environment, not the
        file: rebuilding would not help), never as a raw ``sqlite3`` error.  A
        format-1 store is verified, then upgraded in one transaction.
        """
        self.path = path
        self._sealer = sealer
        self._tenant = tenant
        self._seal = RowSeal(sealer, tenant, path)
        self._pending_applied: int | None = None
        self.upgraded_rows = 0
        try:
            self._db = _Serialized(
                sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            )
        except sqlite3.Error as exc:
            raise store_error(path, exc, "cannot open it") from exc
        try:
            self._db.create_function("nd_rowmix", -1, rowmix, deterministic=True)
            # REPLACE deletes the row it replaces: only with recursive triggers does
            # that deletion reach the row checksum.
            self._db.execute("PRAGMA recursive_triggers=ON")
            self._db.execute("PRAGMA journal_mode=WAL")
            # The command log is fsynced before every acknowledgement, so the store
            # may lag on power loss: start-up replays what it misses.
            self._db.execute("PRAGMA synchronous=NORMAL")
            problem = self.integrity_problem()
            if problem is not None:
                raise CorruptFile(path, f"SQLite integrity check failed: {problem}")
            present = self._schema_entries()
            if self._is_format1(present):
                self._upgrade(present)
                present = self._schema_entries()
            self._verify_rows(SCHEMA, self._check_schema(present))
            v = self.meta("applied_seq")
            try:
                self._applied = int(v) if v is not None else 0
            except ValueError:
                raise CorruptFile(path, f"meta applied_seq is {v!r}, not a number") from None
            stored = self.meta("tenant")
            if stored is None:
                self._set_meta("tenant", tenant)
            elif stored != tenant:
                raise CorruptFile(path, f"feature store of tenant {stored!r}, expected {tenant!r}")
            fmt = self.meta("format")
            if fmt is None:
                self._set_meta("format", str(FORMAT))
            elif fmt != str(FORMAT):
                raise CorruptFile(
                    path, f"meta format is {fmt!r}; this version reads format {FORMAT}"
                )
        except BaseException as exc:
            self._db.close()
            if isinstance(exc, sqlite3.Error):
                raise store_error(path, exc, "not a usable SQLite feature store") from exc
            if isinstance(exc, UnicodeDecodeError):
                # SQLite quoted damaged schema text in its message: not even UTF-8.
                raise CorruptFile(
                    path, f"SQLite reports damage in a message that is not UTF-8 ({exc})"
                ) from exc
            raise

    # -- meta ------------------------------------------------------------------
    def meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT v FROM meta WHERE k=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def note(self, key: str, value: str) -> None:
        """Record a fact about the derived state (outside any command; e.g. a check
        that need not run again while this file lives)."""
        self._set_meta(key, value)

    def _set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta(k, v) VALUES (?, ?)", (key, value))

    def _set_applied(self, seq: int) -> None:
        # Cached only once the transaction commits (see _Tx).
        self._set_meta("applied_seq", str(seq))
        self._pending_applied = seq

    @property
    def applied_seq(self) -> int:
        """The last command applied (cached; written in each change's transaction)."""
        return self._applied

    # -- format and verification -------------------------------------------------
    def _schema_entries(self) -> set[tuple[str, str, str, str]]:
        return {
            (str(a), str(b), str(c), str(norm_sql(d)))
            for a, b, c, d in self._db.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master"
            )
        }

    @staticmethod
    def _is_format1(present: set[tuple[str, str, str, str]]) -> bool:
        items = [e for e in present if e[0] == "table" and e[1] == "items"]
        return bool(items) and items[0] in schema_parts(SCHEMA_V1).entries

    def _refuse_unknown(self, present: set[tuple[str, str, str, str]], schema: str) -> None:
        unknown = sorted(present - schema_parts(schema).entries)
        if unknown:
            kind, name, _tbl, sql = unknown[0]
            raise CorruptFile(
                self.path,
                f"schema entry {kind} {name!r} ({sql[:120]}) is not one this store "
                f"creates ({len(unknown)} such entries)",
            )

    def _upgrade(self, present: set[tuple[str, str, str, str]]) -> None:
        """Verify a format-1 store as it is, then rewrite it as format 2 in one
        transaction (a crash leaves format 1; the next open upgrades again)."""
        self._refuse_unknown(present, SCHEMA_V1)
        names = {e[1] for e in present if e[0] == "table"}
        if SUMS in names:
            summed = {str(r[0]) for r in self._db.execute(f"SELECT tbl FROM {SUMS}")}  # noqa: S608
            missing = sorted(t for t in names & set(schema_parts(SCHEMA_V1).columns) - summed)
            if missing:
                raise CorruptFile(self.path, f"table {missing[0]!r} has no row checksum")
            self._verify_rows(SCHEMA_V1, set(schema_parts(SCHEMA_V1).columns) - names)
        with self._tx():
            self.upgraded_rows = upgrade_v1(self._db, self._seal, names)
            self._db.execute(
                "INSERT OR REPLACE INTO meta(k, v) VALUES ('format', ?)", (str(FORMAT),)
            )
            self._store_sums(SCHEMA, schema_parts(SCHEMA).columns)
        # The format-1 pages are free now but still hold the clear values: rewrite
        # the file without them, and empty the WAL that carried them.
        self._db.execute("VACUUM")
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _check_schema(self, present: set[tuple[str, str, str, str]]) -> set[str]:
        """Refuse schema entries this version does not create; create the missing
        ones.  Returns the tables whose checksum must be computed (adopted) rather
        than verified: all of them in a new or just upgraded store, a table this
        version adds in an older one."""
        self._refuse_unknown(present, SCHEMA)
        names = {e[1] for e in present}
        had_sums = SUMS in names
        self._db.executescript(SCHEMA + schema_parts(SCHEMA).sums_sql)
        summed = {str(r[0]) for r in self._db.execute(f"SELECT tbl FROM {SUMS}")}  # noqa: S608
        adopt: set[str] = set()
        for table in schema_parts(SCHEMA).columns:
            if table in summed:
                continue
            if had_sums and table in names:
                raise CorruptFile(self.path, f"table {table!r} has no row checksum")
            adopt.add(table)
        return adopt

    def _table_digest(self, schema: str, table: str) -> int:
        cols = ", ".join(schema_parts(schema).columns[table])
        x, name = 0, table.encode()
        for row in self._db.execute(f"SELECT {cols} FROM {table}"):  # noqa: S608
            x ^= row_digest(name, row)
        return x

    def _store_sums(self, schema: str, tables: Iterable[str]) -> None:
        """Record the row checksum of each of ``tables`` (in the caller's transaction)."""
        for table in tables:
            self._db.execute(
                f"INSERT OR REPLACE INTO {SUMS}(tbl, x) VALUES (?, ?)",  # noqa: S608
                (table, self._table_digest(schema, table)),
            )

    def _verify_rows(self, schema: str, adopt: set[str]) -> None:
        """Every table's rows against its checksum; adopt (compute) those in ``adopt``."""
        tables = schema_parts(schema).columns
        if adopt and schema == SCHEMA:
            with self._tx():
                self._store_sums(schema, sorted(adopt))
        sums = dict(self._db.execute(f"SELECT tbl, x FROM {SUMS}").fetchall())  # noqa: S608
        for table in tables:
            if table in adopt:
                continue
            got = self._table_digest(schema, table)
            if got != sums[table]:
                raise CorruptFile(
                    self.path,
                    f"the rows of table {table!r} do not match their checksum "
                    f"({got & (2**64 - 1):016x}, recorded {sums[table] & (2**64 - 1):016x}): "
                    "a row was changed outside SQLite (damage on disk)",
                )

    def integrity_problem(self) -> str | None:
        """None if ``PRAGMA integrity_check`` passes, else what it (or SQLite) reports.

        ``integrity_check`` rather than ``quick_check``: it also verifies that every
        index entry matches its row, so a flipped byte in an item id, position or
        content hash is caught (the index no longer agrees), not only broken page
        structure.  It reads the whole file (measured costs: benchmarks/README.md,
        "Design notes (measured)").
        """
        try:
            rows = self._db.execute("PRAGMA integrity_check(20)").fetchall()
        except sqlite3.DatabaseError as exc:
            return str(exc)
        msgs = [str(r[0]) for r in rows]
        return None if msgs == ["ok"] else "; ".join(msgs)

    def integrity_ok(self) -> bool:
        return self.integrity_problem() is None

    # -- sealing -----------------------------------------------------------------
    def _id(self, item_id: str) -> bytes:
        return self._seal.ref("id", item_id)

    def _unid(self, blob: bytes | None) -> str | None:
        return None if blob is None else self._seal.unref("id", blob)

    def _idem_ref(self, key: str) -> bytes:
        return self._seal.ref("idem", key)

    def _seal_features(self, pos: int, features: npt.NDArray[np.uint64]) -> bytes:
        raw = np.ascontiguousarray(features, dtype="<u8").tobytes()
        return self._sealer.seal(raw, self._seal.pos_ad(pos, b"features"))

    def _open_features(self, pos: int, blob: bytes) -> npt.NDArray[np.uint64]:
        ad = self._seal.pos_ad(pos, b"features")
        raw = self._sealer.open(blob, ad, what=f"{self.path} item {pos}")
        return np.frombuffer(raw, dtype="<u8").astype(np.uint64)

    def _open_bandkeys(self, pos: int, blob: bytes) -> bytes:
        raw = self._seal.unbind("bandkeys", pos, blob)
        return b"" if raw is None else raw

    def _record(self, scope: str, key: object, blob: bytes) -> dict[str, Any]:
        d: dict[str, Any] = json.loads(self._seal.unbind_record(scope, key, blob))
        return d

    # -- reads -------------------------------------------------------------------
    def next_pos(self) -> int:
        row = self._db.execute("SELECT MAX(pos) FROM items").fetchone()
        return 0 if row[0] is None else int(row[0]) + 1

    def current(self, item_id: str) -> StoredItem | None:
        row = self._db.execute(
            "SELECT pos, item_id, version, content_hash, n_shingles, tombstone_epoch, "
            "media_type, source_time FROM items WHERE item_id=? ORDER BY pos DESC LIMIT 1",
            (self._id(item_id),),
        ).fetchone()
        return None if row is None else self._item(row, item_id)

    def _item(self, row: Sequence[Any], item_id: str | None = None) -> StoredItem:
        pos = int(row[0])
        return StoredItem(
            pos,
            item_id if item_id is not None else str(self._unid(row[1])),
            int(row[2]),
            _unsigned(int(row[3])),
            int(row[4]),
            None if row[5] is None else int(row[5]),
            self._seal.unbind_str("media_type", pos, row[6]),
            self._seal.unbind_str("source_time", pos, row[7]),
        )

    def tombstoned(self) -> list[StoredItem]:
        """Items whose current version is tombstoned, in position order."""
        rows = self._db.execute(
            "SELECT pos, item_id, version, content_hash, n_shingles, tombstone_epoch, "
            "media_type, source_time FROM items i WHERE tombstone_epoch IS NOT NULL "
            "AND pos = (SELECT MAX(pos) FROM items j WHERE j.item_id = i.item_id) ORDER BY pos"
        ).fetchall()
        return [self._item(r) for r in rows]

    def live_count(self) -> int:
        row = self._db.execute(
            "SELECT COUNT(*) FROM items WHERE tombstone_epoch IS NULL"
        ).fetchone()
        return int(row[0])

    def by_content_hash(self, h: int) -> list[int]:
        rows = self._db.execute(
            "SELECT pos FROM items WHERE content_hash=? AND tombstone_epoch IS NULL ORDER BY pos",
            (_signed(h),),
        ).fetchall()
        return [int(r[0]) for r in rows]

    def live_content_hashes(self) -> npt.NDArray[np.uint64]:
        rows = self._db.execute("SELECT content_hash FROM items WHERE tombstone_epoch IS NULL")
        vals = np.fromiter((r[0] for r in rows), dtype=np.int64)
        return vals.view(np.uint64)

    def _live_rows(self, columns: str, positions: Sequence[int]) -> Iterator[tuple[Any, ...]]:
        """``columns`` of the live rows holding features among ``positions``."""
        ps = [int(p) for p in positions]
        for lo in range(0, len(ps), 500):
            chunk = ps[lo : lo + 500]
            marks = ",".join("?" * len(chunk))
            yield from self._db.execute(
                f"SELECT {columns} FROM items WHERE pos IN ({marks}) "  # noqa: S608
                "AND tombstone_epoch IS NULL AND features IS NOT NULL",
                chunk,
            ).fetchall()

    def features(self, positions: Sequence[int]) -> dict[int, tuple[str, npt.NDArray[np.uint64]]]:
        """``{pos: (item_id, features)}`` for the live positions among ``positions``."""
        return {
            int(pos): (str(self._unid(item_id)), self._open_features(int(pos), bytes(blob)))
            for pos, item_id, blob in self._live_rows("pos, item_id, features", positions)
        }

    def live_positions(self, positions: Sequence[int]) -> set[int]:
        """The positions among ``positions`` that are live and hold features (what
        :meth:`features` would return, without reading or opening any blob)."""
        return {int(r[0]) for r in self._live_rows("pos", positions)}

    def text(self, pos: int) -> str | None:
        row = self._db.execute("SELECT text FROM items WHERE pos=?", (pos,)).fetchone()
        if row is None or row[0] is None:
            return None
        raw = self._sealer.open(
            bytes(row[0]), self._seal.pos_ad(pos, b"text"), what=f"{self.path} text {pos}"
        )
        return raw.decode("utf-8")

    def live_bandkeys(self, bands: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint32]]:
        """Positions (ascending) and (n, bands) band keys of every live item."""
        rows = self._db.execute(
            "SELECT pos, bandkeys FROM items WHERE tombstone_epoch IS NULL ORDER BY pos"
        ).fetchall()
        pos = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        raw = b"".join(self._open_bandkeys(int(p), bytes(b)) for p, b in rows)
        keys = np.frombuffer(raw, dtype="<u4").astype(np.uint32)
        return pos, keys.reshape(len(rows), bands)

    def idempotent(self, key: str) -> tuple[str, bytes] | None:
        ref = self._idem_ref(key)
        row = self._db.execute("SELECT body_sha, response FROM idem WHERE key=?", (ref,)).fetchone()
        if row is None:
            return None
        body = self._seal.unbind_str("idem-body", ref.hex(), row[0])
        resp = self._seal.unbind_record("idem-response", ref.hex(), row[1])
        return str(body), resp.encode("utf-8")

    def rows(self) -> Iterator[tuple[Any, ...]]:
        """Every item row in position order, opened (for digests)."""
        for r in self._db.execute(
            "SELECT pos, item_id, version, content_hash, n_shingles, features IS NOT NULL, "
            "tombstone_epoch, media_type, source_time FROM items ORDER BY pos"
        ):
            pos = int(r[0])
            yield (
                pos,
                self._unid(r[1]),
                *r[2:7],
                self._seal.unbind_str("media_type", pos, r[7]),
                self._seal.unbind_str("source_time", pos, r[8]),
            )

    def all_features(self, stride: int = 1) -> Iterator[tuple[int, str, npt.NDArray[np.uint64]]]:
        """Live items' features in position order; with ``stride`` only positions that
        are multiples of it (a sample: only those rows are read and decrypted)."""
        for pos, item_id, blob in self._db.execute(
            "SELECT pos, item_id, features FROM items WHERE tombstone_epoch IS NULL "
            "AND features IS NOT NULL AND pos % ? = 0 ORDER BY pos",
            (max(int(stride), 1),),
        ):
            yield int(pos), str(self._unid(item_id)), self._open_features(int(pos), bytes(blob))

    def digest(self) -> str:
        """SHA-256 over the logical content (items, features, tombstones, idempotency),
        computed on opened values: the same in every on-disk format."""
        h = hashlib.sha256()
        for row in self.rows():
            h.update(json.dumps(list(row), separators=(",", ":")).encode())
        for pos, _item, feats in self.all_features():
            h.update(pos.to_bytes(8, "little") + feats.astype("<u8").tobytes())
        idem = []
        for ref, body, seq, resp in self._db.execute(
            "SELECT key, body_sha, seq, response FROM idem"
        ):
            k = bytes(ref).hex()
            idem.append(
                (
                    self._seal.unref("idem", ref),
                    self._seal.unbind_str("idem-body", k, body),
                    int(seq),
                    self._seal.unbind_record("idem-response", k, resp).encode("utf-8"),
                )
            )
        for key, body_sha, seq, resp in sorted(idem, key=lambda e: e[0].encode()):
            h.update(f"{key}\x00{body_sha}\x00{seq}\x00".encode() + resp)
        h.update(self.decision_digest().encode())
        h.update(str(self.applied_seq).encode())
        return h.hexdigest()

    def _decision_rows(self, table: str) -> list[tuple[Any, ...]]:
        """The rows of a decision table, opened, in the order the digest uses."""
        s = self._seal
        if table == "events":
            return [
                (seq, kind, self._unid(i), s.unbind_record("event", seq, rec))
                for seq, kind, i, rec in self._db.execute("SELECT * FROM events ORDER BY seq")
            ]
        if table == "links":
            rows = [
                (self._unid(i), st, self._unid(c), seq)
                for i, st, c, seq in self._db.execute("SELECT * FROM links")
            ]
            return sorted(rows, key=lambda r: str(r[0]).encode())
        if table == "policies":
            return [
                (v, s.unbind_record("policy", v, doc), seq)
                for v, doc, seq in self._db.execute("SELECT * FROM policies ORDER BY version")
            ]
        return [
            (
                seq,
                s.unref("reviewer", rv),
                self._unid(a),
                self._unid(b),
                score,
                label,
                s.unbind_record("label", seq, rec),
            )
            for seq, rv, a, b, score, label, rec in self._db.execute(
                "SELECT * FROM labels ORDER BY seq"
            )
        ]

    def decision_digest(self) -> str:
        """SHA-256 over the decision layer: events, current links, policies, labels."""
        h = hashlib.sha256()
        for table in ("events", "links", "policies", "labels"):
            h.update(table.encode())
            for row in self._decision_rows(table):
                h.update(json.dumps(list(row), separators=(",", ":")).encode())
        return h.hexdigest()

    def link_state(self) -> dict[str, tuple[str, str | None]]:
        """item id -> (state, canonical) for items decided duplicate or review."""
        return {str(i): (str(st), c) for i, st, c, _seq in self._decision_rows("links")}

    def link(self, item_id: str) -> tuple[str, str | None] | None:
        row = self._db.execute(
            "SELECT state, canonical FROM links WHERE item_id=?", (self._id(item_id),)
        ).fetchone()
        return None if row is None else (str(row[0]), self._unid(row[1]))

    def members(self, canonical: str) -> list[str]:
        """Live items linked as duplicates of ``canonical``, oldest current version first."""
        return [
            str(self._unid(r[0]))
            for r in self._db.execute(
                "SELECT l.item_id FROM links l JOIN items i ON i.item_id = l.item_id "
                "AND i.tombstone_epoch IS NULL WHERE l.canonical=? AND l.state='duplicate' "
                "ORDER BY i.pos",
                (self._id(canonical),),
            )
        ]

    def broken_links(self, limit: int = 1) -> list[str]:
        """Items whose link breaks the link rules: the item is not live, or a duplicate
        link points at itself, at an item that is not live, or at another duplicate."""
        live = "SELECT 1 FROM items i WHERE i.item_id = {} AND i.tombstone_epoch IS NULL"
        return [
            str(self._unid(r[0]))
            for r in self._db.execute(
                f"SELECT l.item_id FROM links l WHERE NOT EXISTS ({live.format('l.item_id')}) "  # noqa: S608
                "OR (l.state = 'duplicate' AND (l.canonical IS NULL OR l.canonical = l.item_id "
                f"OR NOT EXISTS ({live.format('l.canonical')}) OR EXISTS (SELECT 1 FROM links m "
                "WHERE m.item_id = l.canonical AND m.state = 'duplicate'))) LIMIT ?",
                (limit,),
            )
        ]

    def events(self, after: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        return [
            self._record("event", seq, rec)
            for seq, rec in self._db.execute(
                "SELECT seq, record FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
                (after, limit),
            )
        ]

    def event(self, seq: int) -> dict[str, Any] | None:
        row = self._db.execute("SELECT record FROM events WHERE seq=?", (seq,)).fetchone()
        return None if row is None else self._record("event", seq, row[0])

    def last_event(self) -> dict[str, Any] | None:
        row = self._db.execute(
            "SELECT seq, record FROM events ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        return None if row is None else self._record("event", row[0], row[1])

    def policies(self) -> list[dict[str, Any]]:
        return [
            self._record("policy", v, doc)
            for v, doc in self._db.execute("SELECT version, doc FROM policies ORDER BY version")
        ]

    def labels(self) -> list[dict[str, Any]]:
        return [
            self._record("label", seq, rec)
            for seq, rec in self._db.execute("SELECT seq, record FROM labels ORDER BY seq")
        ]

    def bandkeys(self, pos: int) -> npt.NDArray[np.uint32] | None:
        row = self._db.execute("SELECT bandkeys FROM items WHERE pos=?", (pos,)).fetchone()
        if row is None or row[0] is None:
            return None
        raw = self._open_bandkeys(pos, bytes(row[0]))
        return np.frombuffer(raw, dtype="<u4").astype(np.uint32)

    def _event(self, seq: int, event: dict[str, Any]) -> None:
        """Record a decision-log event and its effect (inside the caller's transaction)."""
        rec = json.dumps(event, sort_keys=True, separators=(",", ":"))
        item = event.get("item_id")
        self._db.execute(
            "INSERT INTO events(seq, kind, item_id, record) VALUES (?,?,?,?)",
            (
                seq,
                event["kind"],
                None if item is None else self._id(str(item)),
                self._seal.bind_record("event", seq, rec),
            ),
        )
        # Re-links (a cluster handed to a new canonical item) first, then the
        # event's own effect on its item.
        for link in [*event.get("relinks", ()), event.get("effect")]:
            if link is None:
                continue
            ref = self._id(str(link["item_id"]))
            if link["state"] in ("duplicate", "review"):
                canonical = link.get("canonical")
                self._db.execute(
                    "INSERT OR REPLACE INTO links(item_id, state, canonical, seq) VALUES (?,?,?,?)",
                    (ref, link["state"], None if canonical is None else self._id(canonical), seq),
                )
            else:
                self._db.execute("DELETE FROM links WHERE item_id=?", (ref,))
        if event["kind"] == "policy":
            version = event["policy"]["version"]
            doc = json.dumps(event["policy"], sort_keys=True, separators=(",", ":"))
            self._db.execute(
                "INSERT INTO policies(version, doc, seq) VALUES (?,?,?)",
                (version, self._seal.bind_record("policy", version, doc), seq),
            )
        elif event["kind"] == "label":
            self._db.execute(
                "INSERT INTO labels(seq, reviewer, left_id, right_id, score, label, record) "
                "VALUES (?,?,?,?,?,?,?)",
                (
                    seq,
                    self._seal.ref("reviewer", str(event["reviewer"])),
                    self._id(str(event["left"])),
                    self._id(str(event["right"])),
                    float(event["score"]),
                    event["label"],
                    self._seal.bind_record("label", seq, rec),
                ),
            )

    def apply_event(
        self, seq: int, event: dict[str, Any], idem: tuple[str, str, bytes] | None = None
    ) -> bool:
        """Apply a decision-layer command; False (nothing changes) if already applied."""
        if seq <= self.applied_seq:
            return False
        with self._tx():
            self._finish(seq, event, idem)
        return True

    def _finish(
        self, seq: int, event: dict[str, Any] | None, idem: tuple[str, str, bytes] | None
    ) -> None:
        """The end of every command's transaction: its decision event (if any), its
        idempotency record, and ``applied_seq`` advanced to ``seq``."""
        if event is not None:
            self._event(seq, event)
        self._idem(seq, idem)
        self._set_applied(seq)

    # -- writes (each one transaction, advancing applied_seq) ----------------------
    def apply_upsert(
        self,
        seq: int,
        *,
        pos: int,
        item_id: str,
        content_hash: int,
        features: npt.NDArray[np.uint64],
        bandkeys: npt.NDArray[np.uint32],
        text: str | None,
        media_type: str | None,
        source_time: str | None,
        replaces: int | None,
        idem: tuple[str, str, bytes] | None,
        event: dict[str, Any] | None = None,
    ) -> bool:
        """Apply an upsert command; False (and nothing changes) if already applied."""
        if seq <= self.applied_seq:
            return False
        s = self._seal
        sealed_text = (
            None
            if text is None
            else self._sealer.seal(text.encode("utf-8"), s.pos_ad(pos, b"text"))
        )
        keys = np.ascontiguousarray(bandkeys, dtype="<u4").tobytes()
        row = (
            pos,
            self._id(item_id),
            seq,
            _signed(content_hash),
            int(features.shape[0]),
            self._seal_features(pos, features),
            sealed_text,
            s.bind("bandkeys", pos, keys),
            s.bind("media_type", pos, media_type),
            s.bind("source_time", pos, source_time),
        )
        with self._tx():
            if replaces is not None:
                self._db.execute(
                    "UPDATE items SET tombstone_epoch=? WHERE pos=? AND tombstone_epoch IS NULL",
                    (seq, replaces),
                )
            self._db.execute(
                "INSERT INTO items(pos, item_id, version, content_hash, n_shingles, features, "
                "text, bandkeys, media_type, source_time, tombstone_epoch) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,NULL)",
                row,
            )
            self._finish(seq, event, idem)
        return True

    def apply_tombstone(
        self,
        seq: int,
        *,
        pos: int,
        epoch: int,
        idem: tuple[str, str, bytes] | None,
        event: dict[str, Any] | None = None,
    ) -> bool:
        """Apply a tombstone command (and its re-link event, if any)."""
        if seq <= self.applied_seq:
            return False
        with self._tx():
            self._db.execute(
                "UPDATE items SET tombstone_epoch=? WHERE pos=? AND tombstone_epoch IS NULL",
                (epoch, pos),
            )
            self._finish(seq, event, idem)
        return True

    def apply_compact(self, seq: int) -> int:
        """Physically drop the features, text and band keys of tombstoned rows (the
        row itself stays, so the tombstone is remembered); returns rows purged."""
        if seq <= self.applied_seq:
            return 0
        with self._tx():
            cur = self._db.execute(
                "UPDATE items SET features=NULL, text=NULL, bandkeys=NULL "
                "WHERE tombstone_epoch IS NOT NULL AND features IS NOT NULL"
            )
            n = cur.rowcount
            self._set_applied(seq)
        return int(n)

    def apply_failed(self, seq: int, op: str, reason: str) -> bool:
        """Record that command ``seq`` could not be applied, and step past it.

        The failure is part of the applied state: replay meets the same command,
        fails the same way and records the same row, so the state is reproducible.
        """
        if seq <= self.applied_seq:
            return False
        with self._tx():
            self._db.execute(
                "INSERT OR REPLACE INTO failed(seq, op, reason) VALUES (?,?,?)",
                (seq, op, self._seal.bind("failed", seq, reason)),
            )
            self._set_applied(seq)
        return True

    def failed_commands(self, limit: int = 100) -> list[dict[str, Any]]:
        """The most recent commands recorded as failed (newest last)."""
        rows = self._db.execute(
            "SELECT seq, op, reason FROM failed ORDER BY seq DESC LIMIT ?", (limit,)
        ).fetchall()
        return [
            {
                "seq": int(r[0]),
                "op": str(r[1]),
                "reason": str(self._seal.unbind_str("failed", int(r[0]), r[2])),
            }
            for r in rows[::-1]
        ]

    def failed_count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM failed").fetchone()[0])

    def apply_noop(self, seq: int) -> None:
        if seq > self.applied_seq:
            with self._tx():
                self._set_applied(seq)

    def _idem(self, seq: int, idem: tuple[str, str, bytes] | None) -> None:
        if idem is not None:
            key, body_sha, response = idem
            ref = self._idem_ref(key)
            self._db.execute(
                "INSERT OR IGNORE INTO idem(key, body_sha, seq, response) VALUES (?,?,?,?)",
                (
                    ref,
                    self._seal.bind("idem-body", ref.hex(), body_sha),
                    seq,
                    self._seal.bind_record("idem-response", ref.hex(), response.decode("utf-8")),
                ),
            )

    class _Tx:
        def __init__(self, store: FeatureStore) -> None:
            self.store = store

        def __enter__(self) -> None:
            self.store._pending_applied = None
            self.store._db.execute("BEGIN IMMEDIATE")

        def __exit__(self, et: object, ev: object, tb: object) -> None:
            st = self.store
            if et is not None:
                st._db.execute("ROLLBACK")
                return
            st._db.execute("COMMIT")
            if st._pending_applied is not None:
                st._applied = st._pending_applied

    def _tx(self) -> FeatureStore._Tx:
        return FeatureStore._Tx(self)

    # -- files -------------------------------------------------------------------
    def backup_to(self, path: str) -> None:
        """A consistent copy of the store at ``path`` (SQLite online backup), fsynced.

        Raises :class:`~neardup.NeardupIOError` naming ``path`` if it cannot be
        written (the live store is not changed)."""
        try:
            dest = sqlite3.connect(path)
            try:
                self._db.backup(dest)
                dest.execute("PRAGMA journal_mode=DELETE")
            finally:
                dest.close()
            with open(path, "rb") as fh:
                os.fsync(fh.fileno())
        except (OSError, sqlite3.Error) as exc:
            raise NeardupIOError(path, OSError(str(exc))) from exc

    def checkpoint(self) -> None:
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        self._db.close()

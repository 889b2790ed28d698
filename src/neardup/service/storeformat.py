"""The feature store's on-disk format: tables, row checksums, sealing, upgrades.

**Format 3** (this version) seals everything a request sent: item ids, media
types, source times, access policies, band keys, idempotency keys and responses, decision
records, links, policies, reviewer labels and failed-command reasons are
sealed with AES-256-SIV under the tenant's store key
(:class:`~neardup.service._crypto.Sealer`, the key derived with HKDF-SHA256).
Records (decisions, labels, policies, stored responses) are packed
(:mod:`neardup.service.recordpack`) before they are sealed.  What stays in clear is what
the engine counts and orders by: positions,
versions and sequence numbers, the keyed 64-bit content hash (the exact-copy
lookup), shingle counts, tombstone epochs, event kinds, link states, a label's
verdict and score, a failed command's operation name.

**Lookups by sealed value.**  The sealer is deterministic (SIV: the IV is a PRF of
the associated data and the plaintext), so an id sealed under the same associated
data is the same bytes every time: ``WHERE item_id = ?`` and the joins between
``items`` and ``links`` work on sealed ids, and reveal only which rows name the
same id.  Every other sealed value is bound to its row (its position or sequence
number), so a value copied to another row, table or tenant fails authentication.
Being deterministic, a replay of the command log writes the same bytes.

**Upgrades**, each when a store is opened, inside one transaction, after the
store's checksums are verified (a crash leaves the old store intact and the next
open upgrades it); ``meta.format`` names the format:

* **format 2** (the same tables, sealed with the first construction: AES-256-GCM
  with a synthetic nonce, :class:`~neardup.service._crypto.LegacySealer`): every
  sealed cell is opened and sealed again in place (:func:`upgrade_v2`);
* **format 1** (ids, decisions and labels in clear; features and text sealed
  with the first construction): rewritten as format 3 (:func:`upgrade_v1`), then
  vacuumed so that no clear value stays in free pages.

**Tables added within a format** are created when a store without them is
opened, and their row checksum adopted: ``access`` (an item version's access
policy, sealed to its row; only versions stored with one have a row) came after
format 3 was first written.  A store that has such a table cannot be opened by
a version that predates it (an unknown schema entry is refused as damage).

**Row checksums** (every format): the XOR of a keyless 64-bit BLAKE2b digest of
each row, kept in ``nd_rowsums`` by triggers (see :mod:`neardup.service.store`).
"""

from __future__ import annotations

import functools
import hashlib
import sqlite3
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from neardup.core._errors import CorruptFile
from neardup.service._crypto import Opener, Sealer
from neardup.service.recordpack import pack, unpack

__all__ = [
    "FORMAT",
    "SCHEMA",
    "SCHEMA_V1",
    "SUMS",
    "UPGRADES",
    "RowOpen",
    "RowSeal",
    "SchemaParts",
    "row_digest",
    "rowmix",
    "schema_parts",
    "statements",
    "upgrade_v1",
    "upgrade_v2",
]

FORMAT = 3
#: Formats upgraded to :data:`FORMAT` when opened (see the module docstring).
UPGRADES = (1, 2)

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS items (
  pos INTEGER PRIMARY KEY,
  item_id {id} NOT NULL,
  version INTEGER NOT NULL,
  content_hash INTEGER NOT NULL,
  n_shingles INTEGER NOT NULL,
  features BLOB,
  text BLOB,
  bandkeys BLOB,
  media_type {txt},
  source_time {txt},
  tombstone_epoch INTEGER
);
CREATE INDEX IF NOT EXISTS items_by_id ON items(item_id, pos);
CREATE INDEX IF NOT EXISTS items_by_hash ON items(content_hash);
CREATE TABLE IF NOT EXISTS idem (
  key {id} PRIMARY KEY,
  body_sha {id} NOT NULL,
  seq INTEGER NOT NULL,
  response BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
  seq INTEGER PRIMARY KEY,
  kind TEXT NOT NULL,
  item_id {id},
  record {txt} NOT NULL
);
CREATE TABLE IF NOT EXISTS links (
  item_id {id} PRIMARY KEY,
  state TEXT NOT NULL,
  canonical {id},
  seq INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS links_by_canonical ON links(canonical);
CREATE TABLE IF NOT EXISTS policies (
  version INTEGER PRIMARY KEY,
  doc {txt} NOT NULL,
  seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS failed (
  seq INTEGER PRIMARY KEY,
  op TEXT NOT NULL,
  reason {txt} NOT NULL
);
CREATE TABLE IF NOT EXISTS labels (
  seq INTEGER PRIMARY KEY,
  reviewer {id} NOT NULL,
  left_id {id} NOT NULL,
  right_id {id} NOT NULL,
  score REAL NOT NULL,
  label TEXT NOT NULL,
  record {txt} NOT NULL
);
"""

# Added in format 3 without a format change: a store opened without it gets the
# table (empty: its items carry no policy) and the table's row checksum adopted.
# Only items upserted with an access policy have a row, bound to the item's row.
_ACCESS = """
CREATE TABLE IF NOT EXISTS access (
  pos INTEGER PRIMARY KEY,
  policy BLOB NOT NULL
);
"""

SCHEMA = _TABLES.format(id="BLOB", txt="BLOB") + _ACCESS
SCHEMA_V1 = _TABLES.format(id="TEXT", txt="TEXT")

SUMS = "nd_rowsums"
_DIGEST_PERSON = b"nd-rowsum-v1"
_F64 = struct.Struct("<d")


def row_digest(table: bytes, row: Sequence[Any]) -> int:
    """Keyless 64-bit digest of one row: the table name and each column, typed."""
    parts: list[bytes] = [table]
    for v in row:
        t = type(v)
        if v is None:
            parts.append(b"\x00")
        elif t is int:
            parts.append(b"\x01" + int(v).to_bytes(8, "little", signed=True))
        elif t is str:
            b = str(v).encode("utf-8", "surrogatepass")
            parts.append(b"\x02" + len(b).to_bytes(4, "little"))
            parts.append(b)
        elif t is bytes:
            parts.append(b"\x03" + len(v).to_bytes(4, "little"))
            parts.append(v)
        else:
            parts.append(b"\x04" + _F64.pack(float(v)))
    h = hashlib.blake2b(b"".join(parts), digest_size=8, person=_DIGEST_PERSON)
    return int.from_bytes(h.digest(), "little", signed=True)


def rowmix(x: int, table: str, *row: Any) -> int:
    """``x`` XOR the digest of ``row`` (the triggers' SQL function ``nd_rowmix``)."""
    return int(x) ^ row_digest(table.encode(), row)


def statements(script: str) -> list[str]:
    """The statements of ``script`` (no semicolons inside this module's SQL), to run
    one by one inside a transaction (``executescript`` would commit first)."""
    return [s.strip() + ";" for s in script.split(";") if s.strip()]


def norm_sql(sql: str | None) -> str | None:
    return None if sql is None else " ".join(sql.split())


@dataclass(frozen=True, slots=True)
class SchemaParts:
    """What a store of one format holds: each checksummed table's columns, the SQL
    of the checksum table and triggers, and every ``sqlite_master`` entry."""

    columns: dict[str, tuple[str, ...]]
    sums_sql: str
    entries: frozenset[tuple[str, str, str, str]]


@functools.cache
def schema_parts(schema: str) -> SchemaParts:
    """Derived from ``schema`` on first use (an in-memory SQLite database)."""
    mem = sqlite3.connect(":memory:")
    try:
        mem.executescript(schema)
        tables = [
            str(r[0])
            for r in mem.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")
        ]
        cols = {
            t: tuple(str(r[1]) for r in mem.execute(f"PRAGMA table_info({t})"))
            for t in tables
        }
        sql = [f"CREATE TABLE IF NOT EXISTS {SUMS} (tbl TEXT PRIMARY KEY, x INTEGER NOT NULL);"]
        for t, cs in cols.items():
            new = ", ".join(f"NEW.{c}" for c in cs)
            old = ", ".join(f"OLD.{c}" for c in cs)
            mix = f"UPDATE {SUMS} SET x = nd_rowmix"  # noqa: S608
            sql += [
                f"CREATE TRIGGER IF NOT EXISTS nd_sum_{t}_ins AFTER INSERT ON {t} BEGIN "
                f"{mix}(x, '{t}', {new}) WHERE tbl = '{t}'; END;",
                f"CREATE TRIGGER IF NOT EXISTS nd_sum_{t}_del AFTER DELETE ON {t} BEGIN "
                f"{mix}(x, '{t}', {old}) WHERE tbl = '{t}'; END;",
                f"CREATE TRIGGER IF NOT EXISTS nd_sum_{t}_upd AFTER UPDATE ON {t} BEGIN "
                f"{mix}(nd_rowmix(x, '{t}', {old}), '{t}', {new}) WHERE tbl = '{t}'; END;",
            ]
        sums_sql = "\n".join(sql)
        mem.create_function("nd_rowmix", -1, rowmix, deterministic=True)
        mem.executescript(sums_sql)
        entries = frozenset(
            (str(a), str(b), str(c), str(norm_sql(d)))
            for a, b, c, d in mem.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")
        )
    finally:
        mem.close()
    return SchemaParts(cols, sums_sql, entries)


def trigger_statements(parts: SchemaParts) -> list[str]:
    """The checksum table and triggers, one statement each (a trigger body holds a
    semicolon, so :func:`statements` cannot split them)."""
    out, cur = [], []
    for line in parts.sums_sql.splitlines():
        cur.append(line)
        if line.endswith("END;") or line.startswith(f"CREATE TABLE IF NOT EXISTS {SUMS}"):
            out.append("\n".join(cur))
            cur = []
    return out


class RowOpen:
    """Opens the values of one tenant's store rows (see the module doc); with a
    :class:`~neardup.service._crypto.LegacySealer`, those of a store being upgraded."""

    __slots__ = ("_opener", "_tenant", "path")

    def __init__(self, opener: Opener, tenant: str, path: str) -> None:
        self._opener, self._tenant, self.path = opener, tenant, path

    def _ad(self, scope: str, key: object = "") -> bytes:
        return f"{self._tenant}\x00{scope}\x00{key}\x00".encode()

    def pos_ad(self, pos: int, what: bytes) -> bytes:
        """Associated data of a value bound to item row ``pos`` (features, text, ...)."""
        return f"{self._tenant}\x00{pos}\x00".encode() + what

    def open_at(self, pos: int, what: bytes, blob: bytes | None) -> bytes | None:
        """A value bound to item row ``pos`` (None stays None)."""
        if blob is None:
            return None
        return self._opener.open(
            bytes(blob), self.pos_ad(pos, what), what=f"{self.path} ({what.decode()} {pos})"
        )

    def unref(self, scope: str, blob: bytes) -> str:
        raw = self._opener.open(bytes(blob), self._ad(scope), what=f"{self.path} ({scope})")
        return raw.decode("utf-8")

    def unbind(self, scope: str, key: object, blob: bytes | None) -> bytes | None:
        if blob is None:
            return None
        what = f"{self.path} ({scope} {key})"
        return self._opener.open(bytes(blob), self._ad(scope, key), what=what)

    def unbind_str(self, scope: str, key: object, blob: bytes | None) -> str | None:
        raw = self.unbind(scope, key, blob)
        return None if raw is None else raw.decode("utf-8")

    def unbind_record(self, scope: str, key: object, blob: bytes) -> str:
        raw = self.unbind(scope, key, blob) or b""
        try:
            return unpack(raw)
        except ValueError as exc:
            raise CorruptFile(self.path, f"{scope} {key}: {exc}") from None


class RowSeal(RowOpen):
    """Seals and opens the values of one tenant's store rows (see the module doc)."""

    __slots__ = ("_sealer",)

    def __init__(self, sealer: Sealer, tenant: str, path: str) -> None:
        super().__init__(sealer, tenant, path)
        self._sealer = sealer

    def seal_at(self, pos: int, what: bytes, raw: bytes | None) -> bytes | None:
        """``raw`` sealed to item row ``pos`` (None stays None)."""
        return None if raw is None else self._sealer.seal(raw, self.pos_ad(pos, what))

    # -- lookup values: equal plaintexts give equal bytes -----------------------
    def ref(self, scope: str, value: str) -> bytes:
        """``value`` sealed for lookups within ``scope`` (``id``, ``idem``, ``reviewer``)."""
        return self._sealer.seal(value.encode("utf-8"), self._ad(scope))

    # -- values bound to one row ---------------------------------------------------
    def bind(self, scope: str, key: object, value: str | bytes | None) -> bytes | None:
        """``value`` sealed to row ``key`` of ``scope`` (None stays None)."""
        if value is None:
            return None
        raw = value.encode("utf-8") if isinstance(value, str) else value
        return self._sealer.seal(raw, self._ad(scope, key))

    def bind_record(self, scope: str, key: object, text: str) -> bytes:
        """A JSON record, packed (:mod:`neardup.service.recordpack`) and sealed to its row."""
        out = self.bind(scope, key, pack(text))
        return b"" if out is None else out


def _v1_rows(
    db: Any, table: str, cols: Sequence[str]
) -> list[tuple[Any, ...]]:
    return list(db.execute(f"SELECT {', '.join(cols)} FROM nd_v1_{table}").fetchall())  # noqa: S608


def upgrade_v1(db: Any, old: RowOpen, seal: RowSeal, existing: set[str]) -> int:
    """Rewrite a verified format-1 store as the current format (the caller holds a
    transaction); returns the rows rewritten.  ``old`` opens the values format 1
    sealed (features and text, with the first construction); ``existing``: the
    format-1 tables present (an older store may lack some)."""
    v1 = schema_parts(SCHEMA_V1)
    v2 = schema_parts(SCHEMA)
    for t in v1.columns:
        for op in ("ins", "del", "upd"):
            db.execute(f"DROP TRIGGER IF EXISTS nd_sum_{t}_{op}")
    db.execute("DROP INDEX IF EXISTS items_by_id")
    db.execute("DROP INDEX IF EXISTS items_by_hash")
    db.execute("DROP INDEX IF EXISTS links_by_canonical")
    db.execute(f"DROP TABLE IF EXISTS {SUMS}")
    moved = [t for t in v1.columns if t != "meta" and t in existing]
    for t in moved:
        db.execute(f"ALTER TABLE {t} RENAME TO nd_v1_{t}")
    for stmt in statements(SCHEMA):
        db.execute(stmt)
    rid = functools.partial(seal.ref, "id")
    n = 0
    # Cells the format-1 store held in clear, sealed here exactly as the current
    # format writes them (see FeatureStore's write methods); its sealed cells
    # (features, text) opened and sealed again.
    converters: dict[str, Callable[[tuple[Any, ...]], tuple[Any, ...]]] = {
        "items": lambda r: (
            r[0], rid(r[1]), *r[2:5],
            seal.seal_at(r[0], b"features", old.open_at(r[0], b"features", r[5])),
            seal.seal_at(r[0], b"text", old.open_at(r[0], b"text", r[6])),
            None if r[7] is None else seal.bind("bandkeys", r[0], bytes(r[7])),
            seal.bind("media_type", r[0], r[8]),
            seal.bind("source_time", r[0], r[9]),
            r[10],
        ),
        "idem": lambda r: (
            seal.ref("idem", r[0]),
            seal.bind("idem-body", seal.ref("idem", r[0]).hex(), r[1]),
            r[2],
            seal.bind_record("idem-response", seal.ref("idem", r[0]).hex(), bytes(r[3]).decode()),
        ),
        "events": lambda r: (
            r[0], r[1], None if r[2] is None else rid(r[2]), seal.bind_record("event", r[0], r[3])
        ),
        "links": lambda r: (rid(r[0]), r[1], None if r[2] is None else rid(r[2]), r[3]),
        "policies": lambda r: (r[0], seal.bind_record("policy", r[0], r[1]), r[2]),
        "failed": lambda r: (r[0], r[1], seal.bind("failed", r[0], r[2])),
        "labels": lambda r: (
            r[0], seal.ref("reviewer", r[1]), rid(r[2]), rid(r[3]), r[4], r[5],
            seal.bind_record("label", r[0], r[6]),
        ),
    }
    for t in moved:
        cols = v2.columns[t]
        marks = ",".join("?" * len(cols))
        rows = [converters[t](r) for r in _v1_rows(db, t, v1.columns[t])]
        db_insert = f"INSERT INTO {t}({', '.join(cols)}) VALUES ({marks})"  # noqa: S608
        for r in rows:
            db.execute(db_insert, r)
        n += len(rows)
        db.execute(f"DROP TABLE nd_v1_{t}")
    for stmt in trigger_statements(v2):
        db.execute(stmt)
    return n


_Row = tuple[Any, ...]


def _resealers(old: RowOpen, new: RowSeal) -> dict[str, Callable[[_Row], _Row]]:
    """Per table: a format-2 row (its columns in schema order) with every sealed
    cell opened by ``old`` and sealed again by ``new``, in the same place."""

    def ref(scope: str, blob: bytes | None) -> bytes | None:
        return None if blob is None else new.ref(scope, old.unref(scope, blob))

    def bound(scope: str, key: object, blob: bytes | None) -> bytes | None:
        return new.bind(scope, key, old.unbind(scope, key, blob))

    def at(pos: int, what: bytes, blob: bytes | None) -> bytes | None:
        return new.seal_at(pos, what, old.open_at(pos, what, blob))

    def idem(r: _Row) -> _Row:
        # The body and response are bound to the sealed key, which changes too.
        key = ref("idem", r[0])
        was, now = bytes(r[0]).hex(), bytes(key or b"").hex()
        body = new.bind("idem-body", now, old.unbind("idem-body", was, r[1]))
        resp = new.bind("idem-response", now, old.unbind("idem-response", was, r[3]))
        return (key, body, r[2], resp)

    return {
        "items": lambda r: (
            r[0], ref("id", r[1]), *r[2:5],
            at(r[0], b"features", r[5]), at(r[0], b"text", r[6]),
            bound("bandkeys", r[0], r[7]), bound("media_type", r[0], r[8]),
            bound("source_time", r[0], r[9]), r[10],
        ),
        "idem": idem,
        "events": lambda r: (r[0], r[1], ref("id", r[2]), bound("event", r[0], r[3])),
        "links": lambda r: (ref("id", r[0]), r[1], ref("id", r[2]), r[3]),
        "policies": lambda r: (r[0], bound("policy", r[0], r[1]), r[2]),
        "failed": lambda r: (r[0], r[1], bound("failed", r[0], r[2])),
        "labels": lambda r: (
            r[0], ref("reviewer", r[1]), ref("id", r[2]), ref("id", r[3]), r[4], r[5],
            bound("label", r[0], r[6]),
        ),
    }


def upgrade_v2(db: Any, old: RowOpen, seal: RowSeal, *, batch: int = 512) -> int:
    """Seal every sealed cell of a verified format-2 store again with the current
    sealer (``old`` opens them), row by row in place; returns the rows rewritten.

    The caller holds a transaction, so a crash leaves format 2 whole; the row
    checksum triggers follow each update.  Rows are read ``batch`` at a time.
    """
    n = 0
    for table, convert in _resealers(old, seal).items():
        cols = schema_parts(SCHEMA).columns[table]
        select = (
            f"SELECT rowid, {', '.join(cols)} FROM {table} "  # noqa: S608
            "WHERE rowid > ? ORDER BY rowid LIMIT ?"
        )
        update = f"UPDATE {table} SET {', '.join(f'{c}=?' for c in cols)} WHERE rowid=?"  # noqa: S608
        last = -(2**63)
        while rows := db.execute(select, (last, batch)).fetchall():
            for r in rows:
                db.execute(update, (*convert(tuple(r[1:])), r[0]))
            last = rows[-1][0]
            n += len(rows)
    return n

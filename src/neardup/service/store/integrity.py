"""The store's format and its verification: the schema, the row checksums, the
SQLite integrity check and the upgrades of stores of formats 1 and 2."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from neardup.core._errors import CorruptFile, InvalidConfig
from neardup.service._crypto import LEGACY_SEALING, SEALING
from neardup.service.store._state import StoreState
from neardup.service.storeformat import (
    FORMAT,
    SCHEMA,
    SCHEMA_V1,
    SUMS,
    RowOpen,
    norm_sql,
    row_digest,
    schema_parts,
    upgrade_v1,
    upgrade_v2,
)


class IntegrityMixin(StoreState):
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

    def _legacy_rows(self, fmt: int) -> RowOpen:
        """What opens the values a store of format ``fmt`` sealed with the first
        construction, or :class:`InvalidConfig` if the store was opened without it."""
        if self._legacy is None:
            raise InvalidConfig(
                "legacy",
                None,
                f"{self.path} is a store of format {fmt}, sealed with {LEGACY_SEALING}; "
                f"upgrading it to format {FORMAT} ({SEALING}) needs the sealer it was "
                "written with",
                "pass legacy=MasterSecret.legacy_sealer('features', tenant, version=...) "
                "to FeatureStore (a tenant does)",
            )
        return RowOpen(self._legacy, self._tenant, self.path)

    def _upgrade_sealing(self) -> None:
        """Seal a verified format-2 store again with the current sealer, in one
        transaction (a crash leaves format 2; the next open upgrades again)."""
        old = self._legacy_rows(2)
        with self._tx():
            self.upgraded_rows = upgrade_v2(self._db, old, self._seal)
            self._set_meta("format", str(FORMAT))
        # The WAL holds a copy of every page the upgrade wrote: empty it.
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _upgrade(self, present: set[tuple[str, str, str, str]]) -> None:
        """Verify a format-1 store as it is, then rewrite it as the current format in
        one transaction (a crash leaves format 1; the next open upgrades again)."""
        self._refuse_unknown(present, SCHEMA_V1)
        old = self._legacy_rows(1)
        names = {e[1] for e in present if e[0] == "table"}
        if SUMS in names:
            summed = {str(r[0]) for r in self._db.execute(f"SELECT tbl FROM {SUMS}")}  # noqa: S608
            missing = sorted(t for t in names & set(schema_parts(SCHEMA_V1).columns) - summed)
            if missing:
                raise CorruptFile(self.path, f"table {missing[0]!r} has no row checksum")
            self._verify_rows(SCHEMA_V1, set(schema_parts(SCHEMA_V1).columns) - names)
        with self._tx():
            self.upgraded_rows = upgrade_v1(self._db, old, self._seal, names)
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

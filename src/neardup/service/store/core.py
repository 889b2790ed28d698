"""The FeatureStore class: opening and verifying a store, and its files."""

from __future__ import annotations

import os
import sqlite3

from neardup.core._errors import CorruptFile, NeardupIOError
from neardup.service._crypto import LegacySealer, Sealer
from neardup.service.store.connection import Serialized, store_error
from neardup.service.store.integrity import IntegrityMixin
from neardup.service.store.reads import ReadsMixin
from neardup.service.store.writes import WritesMixin
from neardup.service.storeformat import FORMAT, SCHEMA, UPGRADES, RowSeal, rowmix


class FeatureStore(IntegrityMixin, ReadsMixin, WritesMixin):
    """SQLite feature store of one tenant (see :mod:`neardup.service.store`)."""

    def __init__(
        self, path: str, sealer: Sealer, tenant: str, *, legacy: LegacySealer | None = None
    ) -> None:
        """Open (creating if absent) and verify the store (see :mod:`neardup.service.store`).

        Every read made here — the SQLite header, the integrity check, the schema,
        the row checksums and the ``meta`` rows — runs before the store is used, and
        any failure is raised as :class:`~neardup.CorruptFile` naming ``path``
        (damage: the caller may set the file aside and rebuild it) or
        :class:`~neardup.NeardupIOError` (the disk or the environment, not the
        file: rebuilding would not help), never as a raw ``sqlite3`` error.  A
        store of an earlier format (1 or 2) is verified, then upgraded in one
        transaction; ``legacy`` opens what it sealed with the first construction
        (:class:`~neardup.InvalidConfig` if such a store is met without it).
        """
        self.path = path
        self._sealer = sealer
        self._legacy = legacy
        self._tenant = tenant
        self._seal = RowSeal(sealer, tenant, path)
        self._pending_applied: int | None = None
        self.upgraded_rows = 0
        try:
            self._db = Serialized(
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
            elif any(e[:2] == ("table", "meta") for e in present) and self.meta("format") == "2":
                # Refused before anything is written (the schema check below would
                # add the tables this version has and format 2 lacks).
                self._legacy_rows(2)
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
            elif fmt == "2":
                self._upgrade_sealing()
            elif fmt != str(FORMAT):
                raise CorruptFile(
                    path,
                    f"meta format is {fmt!r}; this version reads format {FORMAT} (and "
                    f"upgrades formats {' and '.join(map(str, UPGRADES))} when it opens them)",
                    "open it with the version of neardup that wrote it",
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

"""The per-tenant feature store: canonical features in SQLite (WAL), sealed at rest.

One row per stored item version: its position in the band index, the item id,
the exact-content hash, the sorted distinct shingle hashes, optionally the
normalized text (only when the tenant retains text), and the band keys (so the
in-memory index is rebuilt without re-hashing); an item version stored with an
access policy also has a row in ``access``.  Every value a request sent is
sealed with the tenant's store key (AES-256-SIV); ids are sealed deterministically
so that lookups and joins work on the sealed bytes (see :mod:`neardup.service.storeformat`,
which also upgrades stores of formats 1 and 2).

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

The class is cut by concern, like :class:`~neardup.service.tenant.Tenant`:
``core`` (:class:`FeatureStore`: open and verify, files) over mixins
``integrity`` (format, schema, row checksums, the upgrades), ``reads``
(:class:`StoredItem`, items, features, decisions, digests) and ``writes`` (the
commands applied, each in one transaction), sharing ``_state`` (the connection,
meta rows, sealing, transactions); ``connection`` holds the SQLite plumbing
(:func:`store_error`, the serialized connection).
"""

from __future__ import annotations

from neardup.service.store.connection import store_error
from neardup.service.store.core import FeatureStore
from neardup.service.store.reads import StoredItem

__all__ = ["FeatureStore", "StoredItem", "store_error"]

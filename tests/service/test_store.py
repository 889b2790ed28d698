"""neardup.service.store: the per-tenant feature store reads back what it wrote,
replays idempotently, seals values at rest and refuses a damaged file."""

from __future__ import annotations

import errno
import sqlite3
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st_

from neardup.core._errors import CorruptFile, NeardupIOError
from neardup.service._crypto import Sealer
from neardup.service.store import FeatureStore, store_error
from neardup.service.storeformat import rowmix

KEY = bytes(range(64))
BANDS = 4


def _open(path: Path, tenant: str = "acme") -> FeatureStore:
    return FeatureStore(str(path), Sealer(KEY), tenant)


def _upsert(
    st: FeatureStore,
    seq: int,
    pos: int,
    item_id: str,
    *,
    text: str | None = "some retained text",
    content_hash: int = 0,
    replaces: int | None = None,
    idem: tuple[str, str, bytes] | None = None,
    access_policy: str | None = None,
) -> bool:
    feats = np.array(sorted({pos * 10 + 1, pos * 10 + 2, 2**63 + pos}), dtype=np.uint64)
    keys = np.arange(BANDS, dtype=np.uint32) + np.uint32(pos * 100)
    return st.apply_upsert(
        seq,
        pos=pos,
        item_id=item_id,
        content_hash=content_hash or (2**64 - 1 - pos),
        features=feats,
        bandkeys=keys,
        text=text,
        media_type="text/plain",
        source_time="2024-01-02T03:04:05Z",
        replaces=replaces,
        idem=idem,
        access_policy=access_policy,
    )


def test_what_is_written_reads_back_after_reopening(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    st = _open(path)
    assert st.next_pos() == 0 and st.applied_seq == 0
    assert _upsert(st, 1, 0, "doc-a", text="héllo wörld")
    assert _upsert(st, 2, 1, "doc-b", text=None, idem=("k1", "sha-1", b'{"ok":true}'))
    digest = st.digest()
    st.close()

    st = _open(path)
    try:
        assert st.applied_seq == 2 and st.next_pos() == 2
        a = st.current("doc-a")
        assert a is not None and a.live and a.pos == 0 and a.version == 1
        # A content hash with the top bit set survives the signed SQLite integer.
        assert a.content_hash == 2**64 - 1
        assert (a.media_type, a.source_time) == ("text/plain", "2024-01-02T03:04:05Z")
        assert a.n_shingles == 3
        assert st.text(0) == "héllo wörld"
        assert st.text(1) is None  # the text was not retained
        feats = st.features([0, 1, 99])
        assert set(feats) == {0, 1}
        assert feats[0][0] == "doc-a"
        assert feats[0][1].tolist() == [1, 2, 2**63]
        bk = st.bandkeys(1)
        assert bk is not None and bk.tolist() == [100, 101, 102, 103]
        pos, keys = st.live_bandkeys(BANDS)
        assert pos.tolist() == [0, 1] and keys.shape == (2, BANDS)
        assert st.by_content_hash(2**64 - 1) == [0]
        assert st.idempotent("k1") == ("sha-1", b'{"ok":true}')
        assert st.idempotent("k2") is None
        assert st.current("nope") is None
        assert st.digest() == digest
    finally:
        st.close()


def test_replaying_an_applied_command_is_a_no_op(tmp_path: Path) -> None:
    st = _open(tmp_path / "s.sqlite")
    try:
        assert _upsert(st, 5, 0, "doc-a")
        before = st.digest()
        assert not _upsert(st, 5, 1, "doc-b")
        assert not _upsert(st, 3, 1, "doc-b")
        assert not st.apply_tombstone(4, pos=0, epoch=4, idem=None)
        assert st.apply_compact(5) == 0
        assert not st.apply_failed(5, "upsert", "boom")
        st.apply_noop(2)
        assert st.digest() == before and st.applied_seq == 5
        assert st.current("doc-b") is None and st.live_count() == 1
    finally:
        st.close()


def test_tombstones_replacements_and_compaction(tmp_path: Path) -> None:
    st = _open(tmp_path / "s.sqlite")
    try:
        _upsert(st, 1, 0, "doc-a")
        _upsert(st, 2, 1, "doc-b")
        # A new version of doc-a replaces (tombstones) position 0.
        _upsert(st, 3, 2, "doc-a", replaces=0)
        cur = st.current("doc-a")
        assert cur is not None and cur.pos == 2 and cur.version == 3 and cur.live
        assert st.live_count() == 2
        assert st.tombstoned() == []  # doc-a's *current* version is live
        assert st.apply_tombstone(4, pos=1, epoch=4, idem=None)
        b = st.current("doc-b")
        assert b is not None and not b.live and b.tombstone_epoch == 4
        assert [i.item_id for i in st.tombstoned()] == ["doc-b"]
        assert set(st.features([0, 1, 2])) == {2}
        assert st.live_positions([0, 1, 2]) == {2}
        assert [p for p, _i, _f in st.all_features()] == [2]
        # Compaction drops the payload of the two dead rows, keeps the rows.
        assert st.apply_compact(5) == 2
        assert st.text(0) is None and st.text(1) is None
        assert st.text(2) == "some retained text"
        assert st.bandkeys(1) is None
        assert [r[0] for r in st.rows()] == [0, 1, 2]
    finally:
        st.close()


def test_failed_commands_are_recorded_in_order(tmp_path: Path) -> None:
    st = _open(tmp_path / "s.sqlite")
    try:
        assert st.apply_failed(1, "upsert", "bad <input>")
        assert st.apply_failed(2, "tombstone", "unknown item")
        assert st.failed_count() == 2 and st.applied_seq == 2
        assert st.failed_commands() == [
            {"seq": 1, "op": "upsert", "reason": "bad <input>"},
            {"seq": 2, "op": "tombstone", "reason": "unknown item"},
        ]
        assert [f["seq"] for f in st.failed_commands(limit=1)] == [2]
    finally:
        st.close()


def test_decision_events_links_and_members(tmp_path: Path) -> None:
    st = _open(tmp_path / "s.sqlite")
    try:
        _upsert(st, 1, 0, "canon")
        _upsert(st, 2, 1, "dup")
        before = st.decision_digest()
        ev = {
            "kind": "link",
            "item_id": "dup",
            "effect": {"item_id": "dup", "state": "duplicate", "canonical": "canon"},
        }
        assert st.apply_event(3, ev)
        assert not st.apply_event(3, ev)
        assert st.link("dup") == ("duplicate", "canon")
        assert st.link("canon") is None
        assert st.link_state() == {"dup": ("duplicate", "canon")}
        assert st.members("canon") == ["dup"]
        assert st.broken_links() == []
        assert st.event(3) == ev and st.last_event() == ev and st.events() == [ev]
        assert st.decision_digest() != before
        # Tombstoning the canonical item breaks the link (nothing re-linked it).
        st.apply_tombstone(4, pos=0, epoch=4, idem=None)
        assert st.broken_links() == ["dup"]
    finally:
        st.close()


def test_values_are_sealed_at_rest(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    st = _open(path)
    _upsert(st, 1, 0, "secret-item-id-4242", text="confidential payload text 4242")
    st.checkpoint()
    st.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert b"secret-item-id-4242" not in raw
    assert b"confidential payload text 4242" not in raw
    assert b"text/plain" not in raw


def test_backup_is_a_consistent_copy(tmp_path: Path) -> None:
    st = _open(tmp_path / "s.sqlite")
    _upsert(st, 1, 0, "doc-a")
    st.backup_to(str(tmp_path / "copy.sqlite"))
    digest = st.digest()
    st.close()
    copy = _open(tmp_path / "copy.sqlite")
    try:
        assert copy.digest() == digest and copy.applied_seq == 1
    finally:
        copy.close()
    st2 = _open(tmp_path / "s.sqlite")
    try:
        with pytest.raises(NeardupIOError) as err:
            st2.backup_to(str(tmp_path / "missing-dir" / "x.sqlite"))
        assert err.value.path.endswith("x.sqlite")
        assert st2.digest() == digest  # the live store is not changed
    finally:
        st2.close()


def test_a_changed_row_is_refused_with_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    st = _open(path)
    _upsert(st, 1, 0, "doc-a")
    st.close()
    # Flip a tombstone behind the store's back; the checksum triggers run, but
    # with a stand-in function that leaves the recorded checksum unchanged.
    db = sqlite3.connect(path)
    db.create_function("nd_rowmix", -1, lambda x, *_: x)
    db.execute("UPDATE items SET tombstone_epoch=1 WHERE pos=0")
    db.commit()
    db.close()
    with pytest.raises(CorruptFile, match="do not match their checksum") as err:
        _open(path)
    assert err.value.path == str(path)


def test_a_store_of_another_tenant_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    _open(path, "acme").close()
    with pytest.raises(CorruptFile, match="tenant 'acme'"):
        _open(path, "globex")


def test_a_file_that_is_not_a_store_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    path.write_bytes(b"not a database at all " * 512)
    with pytest.raises(CorruptFile) as err:
        _open(path)
    assert err.value.path == str(path)


def test_an_unknown_schema_entry_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    _open(path).close()
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE intruder(x)")
    db.commit()
    db.close()
    with pytest.raises(CorruptFile, match="intruder"):
        _open(path)


def test_store_error_separates_damage_from_environment() -> None:
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = sqlite3.SQLITE_FULL  # type: ignore[attr-defined]
    err = store_error("s.sqlite", full, "write")
    assert isinstance(err, NeardupIOError) and err.error.errno == errno.EIO
    notadb = sqlite3.DatabaseError("file is not a database")
    notadb.sqlite_errorcode = sqlite3.SQLITE_NOTADB  # type: ignore[attr-defined]
    assert isinstance(store_error("s.sqlite", notadb, "open"), CorruptFile)
    # No code at all: treated as damage.
    assert isinstance(store_error("s.sqlite", sqlite3.Error("?"), "open"), CorruptFile)


def test_access_policies_are_kept_sealed_per_item_version(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    st = _open(path)
    _upsert(st, 1, 0, "doc-a", access_policy="eu-secret-label")
    _upsert(st, 2, 1, "doc-b")
    _upsert(st, 3, 2, "doc-a", replaces=0, access_policy="us")
    _upsert(st, 4, 3, "doc-c", access_policy="hr")
    assert st.apply_tombstone(5, pos=3, epoch=5, idem=None)
    st.apply_compact(6)
    digest = st.digest()
    st.checkpoint()
    st.close()
    assert b"eu-secret-label" not in b"".join(p.read_bytes() for p in tmp_path.iterdir())
    st = _open(path)
    try:
        assert st.digest() == digest
        a, b = st.current("doc-a"), st.current("doc-b")
        assert a is not None and a.access_policy == "us" and "access_policy='us'" in repr(a)
        assert b is not None and b.access_policy is None and "access_policy" not in repr(b)
        assert [i.access_policy for i in st.tombstoned()] == ["hr"]  # compaction keeps it
        assert st.access_policies() == {0: "eu-secret-label", 2: "us", 3: "hr"}
        assert st.access_policy(1) is None and st.access_policy(0) == "eu-secret-label"
    finally:
        st.close()
    # A policy moved to another item's row (checksums kept right) fails authentication.
    db = sqlite3.connect(path)
    db.create_function("nd_rowmix", -1, rowmix, deterministic=True)
    db.execute("UPDATE access SET pos=1 WHERE pos=0")
    db.commit()
    db.close()
    st = _open(path)
    try:
        with pytest.raises(CorruptFile, match="authentication failed"):
            st.current("doc-b")
    finally:
        st.close()


def test_a_store_written_before_access_policies_opens_and_reads_alike(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    st = _open(path)
    _upsert(st, 1, 0, "doc-a")
    digest = st.digest()
    st.close()
    # The store as the version before access policies wrote it: no access table.
    db = sqlite3.connect(path)
    for op in ("ins", "del", "upd"):
        db.execute(f"DROP TRIGGER nd_sum_access_{op}")
    db.execute("DROP TABLE access")
    db.execute("DELETE FROM nd_rowsums WHERE tbl='access'")
    db.commit()
    db.close()
    st = _open(path)
    try:
        assert st.digest() == digest  # no policy: the same logical state, the same digest
        cur = st.current("doc-a")
        assert cur is not None and cur.access_policy is None
        _upsert(st, 2, 1, "doc-b", access_policy="eu")
    finally:
        st.close()
    again = _open(path)
    try:
        cur = again.current("doc-b")
        assert cur is not None and cur.access_policy == "eu"
    finally:
        again.close()


_LABELS = st_.one_of(st_.none(), st_.from_regex(r"[a-z0-9][a-z0-9_.:-]{0,8}", fullmatch=True))


@settings(max_examples=25, deadline=None)
@given(st_.lists(st_.tuples(st_.sampled_from("abc"), _LABELS), min_size=1, max_size=8))
def test_the_current_version_reads_its_own_policy(writes: list[tuple[str, str | None]]) -> None:
    """Whatever the sequence of versions, an item reads back the policy of its
    current version (None when it was stored without one), after reopening too."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.sqlite"
        st = _open(path)
        last: dict[str, tuple[int, str | None]] = {}
        for seq, (item, policy) in enumerate(writes, 1):
            prev = last.get(item)
            _upsert(
                st,
                seq,
                seq - 1,
                item,
                replaces=None if prev is None else prev[0],
                access_policy=policy,
            )
            last[item] = (seq - 1, policy)
        st.close()
        st = _open(path)
        try:
            for item, (pos, policy) in last.items():
                cur = st.current(item)
                assert cur is not None and cur.pos == pos and cur.access_policy == policy
        finally:
            st.close()

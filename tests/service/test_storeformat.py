"""The feature store's on-disk format: what is sealed, the upgrades of formats 1 and 2."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from neardup import CorruptFile, InvalidConfig
from neardup.service import storeformat as fmt
from neardup.service._crypto import LegacySealer, Sealer
from neardup.service.store import FeatureStore

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
EXPECTED: dict[str, Any] = json.loads((FIXTURES / "store_v1.json").read_text())
# The fixtures were sealed with the first construction under this key; the
# current one seals with a 64-byte key of its own.
LEGACY_KEY = bytes.fromhex(EXPECTED["key_hex"])
KEY = bytes(range(64, 128))

# Every value a request sent that the format-1 fixture holds in clear.
SECRETS = [
    b"doc/1",
    b"doc 2",
    "Ünïcode-3".encode(),
    b"idem-1",
    b"rev-1",
    b"one word changed",
    b"text/plain",
    b"2026-01-02",
    b"out of range",
    b'"threshold"',
    b"retained text",
]


def _v1_copy(tmp_path: Path) -> Path:
    dest = tmp_path / "features-0.sqlite"
    shutil.copy(FIXTURES / "store_v1.sqlite", dest)
    return dest


def _bytes_on_disk(path: Path) -> bytes:
    out = b""
    for suffix in ("", "-wal"):
        p = Path(f"{path}{suffix}")
        if p.exists():
            out += p.read_bytes()
    return out


def _open(path: Path, tenant: str = "acme") -> FeatureStore:
    return FeatureStore(str(path), Sealer(KEY), tenant, legacy=LegacySealer(LEGACY_KEY))


def _check_reads(st: FeatureStore) -> None:
    assert st.applied_seq == EXPECTED["applied_seq"]
    assert st.digest() == EXPECTED["digest"]
    assert st.decision_digest() == EXPECTED["decision_digest"]
    assert st.events() == EXPECTED["events"]
    assert st.labels() == EXPECTED["labels"]
    assert st.policies() == EXPECTED["policies"]
    assert st.failed_commands() == EXPECTED["failed"]
    assert {k: list(v) for k, v in st.link_state().items()} == EXPECTED["links"]
    for item_id, (text,) in EXPECTED["items"].items():
        assert str(st.current(item_id)) == text
    for key, (body, resp) in EXPECTED["idem"].items():
        got = st.idempotent(key)
        assert got is not None and got == (body, resp.encode())
    for p, text in EXPECTED["texts"].items():
        assert st.text(int(p)) == text
    for p, keys in EXPECTED["bandkeys"].items():
        bk = st.bandkeys(int(p))
        assert bk is not None and bk.tolist() == keys
    feats = st.features(list(range(5)))
    assert {str(p): f.tolist() for p, (_i, f) in feats.items()} == EXPECTED["features"]
    assert st.members("doc/1") == ["doc 2", "x" * 200]
    assert st.broken_links(10) == []


def test_format1_store_is_upgraded_without_loss(tmp_path: Path) -> None:
    path = _v1_copy(tmp_path)
    assert all(s in path.read_bytes() for s in SECRETS[:3])
    st = _open(path)
    assert st.upgraded_rows == 20
    assert st.meta("format") == str(fmt.FORMAT)
    _check_reads(st)
    st.close()
    # Nothing in clear is left, not even in free pages or the WAL.
    disk = _bytes_on_disk(path)
    assert [s for s in SECRETS if s in disk] == []
    again = _open(path)
    assert again.upgraded_rows == 0
    _check_reads(again)
    again.close()


def test_interrupted_upgrade_leaves_format1_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _v1_copy(tmp_path)
    real = fmt.upgrade_v1

    def half(db: Any, old: fmt.RowOpen, seal: fmt.RowSeal, existing: set[str]) -> int:
        real(db, old, seal, existing)
        raise OSError("power lost during the upgrade")

    import neardup.service.store.integrity as store_mod

    monkeypatch.setattr(store_mod, "upgrade_v1", half)
    with pytest.raises(OSError, match="power lost"):
        _open(path)
    monkeypatch.setattr(store_mod, "upgrade_v1", real)
    with sqlite3.connect(path) as db:
        cols = {r[1]: r[2] for r in db.execute("PRAGMA table_info(items)")}
    assert cols["item_id"] == "TEXT"
    st = _open(path)
    assert st.upgraded_rows == 20
    _check_reads(st)
    st.close()


def test_damaged_format1_store_is_refused_before_upgrade(tmp_path: Path) -> None:
    path = _v1_copy(tmp_path)
    with sqlite3.connect(path) as db:
        # A change the checksum triggers do not see: damage, as if on disk.
        db.execute("DROP TRIGGER nd_sum_links_upd")
        db.execute("UPDATE links SET canonical='doc 2' WHERE item_id='x'||substr(item_id,2)")
    with pytest.raises(CorruptFile, match="table 'links' do not match"):
        _open(path)
    with sqlite3.connect(path) as db:
        cols = {r[1]: r[2] for r in db.execute("PRAGMA table_info(items)")}
    assert cols["item_id"] == "TEXT"


def _new_store(path: Path, tenant: str = "acme") -> FeatureStore:
    st = FeatureStore(str(path), Sealer(KEY), tenant)
    feats = np.arange(10, dtype=np.uint64)
    keys = np.arange(8, dtype=np.uint32)
    for pos, item_id in enumerate(["doc/1", "doc 2"]):
        st.apply_upsert(
            pos + 1,
            pos=pos,
            item_id=item_id,
            content_hash=pos + 99,
            features=feats,
            bandkeys=keys,
            text="retained text",
            media_type="text/plain",
            source_time="2026-01-02T00:00:00Z",
            replaces=None,
            idem=("idem-1", "ab" * 32, b'{"seq": 1}') if pos == 0 else None,
            event={
                "kind": "decision",
                "item_id": item_id,
                "effect": {"item_id": item_id, "state": "duplicate", "canonical": "doc/1"}
                if pos == 1
                else None,
            },
        )
    policy = {"version": 2, "threshold": 0.8}
    st.apply_event(3, {"kind": "policy", "item_id": None, "policy": policy})
    st.apply_event(
        4,
        {
            "kind": "label",
            "item_id": None,
            "reviewer": "rev-1",
            "left": "doc/1",
            "right": "doc 2",
            "score": 0.9,
            "label": "duplicate",
            "rationale": "one word changed",
        },
    )
    st.apply_failed(5, "tombstone", "epoch out of range for doc/1")
    return st


def test_new_store_holds_nothing_a_request_sent_in_clear(tmp_path: Path) -> None:
    path = tmp_path / "features-0.sqlite"
    st = _new_store(path)
    assert st.members("doc/1") == ["doc 2"]
    assert st.link("doc 2") == ("duplicate", "doc/1")
    assert st.idempotent("idem-1") == ("ab" * 32, b'{"seq": 1}')
    item = st.current("doc 2")
    assert item is not None and item.media_type == "text/plain"
    st.checkpoint()
    st.close()
    disk = _bytes_on_disk(path)
    assert [s for s in SECRETS if s in disk] == []
    with sqlite3.connect(path) as db:
        assert {r[0] for r in db.execute("SELECT state FROM links")} == {"duplicate"}
        assert {r[0] for r in db.execute("SELECT kind FROM events")} == {
            "decision",
            "policy",
            "label",
        }


def test_sealed_values_are_bound_to_their_row_and_tenant(tmp_path: Path) -> None:
    path = tmp_path / "features-0.sqlite"
    _new_store(path).close()
    with sqlite3.connect(path) as db:
        # Keep the row checksums consistent: only authentication can catch the swap.
        db.create_function("nd_rowmix", -1, fmt.rowmix, deterministic=True)
        a, b = (r[0] for r in db.execute("SELECT media_type FROM items ORDER BY pos"))
        assert a != b  # the same media type, sealed to two positions
        db.execute("UPDATE items SET media_type=? WHERE pos=1", (a,))
    st = _open(path)
    with pytest.raises(CorruptFile, match="authentication failed"):
        st.current("doc 2")
    assert st.current("doc/1") is not None
    st.close()
    # Another tenant's lookup value for the same id differs.
    seal = fmt.RowSeal(Sealer(KEY), "acme", str(path))
    other = fmt.RowSeal(Sealer(KEY), "other", str(path))
    assert other.ref("id", "doc/1") != seal.ref("id", "doc/1")


def test_store_of_another_format_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "features-0.sqlite"
    _new_store(path).close()
    with sqlite3.connect(path) as db:
        db.create_function("nd_rowmix", -1, fmt.rowmix, deterministic=True)
        db.execute("UPDATE meta SET v='4' WHERE k='format'")
    with pytest.raises(CorruptFile, match="meta format is '4'; this version reads format 3"):
        _open(path)


def _v2_copy(tmp_path: Path) -> Path:
    # store_v1.sqlite upgraded to format 2 by the version that sealed with the
    # first construction (tests/fixtures/make_sealed_v2.py); same content.
    dest = tmp_path / "features-0.sqlite"
    shutil.copy(FIXTURES / "store_v2.sqlite", dest)
    return dest


def _sealed_cells(path: Path) -> set[bytes]:
    """Every sealed cell of a store of format 2 or 3 (the BLOB columns)."""
    out: set[bytes] = set()
    with sqlite3.connect(path) as db:
        # A store written before a table existed lacks it (``access``, added in format 3).
        present = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        for table, cols in fmt.schema_parts(fmt.SCHEMA).columns.items():
            if table not in present:
                continue
            for row in db.execute(f"SELECT {', '.join(cols)} FROM {table}"):
                out |= {bytes(v) for v in row if isinstance(v, bytes)}
    return out


def test_format2_store_is_sealed_again_without_loss(tmp_path: Path) -> None:
    path = _v2_copy(tmp_path)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT v FROM meta WHERE k='format'").fetchone() == ("2",)
    old_cells = _sealed_cells(path)
    st = _open(path)
    assert st.upgraded_rows == 20
    assert st.meta("format") == "3"
    _check_reads(st)
    st.close()
    # Every sealed cell was replaced: none of the first construction's is left.
    new_cells = _sealed_cells(path)
    assert len(new_cells) == len(old_cells) and not new_cells & old_cells
    seal = fmt.RowSeal(Sealer(KEY), "acme", str(path))
    assert seal.ref("id", "doc/1") in new_cells
    again = _open(path)
    assert again.upgraded_rows == 0
    _check_reads(again)
    again.close()
    # Once upgraded, the first construction's sealer is no longer needed.
    FeatureStore(str(path), Sealer(KEY), "acme").close()


def test_interrupted_sealing_upgrade_leaves_format2_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _v2_copy(tmp_path)
    before = _sealed_cells(path)
    real = fmt.upgrade_v2

    def half(db: Any, old: fmt.RowOpen, seal: fmt.RowSeal) -> int:
        real(db, old, seal)
        raise OSError("power lost during the upgrade")

    import neardup.service.store.integrity as store_mod

    monkeypatch.setattr(store_mod, "upgrade_v2", half)
    with pytest.raises(OSError, match="power lost"):
        _open(path)
    monkeypatch.setattr(store_mod, "upgrade_v2", real)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT v FROM meta WHERE k='format'").fetchone() == ("2",)
    assert _sealed_cells(path) == before
    st = _open(path)
    assert st.upgraded_rows == 20
    _check_reads(st)
    st.close()


def test_format2_store_is_verified_before_it_is_sealed_again(tmp_path: Path) -> None:
    path = _v2_copy(tmp_path)
    with sqlite3.connect(path) as db:
        # A change the checksum triggers do not see: damage, as if on disk.
        db.execute("DROP TRIGGER nd_sum_failed_upd")
        db.execute("UPDATE failed SET op='upsert'")
    before = _sealed_cells(path)
    with pytest.raises(CorruptFile, match="table 'failed' do not match"):
        _open(path)
    assert _sealed_cells(path) == before


def test_old_store_without_the_old_sealer_is_refused_unchanged(tmp_path: Path) -> None:
    for copy, fmt_no in ((_v2_copy, 2), (_v1_copy, 1)):
        path = copy(tmp_path)
        before = path.read_bytes()
        with pytest.raises(InvalidConfig, match=f"store of format {fmt_no}, sealed with") as err:
            FeatureStore(str(path), Sealer(KEY), "acme")
        assert "legacy=MasterSecret.legacy_sealer" in err.value.fix
        assert path.read_bytes() == before
        path.unlink()


def test_format2_store_under_another_key_is_refused_not_upgraded(tmp_path: Path) -> None:
    path = _v2_copy(tmp_path)
    before = _sealed_cells(path)
    with pytest.raises(CorruptFile, match="authentication failed"):
        FeatureStore(str(path), Sealer(KEY), "acme", legacy=LegacySealer(bytes(32)))
    assert _sealed_cells(path) == before


def test_new_stores_are_format3_sealed_with_aes_siv(tmp_path: Path) -> None:
    path = tmp_path / "features-0.sqlite"
    st = _new_store(path)
    assert st.meta("format") == "3"
    st.close()
    seal = fmt.RowSeal(Sealer(KEY), "acme", str(path))
    with sqlite3.connect(path) as db:
        ids = [bytes(r[0]) for r in db.execute("SELECT item_id FROM items ORDER BY pos")]
    assert ids == [seal.ref("id", "doc/1"), seal.ref("id", "doc 2")]
    assert len(ids[0]) == len("doc/1") + 17  # SIV's 16-byte IV and the framing byte
    assert Sealer(KEY).open(ids[0], b"acme\x00id\x00\x00") == b"doc/1"


def test_replaying_the_same_commands_writes_byte_identical_rows(tmp_path: Path) -> None:
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    _new_store(a).close()
    _new_store(b).close()
    for table, cols in fmt.schema_parts(fmt.SCHEMA).columns.items():
        sql = f"SELECT {', '.join(cols)} FROM {table} ORDER BY rowid"
        with sqlite3.connect(a) as da, sqlite3.connect(b) as db:
            rows = da.execute(sql).fetchall()
            assert rows == db.execute(sql).fetchall(), table

"""Storage faults at the library level: a damaged byte anywhere in a tenant's feature
store, its write-ahead log or its command log either starts with every acknowledged
write intact (the store rebuilt from snapshot + log when needed) or is refused
loudly, naming the file.  Never a silent loss, never a raw sqlite3 traceback."""

from __future__ import annotations

import os
import shutil
import sqlite3
import struct
from pathlib import Path
from typing import Any

import pytest

from neardup.core._errors import CorruptFile, NeardupError, NeardupIOError
from neardup.service._crypto import MasterSecret
from neardup.service.store import FeatureStore, store_error
from neardup.service.tenant import Tenant, TenantConfig
from service_helpers import record_figure

MASTER = MasterSecret(bytes(range(32)))
CFG = TenantConfig.from_dict(
    {
        "threshold": 0.75,
        "shingle": "word:2",
        "num_perm": 32,
        "bands": 8,
        "rows": 4,
        "retain": "text",
    }
)
PAGE = 4096


def _build(root: Path, *, close: bool = True) -> tuple[Tenant, dict[str, Any]]:
    """A tenant with upserts (some duplicates: decision events and links), idempotency
    keys, a snapshot part-way, a replacement and a tombstone."""
    t = Tenant.create(str(root), "t1", CFG, MASTER)
    for i in range(14):
        base = i - 1 if i % 4 == 3 else i  # every 4th item near-duplicates its predecessor
        t.upsert(
            item_id=f"i{i}",
            content=f"item number {base} says hello to the whole wide world {base * 7}",
            idempotency_key=f"k{i}",
            source_time="2024-01-01T00:00:00Z",
            media_type="text/plain",
        )
        if i == 6:
            t.snapshot()
    t.upsert(item_id="i1", content="a replaced text for item one entirely", replace=True)
    t.tombstone("i5")
    expect = {
        "digest": t.digest(),
        "items": {f"i{i}": t.item(f"i{i}") for i in range(14)},
        "seq": t.seq,
    }
    if close:
        t.close()
    return t, expect


def _outcome(root: Path, expect: dict[str, Any], damaged: str) -> str:
    """'refused', 'recovered' or 'clean'; fails the test on anything else."""
    refusal: str | None
    try:
        t = Tenant.open_dir(str(root), MASTER)
    except (CorruptFile, NeardupIOError) as exc:
        refusal = str(exc)
    else:
        refusal = None
    if refusal is not None:
        assert os.path.basename(damaged) in refusal, refusal
        return "refused"
    try:
        assert t.digest() == expect["digest"], "silent change"
        for item_id, doc in expect["items"].items():
            assert t.item(item_id) == doc, item_id
        assert t.seq == expect["seq"]
        return "recovered" if t.recovered else "clean"
    finally:
        t.close()


def _flip_each(
    tmp_path: Path, base: Path, name: str, offsets: list[int], expect: dict[str, Any]
) -> dict[str, int]:
    counts: dict[str, int] = {}
    good = (base / name).read_bytes()
    for n, at in enumerate(offsets):
        work = tmp_path / f"w{n}"
        shutil.copytree(base, work)
        data = bytearray(good)
        data[at] ^= 0x01 if n % 2 else 0x80
        (work / name).write_bytes(bytes(data))
        try:
            kind = _outcome(work, expect, name)
        except AssertionError as exc:
            raise AssertionError(f"byte {at} of {name}: {exc}") from exc
        counts[kind] = counts.get(kind, 0) + 1
        shutil.rmtree(work)
    return counts


def _page_offsets(size: int) -> list[int]:
    """A few bytes of every page: its header, its first cell pointers, and cell
    content from the end of the page backwards (where SQLite stores rows)."""
    out: list[int] = []
    for page in range(size // PAGE):
        start = page * PAGE
        head = 100 if page == 0 else 0  # page 1 begins with the 100-byte file header
        picks = [0, 5, 18, 28, 60] if page == 0 else []
        picks += [head, head + 3, head + 9, PAGE - 1, PAGE - 20, PAGE - 150, PAGE - 700]
        picks += [PAGE - 1800, PAGE // 2]
        out += sorted({start + p for p in picks})
    return out


@pytest.mark.slow
def test_a_byte_flipped_in_any_region_of_the_store_never_loses_a_write(tmp_path: Path) -> None:
    base = tmp_path / "base"
    _, expect = _build(base)
    name = "features-0.sqlite"
    assert not (base / f"{name}-wal").exists()
    offsets = _page_offsets(os.path.getsize(base / name))
    counts = _flip_each(tmp_path, base, name, offsets, expect)
    print(f"outcomes of {len(offsets)} flips: {counts}")
    record_figure("damage_store", bytes_damaged=len(offsets), outcomes=counts, silent=0)
    # Most flips hit live content and are rebuilt from snapshot + log; some hit
    # unused space and change nothing; none is silent.
    assert counts.get("recovered", 0) > len(offsets) // 3, counts


def test_a_byte_flipped_in_the_write_ahead_log_never_loses_a_write(tmp_path: Path) -> None:
    # As after kill -9: the store's recent transactions are still in its -wal file.
    base = tmp_path / "base"
    t, expect = _build(base, close=False)
    try:
        wal = base / "features-0.sqlite-wal"
        size = os.path.getsize(wal)
        assert size > 32
        crash = tmp_path / "crash"
        shutil.copytree(base, crash)
    finally:
        t.close()
    # The WAL header (32 bytes), then frames of a 24-byte header + one page each.
    # Frames sampled evenly (every frame would take a minute).
    offsets = [0, 8, 16, 24]
    frames = (size - 32) // (24 + PAGE)
    for frame in sorted({frames * k // 16 for k in range(16)} | {frames - 1}):
        start = 32 + frame * (24 + PAGE)
        offsets += [start + 8, start + 24 + PAGE - 1, start + 24 + PAGE // 2]
    counts = _flip_each(tmp_path, crash, wal.name, offsets, expect)
    print(f"{frames} WAL frames; outcomes of {len(offsets)} flips: {counts}")
    record_figure("damage_store_wal", bytes_damaged=len(offsets), outcomes=counts, silent=0)
    assert sum(counts.values()) == len(offsets), counts


def test_a_byte_flipped_in_the_command_log_is_refused_naming_it(tmp_path: Path) -> None:
    base = tmp_path / "base"
    _, expect = _build(base)
    name = "log-0.ndlog"
    data = (base / name).read_bytes()
    offsets = [0, 9, 20, 23]  # the file header: magic, version, base sequence, CRC
    off = 24
    while off < len(data):
        (n,) = struct.unpack_from("<I", data, off + 4)
        end = off + 12 + n
        offsets += sorted({off, off + 5, off + 9, off + 12, (off + end) // 2, end - 1})
        off = end
    assert off == len(data)
    counts = _flip_each(tmp_path, base, name, offsets, expect)
    # Every record of this log was acknowledged: damage to any of them, the last
    # included, is refused; none is trimmed as if it were a torn write.
    assert counts == {"refused": len(offsets)}
    record_figure("damage_command_log", bytes_damaged=len(offsets), outcomes=counts, silent=0)
    # A torn record after the last one is not an acknowledged write: trimmed.
    work = tmp_path / "torn"
    shutil.copytree(base, work)
    with open(work / name, "ab") as fh:
        fh.write(b"\xd5NDR\x40\x00\x00\x00par")
    assert _outcome(work, expect, name) == "clean"


def test_zeroed_meta_page_and_header_page_are_rebuilt(tmp_path: Path) -> None:
    base = tmp_path / "base"
    _, expect = _build(base)
    store = base / "features-0.sqlite"
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        (meta_page,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name='meta'").fetchone()
    for page in (meta_page, 1):
        with open(store, "r+b") as fh:
            fh.seek((page - 1) * PAGE)
            fh.write(bytes(PAGE))
        t = Tenant.open_dir(str(base), MASTER)
        try:
            assert t.recovered is not None and t.recovered["snapshot"].endswith(".ndsnap")
            assert t.digest() == expect["digest"]
            assert {i: t.item(i) for i in expect["items"]} == expect["items"]
            assert os.path.exists(t.recovered["damaged_store_moved_to"])
        finally:
            t.close()


def test_a_read_failing_after_open_rebuilds_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "base"
    _, expect = _build(base)
    real = FeatureStore.live_bandkeys
    calls = []

    def failing_once(self: FeatureStore, bands: int) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise sqlite3.DatabaseError("database disk image is malformed")
        return real(self, bands)

    monkeypatch.setattr(FeatureStore, "live_bandkeys", failing_once)
    t = Tenant.open_dir(str(base), MASTER)
    try:
        assert t.recovered is not None and "a read at start-up failed" in t.recovered["damage"]
        assert t.digest() == expect["digest"]
    finally:
        t.close()


def test_environment_errors_are_not_mistaken_for_damage(tmp_path: Path) -> None:
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = sqlite3.SQLITE_FULL  # type: ignore[attr-defined]
    assert isinstance(store_error("s.sqlite", full, "x"), NeardupIOError)
    bad_read = sqlite3.OperationalError("disk I/O error")
    bad_read.sqlite_errorcode = sqlite3.SQLITE_IOERR_READ  # type: ignore[attr-defined]
    assert isinstance(store_error("s.sqlite", bad_read, "x"), CorruptFile)
    corrupt = sqlite3.DatabaseError("database disk image is malformed")
    corrupt.sqlite_errorcode = sqlite3.SQLITE_CORRUPT  # type: ignore[attr-defined]
    err = store_error("s.sqlite", corrupt, "x")
    assert isinstance(err, CorruptFile) and isinstance(err, NeardupError)
    assert str(err).startswith("s.sqlite: x (") and "malformed" in str(err)


def test_a_store_without_row_checksums_is_adopted_then_verified(tmp_path: Path) -> None:
    from neardup.service._crypto import Sealer

    path = str(tmp_path / "s.sqlite")
    s = FeatureStore(path, Sealer(bytes(64)), "t1")
    s.apply_noop(7)
    s.close()
    # A store written before the checksums existed: no nd_rowsums, no triggers.
    db = sqlite3.connect(path)
    names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='trigger'")]
    for name in names:
        db.execute(f"DROP TRIGGER {name}")
    db.execute("DROP TABLE nd_rowsums")
    db.execute("UPDATE meta SET v='9' WHERE k='applied_seq'")  # no trigger: not summed
    db.commit()
    db.close()
    s = FeatureStore(path, Sealer(bytes(64)), "t1")  # adopted: trusted on first open
    assert s.applied_seq == 9
    s.close()
    db = sqlite3.connect(path)
    db.execute("DROP TRIGGER nd_sum_meta_upd")
    db.execute("UPDATE meta SET v='10' WHERE k='applied_seq'")  # changed behind its back
    db.commit()
    db.close()
    with pytest.raises(CorruptFile, match="do not match their checksum"):
        FeatureStore(path, Sealer(bytes(64)), "t1")


def test_rows_changed_behind_the_stores_back_are_refused(tmp_path: Path) -> None:
    from neardup.service._crypto import Sealer

    path = str(tmp_path / "s.sqlite")
    s = FeatureStore(path, Sealer(bytes(64)), "t1")
    s.apply_noop(3)
    s.close()
    # Another writer without the checksum function cannot write at all ...
    db = sqlite3.connect(path)
    with pytest.raises(sqlite3.OperationalError, match="nd_rowmix"):
        db.execute("UPDATE meta SET v='4' WHERE k='applied_seq'")
    db.close()
    # ... and a change that bypasses the triggers is found at the next open.
    raw = bytearray(Path(path).read_bytes())
    # The meta row is the record 'applied_seq', '3' (the index entry has no value).
    at = raw.index(b"applied_seq3") + len(b"applied_seq")
    raw[at] = ord("8")
    Path(path).write_bytes(bytes(raw))
    with pytest.raises(CorruptFile, match="table 'meta' do not match their checksum"):
        FeatureStore(path, Sealer(bytes(64)), "t1")

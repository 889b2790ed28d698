"""A service data directory written before the redesign opens and answers the same.

``tests/data/service-golden.tar.gz`` was written by a real ``neardup serve`` (two
tenants of different schemes, upserts, tombstones, a snapshot) and
``service-golden.json`` holds the answers it gave to read-only requests; see
``tests/data/make_service_golden.py``.  A later version must open that directory
and give the same answers, byte for byte after JSON parsing.
"""

from __future__ import annotations

import importlib.util
import io
import json
import sqlite3
import struct
import sys
import tarfile
import zlib
from pathlib import Path
from types import ModuleType

import pytest

from neardup.core._errors import CorruptFile
from neardup.service._crypto import MasterSecret
from neardup.service.tenant import Tenant
from service_helpers import Server

DATA = Path(__file__).resolve().parents[1] / "data"


def _maker() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "make_service_golden", DATA / "make_service_golden.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_recorded_data_directory_answers_as_recorded(tmp_path: Path) -> None:
    maker = _maker()
    with tarfile.open(DATA / "service-golden.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    recorded = json.loads((DATA / "service-golden.json").read_text())["answers"]
    producers = json.loads((tmp_path / "d.producers.json").read_text())
    srv = Server(tmp_path / "d", operator_tenants=tuple(maker.TENANTS)).start()
    try:
        got = maker.answers(srv, srv.operator_token, producers)
    finally:
        srv.stop()
    for tenant, want in recorded.items():
        diff = [
            k for k in sorted(set(want) | set(got[tenant])) if want.get(k) != got[tenant].get(k)
        ]
        assert diff == [], f"{tenant}: {len(diff)} answers differ, first {diff[:5]}"
    # The record is not trivial: duplicates found, pairs verified, tombstones seen.
    states = [
        v[1]["decision"]["state"] for k, v in recorded["t1"].items() if k.startswith("candidates-")
    ]
    assert "duplicate" in states and "unique" in states
    assert sum(v[0] == 404 for v in recorded["t1"].values() if isinstance(v, list)) >= 1
    # Opened by this version, the stores and logs are in the current formats.
    for tenant in recorded:
        assert _formats(tmp_path / "d" / "tenants" / tenant) == ("3", 3)


def _formats(root: Path, gen: int = 0) -> tuple[str, int]:
    """The store's ``meta`` format and the command log's header version."""
    with sqlite3.connect(root / f"features-{gen}.sqlite") as db:
        (store,) = db.execute("SELECT v FROM meta WHERE k='format'").fetchone()
    (log,) = struct.unpack_from("<I", (root / f"log-{gen}.ndlog").read_bytes(), 8)
    return str(store), int(log)


def _manifest(snapshot: bytes) -> dict[str, object]:
    with tarfile.open(fileobj=io.BytesIO(snapshot)) as tar:
        fh = tar.extractfile("manifest.json")
        assert fh is not None
        doc: dict[str, object] = json.loads(fh.read())
    return doc


@pytest.mark.timeout(300)
def test_the_recorded_tenants_are_sealed_again_in_place_and_keep_their_state(
    tmp_path: Path,
) -> None:
    """The recorded directory was sealed with the first construction (store format
    2, log format 2, snapshot format 1): opening a tenant rewrites its store and log
    with AES-256-SIV, the state stays the same, new writes use the new format, and
    the old snapshot still restores."""
    with tarfile.open(DATA / "service-golden.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    recorded = json.loads((DATA / "service-golden.json").read_text())["answers"]
    master = MasterSecret(bytes.fromhex((tmp_path / "d.master.key").read_text().strip()))
    for name in ("t1", "t2"):
        root = tmp_path / "d" / "tenants" / name
        assert _formats(root) == ("2", 2)
        t = Tenant.open_dir(str(root), master)
        try:
            assert t.log.upgraded_from == 2 and t.log.upgraded_records == t.log.last_seq
            assert t.store.upgraded_rows > 0
            assert t.digest() == recorded[name]["digest"]
        finally:
            t.close()
        assert _formats(root) == ("3", 3)
        t = Tenant.open_dir(str(root), master)  # current now: nothing to rewrite
        try:
            assert t.log.upgraded_from is None and t.store.upgraded_rows == 0
            assert t.digest() == recorded[name]["digest"]
        finally:
            t.close()

    root = tmp_path / "d" / "tenants" / "t1"
    old_snapshot = (root / "snapshots" / "snap-000000000063.ndsnap").read_bytes()
    assert _manifest(old_snapshot)["format_version"] == 1
    t = Tenant.open_dir(str(root), master)
    try:
        t.upsert(item_id="new-1", content="a paragraph written after the upgrade " * 4)
        # The new record is sealed with the tenant's AES-256-SIV log key.
        data, off, payload = (root / "log-0.ndlog").read_bytes(), 24, b""
        while off < len(data):
            n = struct.unpack_from("<I", data, off + 4)[0]
            payload, off = data[off + 12 : off + 12 + n], off + 12 + n
        sealer = master.sealer("log", "t1", version=t.config.scheme_version)
        assert struct.unpack_from("<Q", sealer.open(payload, b"neardup-log\x00t1"))[0] == t.seq
        assert t.digest() != recorded["t1"]["digest"]
        new_snapshot = t.snapshot()
        assert _manifest(new_snapshot)["format_version"] == 2
        out = t.restore(old_snapshot)
        assert out["restored_seq"] == 63
        assert _formats(root, t.generation) == ("3", 3)
        assert t.digest() == recorded["t1"]["digest"]
        t.restore(new_snapshot)
        assert t.store.current("new-1") is not None
    finally:
        t.close()


@pytest.mark.timeout(300)
def test_a_forged_record_in_an_old_log_stops_its_rewrite_and_repair_rebases(
    tmp_path: Path,
) -> None:
    with tarfile.open(DATA / "service-golden.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    master = MasterSecret(bytes.fromhex((tmp_path / "d.master.key").read_text().strip()))
    root = tmp_path / "d" / "tenants" / "t1"
    log = root / "log-0.ndlog"
    data = bytearray(log.read_bytes())
    off = 24
    for _ in range(3):
        off += 12 + struct.unpack_from("<I", data, off + 4)[0]
    n = struct.unpack_from("<I", data, off + 4)[0]
    data[off + 12 + 20] ^= 0x01  # a payload byte, its CRC fixed: only authentication sees it
    struct.pack_into("<I", data, off + 8, zlib.crc32(bytes(data[off + 12 : off + 12 + n])))
    log.write_bytes(bytes(data))
    with pytest.raises(CorruptFile, match=f"byte offset {off}: authentication failed") as err:
        Tenant.open_dir(str(root), master)
    assert err.value.path == str(log) and "neardup repair" in err.value.fix
    assert log.read_bytes() == bytes(data) and _formats(root) == ("2", 2)
    report = Tenant.repair(str(root), master)
    assert report["status"] == "damaged" and report["survey"]["damaged_offsets"] == [off]
    assert report["next"].startswith("neardup repair --rebase")
    report = Tenant.repair(str(root), master, rebase=True)
    assert report["status"] == "repaired" and _formats(root, 1) == ("3", 3)

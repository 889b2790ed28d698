"""Command logs of formats 1 and 2 (the first sealing construction) rewritten as
format 3 (AES-256-SIV): every command kept, damage refused, a crash harmless."""

from __future__ import annotations

import json
import os
import shutil
import struct
import zlib
from pathlib import Path

import pytest

import neardup.service.logupgrade as logupgrade
from neardup.core._errors import CorruptFile, InvalidConfig, NeardupIOError
from neardup.service._crypto import LegacySealer, Sealer
from neardup.service.cmdlog import FORMAT, Command, CommandLog
from neardup.service.logupgrade import open_current

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LEGACY = json.loads((FIXTURES / "sealed_v2.json").read_text())
OLD = LegacySealer(bytes.fromhex(LEGACY["key_hex"]))
AAD = bytes.fromhex(LEGACY["log_aad_hex"])
SEAL = Sealer(bytes(range(64)))
WANT = [(c["seq"], c["header"], c["blob"]) for c in LEGACY["commands"]]


def _copy(tmp_path: Path, version: int) -> Path:
    p = tmp_path / "log-0.ndlog"
    shutil.copy(FIXTURES / f"cmdlog_v{version}.ndlog", p)
    return p


def _commands(log: CommandLog) -> list[tuple[int, dict[str, object], str]]:
    return [(c.seq, c.header, c.blob.hex()) for c in log.commands()]


def _payloads(data: bytes) -> list[bytes]:
    out, off = [], 24
    while off < len(data):
        n = struct.unpack_from("<I", data, off + 4)[0]
        out.append(data[off + 12 : off + 12 + n])
        off += 12 + n
    return out


@pytest.mark.parametrize("version", [1, 2])
def test_an_old_log_is_rewritten_as_the_current_format(tmp_path: Path, version: int) -> None:
    p = _copy(tmp_path, version)
    log = open_current(str(p), SEAL, aad=AAD, legacy=OLD)
    assert (log.version, log.upgraded_from, log.upgraded_records) == (FORMAT, version, 4)
    assert log.trimmed_bytes == 0 and log.last_seq == 5 and log.base_seq == 0
    assert _commands(log) == WANT
    log.append(Command(6, {"op": "tombstone", "item_id": "doc 2"}))
    log.close()
    data = p.read_bytes()
    assert struct.unpack_from("<I", data, 8)[0] == FORMAT == 3
    # Every record is sealed with the current construction, none with the old one.
    payloads = _payloads(data)
    assert len(payloads) == 5
    for payload in payloads:
        SEAL.open(payload, AAD)
        with pytest.raises(CorruptFile):
            OLD.open(payload, AAD)
    assert not list(tmp_path.glob("*.upgrade*"))
    # Current now: opened without the old sealer, nothing rewritten.
    log = open_current(str(p), SEAL, aad=AAD, legacy=None)
    assert log.upgraded_from is None and log.upgraded_records == 0
    assert _commands(log)[-1] == (6, {"item_id": "doc 2", "op": "tombstone"}, "")
    log.close()


def test_a_current_log_is_opened_as_it_is(tmp_path: Path) -> None:
    p = tmp_path / "log"
    log = CommandLog.create(str(p), SEAL, aad=AAD, base_seq=7)
    log.append(Command(8, {"op": "compact"}))
    log.close()
    before = p.read_bytes()
    log = open_current(str(p), SEAL, aad=AAD, legacy=OLD)
    assert log.upgraded_from is None and [c.seq for c in log.commands()] == [8]
    log.close()
    assert p.read_bytes() == before


def test_an_old_log_with_a_torn_tail_is_trimmed_then_rewritten(tmp_path: Path) -> None:
    p = _copy(tmp_path, 2)
    with open(p, "ab") as fh:
        fh.write(b"\xd5NDR\x40\x00")  # a record cut short by a crash
    log = open_current(str(p), SEAL, aad=AAD, legacy=OLD)
    assert log.trimmed_bytes == 6 and log.upgraded_from == 2
    assert _commands(log) == WANT
    log.close()


def test_a_damaged_old_log_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    p = _copy(tmp_path, 2)
    data = bytearray(p.read_bytes())
    # Forge the second record: flip a payload byte and fix its CRC, so only
    # authentication (during the rewrite) can tell.
    off = 24 + 12 + struct.unpack_from("<I", data, 24 + 4)[0]
    n = struct.unpack_from("<I", data, off + 4)[0]
    data[off + 12 + 5] ^= 0x01
    struct.pack_into("<I", data, off + 8, zlib.crc32(bytes(data[off + 12 : off + 12 + n])))
    p.write_bytes(bytes(data))
    with pytest.raises(CorruptFile, match=f"byte offset {off}: authentication failed"):
        open_current(str(p), SEAL, aad=AAD, legacy=OLD)
    assert p.read_bytes() == bytes(data)
    assert not list(tmp_path.glob("*.upgrade*"))


def test_a_crash_during_the_rewrite_leaves_the_old_log_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = _copy(tmp_path, 1)
    before = p.read_bytes()
    real = os.replace

    def crash(src: str, dst: str) -> None:
        if str(src).endswith(".upgrade"):
            raise OSError(5, "power lost before the rename")
        real(src, dst)

    monkeypatch.setattr(logupgrade.os, "replace", crash)
    with pytest.raises(NeardupIOError, match="power lost before the rename"):
        open_current(str(p), SEAL, aad=AAD, legacy=OLD)
    assert p.read_bytes() == before
    assert not list(tmp_path.glob("*.upgrade*"))
    monkeypatch.setattr(logupgrade.os, "replace", real)
    log = open_current(str(p), SEAL, aad=AAD, legacy=OLD)
    assert log.upgraded_from == 1 and _commands(log) == WANT
    log.close()


def test_an_old_log_without_its_sealer_or_under_another_key_is_refused(tmp_path: Path) -> None:
    p = _copy(tmp_path, 2)
    before = p.read_bytes()
    with pytest.raises(InvalidConfig, match="command log of format 2, sealed with AES-256-GCM"):
        open_current(str(p), SEAL, aad=AAD, legacy=None)
    with pytest.raises(CorruptFile, match="authentication failed"):
        open_current(str(p), SEAL, aad=AAD, legacy=LegacySealer(bytes(32)))
    with pytest.raises(CorruptFile, match="authentication failed"):
        open_current(str(p), SEAL, aad=b"neardup-log\x00other", legacy=OLD)
    assert p.read_bytes() == before


def test_salvage_reads_an_old_log_with_its_own_sealer(tmp_path: Path) -> None:
    p = _copy(tmp_path, 2)
    survey = CommandLog.salvage(str(p), SEAL, aad=AAD, legacy=OLD)
    assert survey["intact_records"] == 4 and survey["last_seq"] == 5
    assert survey["damaged_offsets"] == []

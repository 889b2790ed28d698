"""Packed records: byte-exact round trips, plain JSON still read, format-1 logs."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.core._errors import Conflict
from neardup.service._crypto import LegacySealer, Sealer
from neardup.service.cmdlog import Command, CommandLog
from neardup.service.recordpack import pack, unpack

SEAL = Sealer(bytes(range(64)))
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LEGACY = json.loads((FIXTURES / "sealed_v2.json").read_text())
OLD = LegacySealer(bytes.fromhex(LEGACY["key_hex"]))
AAD = bytes.fromhex(LEGACY["log_aad_hex"])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(), kids, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_pack_round_trips_any_json_text_byte_for_byte(value: object) -> None:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    packed = pack(text)
    assert packed[:1] == b"\x01"
    assert unpack(packed) == text


def test_a_decision_record_packs_small() -> None:
    record = json.dumps(
        {
            "kind": "decision",
            "item_id": "ticket-81723",
            "candidates": [],
            "decision": {
                "state": "unique",
                "reason": "no candidate found; a pair at the threshold is found with "
                "probability 0.9998, so this is not proof of uniqueness",
                "threshold": 0.8,
                "verification": "exact",
            },
            "prev": "ab" * 32,
            "time": 1796417003.643622,
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    assert len(pack(record)) < len(record) / 2


def test_plain_json_is_read_as_it_is_and_anything_else_is_refused() -> None:
    assert unpack(b'{"a":1}') == '{"a":1}'
    assert unpack(b"[1]") == "[1]"
    with pytest.raises(ValueError, match="not JSON and not packed"):
        unpack(b"\x07abc")
    with pytest.raises(ValueError, match="cut short"):
        unpack(pack('{"kind":"decision","x":"' + "y" * 300 + '"}')[:-4])


def test_a_format1_log_is_read_with_its_plain_json_headers_and_never_appended(
    tmp_path: Path,
) -> None:
    # A log as the first format wrote it (version 1, headers as plain JSON, sealed
    # with the first construction): tests/fixtures/make_sealed_v2.py.
    p = tmp_path / "log"
    shutil.copy(FIXTURES / "cmdlog_v1.ndlog", p)
    before = p.read_bytes()
    assert struct.unpack_from("<I", before, 8)[0] == 1
    n = struct.unpack_from("<I", before, 24 + 4)[0]
    plain = OLD.open(before[24 + 12 : 24 + 12 + n], AAD)
    hlen = struct.unpack_from("<I", plain, 8)[0]
    assert plain[12 : 12 + hlen] == b'{"item_id":"doc/1","n":1,"op":"upsert"}'
    log = CommandLog.open(str(p), SEAL, aad=AAD, legacy=OLD)
    assert log.version == 1
    got = [(c.seq, c.header, c.blob.hex()) for c in log.commands()]
    assert got == [(c["seq"], c["header"], c["blob"]) for c in LEGACY["commands"]]
    # Appending would mix constructions in one file: refused, nothing written
    # (a tenant rewrites such a log first: tests/service/test_logupgrade.py).
    with pytest.raises(Conflict, match="format 1, read-only here"):
        log.append(Command(6, {"op": "tombstone"}))
    log.close()
    assert p.read_bytes() == before


def test_a_new_log_is_format3_with_packed_headers(tmp_path: Path) -> None:
    p = tmp_path / "log"
    log = CommandLog.open(str(p), SEAL, aad=b"t")
    header = {"op": "upsert", "event": {"kind": "decision", "reason": "no candidate found"}}
    log.append(Command(1, header, b"xyz"))
    log.close()
    assert struct.unpack_from("<I", p.read_bytes(), 8)[0] == 3
    log = CommandLog.open(str(p), SEAL, aad=b"t")
    (cmd,) = list(log.commands())
    log.close()
    assert cmd.header == header and cmd.blob == b"xyz"
    plain = SEAL.open(p.read_bytes()[24 + 12 :], b"t")
    assert plain[12:13] == b"\x01"

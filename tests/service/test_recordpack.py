"""Packed records: byte-exact round trips, plain JSON still read, format-1 logs."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.service._crypto import Sealer
from neardup.service.cmdlog import Command, CommandLog
from neardup.service.recordpack import pack, unpack

SEAL = Sealer(bytes(range(32)))
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


def _format1_log(path: Path) -> None:
    # A log as the first format wrote it: version 1, headers as plain JSON.
    head = struct.pack("<8sIQ", b"NDCMDLOG", 1, 0)
    head += struct.pack("<I", zlib.crc32(head))
    header = b'{"op":"upsert","i":1}'
    plain = struct.pack("<QI", 1, len(header)) + header + b"blob"
    payload = SEAL.seal(plain, b"t")
    rec = struct.pack("<4sII", b"\xd5NDR", len(payload), zlib.crc32(payload)) + payload
    path.write_bytes(head + rec)


def test_a_format1_log_is_read_and_appended_in_its_own_format(tmp_path: Path) -> None:
    p = tmp_path / "log"
    _format1_log(p)
    log = CommandLog.open(str(p), SEAL, aad=b"t")
    assert log.version == 1
    log.append(Command(2, {"op": "tombstone"}))
    log.close()
    log = CommandLog.open(str(p), SEAL, aad=b"t")
    cmds = list(log.commands())
    log.close()
    assert [(c.seq, c.header) for c in cmds] == [
        (1, {"op": "upsert", "i": 1}),
        (2, {"op": "tombstone"}),
    ]
    assert cmds[0].blob == b"blob"
    # Still format 1 on disk, the appended header plain JSON: older code reads it.
    data = p.read_bytes()
    assert struct.unpack_from("<I", data, 8)[0] == 1
    first = struct.unpack_from("<I", data, 24 + 4)[0]
    second = 24 + 12 + first
    n = struct.unpack_from("<I", data, second + 4)[0]
    plain = SEAL.open(data[second + 12 : second + 12 + n], b"t")
    assert plain[12:] == b'{"op":"tombstone"}'


def test_a_new_log_is_format2_with_packed_headers(tmp_path: Path) -> None:
    p = tmp_path / "log"
    log = CommandLog.open(str(p), SEAL, aad=b"t")
    header = {"op": "upsert", "event": {"kind": "decision", "reason": "no candidate found"}}
    log.append(Command(1, header, b"xyz"))
    log.close()
    assert struct.unpack_from("<I", p.read_bytes(), 8)[0] == 2
    log = CommandLog.open(str(p), SEAL, aad=b"t")
    (cmd,) = list(log.commands())
    log.close()
    assert cmd.header == header and cmd.blob == b"xyz"
    plain = SEAL.open(p.read_bytes()[24 + 12 :], b"t")
    assert plain[12:13] == b"\x01"

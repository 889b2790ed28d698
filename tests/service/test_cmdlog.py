"""Command log: durability format, torn tails trimmed, damage (anywhere) refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.core._errors import CorruptFile
from neardup.service._crypto import Sealer
from neardup.service.cmdlog import Command, CommandLog

SEAL = Sealer(bytes(range(64)))


def fill(path: Path, n: int) -> list[int]:
    log = CommandLog.open(str(path), SEAL, aad=b"t")
    ends = []
    for i in range(1, n + 1):
        log.append(Command(i, {"op": "upsert", "i": i}, b"x" * i))
        ends.append(os.path.getsize(path))
    log.close()
    return ends


def read(path: Path) -> list[int]:
    log = CommandLog.open(str(path), SEAL, aad=b"t")
    try:
        return [c.seq for c in log.commands()]
    finally:
        log.close()


def test_round_trip_and_group_commit(tmp_path: Path) -> None:
    p = tmp_path / "log"
    fill(p, 3)
    log = CommandLog.open(str(p), SEAL, aad=b"t")
    log.append_many([Command(4, {"op": "a"}), Command(5, {"op": "b"}, b"\x00\xff")])
    log.close()
    log = CommandLog.open(str(p), SEAL, aad=b"t")
    cmds = list(log.commands())
    assert [c.seq for c in cmds] == [1, 2, 3, 4, 5]
    assert cmds[-1].blob == b"\x00\xff" and cmds[0].header == {"op": "upsert", "i": 1}
    assert [c.seq for c in log.commands(after=3)] == [4, 5]
    with pytest.raises(CorruptFile, match="refusing to append seq 5"):
        log.append(Command(5, {"op": "again"}))
    log.close()


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 400))
def test_any_torn_tail_is_trimmed_to_the_last_whole_record(tmp_path_factory, cut: int) -> None:
    p = tmp_path_factory.mktemp("torn") / "log"
    ends = fill(p, 4)
    size = ends[-1]
    cut = min(cut, size - ends[-2])  # only the last record is torn
    with open(p, "r+b") as fh:
        fh.truncate(size - cut)
    log = CommandLog.open(str(p), SEAL, aad=b"t")
    assert [c.seq for c in log.commands()] == [1, 2, 3]
    assert log.trimmed_bytes == size - cut - ends[-2]
    # The log continues cleanly after the trim.
    log.append(Command(4, {"op": "redo"}))
    log.close()
    assert read(p) == [1, 2, 3, 4]


def test_garbage_tail_is_trimmed_but_a_bad_checksum_on_the_last_record_is_refused(
    tmp_path: Path,
) -> None:
    p = tmp_path / "log"
    ends = fill(p, 3)
    with open(p, "ab") as fh:
        fh.write(b"\xd5ND")  # a torn record magic
    assert read(p) == [1, 2, 3]
    assert os.path.getsize(p) == ends[-1]
    with open(p, "r+b") as fh:
        fh.seek(ends[-1] - 3)
        fh.write(b"\x00\x00\x00")
    # The last record is all there: its failing checksum is damage, not a torn write.
    with pytest.raises(CorruptFile, match=f"last record, at byte offset {ends[-2]}") as exc:
        CommandLog.open(str(p), SEAL, aad=b"t")
    assert "follows sequence 2" in str(exc.value) and str(p) in str(exc.value)
    assert os.path.getsize(p) == ends[-1]  # nothing trimmed


def flip(path: Path, at: int, mask: int = 0x01) -> None:
    with open(path, "r+b") as fh:
        fh.seek(at)
        b = fh.read(1)
        fh.seek(at)
        fh.write(bytes([b[0] ^ mask]))


def test_a_byte_flipped_anywhere_in_the_last_record_is_refused_never_trimmed(
    tmp_path: Path,
) -> None:
    p = tmp_path / "log"
    ends = fill(p, 4)
    good = p.read_bytes()
    start, size = ends[-2], ends[-1]
    for at in range(start, size):
        for mask in (0x01, 0x80, 0xFF):
            p.write_bytes(good)
            flip(p, at, mask)
            with pytest.raises(CorruptFile, match=f"byte offset {start}") as exc:
                CommandLog.open(str(p), SEAL, aad=b"t")
            assert str(p) in str(exc.value) and "follows sequence 3" in str(exc.value)
            assert os.path.getsize(p) == size, (at, mask)  # never trimmed


def test_a_damaged_length_of_the_last_record_is_told_from_a_torn_write(tmp_path: Path) -> None:
    import struct

    p = tmp_path / "log"
    ends = fill(p, 3)
    good = p.read_bytes()
    start = ends[-2]
    (n,) = struct.unpack_from("<I", good, start + 4)
    for bad in (n + 1, n + 1000, n * 2, 2**31, 2**32 - 1, n - 1, 0):
        data = bytearray(good)
        struct.pack_into("<I", data, start + 4, bad)
        p.write_bytes(bytes(data))
        with pytest.raises(CorruptFile, match=f"byte offset {start}") as exc:
            CommandLog.open(str(p), SEAL, aad=b"t")
        if bad > n:  # runs past the end of the file, yet its checksum matches
            assert f"matches the {n} bytes present" in str(exc.value)
    # A damaged length followed by a torn record: still told by the checksum.
    data = bytearray(good)
    struct.pack_into("<I", data, start + 4, n + 500)
    p.write_bytes(bytes(data) + b"\xd5NDR\x40\x00\x00\x00part")
    with pytest.raises(CorruptFile, match=f"declares {n + 500} payload bytes"):
        CommandLog.open(str(p), SEAL, aad=b"t")


def test_truncation_at_every_byte_of_the_last_record_is_trimmed(tmp_path: Path) -> None:
    p = tmp_path / "log"
    ends = fill(p, 4)
    good = p.read_bytes()
    for cut in range(ends[-2], ends[-1]):
        p.write_bytes(good[:cut])
        log = CommandLog.open(str(p), SEAL, aad=b"t")
        assert [c.seq for c in log.commands()] == [1, 2, 3], cut
        assert log.trimmed_bytes == cut - ends[-2] and log.last_seq == 3
        log.close()
        assert os.path.getsize(p) == ends[-2]


def test_a_zero_filled_tail_is_refused_with_the_power_loss_fix(tmp_path: Path) -> None:
    p = tmp_path / "log"
    ends = fill(p, 2)
    with open(p, "ab") as fh:
        fh.write(bytes(64))  # the size reached the disk, the data did not
    with pytest.raises(CorruptFile, match=f"truncate the file to {ends[-1]} bytes"):
        CommandLog.open(str(p), SEAL, aad=b"t")


def test_a_damaged_crc_field_still_names_the_records_sequence(tmp_path: Path) -> None:
    p = tmp_path / "log"
    ends = fill(p, 3)
    flip(p, ends[0] + 9)  # the CRC field of record 2
    with pytest.raises(CorruptFile, match="authenticates as sequence 2") as exc:
        CommandLog.open(str(p), SEAL, aad=b"t")
    assert "follows sequence 1" in str(exc.value)


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 300), min_size=1, max_size=8),
    kind=st.sampled_from(["cut", "flip", "flip-earlier", "none"]),
    where=st.floats(0, 1, exclude_max=True),
    mask=st.integers(1, 255),
)
def test_random_logs_torn_tails_trimmed_damage_refused(
    tmp_path_factory, sizes: list[int], kind: str, where: float, mask: int
) -> None:
    p = tmp_path_factory.mktemp("rand") / "log"
    log = CommandLog.open(str(p), SEAL, aad=b"t")
    ends = [os.path.getsize(p)]
    for i, n in enumerate(sizes, 1):
        blob = bytes(range(256)) * (n // 256) + b"y" * (n % 256)
        log.append(Command(i, {"op": "w", "i": i}, blob))
        ends.append(os.path.getsize(p))
    log.close()
    k = len(sizes)
    if kind == "cut":
        cut = ends[-2] + int(where * (ends[-1] - ends[-2]))
        with open(p, "r+b") as fh:
            fh.truncate(cut)
        log = CommandLog.open(str(p), SEAL, aad=b"t")
        assert [c.seq for c in log.commands()] == list(range(1, k))
        assert log.trimmed_bytes == cut - ends[-2]
        log.close()
    elif kind == "none":
        assert read(p) == list(range(1, k + 1))
    else:
        rec = k - 1 if kind == "flip" else int(where * k)
        at = ends[rec] + int(where * (ends[rec + 1] - ends[rec]))
        flip(p, at, mask)
        with pytest.raises(CorruptFile, match=f"byte offset {ends[rec]}"):
            CommandLog.open(str(p), SEAL, aad=b"t")
        assert os.path.getsize(p) == ends[-1]


def test_damage_in_the_middle_is_refused_with_offset(tmp_path: Path) -> None:
    p = tmp_path / "log"
    ends = fill(p, 4)
    with open(p, "r+b") as fh:
        fh.seek(ends[0] + 20)
        b = fh.read(1)
        fh.seek(ends[0] + 20)
        fh.write(bytes([b[0] ^ 0xFF]))
    with pytest.raises(CorruptFile, match=f"byte offset {ends[0]}"):
        CommandLog.open(str(p), SEAL, aad=b"t")
    # and the file was not trimmed
    assert os.path.getsize(p) == ends[-1]


def test_damaged_length_in_the_middle_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "log"
    ends = fill(p, 4)
    with open(p, "r+b") as fh:
        fh.seek(ends[1] + 4)
        fh.write((10**8).to_bytes(4, "little"))
    with pytest.raises(CorruptFile, match=f"damaged record length at byte offset {ends[1]}"):
        CommandLog.open(str(p), SEAL, aad=b"t")


def test_other_key_or_tenant_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "log"
    fill(p, 2)
    with pytest.raises(CorruptFile, match="authentication failed"):
        CommandLog.open(str(p), Sealer(bytes(64)), aad=b"t")
    with pytest.raises(CorruptFile, match="authentication failed"):
        CommandLog.open(str(p), SEAL, aad=b"other-tenant")


def test_bad_header_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "log"
    p.write_bytes(b"not a log at all, definitely")
    with pytest.raises(CorruptFile, match="not a neardup command log"):
        CommandLog.open(str(p), SEAL, aad=b"t")


def test_concurrent_writers_share_fsyncs_and_sync_means_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading
    import time

    p = tmp_path / "log"
    log = CommandLog.open(str(p), SEAL, aad=b"t")
    real_fsync = os.fsync
    synced_sizes: list[int] = []

    def slow_fsync(fd: int) -> None:
        # A slow disk: writers arriving during one fsync must share the next.
        time.sleep(0.03)
        synced_sizes.append(os.fstat(fd).st_size)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    lock = threading.Lock()
    n_threads, per_thread = 8, 10
    seq = [0]
    acked: list[tuple[int, int]] = []  # (seq, file size the ack relied on)

    def writer() -> None:
        for _ in range(per_thread):
            with lock:  # the tenant lock: writes in sequence order
                seq[0] += 1
                s = seq[0]
                log.write([Command(s, {"op": "w", "s": s})])
                end = os.path.getsize(p)
            log.sync(s)
            assert log.durable_seq >= s
            # The acknowledged record lies inside some fsynced prefix.
            assert max(synced_sizes) >= end
            acked.append((s, end))

    threads = [threading.Thread(target=writer) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = n_threads * per_thread
    assert len(acked) == total and log.durable_seq == total
    # Each fsync covers every command written while the previous one ran (about
    # half the writers in steady state); one fsync per command would be 80.
    assert log.fsyncs <= total // 3, f"{log.fsyncs} fsyncs for {total} concurrent commands"
    log.close()
    assert read(p) == list(range(1, total + 1))


def test_failed_fsync_poisons_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from neardup.core._errors import NeardupIOError

    p = tmp_path / "log"
    log = CommandLog.open(str(p), SEAL, aad=b"t")
    log.append(Command(1, {"op": "ok"}))

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    log.write([Command(2, {"op": "lost?"})])
    with pytest.raises(NeardupIOError, match="Input/output error"):
        log.sync(2)
    monkeypatch.undo()
    # After a failed fsync the page cache may have dropped the data: refuse to go on.
    with pytest.raises(NeardupIOError):
        log.write([Command(3, {"op": "after"})])
    with pytest.raises(NeardupIOError):
        log.sync(2)
    assert log.durable_seq == 1
    log.close()


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 30), after=st.integers(-1, 35))
def test_commands_after_any_sequence(tmp_path_factory, n: int, after: int) -> None:
    p = tmp_path_factory.mktemp("log") / "log"
    fill(p, n)
    log = CommandLog.open(str(p), SEAL, aad=b"t")
    assert log.last_seq == n
    assert [c.seq for c in log.commands(after=after)] == list(range(max(after, 0) + 1, n + 1))
    log.close()


def test_forged_record_in_the_middle_fails_when_read(tmp_path: Path) -> None:
    # A record whose CRC is recomputed after tampering passes the framing check at
    # open; decrypting it (replay) fails authentication and names the offset.
    import struct
    import zlib

    p = tmp_path / "log"
    fill(p, 5)
    data = bytearray(p.read_bytes())
    off = 24  # header length: the first record
    (n,) = struct.unpack_from("<I", data, off + 4)
    data[off + 12 + n // 2] ^= 0x01
    struct.pack_into("<I", data, off + 8, zlib.crc32(bytes(data[off + 12 : off + 12 + n])))
    p.write_bytes(bytes(data))
    log = CommandLog.open(str(p), SEAL, aad=b"t")
    assert [c.seq for c in log.commands(after=3)] == [4, 5]  # not reading it: fine
    with pytest.raises(CorruptFile, match="byte offset 24"):
        list(log.commands())
    log.close()

"""The replayable command log: append-only, checksummed, fsynced before acknowledging.

File layout (little-endian)::

    header:  b"NDCMDLOG" | u32 format version | u64 base sequence | u32 CRC-32 of the above
    record:  b"\\xd5NDR" | u32 payload length | u32 CRC-32 of payload | payload
    payload: sealed( u64 seq | u32 header length | header | blob )

The header is UTF-8 JSON in format 1 and :func:`neardup.service.recordpack.pack`-ed JSON
in formats 2 and 3.  Format 3 seals with AES-256-SIV (:class:`~neardup.service._crypto.Sealer`);
formats 1 and 2 sealed with the first construction, and are opened with its
:class:`~neardup.service._crypto.LegacySealer` to be read (never appended to) and
rewritten as format 3 (:mod:`neardup.service.logupgrade`).

Guarantees:

* :meth:`CommandLog.append` returns only after the record is written and
  ``fsync``-ed, so an acknowledged command survives a crash (``kill -9``, power
  loss on a disk that honours fsync).
* **Group commit**: :meth:`CommandLog.write` puts records in the file (in
  sequence order, under the caller's lock) without waiting for the disk, and
  :meth:`CommandLog.sync` returns once everything up to a sequence number is
  fsynced.  Concurrent writers share fsyncs: while one thread waits for the disk,
  the others queue, and the next fsync covers all of them.  A caller acknowledges
  only after ``sync`` returns; an fsync error poisons the log (every later call
  raises), because after a failed fsync the kernel may have dropped the pages.
* On open, every record is classified by what is *present* in the file, because a
  crash can only cut the file short, never change bytes already written:

  - **torn tail** (trimmed, ``trimmed_bytes`` says how much; the log continues
    from the last whole record): the last record's 12-byte frame header is
    incomplete, or its declared length runs past the end of the file and no whole
    record follows.  Such a record was never fsynced, so never acknowledged.
  - **damage** (refused, never trimmed: :class:`~neardup.CorruptFile` names the
    file, the byte offset, the sequence number it follows and the fix): a record
    whose bytes are all there (its declared length ends at or before the end of
    the file) but whose magic, CRC-32 or authentication tag fails — *whether or not it
    is the last record*, since a flipped bit in the last, fsynced record is as
    much damage as one in the middle; and a record whose declared length runs
    past the end of the file while a whole record follows it.
  - **damaged length of the last record**: the length field is covered by no
    checksum of its own, so a damaged length is told from a torn write by the
    payload CRC.  A length made *smaller* ends the record inside the file, where
    its CRC fails: damage.  A length made *larger* points past the end of the
    file; a torn record's CRC matches no prefix of what is present, while a whole
    record with a damaged length has its CRC match the bytes up to the end of the
    file (or up to a later record's magic).  So a record running past the end of
    the file is damage, not torn, when its CRC matches the bytes up to the end
    of the file or up to any later record magic.  A second fault in the same
    record (its length *and* its CRC field) is read as a torn tail: the one
    undetected case, at two independent faults in 12 bytes.

  Framing and CRC-32 are verified over the whole file at open (a sequential
  pass over a memory map); authentication is checked when a record is
  decrypted — the last one at open, the others when they are replayed — so a
  forged record (CRC recomputed) is refused, naming its offset, before it can
  change any state.
* Every write goes through ``fsync`` before acknowledgement, so a refusal at open
  may concern an acknowledged command: start-up stops rather than drop it.  A
  file system that exposes an append as zero bytes after a power loss (the size
  reached the disk, the data did not) makes an unacknowledged last record look
  whole and damaged; the refusal then says the bytes are all zero and how to
  drop them if the operator knows the host lost power.
* Sequence numbers are strictly increasing; a gap or repeat is corruption.

Payloads are sealed with the tenant's log key (AES-256-SIV, see ``neardup.service._crypto``),
so features in the log are encrypted at rest like everything else.
"""

from __future__ import annotations

import array
import json
import mmap
import os
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from neardup.core._errors import Conflict, CorruptFile, InvalidConfig, NeardupIOError
from neardup.core.persist import fsync_dir
from neardup.service._crypto import LEGACY_SEALING, LegacySealer, Opener, Sealer
from neardup.service.recordpack import pack, unpack

__all__ = ["FORMAT", "Command", "CommandLog"]

_MAGIC = b"NDCMDLOG"
#: The format new logs are written in; formats 1 and 2 are read (see above).
FORMAT = 3
_READS = (1, 2, 3)
_HEAD = struct.Struct("<8sIQ")
_HEAD_LEN = _HEAD.size + 4
_REC_MAGIC = b"\xd5NDR"
_REC = struct.Struct("<4sII")
_MAX_RECORD = 256 * 1024 * 1024
_SEQ = struct.Struct("<Q")


class _Damage(Exception):
    """Damage found by the framing pass (raised as :class:`CorruptFile` by ``open``)."""

    def __init__(self, offset: int, reason: str, before: array.array[int]) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason
        self.before = before


@dataclass(frozen=True, slots=True)
class Command:
    """One logged command: its sequence number, a JSON header and a binary blob."""

    seq: int
    header: dict[str, Any]
    blob: bytes = b""


class CommandLog:
    """An append-only command log file (one per tenant and generation).

    Example:
        >>> import tempfile, os
        >>> from neardup.service._crypto import Sealer
        >>> path = os.path.join(tempfile.mkdtemp(), "log")
        >>> log = CommandLog.open(path, Sealer(bytes(64)), aad=b"t1")
        >>> log.append(Command(1, {"op": "upsert", "item_id": "A"}, b"features"))
        >>> log.close()
        >>> log = CommandLog.open(path, Sealer(bytes(64)), aad=b"t1")
        >>> [(c.seq, c.header["item_id"]) for c in log.commands()]
        [(1, 'A')]
    """

    def __init__(
        self,
        path: str,
        fh: Any,
        sealer: Opener,
        aad: bytes,
        base_seq: int,
        offsets: array.array[int],
        view: Any,
        last_seq: int,
    ) -> None:
        self.path = path
        self._fh = fh
        self._sealer = sealer
        self._aad = aad
        self.base_seq = base_seq
        self._offsets = offsets
        self._view = view
        self.last_seq = last_seq
        self.trimmed_bytes = 0
        # Everything read back at open is on disk already.
        self._durable = self.last_seq
        self._sync_cond = threading.Condition(threading.Lock())
        self._syncing = False
        self._failed: OSError | None = None
        self.fsyncs = 0
        self.version = FORMAT
        #: Set by :func:`neardup.service.logupgrade.open_current` when it rewrote the log.
        self.upgraded_from: int | None = None
        self.upgraded_records = 0

    @classmethod
    def create(cls, path: str, sealer: Sealer, *, aad: bytes, base_seq: int = 0) -> CommandLog:
        """Create an empty log whose first record will have ``seq > base_seq`` (durably)."""
        head = _HEAD.pack(_MAGIC, FORMAT, base_seq)
        head += struct.pack("<I", zlib.crc32(head))
        tmp = path + ".tmp"
        try:
            with open(tmp, "wb") as fh:
                fh.write(head)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
            fsync_dir(os.path.dirname(os.path.abspath(path)))
        except OSError as exc:
            raise NeardupIOError(path, exc) from exc
        return cls.open(path, sealer, aad=aad)

    @classmethod
    def open(
        cls, path: str, sealer: Sealer, *, aad: bytes, legacy: LegacySealer | None = None
    ) -> CommandLog:
        """Open (creating if absent) and validate the log; see the module guarantees.
        A log of format 1 or 2 is opened with ``legacy``, for reading only.

        Every record's framing and CRC-32 is checked; only the last record is
        decrypted here (its sequence number ends the log).  Records are decrypted
        and authenticated when :meth:`commands` reads them, so start-up costs a
        checksum pass over the file plus the commands the store has not applied,
        not a decryption of the whole history.
        """
        if not os.path.exists(path):
            return cls.create(path, sealer, aad=aad)
        try:
            size = os.path.getsize(path)
            with open(path, "rb") as fh:
                data: Any = (
                    mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
                )
        except OSError as exc:
            raise NeardupIOError(path, exc) from exc
        if len(data) < _HEAD_LEN:
            raise CorruptFile(path, f"log header is {len(data)} bytes, expected {_HEAD_LEN}")
        magic, version, base_seq = _HEAD.unpack_from(data, 0)
        (crc,) = struct.unpack_from("<I", data, _HEAD.size)
        if magic != _MAGIC or crc != zlib.crc32(data[: _HEAD.size]):
            raise CorruptFile(path, "not a neardup command log (bad magic or header checksum)")
        if version not in _READS:
            raise CorruptFile(
                path, f"log format version {version}, this build reads versions {_READS}"
            )
        reader = cls._reader(path, version, sealer, legacy)
        try:
            offsets, end = cls._scan(data)
        except _Damage as d:
            raise cls._refusal(path, data, d, reader, aad, base_seq) from None
        last_seq = base_seq
        if offsets:
            try:
                last_seq = cls._decode(path, data, offsets[-1], reader, aad).seq
            except CorruptFile as exc:
                last = _Damage(
                    offsets[-1],
                    f"the last record, at byte offset {offsets[-1]}, passes its checksum "
                    f"but not authentication ({exc.reason}): damage or another key, "
                    "not a torn write",
                    offsets[:-1],
                )
                raise cls._refusal(path, data, last, reader, aad, base_seq) from None
            if last_seq <= base_seq:
                raise CorruptFile(
                    path, f"last sequence {last_seq} does not follow the log's base {base_seq}"
                )
        trimmed = len(data) - end
        try:
            out = open(path, "r+b")  # noqa: SIM115 - kept open for appends
            if trimmed:
                out.truncate(end)
                out.flush()
                os.fsync(out.fileno())
            out.seek(end)
        except OSError as exc:
            raise NeardupIOError(path, exc) from exc
        log = cls(path, out, reader, aad, base_seq, offsets, data, last_seq)
        log.trimmed_bytes = trimmed
        log.version = int(version)
        return log

    @staticmethod
    def _reader(path: str, version: int, sealer: Sealer, legacy: LegacySealer | None) -> Opener:
        """What opens the records of a log of format ``version``."""
        if version >= FORMAT:
            return sealer
        if legacy is None:
            raise InvalidConfig(
                "legacy", None, f"{path} is a command log of format {version}, sealed with "
                f"{LEGACY_SEALING}", "pass legacy=MasterSecret.legacy_sealer('log', ...)"
            )
        return legacy

    @staticmethod
    def _valid_record_at(data: Any, off: int) -> bool:
        if off + _REC.size > len(data):
            return False
        magic, n, crc = _REC.unpack_from(data, off)
        end = off + _REC.size + n
        return bool(
            magic == _REC_MAGIC
            and end <= len(data)
            and zlib.crc32(data[off + _REC.size : end]) == crc
        )

    @classmethod
    def _later_record_exists(cls, data: Any, off: int) -> bool:
        pos = data.find(_REC_MAGIC, off + 1)
        while pos != -1:
            if cls._valid_record_at(data, pos):
                return True
            pos = data.find(_REC_MAGIC, pos + 1)
        return False

    @staticmethod
    def _whole_with_damaged_length(data: Any, off: int, crc: int) -> int | None:
        """The payload length at which the record at ``off`` checksums, if its payload
        ends at the end of the file or at a later record magic (its own length field
        is then damaged); None if no such end exists (a torn record)."""
        start = off + _REC.size
        ends = []
        pos = data.find(_REC_MAGIC, start)
        while pos != -1:
            ends.append(pos)
            pos = data.find(_REC_MAGIC, pos + 1)
        ends.append(len(data))
        running, at = 0, start
        for end in ends:
            running = zlib.crc32(data[at:end], running)
            at = end
            if running == crc:
                return int(end - start)
        return None

    @classmethod
    def _scan(cls, data: Any) -> tuple[array.array[int], int]:
        """Offsets of the whole, checksummed records and where the valid log ends;
        raises :class:`_Damage` for damage (see the module docstring for the rule)."""
        off = _HEAD_LEN
        out: array.array[int] = array.array("q")
        n_data = len(data)
        while off < n_data:
            if off + _REC.size > n_data:
                break  # torn: the frame header itself is cut short
            magic, n, crc = _REC.unpack_from(data, off)
            end = off + _REC.size + n
            if end > n_data or n > _MAX_RECORD:
                # A torn write only ever cuts the final record short.  If a whole,
                # valid record follows, or this record's CRC matches the bytes that
                # are present, the length field is damaged: the record was whole.
                if cls._later_record_exists(data, off):
                    raise _Damage(off, f"damaged record length at byte offset {off}", out)
                whole = cls._whole_with_damaged_length(data, off, crc)
                if whole is not None:
                    raise _Damage(
                        off,
                        f"damaged record length at byte offset {off}: the record declares "
                        f"{n} payload bytes, but its checksum matches the {whole} bytes "
                        "present, so it was written whole: damage, not a torn write",
                        out,
                    )
                break  # torn: the record is cut short
            if magic != _REC_MAGIC or zlib.crc32(data[off + _REC.size : end]) != crc:
                what = "magic" if magic != _REC_MAGIC else "checksum"
                if end == n_data:
                    reason = (
                        f"the last record, at byte offset {off}, fails its {what} although "
                        f"all its {end - off} bytes are present: damage, not a torn write"
                    )
                else:
                    reason = f"record at byte offset {off} fails its {what}"
                raise _Damage(off, reason, out)
            out.append(off)
            off = end
        return out, off

    @classmethod
    def salvage(
        cls, path: str, sealer: Sealer, *, aad: bytes, legacy: LegacySealer | None = None
    ) -> dict[str, Any]:
        """Survey a damaged log without changing it (for ``neardup repair``).

        Walks the frames from the header on; where a frame fails, skips to the next
        frame that passes its CRC and authenticates.  Returns the base sequence, the
        sequence numbers of the intact records, the byte offsets of the damaged
        stretches and ``last_seq``: the last sequence the file held, counting a
        damaged stretch between two intact records by their sequence numbers and a
        damaged tail as one record per stretch (sequences go up by one per command).
        """
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            raise NeardupIOError(path, exc) from exc
        if len(data) < _HEAD_LEN or data[:8] != _MAGIC:
            raise CorruptFile(path, "not a neardup command log (bad magic)")
        _, version, base_seq = _HEAD.unpack_from(data, 0)
        reader = cls._reader(path, version, sealer, legacy)
        seqs: list[int] = []
        offsets: list[int] = []
        damaged: list[int] = []
        off, n_data, tail_damage = _HEAD_LEN, len(data), 0

        def intact(at: int) -> int | None:
            if not cls._valid_record_at(data, at):
                return None
            try:
                return cls._decode(path, data, at, reader, aad).seq
            except (CorruptFile, struct.error, ValueError):
                return None

        while off + _REC.size <= n_data:
            seq = intact(off)
            if seq is not None:
                seqs.append(seq)
                offsets.append(off)
                off += _REC.size + _REC.unpack_from(data, off)[1]
                continue
            damaged.append(off)
            nxt = data.find(_REC_MAGIC, off + 1)
            while nxt != -1 and intact(nxt) is None:
                nxt = data.find(_REC_MAGIC, nxt + 1)
            if nxt == -1:
                tail_damage = 1
                break
            off = nxt
        last = max(seqs, default=base_seq) + tail_damage
        return {
            "base_seq": base_seq,
            "intact_records": len(seqs),
            "intact_after_damage": sum(1 for o in offsets if damaged and o > damaged[0]),
            "damaged_offsets": damaged,
            "last_seq": last,
        }

    @classmethod
    def _refusal(
        cls, path: str, data: Any, d: _Damage, sealer: Opener, aad: bytes, base_seq: int
    ) -> CorruptFile:
        """The :class:`CorruptFile` for damage at ``d.offset``: where, after which
        sequence number, and what to do."""
        where = "it is the first record"
        if len(d.before):
            try:
                prev = cls._decode(path, data, d.before[-1], sealer, aad).seq
                where = f"it follows sequence {prev}"
            except CorruptFile:
                where = f"it follows the record at byte offset {d.before[-1]}"
        elif base_seq:
            where = f"it is the first record after base sequence {base_seq}"
        # The damaged record's own sequence number, when only its frame is damaged.
        try:
            n = min(_REC.unpack_from(data, d.offset)[1], len(data) - d.offset - _REC.size)
            payload = bytes(data[d.offset + _REC.size : d.offset + _REC.size + n])
            plain = sealer.open(payload, aad)
            where += f"; its payload still authenticates as sequence {_SEQ.unpack_from(plain)[0]}"
        except (CorruptFile, struct.error):
            pass
        fix = (
            "keep this log as it is (never trim it by hand: that drops acknowledged "
            "commands); restore the tenant from its latest snapshot and a backup copy of "
            "this log, and check the disk"
        )
        tail = data[d.offset :]
        if len(tail) >= _REC.size and not tail.strip(b"\x00"):
            fix = (
                f"the {len(tail)} bytes from byte offset {d.offset} to the end of the file "
                "are all zero, which some file systems leave where an append had not reached "
                "the disk at a power loss: only if this host lost power while writing (that "
                f"record was then never acknowledged), truncate the file to {d.offset} bytes; "
                f"otherwise {fix}"
            )
        return CorruptFile(
            path,
            f"{d.reason} ({where}); it may hold acknowledged commands, so start-up stops "
            "rather than drop it",
            fix,
        )

    @staticmethod
    def _decode(path: str, data: Any, off: int, sealer: Opener, aad: bytes) -> Command:
        _, n, _ = _REC.unpack_from(data, off)
        payload = bytes(data[off + _REC.size : off + _REC.size + n])
        plain = sealer.open(payload, aad, what=f"{path} at byte offset {off}")
        seq, hlen = struct.unpack_from("<QI", plain, 0)
        try:
            header = json.loads(unpack(plain[12 : 12 + hlen]))
        except ValueError as exc:
            raise CorruptFile(
                path, f"record at byte offset {off} is authentic but unreadable: {exc}"
            ) from None
        return Command(seq, header, plain[12 + hlen :])

    def _at(self, i: int) -> Command:
        return self._decode(self.path, self._view, self._offsets[i], self._sealer, self._aad)

    def commands(self, after: int = -1) -> Iterator[Command]:
        """The commands that were in the file at open with ``seq > after``, decrypted
        (and authenticated) as they are read; appends since open are not included.

        Raises :class:`~neardup.CorruptFile` naming the offset of a record that fails
        authentication or breaks the strictly increasing sequence.
        """
        offs = self._offsets
        # Sequence numbers increase along the file: binary search for the first
        # record after ``after``, decrypting O(log n) records.
        lo, hi = 0, len(offs)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._at(mid).seq <= after:
                lo = mid + 1
            else:
                hi = mid
        prev = self._at(lo - 1).seq if lo > 0 else self.base_seq
        for i in range(lo, len(offs)):
            cmd = self._at(i)
            if cmd.seq <= prev:
                raise CorruptFile(
                    self.path,
                    f"sequence {cmd.seq} at byte offset {offs[i]} does not follow {prev}",
                )
            prev = cmd.seq
            yield cmd

    def encode(self, cmd: Command) -> bytes:
        # allow_nan=False: a NaN would be written as a bare token no JSON reader accepts.
        text = json.dumps(cmd.header, sort_keys=True, separators=(",", ":"), allow_nan=False)
        header = pack(text) if self.version >= 2 else text.encode("utf-8")
        plain = struct.pack("<QI", cmd.seq, len(header)) + header + cmd.blob
        if not isinstance(self._sealer, Sealer):
            raise Conflict(
                f"{self.path} is a command log of format {self.version}, read-only here",
                "rewrite it as the current format first (neardup.service.logupgrade)",
            )
        payload = self._sealer.seal(plain, self._aad)
        return _REC.pack(_REC_MAGIC, len(payload), zlib.crc32(payload)) + payload

    def append(self, cmd: Command) -> None:
        """Append ``cmd`` durably (written and fsynced before returning)."""
        self.append_many([cmd])

    def append_many(self, cmds: list[Command]) -> None:
        """Append several commands with one fsync."""
        self.write(cmds)
        self.sync(self.last_seq)

    def write(self, cmds: list[Command]) -> None:
        """Write ``cmds`` (in sequence order) without waiting for the disk.

        Callers serialize ``write`` (the tenant lock) and call :meth:`sync` before
        acknowledging; until then the commands may be lost by a power failure (not
        by a process crash: they are in the kernel's page cache).
        """
        self._check()
        last = self.last_seq
        for c in cmds:
            if c.seq <= last:
                raise CorruptFile(self.path, f"refusing to append seq {c.seq} after {last}")
            last = c.seq
        buf = b"".join(self.encode(c) for c in cmds)
        try:
            self._fh.write(buf)
            self._fh.flush()
        except OSError as exc:
            self._failed = exc
            raise NeardupIOError(self.path, exc) from exc
        self.last_seq = last

    def sync(self, seq: int) -> None:
        """Return once every command up to ``seq`` is fsynced (group commit)."""
        if self._durable >= seq:
            return
        with self._sync_cond:
            while self._durable < seq:
                self._check()
                if self._syncing:
                    # Another thread's fsync is running; it may cover us. All
                    # waiters wake together (a plain lock would wake them one at
                    # a time, and each would pay its own fsync: a convoy).
                    self._sync_cond.wait()
                    continue
                self._syncing = True
                # last_seq is set after the flush, so this fsync covers it.
                target = self.last_seq
                error: OSError | None = None
                self._sync_cond.release()
                try:
                    os.fsync(self._fh.fileno())
                except OSError as exc:
                    error = exc
                finally:
                    self._sync_cond.acquire()
                    self._syncing = False
                    self._sync_cond.notify_all()
                if error is not None:
                    self._failed = error
                    raise NeardupIOError(self.path, error) from error
                self.fsyncs += 1
                self._durable = max(self._durable, target)

    @property
    def durable_seq(self) -> int:
        """The last sequence number known to be on disk."""
        return self._durable

    def _check(self) -> None:
        if self._failed is not None:
            raise NeardupIOError(self.path, self._failed)

    def release(self) -> None:
        """Forget the records mapped at open (after replay; they stay on disk)."""
        view, self._view, self._offsets = self._view, b"", array.array("q")
        if isinstance(view, mmap.mmap):
            view.close()

    def close(self) -> None:
        self.release()
        self._fh.close()

"""Rewriting a command log of an earlier format as the current one.

Command logs of formats 1 and 2 were sealed with the first construction
(AES-256-GCM with a synthetic nonce, :class:`~neardup.service._crypto.LegacySealer`);
format 3 seals with AES-256-SIV (:class:`~neardup.service._crypto.Sealer`).  A log
is the source of truth and is appended to for as long as its generation lives, so
an old one is not kept: :func:`open_current` opens it with the old sealer (every
check of :meth:`CommandLog.open` applies: a torn tail is trimmed, damage refused),
writes every record, decrypted and authenticated, to a new log of the current
format beside it, fsyncs that, renames it over the old one and fsyncs the folder.
A crash at any point leaves either the old log, whole, or the new one; the next
open upgrades again from the old.  Sequence numbers, the base sequence and each
command's header and blob are kept; only the sealing (and a format-1 header's
encoding) changes.
"""

from __future__ import annotations

import os

from neardup.core._errors import CorruptFile, NeardupIOError
from neardup.core.persist import fsync_dir
from neardup.service._crypto import LegacySealer, Sealer
from neardup.service.cmdlog import FORMAT, CommandLog

__all__ = ["open_current"]

_BATCH = 1024


def open_current(
    path: str, sealer: Sealer, *, aad: bytes, legacy: LegacySealer | None
) -> CommandLog:
    """The log at ``path`` opened for appending, in the current format: rewritten
    first if it is of an earlier one (see the module docstring).

    The returned log's ``upgraded_from`` is the format it was rewritten from (None
    if it was current) and ``upgraded_records`` how many records were sealed again;
    ``trimmed_bytes`` counts a torn tail dropped on the way.
    """
    log = CommandLog.open(path, sealer, aad=aad, legacy=legacy)
    if log.version >= FORMAT:
        return log
    old, trimmed, tmp = log.version, log.trimmed_bytes, f"{path}.upgrade"
    n = 0
    try:
        new = CommandLog.create(tmp, sealer, aad=aad, base_seq=log.base_seq)
        try:
            batch = []
            try:
                for cmd in log.commands():
                    batch.append(cmd)
                    if len(batch) >= _BATCH:
                        new.write(batch)
                        n, batch = n + len(batch), []
            except CorruptFile as exc:
                raise CorruptFile(
                    path,
                    f"cannot be rewritten in format {FORMAT}: {exc.path}: {exc.reason}",
                    "run `neardup repair` on the tenant (with --rebase it starts a new log "
                    "from the store when the store holds every command), or restore this log "
                    "from a backup",
                ) from exc
            new.write(batch)
            n += len(batch)
            new.sync(new.last_seq)
            if new.last_seq != log.last_seq:  # pragma: no cover - commands() would refuse
                raise CorruptFile(
                    path, f"upgrade copied up to sequence {new.last_seq} of {log.last_seq}"
                )
        finally:
            new.close()
        log.close()
        os.replace(tmp, path)
        fsync_dir(os.path.dirname(os.path.abspath(path)))
    except NeardupIOError:
        raise
    except OSError as exc:
        raise NeardupIOError(path, exc) from exc
    finally:
        log.close()  # again after a success: harmless
        if os.path.exists(tmp):
            os.unlink(tmp)
    log = CommandLog.open(path, sealer, aad=aad)
    log.trimmed_bytes, log.upgraded_from, log.upgraded_records = trimmed, old, n
    return log

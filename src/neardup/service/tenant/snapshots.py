"""A tenant's snapshots, restores and compaction."""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import logging
import os
import tarfile
import threading
import time
from typing import Any

from neardup.core._errors import Conflict, CorruptFile, SchemeMismatch
from neardup.core.persist import atomic_write
from neardup.service.cmdlog import Command, CommandLog
from neardup.service.decisions import Policy
from neardup.service.tenant.config import SNAPSHOT_FORMAT, SNAPSHOT_READS, Guard
from neardup.service.tenant.policies import PoliciesMixin

_log = logging.getLogger("neardup.service.manager")


class SnapshotsMixin(PoliciesMixin):
    def compact(self) -> dict[str, Any]:
        """Merge the index delta, drop tombstones from the index, purge their features."""
        with self._lock:
            seq = self.seq + 1
            cmd = Command(seq, {"op": "compact"})
            purged = self._commit(cmd)
        self.log.sync(seq)
        dropped = self.index.compact()
        return {
            **self._envelope(),
            "seq": seq,
            "purged_features": purged,
            "index_entries_dropped": dropped,
            "index_bytes": self.index.nbytes,
        }

    def _maybe_compact_index(self) -> None:
        if self.index.needs_compaction() and self._compacting.acquire(blocking=False):

            def run() -> None:
                try:
                    self.index.compact()
                finally:
                    self._compacting.release()

            threading.Thread(target=run, name=f"compact-{self.tenant}", daemon=True).start()

    # -- snapshots ---------------------------------------------------------------
    def snapshot(self) -> bytes:
        """A self-verifying snapshot of this tenant (also kept under ``snapshots/``).

        Layout: an uncompressed tar of ``manifest.json`` (format version, tenant,
        scheme descriptor, last applied sequence, per-file SHA-256), ``manifest.hmac``
        (HMAC-SHA256 of the manifest under the tenant's snapshot MAC key) and
        ``features.sqlite.sealed`` (the store, sealed with AES-256-SIV under the
        tenant's snapshot key; format 1, still restored, sealed it with AES-256-GCM
        and a synthetic nonce).  Never contains the master secret or any key.
        """
        with self._lock:
            tmp = self._path(f".snap-{self.seq}.sqlite")
            try:
                self.store.backup_to(tmp)
                with open(tmp, "rb") as fh:
                    db = fh.read()
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            seq = self.seq
        sealed = self._snap_sealer.seal(db, f"snapshot\x00{self.tenant}\x00{seq}".encode())
        manifest = {
            "format": "neardup-snapshot",
            "format_version": SNAPSHOT_FORMAT,
            "tenant": self.tenant,
            "last_seq": seq,
            "tenant_config": self.config.to_dict(),
            **self.scheme_descriptor,
            "files": {
                "features.sqlite.sealed": {
                    "sha256": hashlib.sha256(sealed).hexdigest(),
                    "bytes": len(sealed),
                }
            },
        }
        mbytes = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()
        mac = hmac.new(self._snap_mac, mbytes, "sha256").hexdigest().encode()
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            for name, data in (
                ("manifest.json", mbytes),
                ("manifest.hmac", mac),
                ("features.sqlite.sealed", sealed),
            ):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mtime = 0
                info.mode = 0o600
                tar.addfile(info, io.BytesIO(data))
        blob = buf.getvalue()
        atomic_write(self._path(os.path.join("snapshots", f"snap-{seq:012d}.ndsnap")), blob)
        self._prune_snapshots()
        self.counters.last_snapshot_time = time.time()
        return blob

    def _prune_snapshots(self) -> None:
        """Keep the newest ``snapshot_keep`` snapshots under ``snapshots/``.

        Recovery uses the newest snapshot that verifies and that the log continues;
        older ones only cover damage of the newer ones, so a few suffice (a snapshot
        loop no longer fills the disk).  Snapshots shipped off the host are the
        backups."""
        folder = self._path("snapshots")
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".ndsnap"))
        except OSError:
            return
        for name in names[: max(0, len(names) - self.snapshot_keep)]:
            try:
                os.unlink(os.path.join(folder, name))
            except OSError as exc:  # a file that will not go is no reason to fail
                _log.warning("tenant %s: cannot remove old snapshot %s: %s", self.tenant, name, exc)

    def _verify_snapshot(self, blob: bytes) -> tuple[dict[str, Any], bytes]:
        what = f"snapshot for tenant {self.tenant!r}"
        try:
            with tarfile.open(fileobj=io.BytesIO(blob), mode="r:") as tar:
                members = {}
                for m in tar.getmembers():
                    if not m.isfile() or m.name not in (
                        "manifest.json",
                        "manifest.hmac",
                        "features.sqlite.sealed",
                    ):
                        raise CorruptFile(what, f"unexpected member {m.name!r}")
                    fh = tar.extractfile(m)
                    members[m.name] = fh.read() if fh else b""
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise CorruptFile(what, f"not a neardup snapshot archive ({exc})") from exc
        for need in ("manifest.json", "manifest.hmac", "features.sqlite.sealed"):
            if need not in members:
                raise CorruptFile(what, f"member {need!r} is missing")
        mbytes = members["manifest.json"]
        try:
            manifest = json.loads(mbytes)
        except ValueError as exc:
            raise CorruptFile(what, f"manifest is not JSON ({exc})") from exc
        if manifest.get("format") != "neardup-snapshot":
            raise CorruptFile(what, "manifest is not a neardup snapshot manifest")
        version = manifest.get("format_version")
        if version not in SNAPSHOT_READS:
            raise CorruptFile(
                what,
                f"format version {version!r} unsupported (this version reads {SNAPSHOT_READS})",
                "restore it with the version of neardup that wrote it",
            )
        if manifest.get("tenant") != self.tenant:
            raise Conflict(
                f"snapshot belongs to tenant {manifest.get('tenant')!r}, not {self.tenant!r}",
                "restore it into its own tenant",
            )
        for k in ("scheme_fingerprint", "config_fingerprint"):
            if manifest.get(k) != self.scheme_descriptor[k]:
                raise SchemeMismatch(
                    str(manifest.get(k)), self.scheme_descriptor[k], "a snapshot and a tenant"
                )
        want = hmac.new(self._snap_mac, mbytes, "sha256").hexdigest().encode()
        if not hmac.compare_digest(want, members["manifest.hmac"]):
            raise CorruptFile(what, "manifest HMAC does not verify (tampered or another key)")
        sealed = members["features.sqlite.sealed"]
        entry = manifest.get("files", {}).get("features.sqlite.sealed", {})
        if hashlib.sha256(sealed).hexdigest() != entry.get("sha256"):
            raise CorruptFile(what, "features.sqlite.sealed fails its SHA-256")
        seq = int(manifest["last_seq"])
        # The manifest (format version included) is authenticated: choose its sealer.
        opener = self._snap_sealer if version == SNAPSHOT_FORMAT else self._legacy_snap_sealer
        db = opener.open(sealed, f"snapshot\x00{self.tenant}\x00{seq}".encode(), what=what)
        return manifest, db

    def restore(
        self, blob: bytes, *, guard: Guard | None = None, actor: str | None = None
    ) -> dict[str, Any]:
        """Replace this tenant's state by a snapshot, after verifying all of it.

        Refuses (before touching live state) a damaged or tampered snapshot
        (:class:`CorruptFile`), another tenant's (:class:`Conflict`) or another
        scheme's (:class:`SchemeMismatch`), a snapshot whose policy ``guard`` refuses,
        and one whose policy history gives a version another meaning than this
        tenant's (:class:`Conflict`).  The switch is atomic: a new generation of store
        and log is written aside, then ``CURRENT`` is replaced.  Policy versions are
        never reused: when this tenant had versions the snapshot lacks (a snapshot
        older than a policy change), they are kept in the history and the snapshot's
        policy is installed as the next version.
        """
        manifest, db = self._verify_snapshot(blob)
        seq = int(manifest["last_seq"])
        with self._lock:
            history = self.policy_history()
            gen = self.generation + 1
            new_store = self._path(f"features-{gen}.sqlite")
            for p in (new_store, new_store + "-wal", new_store + "-shm"):
                if os.path.exists(p):
                    os.unlink(p)
            atomic_write(new_store, db)
            check = self._open_store(new_store)
            try:
                if not check.integrity_ok() or check.applied_seq != seq:
                    raise CorruptFile(new_store, "restored store fails its integrity check")
                theirs = self._history(check)
                restored = Policy.from_dict(max(theirs, key=lambda d: int(d["version"])))
                if guard is not None:
                    guard(self.config, restored)
                self._missing_policies(theirs, history, "the snapshot and this tenant")
                check.checkpoint()
            finally:
                check.close()
            CommandLog.create(
                self._path(f"log-{gen}.ndlog"), self._log_sealer, aad=self._aad, base_seq=seq
            ).close()
            old = self.generation
            self.log.close()
            self.store.close()
            atomic_write(self._path("CURRENT"), json.dumps({"generation": gen}).encode())
            self._open()
            self.adopt_policy(history, restored, actor=actor, source="restore", fresh=False)
            for name in (
                f"features-{old}.sqlite",
                f"features-{old}.sqlite-wal",
                f"features-{old}.sqlite-shm",
                f"log-{old}.ndlog",
            ):
                p = self._path(name)
                if os.path.exists(p):
                    os.unlink(p)
        return {
            **self._envelope(),
            "restored_seq": seq,
            "items": self._live,
            "generation": self.generation,
        }

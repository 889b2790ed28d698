"""The Tenant class: its state at open and close, and offline repair."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
import time
from typing import Any

import numpy as np

from neardup.core._errors import (
    Conflict,
    CorruptFile,
    InvalidConfig,
    NeardupError,
    NeardupIOError,
    SchemeMismatch,
)
from neardup.core.persist import atomic_write
from neardup.service._crypto import MasterSecret
from neardup.service.cmdlog import CommandLog
from neardup.service.tenant._state import Counters
from neardup.service.tenant.config import TenantConfig, valid_tenant_id
from neardup.service.tenant.ingest import IngestMixin
from neardup.service.tenant.labels import LabelsMixin
from neardup.service.tenant.links import LinksMixin
from neardup.service.tenant.policies import PoliciesMixin
from neardup.service.tenant.query import QueryMixin
from neardup.service.tenant.recovery import RecoveryMixin
from neardup.service.tenant.snapshots import SnapshotsMixin
from neardup.service.tenant.writer import Writer
from neardup.sketch.lsh import candidate_probability
from neardup.sketch.minhash import MinHasher
from neardup.text.hashing import HashKey, SchemeDescriptor
from neardup.text.normalize import get_normalizer

_log = logging.getLogger("neardup.service.manager")


def _lock_folder(root: str) -> int | None:
    """An exclusive lock on a tenant folder for as long as a process has it open, so
    that a second server or an offline repair cannot write it at the same time."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no folder lock
        return None
    try:
        fd = os.open(os.path.join(root, "LOCK"), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise NeardupIOError(os.path.join(root, "LOCK"), exc) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise Conflict(
            f"the tenant folder {root} is open in another process (or another object)",
            "stop the server that has it open, or use its API (POST .../reopen)",
        ) from None
    return fd


def _unlock_folder(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)  # closing the descriptor releases the flock


class Tenant(
    RecoveryMixin, IngestMixin, LinksMixin, QueryMixin, LabelsMixin, SnapshotsMixin, PoliciesMixin
):
    """One tenant's durable state and operations (see the module docstring).

    All state changes are serialized by one lock per tenant; queries do not take
    it (they read committed state through their own SQLite connection and the
    index's consistent array references).
    """

    def __init__(
        self,
        root: str,
        tenant: str,
        config: TenantConfig,
        master: MasterSecret,
        *,
        max_scan: int = 20_000,
        compact_delta: int = 16_384,
        audit_rate: float = 0.0,
        audit_interval_s: float = 60.0,
        audit_max_items: int = 20_000,
        batch_writes: bool = False,
        verify_budget: int = 4_000_000,
        explain_max_chars: int = 100_000,
        start: bool = True,
        snapshot_keep: int = 3,
        request_budget_s: float | None = None,
    ) -> None:
        self.root = root
        #: Seconds a write may take before it is logged (None: no limit); past it
        #: the request ends with DeadlineExceeded and nothing is recorded.
        self.request_budget_s = request_budget_s
        #: Shingle hashes compared per query (query + candidate sizes, summed).
        self.verify_budget = verify_budget
        #: Snapshots kept under snapshots/ (the newest ones).
        self.snapshot_keep = max(1, snapshot_keep)
        #: Longest content whose shared spans are computed for an explanation.
        self.explain_max_chars = explain_max_chars
        self.tenant = valid_tenant_id(tenant)
        self.config = config
        self.dedup = config.scheme
        self.key = HashKey(
            f"{tenant}/v{config.scheme_version}",
            master.derive("shingle-key", tenant, version=config.scheme_version, size=16),
        )
        self.hasher = MinHasher(self.dedup, key=self.key)
        self.scheme: SchemeDescriptor = self.hasher.scheme
        self.bands, self.rows = self.dedup.layout
        self.predicted_recall = candidate_probability(
            config.scheme.threshold, self.bands, self.rows
        )
        # Sealing keys (HKDF) and, to read and upgrade what the first construction
        # sealed, that construction's keys (keyed BLAKE2b); see service._crypto.
        v = config.scheme_version
        self._sealer = master.sealer("features", tenant, version=v)
        self._log_sealer = master.sealer("log", tenant, version=v)
        self._snap_sealer = master.sealer("snapshot", tenant, version=v)
        self._legacy_sealer = master.legacy_sealer("features", tenant, version=v)
        self._legacy_log_sealer = master.legacy_sealer("log", tenant, version=v)
        self._legacy_snap_sealer = master.legacy_sealer("snapshot", tenant, version=v)
        self._snap_mac = master.derive("snapshot-mac", tenant, version=v)
        self._master_fp = master.fingerprint
        self._master = master
        self._norm = get_normalizer(config.scheme.normalizer)
        self.max_scan = max_scan
        self.compact_delta = compact_delta
        self.audit_rate = audit_rate
        self.audit_interval_s = audit_interval_s
        self.audit_max_items = audit_max_items
        self._writer: Writer | None = None
        self._batch_writes = batch_writes
        self._audit_busy = threading.Lock()
        self._audit_last = 0.0
        #: Set by close(): a background audit stops, and none starts.
        self._closed = False
        self._lock = threading.RLock()
        self._compacting = threading.Lock()
        self.counters = Counters()
        self.trimmed_bytes = 0
        self.replayed = 0
        self.recovered: dict[str, Any] | None = None
        #: Why writes stopped (a storage error while applying); None while healthy.
        self.stopped: str | None = None
        self.failed_commands = 0
        self._dir_lock: int | None = None
        if start:
            self._dir_lock = _lock_folder(root)
            try:
                self._open()
            except BaseException:
                _unlock_folder(self._dir_lock)
                raise
            self._warm_kernels()

    def _warm_kernels(self) -> None:
        """Run the compiled kernels a write uses before it is logged (prepare, band
        query) once, at open: a kernel loaded (or, on a cold cache, compiled) here
        is never paid for inside a request's time budget."""
        if self.request_budget_s is None:
            return
        try:
            prep = self.prepare(" ".join(f"warm{i}" for i in range(64)))
            index = getattr(self, "index", None)  # none while degraded
            if index is not None:
                index.query(prep.bandkeys, max_scan=1)
        except NeardupError:
            pass  # a tenant that cannot prepare text answers its requests with why

    # -- files -------------------------------------------------------------------
    @property
    def scheme_descriptor(self) -> dict[str, Any]:
        return {
            "scheme": self.scheme.to_dict(),
            "scheme_fingerprint": self.scheme.fingerprint,
            "config_fingerprint": self.dedup.fingerprint,
            "tenant_config_fingerprint": self.config.fingerprint,
            "bands": self.bands,
            "rows": self.rows,
        }

    def _path(self, name: str) -> str:
        return os.path.join(self.root, name)

    @classmethod
    def create(
        cls, root: str, tenant: str, config: TenantConfig, master: MasterSecret, **kw: Any
    ) -> Tenant:
        valid_tenant_id(tenant)
        os.makedirs(os.path.join(root, "snapshots"), exist_ok=True)
        meta_path = os.path.join(root, "tenant.json")
        if os.path.exists(meta_path):
            raise Conflict(f"tenant {tenant!r} already exists", "use another tenant id")
        t = cls.__new__(cls)
        key = HashKey(
            f"{tenant}/v{config.scheme_version}",
            master.derive("shingle-key", tenant, version=config.scheme_version, size=16),
        )
        doc = {
            "format": "neardup-tenant-v1",
            "tenant": tenant,
            "config": config.to_dict(),
            "config_fingerprint": config.fingerprint,
            "key_id": key.key_id,
            "key_fingerprint": key.fingerprint,
            "master_fingerprint": master.fingerprint,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        atomic_write(meta_path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())
        del t
        return cls(root, tenant, config, master, **kw)

    @classmethod
    def open_dir(cls, root: str, master: MasterSecret, **kw: Any) -> Tenant:
        meta_path = os.path.join(root, "tenant.json")
        try:
            with open(meta_path, encoding="utf-8") as fh:
                doc = json.load(fh)
        except OSError as exc:
            raise NeardupIOError(meta_path, exc) from exc
        except ValueError as exc:
            raise CorruptFile(meta_path, f"not JSON ({exc})") from exc
        config = TenantConfig.from_dict(doc["config"], recorded=True)
        tenant = str(doc["tenant"])
        if config.fingerprint != doc.get("config_fingerprint"):
            raise CorruptFile(meta_path, "configuration does not match its fingerprint")
        key = HashKey(
            f"{tenant}/v{config.scheme_version}",
            master.derive("shingle-key", tenant, version=config.scheme_version, size=16),
        )
        if key.fingerprint != doc.get("key_fingerprint"):
            raise SchemeMismatch(
                f"key {doc.get('key_id')} fingerprint {doc.get('key_fingerprint')}",
                f"{key.key_id} fingerprint {key.fingerprint} (the master secret changed "
                "without a new scheme version; a rotated key needs a new scheme and a rebuild, "
                "never a silent mix)",
                f"tenant {tenant!r} features",
            )
        return cls(root, tenant, config, master, **kw)

    @property
    def _aad(self) -> bytes:
        return f"neardup-log\x00{self.tenant}".encode()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # A background exact audit sees the flag and ends; wait for it (bounded) and
        # keep its slot, so that none starts on the closed store.
        if not self._audit_busy.acquire(timeout=30):  # pragma: no cover - a stuck scan
            _log.warning("tenant %s: closing while an exact audit still runs", self.tenant)
        if self._writer is not None:
            self._writer.stop()
            self._writer = None
        with self._lock:
            self.log.close()
            self.store.close()
            _unlock_folder(self._dir_lock)
            self._dir_lock = None

    # -- inspection --------------------------------------------------------------
    def __len__(self) -> int:
        return self._live

    def digest(self) -> str:
        """SHA-256 of the logical state: store content + index membership."""
        h = hashlib.sha256(self.store.digest().encode())
        pos, keys = self.store.live_bandkeys(self.bands)
        h.update(pos.astype("<i8").tobytes() + keys.astype("<u4").tobytes())
        live = np.array([p for p in pos.tolist() if self.index.is_live(p)], dtype="<i8")
        h.update(live.tobytes())
        return h.hexdigest()

    def stats(self) -> dict[str, Any]:
        return {
            **self._envelope(),
            "items": self._live,
            "seq": self.seq,
            "generation": self.generation,
            "index_bytes": self.index.nbytes,
            "index_bytes_per_item": self.index.nbytes / max(self._live, 1),
            "index_delta": self.index.delta_size,
            "bucket_overflow": self.index.overflow,
            "bands": self.bands,
            "rows": self.rows,
            "predicted_recall": self.predicted_recall,
            "replayed_at_start": self.replayed,
            "trimmed_bytes_at_start": self.trimmed_bytes,
            "recovered_at_start": self.recovered,
            "failed_commands": self.failed_commands,
            "stopped": self.stopped,
            "last_snapshot_time": self.counters.last_snapshot_time,
            "retain": self.config.retain,
        }

    # -- offline repair ------------------------------------------------------------
    @classmethod
    def repair(
        cls, root: str, master: MasterSecret, *, rebase: bool = False, accept_loss: bool = False
    ) -> dict[str, Any]:
        """Diagnose a tenant folder offline (no server may have it open) and, with
        ``rebase``, rebuild a damaged command log from the tenant's feature store.

        Opening repairs what is safe by itself (a torn tail is trimmed, a damaged
        store is rebuilt from a snapshot and the log).  A damaged log is not: its
        damaged records may be acknowledged commands.  When the store verifies and
        has applied every command the damaged log held (``last_seq`` of
        :meth:`CommandLog.salvage`), ``rebase`` makes the store the new starting
        point — a new generation whose log starts at the store's sequence, the
        damaged log kept beside it — and nothing acknowledged is lost.  If the store
        lags the log, the commands in between are lost and ``accept_loss`` must say
        so.  Returns a report; raises nothing for damage it can describe.
        """
        try:
            t = cls.open_dir(root, master)
        except CorruptFile as exc:
            damage = exc
        else:
            healthy = {"status": "ok", **t.stats()}
            t.close()
            return healthy
        report: dict[str, Any] = {"status": "damaged", "file": damage.path, "reason": str(damage)}
        if not damage.path.endswith(".ndlog"):
            report["next"] = "restore the tenant from a snapshot or a backup of its folder"
            return report
        t = cls.open_dir(root, master, start=False)
        t._dir_lock = _lock_folder(root)
        try:
            return t._rebase(damage, report, rebase=rebase, accept_loss=accept_loss)
        finally:
            _unlock_folder(t._dir_lock)

    def _rebase(
        self, damage: CorruptFile, report: dict[str, Any], *, rebase: bool, accept_loss: bool
    ) -> dict[str, Any]:
        t, root = self, self.root
        gen = t._current_gen()
        survey = CommandLog.salvage(
            damage.path, t._log_sealer, aad=t._aad, legacy=t._legacy_log_sealer
        )
        store_path = t._path(f"features-{gen}.sqlite")
        try:
            store = t._open_store(store_path)
        except (CorruptFile, NeardupIOError) as exc:
            report.update(survey=survey, store=f"unusable: {exc}")
            report["next"] = "both the log and the store are damaged: restore from a backup"
            return report
        applied = store.applied_seq
        lost = max(0, int(survey["last_seq"]) - applied)
        report.update(survey=survey, store_applied_seq=applied, commands_lost=lost)
        if not rebase:
            store.close()
            report["next"] = (
                "neardup repair --rebase: the store holds every command of the log"
                if lost == 0
                else f"neardup repair --rebase --accept-loss: the store lacks {lost} "
                f"command(s) after sequence {applied}; or restore a backup of the log"
            )
            return report
        if lost and not accept_loss:
            store.close()
            raise InvalidConfig(
                "accept_loss",
                False,
                f"rebasing loses {lost} command(s) after sequence {applied} that the store "
                "never applied",
                "restore a backup of the log, or pass --accept-loss to start from the store",
            )
        new_gen = gen + 1
        new_store = t._path(f"features-{new_gen}.sqlite")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(new_store + suffix):
                os.unlink(new_store + suffix)
        store.backup_to(new_store)
        store.close()
        CommandLog.create(
            t._path(f"log-{new_gen}.ndlog"), t._log_sealer, aad=t._aad, base_seq=applied
        ).close()
        kept = f"{damage.path}.damaged-{time.time_ns()}"
        atomic_write(t._path("CURRENT"), json.dumps({"generation": new_gen}).encode())
        os.replace(damage.path, kept)
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(store_path + suffix):
                os.unlink(store_path + suffix)
        _unlock_folder(t._dir_lock)
        t._dir_lock = None
        after = type(self).open_dir(root, self._master)
        report.update(status="repaired", damaged_log_kept=kept, after=after.stats())
        after.close()
        return report

    def destroy(self) -> None:
        self.close()
        shutil.rmtree(self.root)

"""One tenant of the service: its scheme, keys, command log, feature store and index.

A tenant's data directory::

    tenant.json              configuration, scheme and key fingerprints
    CURRENT                  which generation of store + log is live (atomic switch)
    features-<gen>.sqlite    canonical features (SQLite, WAL; sealed blobs)
    log-<gen>.ndlog          the command log since that generation began
    snapshots/snap-<seq>.ndsnap

Guarantees:

* **Isolation.**  Every tenant has its own shingle key (keyed SipHash, derived
  from the master secret), store, log and index; nothing here can read another
  tenant's files, and every sealed blob is bound to the tenant id.
* **Durability.**  A state change is acknowledged only after its command is in
  the log and fsynced.  Start-up replays the log after the store's last applied
  command; a torn tail (the last record cut short) is trimmed (``trimmed_bytes``
  is reported), a damaged record — in the middle or the last one — stops start-up
  with the file and offset (see :mod:`neardup.service.cmdlog` for the exact rule).  A
  feature store that fails to open, any of its checks at open (SQLite integrity,
  schema, row checksums: see :mod:`neardup.service.store`) or any read during start-up,
  or that lags behind the log's start, is set aside and rebuilt from the latest
  snapshot that verifies and that the log continues (``recovered`` in
  :meth:`Tenant.stats`), then the log is replayed after it; with no such snapshot
  start-up stops and says so, rather than serve partial state.
* **Determinism.**  Positions and sequence numbers are assigned in command order,
  candidates are ordered by (score desc, item id), and replaying the same log
  gives the same :meth:`Tenant.digest`.
* **Precision.**  A candidate's ``score`` is the exact Jaccard similarity of the
  stored shingle-hash sets — never an estimate.  Recall is that of the LSH layout:
  a pair at the threshold is a candidate with probability ``predicted_recall``
  (reported with every decision); "no candidate" is never proof of uniqueness.
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
import io
import json
import logging
import os
import queue
import re
import shutil
import sqlite3
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from neardup.core._errors import (
    CommandFailed,
    Conflict,
    CorruptFile,
    DeadlineExceeded,
    Degraded,
    EmptyDocument,
    InvalidConfig,
    LimitExceeded,
    NeardupError,
    NeardupIOError,
    NotFound,
    SchemeMismatch,
    TenantUnavailable,
)
from neardup.core._fingerprint import canonical_json, fingerprint
from neardup.core._trace import span
from neardup.core.config import Config, ShingleSpec
from neardup.core.persist import atomic_write
from neardup.service._crypto import MasterSecret, Sealer
from neardup.service.cmdlog import Command, CommandLog
from neardup.service.decisions import (
    GENESIS,
    Policy,
    PolicyGuard,
    band_estimate,
    chain_hash,
    colliding_bands,
    outcome,
    verify_chain,
)
from neardup.service.feedback import FeedbackPolicy, Label, evaluate_feedback
from neardup.service.online import BandIndex, fold_keys
from neardup.service.store import FeatureStore, StoredItem, store_error
from neardup.sketch.lsh import candidate_probability
from neardup.sketch.minhash import MinHasher
from neardup.sketch.screen import BloomFilter
from neardup.text.hashing import (
    HashKey,
    SchemeDescriptor,
    ShingleSets,
    hash_documents,
    hash_encoded,
)
from neardup.text.normalize import EncodedTexts, encode_text, get_normalizer
from neardup.verify.explain import merge_spans, positioned_shingles

_log = logging.getLogger("neardup.service.manager")

__all__ = ["Candidate", "Prepared", "Tenant", "TenantConfig", "valid_tenant_id"]

#: A service's guard for a policy that is to be live under a configuration's layout
#: (``Service._recall_guard``): raises to refuse, returns warnings.
Guard = Callable[["TenantConfig", Policy], list[str]]

_TENANT_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}\Z")  # \Z: "$" allows a final "\n"
SNAPSHOT_FORMAT = 1


def valid_tenant_id(tenant: str) -> str:
    if not isinstance(tenant, str) or not _TENANT_RE.match(tenant):
        raise InvalidConfig(
            "tenant_id",
            tenant,
            "must be 1-63 of a-z, 0-9, '-', '_' (starting alphanumeric)",
            "rename the tenant, e.g. 'acme-prod'",
        )
    return tenant


@dataclass(frozen=True, kw_only=True, slots=True)
class TenantConfig:
    """A tenant's scheme and limits (frozen, keyword-only, validated, fingerprinted).

    ``threshold`` is the exact Jaccard at which the policy calls a pair a
    duplicate; ``retain`` is ``hashes`` (default: only sorted shingle-hash sets
    are kept) or ``text`` (the normalized text too: needed for span explanations
    and for rebuilds under a new shingle spec).  ``scheme_version`` is part of the
    key derivation: bump it to rotate the key (a new scheme, never mixed).
    """

    threshold: float = 0.8
    shingle: str = "word:5"
    normalizer: str = "nfkc-casefold"
    num_perm: int = 128
    bands: int | None = None
    rows: int | None = None
    retain: Literal["hashes", "text"] = "hashes"
    scheme_version: int = 1
    policy_version: int = 1
    max_items: int = 10_000_000
    max_shingles: int = 100_000
    max_candidates: int = 100
    max_bucket_size: int = 1_000
    rate_per_s: float = 5_000.0
    burst: int = 10_000

    def __post_init__(self) -> None:
        if self.retain not in ("hashes", "text"):
            raise InvalidConfig("retain", self.retain, "unknown retention", "use hashes or text")
        for name, lo, hi in (
            ("scheme_version", 1, 1 << 30),
            ("policy_version", 1, 1 << 30),
            ("max_items", 1, 1 << 40),
            ("max_candidates", 1, 10_000),
            ("max_bucket_size", 2, 1 << 30),
            ("burst", 1, 1 << 30),
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise InvalidConfig(name, v, f"must be an integer in [{lo}, {hi}]", "fix the value")
        r = self.rate_per_s
        if isinstance(r, bool) or not isinstance(r, int | float) or not 0 < r <= 1e7:
            raise InvalidConfig("rate_per_s", r, "must be in (0, 1e7]", "use e.g. 5000")
        self.dedup_config()  # validates threshold, shingle spec, layout

    def dedup_config(self) -> Config:
        return Config(
            threshold=self.threshold,
            normalizer=self.normalizer,
            shingle=ShingleSpec.parse(self.shingle, max_shingles=self.max_shingles),
            hash_algorithm="siphash24",
            num_perm=self.num_perm,
            bands=self.bands,
            rows=self.rows,
            max_bucket_size=self.max_bucket_size,
            max_candidates=self.max_candidates,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def initial_policy(self) -> Policy:
        """The policy a tenant of this configuration starts with."""
        return Policy(
            version=self.policy_version,
            threshold=self.threshold,
            max_candidates=self.max_candidates,
        )

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TenantConfig:
        if not isinstance(d, dict):
            raise InvalidConfig(
                "config", d, "must be a JSON object", 'send e.g. {"threshold": 0.8}'
            )
        known = set(cls.__dataclass_fields__)
        extra = sorted(set(d) - known)
        if extra:
            raise InvalidConfig(
                "config", extra[0], "unknown field", f"use only {', '.join(sorted(known))}"
            )
        try:
            return cls(**d)
        except TypeError as exc:
            raise InvalidConfig("config", d, str(exc), "check the field types") from exc

    @property
    def scheme_fields(self) -> dict[str, Any]:
        """The fields that change signatures or features (a change needs a new scheme)."""
        d = self.to_dict()
        return {
            k: d[k]
            for k in (
                "shingle",
                "normalizer",
                "num_perm",
                "bands",
                "rows",
                "scheme_version",
                "max_shingles",
            )
        }

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.to_dict())


@dataclass(frozen=True, slots=True)
class Prepared:
    """An item's canonical features, ready to query or store."""

    features: npt.NDArray[np.uint64]
    content_hash: int
    bandkeys: npt.NDArray[np.uint32]
    normalized: str


@dataclass(frozen=True, slots=True)
class Candidate:
    """A stored item that shares a band (or the exact content) with the query,
    with its exact Jaccard score."""

    item_id: str
    score: float
    shared: int
    union: int
    bands: int
    first_band: int | None
    method: str
    pos: int = -1

    def to_dict(self) -> dict[str, Any]:
        return {
            "item_id": self.item_id,
            "score": self.score,
            "shared": self.shared,
            "union": self.union,
            "bands": self.bands,
            "first_band": self.first_band,
            "method": self.method,
        }


class _Job:
    """One upsert waiting for the tenant's writer thread."""

    __slots__ = ("args", "context", "done", "error", "kw", "result")

    def __init__(self, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        self.args = args
        self.kw = kw
        # The request's context (trace spans, ...) follows it to the writer thread.
        self.context = contextvars.copy_context()
        self.done = threading.Event()
        self.result: dict[str, Any] | None = None
        self.error: BaseException | None = None


class _Writer:
    """A tenant's single writer: drains queued upserts in batches under one lock
    acquisition and one fsync.

    Many request threads taking the tenant lock in turn spend more CPU on lock and
    GIL hand-offs than on the work itself once dozens are in flight; here each
    request thread waits on its own event and wakes exactly once.
    """

    def __init__(self, tenant: Tenant, max_batch: int = 256) -> None:
        self.tenant = tenant
        self.max_batch = max_batch
        self.queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self.thread = threading.Thread(
            target=self._run, name=f"writer-{tenant.tenant}", daemon=True
        )
        self.thread.start()

    def submit(self, job: _Job) -> None:
        self.queue.put(job)

    def stop(self) -> None:
        self.queue.put(None)
        self.thread.join(timeout=30)

    def _run(self) -> None:
        t = self.tenant
        while True:
            first = self.queue.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while len(batch) < self.max_batch:
                try:
                    nxt = self.queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                batch.append(nxt)
            sync_to = 0
            with t._lock:
                for job in batch:
                    try:
                        job.result = job.context.run(t._upsert_locked, *job.args, **job.kw)
                    except BaseException as exc:  # handed to the waiting request
                        job.error = exc
                sync_to = t.seq
            try:
                t.log.sync(sync_to)
            except BaseException as exc:
                for job in batch:
                    if job.error is None:
                        job.error = exc
            for job in batch:
                job.done.set()
            if stop:
                return


@dataclass
class _Counters:
    upserts: int = 0
    queries: int = 0
    capped: int = 0
    candidates_verified: int = 0
    last_snapshot_time: float | None = None
    extra: dict[str, int] = field(default_factory=dict)
    audits: int = 0
    audit_pairs: int = 0
    audit_misses: int = 0
    rejected: int = 0
    cross_version: int = 0
    last_source_time: float | None = None
    last_report: dict[str, Any] | None = None


@dataclass
class _Preverified:
    """Exact scores computed before the tenant's write lock is taken, reused under it.

    A committed position's features never change (a new version of an item gets a
    new position), so its score stays true; only whether it is still live can
    change, and that is checked again under the lock.  Positions at or past
    ``below`` may belong to a write still being applied and are not kept; a
    restore (another generation) drops everything kept.
    """

    generation: int
    below: int
    scores: dict[int, tuple[str, int, int]] = field(default_factory=dict)


def _exact(a: npt.NDArray[np.uint64], b: npt.NDArray[np.uint64]) -> tuple[int, int]:
    inter = int(np.intersect1d(a, b, assume_unique=True).shape[0])
    return inter, int(a.shape[0] + b.shape[0] - inter)


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


class Tenant:
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
        self.dedup = config.dedup_config()
        self.key = HashKey(
            f"{tenant}/v{config.scheme_version}",
            master.derive("shingle-key", tenant, version=config.scheme_version, size=16),
        )
        self.hasher = MinHasher(self.dedup, key=self.key)
        self.scheme: SchemeDescriptor = self.hasher.scheme
        self.bands, self.rows = self.dedup.layout
        self.predicted_recall = candidate_probability(config.threshold, self.bands, self.rows)
        self._sealer = Sealer(master.derive("features", tenant, version=config.scheme_version))
        self._log_sealer = Sealer(master.derive("log", tenant, version=config.scheme_version))
        self._snap_mac = master.derive("snapshot-mac", tenant, version=config.scheme_version)
        self._snap_sealer = Sealer(master.derive("snapshot", tenant, version=config.scheme_version))
        self._master_fp = master.fingerprint
        self._master = master
        self._norm = get_normalizer(config.normalizer)
        self.max_scan = max_scan
        self.compact_delta = compact_delta
        self.audit_rate = audit_rate
        self.audit_interval_s = audit_interval_s
        self.audit_max_items = audit_max_items
        self._writer: _Writer | None = None
        self._batch_writes = batch_writes
        self._audit_busy = threading.Lock()
        self._audit_last = 0.0
        #: Set by close(): a background audit stops, and none starts.
        self._closed = False
        self._lock = threading.RLock()
        self._compacting = threading.Lock()
        self.counters = _Counters()
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
        config = TenantConfig.from_dict(doc["config"])
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

    def _current_gen(self) -> int:
        path = self._path("CURRENT")
        if not os.path.exists(path):
            return 0
        try:
            with open(path, encoding="utf-8") as fh:
                return int(json.load(fh)["generation"])
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptFile(path, f"unreadable generation pointer ({exc})") from exc

    def _open(self) -> None:
        """Open the current generation.  Every read of the store during start-up is
        inside the recovery path: one that fails after the store passed its checks
        at open (``FeatureStore`` verifies it) has the store rebuilt the same way."""
        try:
            self._open_generation(None)
        except sqlite3.Error as exc:
            store_path = self._path(f"features-{self.generation}.sqlite")
            damage = store_error(store_path, exc, "a read at start-up failed")
            trimmed = self.trimmed_bytes
            self.log.close()
            self.store.close()
            if not isinstance(damage, CorruptFile):
                raise damage from exc
            try:
                self._open_generation(damage)
            except sqlite3.Error as again:
                raise store_error(
                    store_path, again, "the rebuilt store fails a read at start-up"
                ) from again
            self.trimmed_bytes = trimmed

    def _open_generation(self, damage: CorruptFile | None) -> None:
        gen = self._current_gen()
        self.generation = gen
        store_path = self._path(f"features-{gen}.sqlite")
        # The log first: damage in its middle stops start-up whatever the store says.
        self.log = CommandLog.open(self._path(f"log-{gen}.ndlog"), self._log_sealer, aad=self._aad)
        self.trimmed_bytes = self.log.trimmed_bytes
        if damage is None:
            try:
                # Opening verifies the store (integrity check, meta rows): any
                # damage SQLite can see is a CorruptFile here, never a raw error.
                self.store = FeatureStore(store_path, self._sealer, self.tenant)
                if self.store.applied_seq < self.log.base_seq:
                    self.store.close()
                    raise CorruptFile(
                        store_path,
                        f"store is at sequence {self.store.applied_seq} but the log starts "
                        f"after {self.log.base_seq}",
                    )
            except CorruptFile as exc:
                damage = exc
        if damage is not None:
            self.store = self._recover_store(store_path, damage)
        st = os.stat(store_path)
        self._store_identity = (st.st_dev, st.st_ino)
        self.failed_commands = self.store.failed_count()
        pols = self.store.policies()
        self.policy = Policy.from_dict(pols[-1]) if pols else self._initial_policy()
        last = self.store.last_event()
        self._last_hash = chain_hash(last) if last is not None else GENESIS
        applied = self.store.applied_seq
        n = 0
        for cmd in self.log.commands(after=applied):
            self._apply_logged(cmd, index=False)
            n += 1
        self.replayed = n
        self.log.release()
        self.seq = max(self.store.applied_seq, self.log.last_seq)
        self._next_pos = self.store.next_pos()
        self._build_index()
        self._repair_links()

    def _recover_store(self, store_path: str, damage: CorruptFile) -> FeatureStore:
        """Rebuild a damaged store from the newest usable snapshot + the log after it."""
        base, last = self.log.base_seq, self.log.last_seq
        snap_dir = self._path("snapshots")
        names = sorted(os.listdir(snap_dir)) if os.path.isdir(snap_dir) else []
        refused: list[str] = []
        chosen: tuple[int, bytes, str] | None = None
        for name in reversed(names):
            if not name.endswith(".ndsnap"):
                continue
            path = os.path.join(snap_dir, name)
            try:
                with open(path, "rb") as fh:
                    manifest, db = self._verify_snapshot(fh.read())
            except (NeardupError, OSError) as exc:
                refused.append(f"{name}: {exc}")
                continue
            seq = int(manifest["last_seq"])
            # Usable only if the log continues it with nothing missing in between.
            if base <= seq <= last:
                chosen = (seq, db, name)
                break
            refused.append(f"{name}: sequence {seq} outside the log's range ({base}, {last}]")
        if chosen is None and base == 0:
            chosen = (0, b"", "(none: the log holds every command since the tenant began)")
        if chosen is None:
            raise CorruptFile(
                store_path,
                f"{damage.reason}; no snapshot can "
                f"replace it (the log starts after sequence {base}; "
                f"{'; '.join(refused) or 'no snapshots'}): restore a snapshot of this tenant "
                "through the operator API or from a backup",
            )
        seq, db, name = chosen
        aside = f"{store_path}.damaged-{int(time.time())}"
        n = 1
        while os.path.exists(aside):  # never overwrite an earlier damaged copy
            n += 1
            aside = f"{store_path}.damaged-{int(time.time())}-{n}"
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(store_path + suffix):
                os.replace(store_path + suffix, aside + suffix)
        if db:
            atomic_write(store_path, db)
        try:
            store = FeatureStore(store_path, self._sealer, self.tenant)
        except CorruptFile as exc:
            raise CorruptFile(
                store_path, f"the store rebuilt from {name} fails its check: {exc.reason}"
            ) from exc
        if store.applied_seq != seq:
            store.close()
            raise CorruptFile(
                store_path,
                f"the store rebuilt from {name} is at sequence {store.applied_seq}, "
                f"its manifest says {seq}",
            )
        self.recovered = {
            "damage": damage.reason,
            "damaged_store_moved_to": aside,
            "snapshot": name,
            "snapshot_seq": seq,
        }
        return store

    def _build_index(self) -> None:
        idx = BandIndex(
            bands=self.bands,
            max_bucket_size=self.config.max_bucket_size,
            delta_capacity=self.compact_delta,
        )
        pos, keys = self.store.live_bandkeys(self.bands)
        idx.load(pos, keys)
        self.index = idx
        self._live = int(pos.shape[0])
        self._build_screen()

    def _build_screen(self) -> None:
        # "Definitely not stored" for most new content without a SQL lookup; the
        # store confirms every possible hit, so false positives cost one query.
        hashes = self.store.live_content_hashes()
        self._screen_cap = max(2 * int(hashes.shape[0]), 65_536)
        screen = BloomFilter(capacity=self._screen_cap, fp_rate=0.01)
        if hashes.size:
            screen.add(hashes)
        self._screen_n = int(hashes.shape[0])
        self._screen = screen

    def _screen_add(self, h: int) -> None:
        self._screen.add(np.array([h], dtype=np.uint64))
        self._screen_n += 1
        if self._screen_n > self._screen_cap:
            self._build_screen()

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

    # -- features ----------------------------------------------------------------
    def prepare(self, content: str, *, max_token_bytes: int = 1024) -> Prepared:
        """Normalize, check limits, hash (keyed) and sign ``content``.

        Raises :class:`LimitExceeded` (422) for content over ``max_document_bytes``,
        a token longer than ``max_token_bytes`` or more than ``max_shingles``
        shingles, and :class:`EmptyDocument` when nothing is left to compare.
        """
        if not isinstance(content, str):
            raise InvalidConfig("content", type(content).__name__, "must be a string", "send text")
        with span("normalize", chars=len(content)):
            normalized = self._norm(content)
            enc = encode_text(normalized)
        if len(enc) > self.dedup.max_document_bytes:
            raise LimitExceeded(
                f"content is {len(enc)} bytes after normalization, over the "
                f"{self.dedup.max_document_bytes}-byte limit",
                "split the item or raise the limit",
                status=413,
            )
        longest = max((len(t) for t in normalized.split()), default=0)
        if longest > max_token_bytes:
            raise LimitExceeded(
                f"a token of {longest} characters exceeds max_token_bytes={max_token_bytes}",
                "send natural text (token stuffing is refused)",
            )
        import numba

        # One item: the kernels' parallel workers would only spin (2x the CPU for the
        # same wall time), so this thread uses one; the setting is per thread.
        before = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            with span("signature", scheme=self.scheme.fingerprint):
                sets = hash_encoded(
                    EncodedTexts.from_bytes([enc]), self.dedup, self.key, self.scheme
                )
                sig = self.hasher.from_sets(sets)
                keys = fold_keys(sig.band_keys()[0])
        finally:
            numba.set_num_threads(before)
        if sets.raw_counts[0] == 0:
            raise EmptyDocument(None, "(no shingles after normalization)")
        if bool(sets.truncated[0]):
            raise LimitExceeded(
                f"content has more than max_shingles={self.config.max_shingles} shingles",
                "split the item, or create the tenant with a larger max_shingles",
            )
        return Prepared(sets.get(0).copy(), int(sets.content_hash[0]), keys, normalized)

    def prepare_from_features(
        self, features: npt.NDArray[np.uint64], content_hash: int
    ) -> Prepared:
        """A :class:`Prepared` from stored shingle hashes of the *same* shingle scheme
        (a layout-only migration: signatures and band keys are recomputed)."""
        import numba

        feats = np.ascontiguousarray(features, dtype=np.uint64)
        sets = ShingleSets(
            feats,
            np.array([0, feats.shape[0]], dtype=np.int64),
            np.array([feats.shape[0]], dtype=np.int64),
            np.zeros(1, dtype=np.bool_),
            np.array([content_hash], dtype=np.uint64),
            np.zeros(1, dtype=np.int64),
            self.scheme,
        )
        before = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            keys = fold_keys(self.hasher.from_sets(sets).band_keys()[0])
        finally:
            numba.set_num_threads(before)
        return Prepared(feats, int(content_hash), keys, "")

    def ingest(
        self,
        item_id: str,
        prep: Prepared,
        *,
        text: str | None,
        media_type: str | None = None,
        source_time: str | None = None,
    ) -> None:
        """Store a copy of an item without deciding it (index rebuilds, migrations).

        Durable once :meth:`flush` returns; no decision-log event is written.
        """
        with self._lock:
            cur = self.store.current(item_id)
            if cur is not None and cur.live:
                return
            seq, pos = self.seq + 1, self._next_pos
            keep = text if (self.config.retain == "text" and text is not None) else None
            tb = keep.encode("utf-8") if keep is not None else b""
            header = {
                "op": "upsert",
                "item_id": item_id,
                "pos": pos,
                "content_hash": prep.content_hash,
                "replaces": None,
                "media_type": media_type,
                "source_time": source_time,
                "n_features": int(prep.features.shape[0]),
                "text_bytes": len(tb) if keep is not None else None,
                "idem": None,
                "response": {"status": "ingested"},
            }
            blob = (
                np.ascontiguousarray(prep.features, dtype="<u8").tobytes()
                + np.ascontiguousarray(prep.bandkeys, dtype="<u4").tobytes()
                + tb
            )
            cmd = Command(seq, header, blob)
            self._commit(cmd)

    def flush(self) -> None:
        """Wait until every command written so far is on disk."""
        self.log.sync(self.log.last_seq)
        self._maybe_compact_index()

    def ingest_tombstoned(self, item: StoredItem) -> None:
        """Record that ``item`` was stored and is tombstoned (a shadow build carries
        the live version's tombstones, so that the item reads as deleted, not as
        never stored).  No features are kept; no decision event is written."""
        if item.tombstone_epoch is None:
            return
        with self._lock:
            if self.store.current(item.item_id) is not None:
                return
            prep = self.prepare_from_features(np.zeros(0, dtype=np.uint64), item.content_hash)
            self.ingest(
                item.item_id,
                prep,
                text=None,
                media_type=item.media_type,
                source_time=item.source_time,
            )
            cur = self.store.current(item.item_id)
            if cur is None:  # pragma: no cover - ingest just stored it
                return
            header = {
                "op": "tombstone",
                "item_id": item.item_id,
                "pos": cur.pos,
                "epoch": item.tombstone_epoch,
                "response": None,
                "idem": None,
                "event": None,
            }
            self._commit(Command(self.seq + 1, header))

    def live_items(self) -> Iterator[tuple[StoredItem, npt.NDArray[np.uint64], str | None]]:
        """(item, features, retained text) of every live item, in position order."""
        for pos, item_id, feats in self.store.all_features():
            cur = self.store.current(item_id)
            if cur is None or cur.pos != pos:
                continue
            text = self.store.text(pos) if self.config.retain == "text" else None
            yield cur, feats, text

    # -- queries -----------------------------------------------------------------
    def find(
        self,
        prep: Prepared,
        *,
        limit: int,
        exclude: int | None = None,
        known: _Preverified | None = None,
        learn: _Preverified | None = None,
    ) -> tuple[list[Candidate], dict[str, Any]]:
        """Exactly scored candidates of ``prep`` (best first, at most ``limit``).

        ``known`` holds scores computed earlier (see :meth:`preverify`): they are
        reused for positions still live, so the answer is exactly the one a fresh
        search would give.  ``learn`` collects the scores computed here instead,
        and then nothing is counted (a pre-pass, not a query).
        """
        if known is not None and known.generation != self.generation:
            known = None
        with span("band_read", bands=self.bands):
            q = self.index.query(prep.bandkeys, max_scan=self.max_scan)
            maybe = prep.content_hash in self._screen
            same = (
                [p for p in self.store.by_content_hash(prep.content_hash) if p != exclude]
                if maybe
                else []
            )
        pos = q.positions
        bands_hit = dict(zip(pos.tolist(), q.bands_hit.tolist(), strict=True))
        first = dict(zip(pos.tolist(), q.first_band.tolist(), strict=True))
        order = sorted(bands_hit, key=lambda p: (-bands_hit[p], p))
        cap = min(self.config.max_candidates, self.policy.max_candidates)
        capped = q.capped or len(order) > cap
        chosen = list(dict.fromkeys(same + [p for p in order if p != exclude]))[:cap]
        out: list[Candidate] = []
        # A work budget, not a clock: the same query over the same state verifies the
        # same candidates, so decisions replay exactly.  The first candidate is always
        # verified; past the budget the rest are reported as capped.
        budget, spent, over_budget = self.verify_budget, 0, False
        with span("verify", candidates=len(chosen)):
            for lo in range(0, len(chosen), 8):
                if over_budget:
                    break
                part = chosen[lo : lo + 8]
                seen = {p: known.scores[p] for p in part if p in known.scores} if known else {}
                live = self.store.live_positions(list(seen)) if seen else set()
                feats = self.store.features([p for p in part if p not in seen])
                for p in part:
                    if p in seen:
                        if p not in live:
                            continue  # tombstoned since it was scored
                        item_id, inter, union = seen[p]
                        # |A| + |B| = |A & B| + |A | B|: the same cost as below.
                        cost = inter + union
                    elif p in feats:
                        item_id, f = feats[p]
                        cost = int(prep.features.shape[0] + f.shape[0])
                    else:
                        continue  # tombstoned since the band read
                    if out and spent + cost > budget:
                        over_budget = True
                        break
                    spent += cost
                    if p not in seen:
                        inter, union = _exact(prep.features, f)
                        if learn is not None and p < learn.below:
                            learn.scores[p] = (item_id, inter, union)
                    score = inter / union if union else 1.0
                    method = "identical" if p in same and inter == union else "minhash-lsh"
                    out.append(
                        Candidate(
                            item_id,
                            score,
                            inter,
                            union,
                            bands_hit.get(p, 0),
                            first.get(p),
                            method,
                            p,
                        )
                    )
        capped = capped or over_budget
        out.sort(key=lambda c: (-c.score, c.item_id))
        if learn is not None:
            return out[:limit], {}
        self.counters.queries += 1
        self.counters.candidates_verified += len(out)
        if capped:
            self.counters.capped += 1
        info = {
            "candidates_found": len(order) + len([p for p in same if p not in bands_hit]),
            "candidates_verified": len(out),
            "bucket_entries_scanned": q.scanned,
            "capped": capped,
        }
        if over_budget:
            info["verify_budget_hit"] = True
        return out[:limit], info

    def preverify(self, prep: Prepared, item_id: str | None = None) -> _Preverified:
        """Score ``prep``'s candidates without taking the write lock.

        The costly part of a write (reading candidates' features and intersecting
        them) runs here, concurrently with the tenant's other requests; under the
        lock :meth:`find` with ``known=`` then scores only what changed meanwhile,
        so a large item never holds up small writes.  Best effort: a store being
        swapped under the scan (a restore) leaves nothing known, never a wrong score.
        """
        pre = _Preverified(self.generation, self._next_pos)
        try:
            cur = self.store.current(item_id) if item_id is not None else None
            exclude = cur.pos if cur is not None and cur.live else None
            self.find(prep, limit=self.policy.max_candidates, exclude=exclude, learn=pre)
        except (NeardupError, sqlite3.Error):
            pre.scores.clear()
        if self.generation != pre.generation:
            pre.scores.clear()
        return pre

    def _deadline(self, deadline: float | None) -> float | None:
        if deadline is not None or self.request_budget_s is None:
            return deadline
        return time.monotonic() + self.request_budget_s

    def _check_deadline(self, deadline: float | None, stage: str) -> None:
        """Raise :class:`DeadlineExceeded` past ``deadline``; only ever called before
        a command is logged, so a request that ends here left no trace."""
        if deadline is not None and time.monotonic() > deadline:
            budget = self.request_budget_s
            what = "its deadline" if budget is None else f"its time budget of {budget:g} s"
            raise DeadlineExceeded(
                f"the request to tenant {self.tenant!r} used up {what} {stage}; nothing "
                "was stored or recorded",
                "retry later (with the same idempotency key, if it had one); an operator "
                "can raise the budget with neardup serve --request-budget",
                retry_after=1.0,
            )

    def decision(
        self,
        cands: list[Candidate],
        info: dict[str, Any],
        *,
        prep: Prepared | None = None,
        content: str | None = None,
        verifiable: bool = True,
        relinks: dict[str, dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """The policy's outcome for these exactly scored candidates, with the evidence.

        With ``prep`` and ``content`` the best candidate of a ``duplicate`` or
        ``review`` outcome is explained: shared / total shingles, the bands that
        collided, and the shared spans as offsets into ``content`` (and into the
        candidate's retained normalized text when the tenant keeps text).
        """
        with span("decide", candidates=len(cands)):
            return self._decision(cands, info, prep, content, verifiable, relinks)

    def _decision(
        self,
        cands: list[Candidate],
        info: dict[str, Any],
        prep: Prepared | None,
        content: str | None,
        verifiable: bool,
        relinks: dict[str, dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        pol = self.policy
        best = cands[0] if cands else None
        est = band_estimate(max(c.bands for c in cands), self.bands, self.rows) if cands else None
        out = outcome(
            pol,
            best_score=best.score if best and verifiable else None,
            identical=bool(best and best.method == "identical" and verifiable),
            capped=bool(info["capped"]),
            found=int(info["candidates_found"]),
            predicted_recall=self.predicted_recall_at(pol.threshold),
            verifiable=verifiable,
            best_estimate=est,
        )
        d: dict[str, Any] = {
            "state": out.state,
            "reason": out.reason,
            "threshold": pol.threshold,
            "review_band": [pol.review_low, pol.review_high],
            "policy_version": pol.version,
            "policy_fingerprint": pol.fingerprint,
            "predicted_recall": self.predicted_recall_at(pol.threshold),
            "capped": info["capped"],
            "verification": "exact" if verifiable else "unavailable (exact-hash-only mode)",
            "score": best.score if best and verifiable else None,
        }
        if best is not None and out.state in ("duplicate", "review") and verifiable:
            d["duplicate_of"] = best.item_id
            if out.state == "duplicate":
                d["canonical"] = self._canonical(best.item_id, relinks)
            if prep is not None and content is not None:
                d["explanation"] = self._explain(prep, content, best, out.reason)
        return d

    def predicted_recall_at(self, threshold: float) -> float:
        """Probability that a pair at ``threshold`` shares a band (this layout)."""
        return float(candidate_probability(threshold, self.bands, self.rows))

    def _canonical(self, item_id: str, relinks: dict[str, dict[str, Any]] | None = None) -> str:
        """The canonical item of ``item_id``'s cluster (``relinks``: changes about to be
        applied in the same command take precedence over the stored links)."""
        # Links always point at a cluster's canonical item, so one hop suffices.
        eff = relinks.get(item_id) if relinks else None
        if eff is not None:
            return str(eff["canonical"]) if eff["state"] == "duplicate" else item_id
        link = self.store.link(item_id)
        if link is not None and link[0] == "duplicate" and link[1] is not None:
            return link[1]
        return item_id

    def _handoff(self, item_id: str) -> list[dict[str, Any]]:
        """The re-links that hand ``item_id``'s cluster to a new canonical item, when
        ``item_id``'s current version leaves it (tombstone or replace).

        Rule: the new canonical is the **oldest live member** — the member whose
        current version was stored first (lowest position, so no ties) — and every
        other member becomes its duplicate.  Empty when ``item_id`` has no members.
        """
        members = [m for m in self.store.members(item_id) if m != item_id]
        if not members:
            return []
        head = members[0]
        out = [{"item_id": head, "state": "unique", "canonical": None}]
        out += [{"item_id": m, "state": "duplicate", "canonical": head} for m in members[1:]]
        return out

    def _repair_links(self) -> dict[str, Any] | None:
        """Bring links written before the link rules existed in line with them (at open).

        Logs of earlier versions tombstoned or replaced canonical items without
        handing their clusters over, so their replay can leave duplicates linked to
        a tombstoned item, to themselves, or to another duplicate.  Replay applies
        such a log exactly as recorded; then, if any link breaks the rules, one
        ``relink`` event (``cause: "repair"``) is appended that applies the same rule
        as a tombstone: each cluster keeps its live root, or else is handed to its
        oldest live member.  The repair is itself in the log, so every later replay,
        snapshot and restore reproduces it; a log with no broken link is left as is.
        """
        # The check reads every link once per store file (a rebuilt or restored
        # store is checked again); commands of this version keep the rules.
        if self.store.meta("links_checked") == "1":
            return None
        if not self.store.broken_links(1):
            self.store.note("links_checked", "1")
            return None
        links = self.store.link_state()
        names = set(links) | {c for _, c in links.values() if c is not None}
        pos: dict[str, int] = {}
        for name in sorted(names):
            cur = self.store.current(name)
            if cur is not None and cur.live:
                pos[name] = cur.pos
        want = {i: v for i, v in links.items() if i in pos}
        parent = {i: c for i, (st, c) in want.items() if st == "duplicate"}
        # Each duplicate belongs to the component of its chain of links: a root (an
        # item without a duplicate link, live or not) or a cycle (self-links too).
        comp: dict[str, tuple[str, str]] = {}
        for start in sorted(parent):
            path: list[str] = []
            node: str | None = start
            while node is not None and node in parent and node not in comp and node not in path:
                path.append(node)
                node = parent[node]
            if node is None:  # a duplicate link without a canonical item
                key = ("dead", path[-1])
            elif node in comp:
                key = comp[node]
            elif node in path:
                key = ("cycle", min(path[path.index(node) :]))
            else:
                key = ("root", node)
            for p in path:
                comp[p] = key
        groups: dict[tuple[str, str], list[str]] = {}
        for item, key in comp.items():
            groups.setdefault(key, []).append(item)
        for (kind, root), members in sorted(groups.items()):
            if kind == "root" and root in pos:
                head = root
            else:
                head = min(members, key=lambda m: pos[m])
                want.pop(head, None)
            for m in members:
                if m != head:
                    want[m] = ("duplicate", head)
        relinks = [
            {
                "item_id": i,
                "state": want[i][0] if i in want else ("unique" if i in pos else "tombstoned"),
                "canonical": want[i][1] if i in want else None,
            }
            for i in sorted(set(links) | set(want))
            if links.get(i) != want.get(i)
        ]
        if not relinks:  # pragma: no cover - broken_links found something to change
            return None
        event = self._record(
            "relink",
            None,
            None,
            cause="repair",
            reason="links recorded before clusters were handed over on tombstone / replace",
            relinks=relinks,
        )
        self.store.note("links_checked", "1")
        return event

    def _hash_strings(self, strings: list[str]) -> ShingleSets:
        """The keyed shingle hashes of each string (the strings are normalized shingles)."""
        import numba

        raw = self.__dict__.get("_raw_cfg")
        if raw is None:
            raw = self.__dict__["_raw_cfg"] = Config(
                threshold=self.dedup.threshold,
                normalizer="raw",
                shingle=self.dedup.shingle,
                hash_algorithm="siphash24",
                num_perm=self.dedup.num_perm,
                bands=self.bands,
                rows=self.rows,
            )
        before = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            return hash_documents(strings, raw, key=self.key)
        finally:
            numba.set_num_threads(before)

    def _spans(self, text: str, normalizer: str, other: npt.NDArray[np.uint64]) -> list[list[int]]:
        """Character spans of ``text`` covered by shingles whose keyed hash is in ``other``.

        Works for hashes-only tenants: only the other side's hash set is needed.
        """
        spec = self.dedup.shingle
        char_spec = (
            spec
            if spec.kind != "byte"
            else ShingleSpec(kind="char", k=spec.k, max_shingles=spec.max_shingles)
        )
        nt = get_normalizer(normalizer).with_offsets(text)
        pos = positioned_shingles(nt, char_spec)
        if not pos:
            return []
        sets = self._hash_strings([p[0] for p in pos])
        # One membership test over all shingles, then "every hash of the string is
        # shared" per string (each normalized shingle hashes to one value).
        hit = np.isin(sets.data, other)
        sizes = np.diff(sets.indptr)
        starts = np.minimum(sets.indptr[:-1], max(hit.shape[0] - 1, 0))
        shared = np.logical_and.reduceat(hit, starts) if hit.size else np.zeros(0, bool)
        shared = shared & (sizes > 0) if hit.size else np.zeros(len(pos), dtype=bool)
        spans = [
            nt.original_span(s, e) for (_, s, e), ok in zip(pos, shared.tolist(), strict=True) if ok
        ]
        return [[a, b] for a, b in merge_spans(spans)]

    def _explain(
        self, prep: Prepared, content: str, best: Candidate, reason: str
    ) -> dict[str, Any]:
        stored_keys = self.store.bandkeys(best.pos)
        collided = (
            colliding_bands(prep.bandkeys.tolist(), stored_keys.tolist())
            if stored_keys is not None
            else []
        )
        feats = self.store.features([best.pos]).get(best.pos)
        other = feats[1] if feats is not None else np.zeros(0, dtype=np.uint64)
        cand_text = self.store.text(best.pos) if self.config.retain == "text" else None
        limit = self.explain_max_chars
        # Spans cost Python work per shingle; past the limit the counts above still
        # explain the decision, and the request does not hold the tenant for seconds.
        query_spans = (
            self._spans(content, self.config.normalizer, other) if len(content) <= limit else None
        )
        cand_spans = (
            self._spans(cand_text, "raw", prep.features)
            if cand_text is not None and len(cand_text) <= limit
            else None
        )
        return {
            "candidate": best.item_id,
            "jaccard": best.score,
            "shared_shingles": best.shared,
            "total_shingles": best.union,
            "method": best.method,
            "bands_collided": collided,
            "bands_total": self.bands,
            "rows_per_band": self.rows,
            "spans": {
                "query": query_spans,
                "query_offsets": (
                    "characters of the submitted content"
                    if query_spans is not None
                    else f"not computed: the content has {len(content)} characters, over "
                    f"the explanation limit of {limit}"
                ),
                "candidate": cand_spans,
                "candidate_offsets": (
                    "characters of the candidate's retained normalized text"
                    if cand_spans is not None
                    else "not available: the tenant retains hashed shingles only"
                    if cand_text is None
                    else f"not computed: the retained text has {len(cand_text)} characters, "
                    f"over the explanation limit of {limit}"
                ),
            },
            "why": reason,
        }

    def _envelope(self) -> dict[str, Any]:
        env = self.__dict__.get("_env")
        if env is None:
            env = self.__dict__["_env"] = {
                "tenant_id": self.tenant,
                "method": "minhash-lsh+exact-jaccard",
                "scheme_fingerprint": self.scheme.fingerprint,
                "scheme_version": self.config.scheme_version,
            }
        return {**env, "policy_version": self.policy.version}

    def candidates(
        self, content: str, *, limit: int, max_token_bytes: int = 1024
    ) -> dict[str, Any]:
        """Exactly scored candidates without storing anything; the ``decision`` in the
        answer is a preview under the current policy and is not recorded."""
        prep = self.prepare(content, max_token_bytes=max_token_bytes)
        if not self.features_available():
            # The same path as decide: unverified band candidates, never a score or id.
            cands, info = self.find_unverified(prep)
            return {
                **self._envelope(),
                "candidates": [],
                **info,
                "decision": self.decision(cands, info, verifiable=False),
            }
        cands, info = self.find(prep, limit=limit)
        self.maybe_audit(prep, cands)
        if cands:
            # Never answer with an item whose upsert is not yet on disk (records
            # reach the log before the index, so this covers all that find saw).
            self.log.sync(self.log.last_seq)
        return {
            **self._envelope(),
            "candidates": [c.to_dict() for c in cands],
            **info,
            "decision": self.decision(cands, info),
        }

    def decide(
        self, content: str, *, max_token_bytes: int = 1024, actor: str | None = None
    ) -> dict[str, Any]:
        """Decide ``content`` under the current policy and record the decision.

        Nothing is stored but the decision-log event (``stored: false``); to store
        the item and link or quarantine it, upsert it (its decision is recorded too).
        """
        prep = self.prepare(content, max_token_bytes=max_token_bytes)
        verifiable = self.features_available()
        pre = self.preverify(prep) if verifiable else None
        with self._lock:
            if verifiable:
                cands, info = self.find(prep, limit=self.policy.max_candidates, known=pre)
            else:
                cands, info = self.find_unverified(prep)
            d = self.decision(cands, info, prep=prep, content=content, verifiable=verifiable)
            # Unverified candidates have no score and no id (the store is gone): the
            # decision reports how many there were, never what they might score.
            evidence = [c.to_dict() for c in cands[:5]] if verifiable else []
            seq = self.seq + 1
            event = self._event(
                seq,
                "decision",
                None,
                actor,
                decision=d,
                stored=False,
                content_hash=prep.content_hash,
                candidates=[
                    {k: e[k] for k in ("item_id", "score", "shared", "union")} for e in evidence
                ],
            )
            cmd = Command(seq, {"op": "event", "event": event})
            self._commit(cmd)
            sync_to = self.seq
        self.log.sync(sync_to)
        return {
            **self._envelope(),
            "decision": d,
            "decision_seq": seq,
            "event_hash": chain_hash(event),
            "evidence": evidence,
            **info,
        }

    def reject(self, reason: str, *, actor: str | None, item_id: str | None) -> dict[str, Any]:
        """Record a ``rejected`` decision (invalid or over-budget content, over quota)."""
        pol = self.policy
        d = {
            "state": "rejected",
            "reason": reason,
            "threshold": pol.threshold,
            "review_band": [pol.review_low, pol.review_high],
            "policy_version": pol.version,
            "policy_fingerprint": pol.fingerprint,
            "predicted_recall": self.predicted_recall_at(pol.threshold),
            "capped": False,
            "verification": "not attempted",
            "score": None,
        }
        event = self._record("decision", item_id, actor, decision=d, stored=False)
        self.counters.rejected += 1
        return {
            **self._envelope(),
            "decision": d,
            "decision_seq": event["seq"],
            "event_hash": chain_hash(event),
            "evidence": [],
            "candidates_found": 0,
            "candidates_verified": 0,
            "bucket_entries_scanned": 0,
            "capped": False,
        }

    # -- decision log ------------------------------------------------------------
    def _event(
        self, seq: int, kind: str, item_id: str | None, actor: str | None, **fields: Any
    ) -> dict[str, Any]:
        """A decision-log record, chained to the previous one (call under the lock)."""
        return {
            "seq": seq,
            "kind": kind,
            "item_id": item_id,
            "actor": actor,
            "time": round(time.time(), 6),
            "tenant": self.tenant,
            "method": "minhash-lsh+exact-jaccard",
            "scheme_version": self.config.scheme_version,
            "scheme_fingerprint": self.scheme.fingerprint,
            "policy_version": self.policy.version,
            **fields,
            "prev": self._last_hash,
        }

    def events(self, *, after: int = 0, limit: int = 1000) -> dict[str, Any]:
        """Decision-log records with ``seq > after`` (oldest first) and the chain check."""
        recs = self.store.events(after=after, limit=limit)
        n = verify_chain(self.store.events(limit=1 << 62), what=f"tenant {self.tenant} log")
        return {
            **self._envelope(),
            "events": recs,
            "chain_verified": n,
            "head": self._last_hash,
        }

    def _record(
        self, kind: str, item_id: str | None, actor: str | None, **fields: Any
    ) -> dict[str, Any]:
        """Write a standalone decision-layer event and apply it (durable on return)."""
        with self._lock:
            seq = self.seq + 1
            event = self._event(seq, kind, item_id, actor, **fields)
            cmd = Command(seq, {"op": "event", "event": event})
            self._commit(cmd)
            sync_to = self.seq
        self.log.sync(sync_to)
        return event

    def unlink(self, item_id: str, *, actor: str | None, rationale: str = "") -> dict[str, Any]:
        """Reverse a ``duplicate`` link: the item becomes unique again (an event too)."""
        self._require_features("unlinked")
        with self._lock:
            link = self.store.link(item_id)
            if link is None or link[0] != "duplicate":
                raise Conflict(
                    f"item {item_id!r} is not linked as a duplicate "
                    f"(state {link[0] if link else 'unique'})",
                    "unlink only items decided duplicate; release quarantined ones",
                )
            event = self._record(
                "unlink",
                item_id,
                actor,
                rationale=str(rationale)[:2000],
                before={"state": link[0], "canonical": link[1]},
                effect={"item_id": item_id, "state": "unique", "canonical": None},
            )
        return {**self._envelope(), "event": event, "event_hash": chain_hash(event)}

    def release(
        self,
        item_id: str,
        *,
        actor: str | None,
        as_state: str = "unique",
        of: str | None = None,
        rationale: str = "",
    ) -> dict[str, Any]:
        """Resolve a quarantined (``review``) item as ``unique`` or as a ``duplicate`` of ``of``."""
        if as_state not in ("unique", "duplicate"):
            raise InvalidConfig("as", as_state, "unknown outcome", "use unique or duplicate")
        self._require_features("released")
        with self._lock:
            link = self.store.link(item_id)
            if link is None or link[0] != "review":
                raise Conflict(
                    f"item {item_id!r} is not quarantined (state {link[0] if link else 'unique'})",
                    "release only items decided review",
                )
            canonical = None
            if as_state == "duplicate":
                cur = self.store.current(of) if isinstance(of, str) else None
                if not isinstance(of, str) or cur is None or not cur.live or of == item_id:
                    raise InvalidConfig(
                        "of", of, "must name another live stored item", "send the original's id"
                    )
                canonical = self._canonical(of)
                if canonical == item_id:
                    raise Conflict(
                        f"item {item_id!r} is the canonical item of {of!r}'s cluster; it "
                        "cannot be a duplicate of its own cluster",
                        "release it as unique (it stays the cluster's canonical item)",
                    )
            # A quarantined item may be the canonical of a cluster: released as a
            # duplicate, its members follow it into the other cluster (one hop).
            relinks = (
                [
                    {"item_id": m, "state": "duplicate", "canonical": canonical}
                    for m in self.store.members(item_id)
                ]
                if canonical is not None
                else []
            )
            event = self._record(
                "release",
                item_id,
                actor,
                rationale=str(rationale)[:2000],
                before={"state": link[0], "canonical": link[1]},
                effect={"item_id": item_id, "state": as_state, "canonical": canonical},
                **({"relinks": relinks} if relinks else {}),
            )
        return {**self._envelope(), "event": event, "event_hash": chain_hash(event)}

    def link_state(self) -> dict[str, tuple[str, str | None]]:
        """Current links and quarantines: item id -> (state, canonical)."""
        return self.store.link_state()

    def state(self, item_id: str) -> dict[str, Any]:
        """An item's current decision state (unique unless linked or quarantined)."""
        link = self.store.link(item_id)
        return {
            **self._envelope(),
            "item_id": item_id,
            "state": link[0] if link else "unique",
            "canonical": link[1] if link else None,
        }

    def decision_pair(self, seq: int) -> tuple[str, str]:
        """The (item, compared candidate) of the decision recorded at ``seq``."""
        ev = self.store.event(seq)
        if ev is None or ev.get("kind") != "decision":
            raise NotFound(f"no decision at sequence {seq}", "see GET .../decisions")
        d = ev.get("decision", {})
        item, other = ev.get("item_id"), d.get("duplicate_of")
        if not isinstance(item, str) or not isinstance(other, str):
            raise InvalidConfig(
                "decision_seq",
                seq,
                "names a decision without a stored item and a compared candidate",
                "label the pair with left and right",
            )
        return item, other

    def label(
        self,
        left: str,
        right: str,
        label: str,
        *,
        actor: str,
        rationale: str = "",
        decision_seq: int | None = None,
    ) -> dict[str, Any]:
        """Record a reviewer label for a pair (an immutable event with its exact score)."""
        if label not in ("duplicate", "not_duplicate", "unsure"):
            raise InvalidConfig(
                "label", label, "unknown label", "use duplicate, not_duplicate or unsure"
            )
        if left == right:
            raise InvalidConfig("right", right, "labels a pair of two items", "name two items")
        score = self.verify(left, right)["score"]
        a, b = sorted((left, right))
        event = self._record(
            "label",
            None,
            actor,
            reviewer=actor,
            left=a,
            right=b,
            label=label,
            score=score,
            rationale=str(rationale)[:2000],
            decision_seq=decision_seq,
        )
        return {**self._envelope(), "event": event, "event_hash": chain_hash(event)}

    def threshold_report(self, *, policy: FeedbackPolicy | None = None) -> dict[str, Any]:
        """Precision / recall of the current and candidate thresholds on reviewer labels.

        Only labels of this scheme version count (scores under another scheme are not
        comparable); the quality checks of :func:`neardup.service.evaluate_feedback` decide
        which reviewers and pairs are trusted.  The suggestion is never applied here:
        a policy change is an operator's call.
        """
        labels = [
            Label(
                reviewer=str(e["reviewer"]),
                left=str(e["left"]),
                right=str(e["right"]),
                score=float(e["score"]),
                label=e["label"],
                policy_version=int(e["policy_version"]),
                scheme_version=int(e["scheme_version"]),
                seq=int(e["seq"]),
            )
            for e in self.store.labels()
            if int(e["scheme_version"]) == self.config.scheme_version
        ]
        rep = evaluate_feedback(labels, current_threshold=self.policy.threshold, policy=policy)
        cur = rep.current
        self.counters.last_report = {
            "precision": cur.precision,
            "recall": cur.recall,
            "suggested": rep.suggested_threshold,
        }
        return {
            **self._envelope(),
            "labels": len(labels),
            "report": rep.to_dict(),
            "labelled_recall": self.labelled_recall(),
        }

    def maybe_audit(
        self, prep: Prepared, cands: list[Candidate], *, itself: str | None = None
    ) -> bool:
        """Start a background exact audit of this query if it is sampled (see
        :meth:`exact_audit`); at most one runs at a time, one per ``audit_interval_s``."""
        if self.audit_rate <= 0 or self._closed:
            return False
        # Sampled by content, not by a shared RNG: the same item is always (not) sampled.
        u = ((prep.content_hash * 0x9E3779B97F4A7C15) & ((1 << 64) - 1)) / float(1 << 64)
        now = time.monotonic()
        if u >= self.audit_rate or now - self._audit_last < self.audit_interval_s:
            return False
        if not self._audit_busy.acquire(blocking=False):
            return False
        self._audit_last = now
        # An upserted item is stored by the time the scan reaches it: not a miss.
        found = {c.item_id for c in cands} | ({itself} if itself else set())

        def run() -> None:
            try:
                self.exact_audit(prep, found)
            except (NeardupError, sqlite3.Error) as exc:
                # The tenant was closed (or its store restored) under the scan: the
                # audit ends quietly, counting nothing.
                if not self._closed:
                    _log.warning("tenant %s: exact audit stopped: %s", self.tenant, exc)
            finally:
                self._audit_busy.release()

        threading.Thread(target=run, name=f"audit-{self.tenant}", daemon=True).start()
        return True

    def exact_audit(self, prep: Prepared, found: set[str]) -> dict[str, int]:
        """Exact search over live items: pairs at the threshold the index missed.

        A share of queries runs this in the background so that recall is *measured*,
        not only predicted from the S-curve.  Tenants larger than ``audit_max_items``
        are scanned on an evenly strided subset of about that size (only those rows
        are read; ``scanned`` says how many items the figures cover).
        """
        t = self.policy.threshold
        pairs = misses = scanned = 0
        q = prep.features
        stride = max(1, -(-self._next_pos // max(self.audit_max_items, 1)))
        for _pos, item_id, feats in self.store.all_features(stride):
            if self._closed:  # the tenant is closing: stop, count nothing
                return {"pairs": pairs, "misses": misses, "scanned": scanned}
            scanned += 1
            inter = int(np.intersect1d(q, feats, assume_unique=True).shape[0])
            union = int(q.shape[0] + feats.shape[0] - inter)
            if union and inter / union >= t:
                pairs += 1
                misses += item_id not in found
        with self._lock:
            c = self.counters
            c.audits += 1
            c.audit_pairs += pairs
            c.audit_misses += misses
            c.extra["audit_scanned"] = c.extra.get("audit_scanned", 0) + scanned
        return {"pairs": pairs, "misses": misses, "scanned": scanned}

    def labelled_pairs(self) -> list[tuple[str, str]]:
        """Pairs whose reviewer majority (``unsure`` aside) says ``duplicate``."""
        votes: dict[tuple[str, str], list[int]] = {}
        for e in self.store.labels():
            if e["label"] == "unsure":
                continue
            v = votes.setdefault((str(e["left"]), str(e["right"])), [0, 0])
            v[0 if e["label"] == "duplicate" else 1] += 1
        return sorted(k for k, (d, n) in votes.items() if d > n)

    def labelled_recall(self, pairs: list[tuple[str, str]] | None = None) -> dict[str, Any]:
        """Share of reviewer-confirmed duplicate pairs (majority ``duplicate``; or
        ``pairs``) that this index makes candidates (they share a band), and that
        verify at the threshold."""
        dup = self.labelled_pairs() if pairs is None else pairs
        found = verified = 0
        for left, right in dup:
            a, b = self.store.current(left), self.store.current(right)
            if a is None or b is None or not (a.live and b.live):
                continue
            ka, kb = self.store.bandkeys(a.pos), self.store.bandkeys(b.pos)
            if ka is not None and kb is not None and bool((ka == kb).any()):
                found += 1
                feats = self.store.features([a.pos, b.pos])
                inter, union = _exact(feats[a.pos][1], feats[b.pos][1])
                verified += int(union > 0 and inter / union >= self.policy.threshold)
        n = len(dup)
        return {
            "labelled_duplicates": n,
            "candidates": found,
            "verified_at_threshold": verified,
            "candidate_recall": found / n if n else None,
        }

    def set_policy(
        self,
        doc: dict[str, Any],
        *,
        actor: str | None,
        guard: PolicyGuard | None = None,
    ) -> dict[str, Any]:
        """Install the next policy version, if ``guard`` allows it under this layout.

        Refused with the estimate in the message: a version that is not the next
        one, a threshold outside the guard's safe range, a review band that starts
        where this tenant's layout finds a pair with probability below the guard's
        minimum (that needs a new layout: a shadow index), or more candidates per
        query than the tenant's ``max_candidates`` budget (see
        :class:`~neardup.service.decisions.PolicyGuard`; its defaults without one).
        """
        guard = guard if guard is not None else PolicyGuard()
        with self._lock:
            pol = Policy.from_dict({**doc, "version": doc.get("version", self.policy.version + 1)})
            if pol.version != self.policy.version + 1:
                raise Conflict(
                    f"policy version {pol.version} is not the next one "
                    f"(current {self.policy.version})",
                    f"send version {self.policy.version + 1}; used versions are immutable",
                )
            warnings = guard.check(
                pol, bands=self.bands, rows=self.rows, num_perm=self.config.num_perm
            )
            if pol.max_candidates > self.config.max_candidates:
                per_item = 8 * max(1, self.config.max_shingles // 10)
                raise InvalidConfig(
                    "max_candidates",
                    pol.max_candidates,
                    f"exceeds the tenant's budget of {self.config.max_candidates} "
                    f"(about {pol.max_candidates * per_item} bytes of features read per query)",
                    f"use at most {self.config.max_candidates}",
                )
            event = self._record(
                "policy", None, actor, policy=pol.to_dict(), fingerprint=pol.fingerprint
            )
        return {
            **self._envelope(),
            "policy": pol.to_dict(),
            "fingerprint": pol.fingerprint,
            "predicted_recall_at_threshold": self.predicted_recall_at(pol.threshold),
            "event_hash": chain_hash(event),
            "warnings": warnings,
        }

    def policies(self) -> dict[str, Any]:
        return {
            **self._envelope(),
            "current": self.policy.to_dict(),
            "fingerprint": self.policy.fingerprint,
            "history": self.policy_history(),
        }

    def policy_history(self, *, placeholder: bool = False) -> list[dict[str, Any]]:
        """Every policy version of this tenant, oldest first (append-only).

        Version 1 (or ``policy_version``) comes from the configuration unless a
        recorded version replaces it: a shadow index adopts the live tenant's history
        (see :meth:`adopt_policy`).  ``placeholder``: leave the configuration's policy
        out (a shadow's, which was never live).
        """
        return self._history(self.store, placeholder=placeholder)

    def _history(self, store: FeatureStore, *, placeholder: bool = False) -> list[dict[str, Any]]:
        rows = store.policies()
        init = self._initial_policy().to_dict()
        if placeholder or any(r["version"] == init["version"] for r in rows):
            return rows
        return sorted([init, *rows], key=lambda d: int(d["version"]))

    @staticmethod
    def _missing_policies(
        own: list[dict[str, Any]], history: list[dict[str, Any]], what: str
    ) -> list[dict[str, Any]]:
        """The versions of ``history`` that ``own`` lacks; a version both hold with
        different contents is a :class:`Conflict` (versions are never reused)."""
        mine = {int(d["version"]): d for d in own}
        missing = []
        for doc in sorted(history, key=lambda d: int(d["version"])):
            have = mine.get(int(doc["version"]))
            if have is None:
                missing.append(doc)
            elif have != doc:
                raise Conflict(
                    f"policy version {doc['version']} means different policies in {what}",
                    "restore / promote only versions of this tenant's own history",
                )
        return missing

    def adopt_policy(
        self,
        history: list[dict[str, Any]],
        desired: Policy,
        *,
        actor: str | None,
        source: str,
        placeholder: bool = False,
        fresh: bool = True,
    ) -> list[dict[str, Any]]:
        """Continue ``history`` (another index's policy versions of this tenant) and make
        ``desired`` (its version ignored) the current policy, without reusing a version.

        Versions of ``history`` this index lacks are recorded (``inherited``); then
        ``desired`` is installed as the next version after all of them, unless the
        current policy already is ``desired`` under a version newer than every one of
        ``history`` (``fresh``: a promotion brings a version that was never live) or
        at least as new (a restore of a snapshot that holds the whole history).
        Used by a shadow's start and promotion (``source``), the promotion of a
        previous version back, and restores.  Returns the recorded policy events.
        """
        events = []
        with self._lock:
            own = self.policy_history(placeholder=placeholder)
            missing = self._missing_policies(own, history, f"tenant {self.tenant!r} ({source})")
            for doc in missing:
                events.append(
                    self._record_policy(Policy.from_dict(doc), actor, source, inherited=True)
                )
            versions = [int(d["version"]) for d in [*own, *history]]
            top = max([*versions, self.policy.version])
            want = {**desired.to_dict(), "version": self.policy.version}
            newest = max(int(d["version"]) for d in history)
            newer = self.policy.version > newest or (not fresh and self.policy.version == newest)
            if not (newer and self.policy.to_dict() == want):
                pol = Policy.from_dict({**desired.to_dict(), "version": top + 1})
                events.append(self._record_policy(pol, actor, source))
        return events

    def _record_policy(
        self, pol: Policy, actor: str | None, source: str, **extra: Any
    ) -> dict[str, Any]:
        return self._record(
            "policy",
            None,
            actor,
            policy=pol.to_dict(),
            fingerprint=pol.fingerprint,
            **extra,
            source=source,
        )

    def _initial_policy(self) -> Policy:
        return self.config.initial_policy()

    # -- degraded mode -----------------------------------------------------------
    def features_available(self) -> bool:
        """False when the feature store's file is gone or replaced (exact-hash-only mode)."""
        try:
            st = os.stat(self.store.path)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self._store_identity

    def _require_features(self, what: str) -> None:
        """Refuse (503 ``degraded``) what needs the feature store in exact-hash-only mode.

        The rule: items and links are neither changed (upsert, tombstone, unlink,
        release) nor exactly scored (verify, labels) while the store is unavailable;
        decisions and previews answer from the band index alone (``review`` at any
        candidate, never ``duplicate``), and policy changes are still recorded.
        """
        if not self.features_available():
            raise Degraded(
                f"tenant {self.tenant!r} is in exact-hash-only mode: its feature store is "
                f"unavailable, so nothing can be {what} (items and links are neither "
                "changed nor exactly scored until it is back)",
                "retry later; an operator restores the feature store (restart recovers it "
                "from the latest snapshot and the command log)",
            )

    @property
    def mode(self) -> str:
        if self.stopped is not None:
            return "stopped"
        return "normal" if self.features_available() else "exact-hash-only"

    def find_unverified(self, prep: Prepared) -> tuple[list[Candidate], dict[str, Any]]:
        """Band candidates without reading the feature store (scores unknown)."""
        q = self.index.query(prep.bandkeys, max_scan=self.max_scan)
        maybe = prep.content_hash in self._screen
        info = {
            "candidates_found": int(q.positions.shape[0]) + int(maybe),
            "candidates_verified": 0,
            "bucket_entries_scanned": q.scanned,
            "capped": q.capped,
        }
        cands = [
            Candidate("?", float("nan"), 0, 0, int(b), int(f), "unverified", int(p))
            for p, b, f in zip(
                q.positions.tolist(), q.bands_hit.tolist(), q.first_band.tolist(), strict=True
            )
        ]
        if maybe and not cands:
            cands = [Candidate("?", float("nan"), 0, 0, self.bands, 0, "unverified", -1)]
        return cands, info

    def verify(self, left: str, right: str) -> dict[str, Any]:
        """Exact Jaccard of two stored, live items under the tenant's policy."""
        self._require_features("exactly scored")
        items = []
        for item_id in (left, right):
            cur = self.store.current(item_id)
            if cur is None or not cur.live:
                raise NotFound(
                    f"item {item_id!r} is not stored (or is tombstoned)", "upsert it first"
                )
            items.append(cur)
        feats = self.store.features([items[0].pos, items[1].pos])
        inter, union = _exact(feats[items[0].pos][1], feats[items[1].pos][1])
        score = inter / union if union else 1.0
        t = self.config.threshold
        return {
            **self._envelope(),
            "left": left,
            "right": right,
            "score": score,
            "shared": inter,
            "union": union,
            "threshold": t,
            "state": "duplicate" if score >= t else "distinct",
        }

    def item(self, item_id: str) -> dict[str, Any]:
        """The stored version of ``item_id`` (metadata only; never content)."""
        cur = self.store.current(item_id)
        if cur is None:
            raise NotFound(f"item {item_id!r} was never stored", "check the item id")
        return {
            **self._envelope(),
            "item_id": item_id,
            "version": cur.version,
            "live": cur.live,
            "tombstone_epoch": cur.tombstone_epoch,
            "shingles": cur.n_shingles,
            "media_type": cur.media_type,
            "source_time": cur.source_time,
        }

    def content(self, item_id: str) -> dict[str, Any]:
        """The retained normalized text of live ``item_id`` (tenants with ``retain="text"``).

        Raises :class:`NotFound` for an unknown or tombstoned item and
        :class:`Conflict` when the tenant keeps hashed shingles only (there is no
        text to return, by the tenant's own choice).
        """
        if self.config.retain != "text":
            raise Conflict(
                f"tenant {self.tenant!r} retains hashed shingle sets only (retain="
                f"{self.config.retain!r}); no text is stored",
                "create the tenant with retain='text' to keep normalized text",
            )
        cur = self.store.current(item_id)
        if cur is None or not cur.live:
            raise NotFound(f"item {item_id!r} is not stored (or is tombstoned)", "check the id")
        text = self.store.text(cur.pos)
        if text is None:
            raise NotFound(f"item {item_id!r} has no retained text", "check the id")
        return {
            **self._envelope(),
            "item_id": item_id,
            "version": cur.version,
            "normalizer": self.config.normalizer,
            "text": text,
        }

    # -- state changes -----------------------------------------------------------
    @staticmethod
    def body_sha(body: dict[str, Any]) -> str:
        return hashlib.sha256(canonical_json(body).encode()).hexdigest()

    def _idempotent(self, key: str | None, body: dict[str, Any]) -> dict[str, Any] | None:
        if not key:
            return None
        prev = self.store.idempotent(key)
        if prev is None:
            return None
        if prev[0] != self.body_sha(body):
            raise Conflict(
                f"idempotency key {key!r} was used with a different request body",
                "use a new idempotency key for a new request",
            )
        stored: dict[str, Any] = json.loads(prev[1])
        return stored

    def upsert(
        self,
        *,
        item_id: str,
        content: str,
        media_type: str | None = None,
        source_time: str | None = None,
        idempotency_key: str | None = None,
        replace: bool = False,
        body: dict[str, Any] | None = None,
        max_token_bytes: int = 1024,
        actor: str | None = None,
        deadline: float | None = None,
    ) -> dict[str, Any]:
        """Store an item, decide it under the current policy (recorded in the decision
        log: linked, quarantined or kept) and return its exactly scored candidates.

        Candidates are scored before the write lock is taken (:meth:`preverify`);
        the decision is the one a search under the lock gives.  ``deadline`` (a
        ``time.monotonic()`` value; default: now + ``request_budget_s``) bounds the
        time until the command is logged: past it :class:`DeadlineExceeded` and
        nothing is recorded.  A logged command is always completed.
        """
        deadline = self._deadline(deadline)
        if not isinstance(item_id, str) or not 0 < len(item_id) <= 256:
            raise InvalidConfig("item_id", item_id, "must be a 1-256 character string", "send one")
        body = body if body is not None else {"item_id": item_id, "content": content}
        prep = self.prepare(content, max_token_bytes=max_token_bytes)
        self._require_features("stored")
        self._check_deadline(deadline, "while preparing its content")
        pre = self.preverify(prep, item_id)
        self._check_deadline(deadline, "while scoring its candidates")
        args = (item_id, prep, body, idempotency_key, replace, media_type, source_time)
        kw: dict[str, Any] = {"content": content, "actor": actor, "pre": pre, "deadline": deadline}
        if self._batch_writes:
            if self._writer is None:
                with self._lock:
                    if self._writer is None:
                        self._writer = _Writer(self)
            job = _Job(args, kw)
            self._writer.submit(job)
            job.done.wait()
            if job.error is not None:
                raise job.error
            response = job.result if job.result is not None else {}
        else:
            with self._lock:
                response = self._upsert_locked(*args, **kw)
                # Whatever this response reports (its own record, an earlier one it
                # repeats, or candidates written by concurrent requests) is on disk
                # before it is acknowledged; the fsync happens outside the lock so
                # that concurrent upserts share it (group commit).
                sync_to = self.seq
            self.log.sync(sync_to)
        self._maybe_compact_index()
        if source_time:
            self._note_source_time(source_time)
        return response

    def _note_source_time(self, source_time: str) -> None:
        import datetime as dt

        try:
            ts = dt.datetime.fromisoformat(source_time.replace("Z", "+00:00"))
        except (TypeError, ValueError):
            return
        if ts.tzinfo is None:
            ts = ts.replace(tzinfo=dt.UTC)
        t = ts.timestamp()
        c = self.counters
        if c.last_source_time is None or t > c.last_source_time:
            c.last_source_time = t

    def _upsert_locked(
        self,
        item_id: str,
        prep: Prepared,
        body: dict[str, Any],
        idempotency_key: str | None,
        replace: bool,
        media_type: str | None,
        source_time: str | None,
        *,
        content: str,
        actor: str | None,
        pre: _Preverified | None = None,
        deadline: float | None = None,
    ) -> dict[str, Any]:
        stored = self._idempotent(idempotency_key, body)
        if stored is not None:
            return stored
        self._check_deadline(deadline, "waiting for the tenant's writer")
        cur = self.store.current(item_id)
        replaces = None
        if cur is not None and cur.live:
            same = self.store.features([cur.pos]).get(cur.pos)
            if same is not None and np.array_equal(same[1], prep.features):
                link = self.store.link(item_id)
                pol = self.policy
                return {
                    **self._envelope(),
                    "item_id": item_id,
                    "status": "unchanged",
                    "version": cur.version,
                    "seq": self.seq,
                    "candidates": [],
                    "decision": {
                        "state": link[0] if link else "unique",
                        "canonical": link[1] if link else None,
                        "reason": "already stored with the same content; its recorded "
                        "decision stands",
                        "threshold": pol.threshold,
                        "policy_version": pol.version,
                        "predicted_recall": self.predicted_recall_at(pol.threshold),
                    },
                }
            if not replace:
                raise Conflict(
                    f"item {item_id!r} is stored (version {cur.version}) with other content",
                    "send replace=true to store a new version, or use a new item id",
                )
            replaces = cur.pos
        if replaces is None and self._live >= self.config.max_items:
            raise LimitExceeded(
                f"tenant {self.tenant!r} holds {self._live} items, its quota is "
                f"{self.config.max_items}",
                "tombstone and compact items, or ask an operator to raise max_items",
                status=429,
            )
        cands, info = self.find(prep, limit=self.policy.max_candidates, exclude=replaces, known=pre)
        self.maybe_audit(prep, cands, itself=item_id)
        seq, pos = self.seq + 1, self._next_pos
        # A replaced version leaves its cluster like a tombstoned one: a canonical
        # item's cluster is handed to its oldest live member before the new version
        # is decided (so it can never be linked to itself).
        relinks = self._handoff(item_id) if replaces is not None else []
        decision = self.decision(
            cands,
            info,
            prep=prep,
            content=content,
            relinks={r["item_id"]: r for r in relinks},
        )
        event = self._event(
            seq,
            "decision",
            item_id,
            actor,
            decision=decision,
            stored=True,
            content_hash=prep.content_hash,
            candidates=[
                {"item_id": c.item_id, "score": c.score, "shared": c.shared, "union": c.union}
                for c in cands[:5]
            ],
            effect={
                "item_id": item_id,
                "state": decision["state"],
                "canonical": decision.get("canonical"),
            },
            **({"relinks": relinks} if relinks else {}),
        )
        response = {
            **self._envelope(),
            "item_id": item_id,
            "seq": seq,
            "version": seq,
            "status": "replaced" if replaces is not None else "inserted",
            "candidates": [c.to_dict() for c in cands],
            **info,
            "decision": decision,
            "event_hash": chain_hash(event),
        }
        text = prep.normalized if self.config.retain == "text" else None
        feats = np.ascontiguousarray(prep.features, dtype="<u8").tobytes()
        keys = np.ascontiguousarray(prep.bandkeys, dtype="<u4").tobytes()
        tb = text.encode("utf-8") if text is not None else b""
        header = {
            "op": "upsert",
            "item_id": item_id,
            "pos": pos,
            "content_hash": prep.content_hash,
            "replaces": replaces,
            "media_type": media_type,
            "source_time": source_time,
            "n_features": int(prep.features.shape[0]),
            "text_bytes": len(tb) if text else None,
            "idem": [idempotency_key, self.body_sha(body)] if idempotency_key else None,
            "response": response if idempotency_key else None,
            "event": event,
        }
        cmd = Command(seq, header, feats + keys + tb)
        self._commit(cmd)
        self.counters.upserts += 1
        return response

    def tombstone(
        self,
        item_id: str,
        *,
        epoch: int | None = None,
        idempotency_key: str | None = None,
        actor: str | None = None,
        deadline: float | None = None,
    ) -> dict[str, Any]:
        """Logically delete ``item_id``: never returned again; purged at compaction.

        ``epoch`` is the version the caller saw; a tombstone older than the stored
        version (the item was rewritten since) is refused with :class:`Conflict`.
        The item leaves its cluster; when it was the cluster's canonical item, the
        cluster is handed to its oldest live member (see :meth:`_handoff`), recorded
        in the same command as a ``relink`` event.  ``deadline`` as for :meth:`upsert`.
        """
        deadline = self._deadline(deadline)
        body = {"op": "tombstone", "item_id": item_id, "epoch": epoch}
        self._require_features("tombstoned")
        with self._lock:
            response = self._tombstone_locked(
                item_id, epoch, idempotency_key, body, actor, deadline=deadline
            )
            sync_to = self.seq
        self.log.sync(sync_to)
        return response

    def _tombstone_locked(
        self,
        item_id: str,
        epoch: int | None,
        idempotency_key: str | None,
        body: dict[str, Any],
        actor: str | None = None,
        *,
        deadline: float | None = None,
    ) -> dict[str, Any]:
        stored = self._idempotent(idempotency_key, body)
        if stored is not None:
            return stored
        self._check_deadline(deadline, "waiting for the tenant's write lock")
        cur = self.store.current(item_id)
        if cur is None or not cur.live:
            raise NotFound(
                f"item {item_id!r} is not stored (or already tombstoned)", "check the item id"
            )
        if epoch is not None and epoch < cur.version:
            raise Conflict(
                f"tombstone epoch {epoch} is older than item {item_id!r} version {cur.version}",
                f"re-read the item and send epoch >= {cur.version}",
            )
        seq = self.seq + 1
        relinks = self._handoff(item_id)
        own = self.store.link(item_id)
        if own is not None:
            relinks.insert(0, {"item_id": item_id, "state": "tombstoned", "canonical": None})
        response = {
            **self._envelope(),
            "item_id": item_id,
            "seq": seq,
            "tombstoned": True,
            "epoch": epoch if epoch is not None else seq,
            "relinks": relinks,
        }
        event = None
        if relinks:
            event = self._event(
                seq,
                "relink",
                item_id,
                actor,
                cause="tombstone",
                before={"state": own[0] if own else "unique", "canonical": own[1] if own else None},
                relinks=relinks,
            )
        header = {
            "op": "tombstone",
            "item_id": item_id,
            "pos": cur.pos,
            "epoch": response["epoch"],
            "response": response if idempotency_key else None,
            "idem": [idempotency_key, self.body_sha(body)] if idempotency_key else None,
            "event": event,
        }
        cmd = Command(seq, header)
        self._commit(cmd)
        return response

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

    # -- applying logged commands ----------------------------------------------------
    def _writable(self) -> None:
        if self.stopped is not None:
            raise TenantUnavailable(
                f"tenant {self.tenant!r} stopped writing: {self.stopped}",
                "an operator checks the disk, then restarts the server (start-up "
                "replays the log); queries keep answering meanwhile",
            )

    def _commit(self, cmd: Command) -> int:
        """Log ``cmd`` (not yet fsynced) and apply it; call under the tenant lock."""
        self._writable()
        self.log.write([cmd])
        return self._apply_logged(cmd, index=True, live=True)

    def _apply_logged(self, cmd: Command, *, index: bool, live: bool = False) -> int:
        """Apply a command that is already in the log, never leaving the tenant stuck.

        * A storage error (the disk, not the command) stops the tenant's writes: the
          command stays in the log and start-up applies it once the disk is fixed.
        * Any other failure is the command's own: it is recorded as failed in the
          store (in place of its effect) and skipped, here and on every replay,
          which meets the same failure and records the same row.
        * An unknown operation means the log is not this version's: start-up stops
          (:class:`CorruptFile`) rather than skip what it cannot read.
        """
        try:
            return self._apply(cmd, index=index)
        except CorruptFile:
            raise
        except (OSError, sqlite3.OperationalError) as exc:
            self.stopped = (
                f"a storage error while applying command {cmd.seq} ({type(exc).__name__}: {exc})"
            )
            _log.error("tenant %s: %s", self.tenant, self.stopped)
            if live:
                raise NeardupIOError(self.store.path, OSError(str(exc))) from exc
            raise
        except Exception as exc:
            op = str(cmd.header.get("op"))
            reason = f"{type(exc).__name__}: {exc}"[:500]
            self.store.apply_failed(cmd.seq, op, reason)
            self.seq = max(getattr(self, "seq", 0), cmd.seq)
            self.failed_commands += 1
            _log.error(
                "tenant %s: command %d (%s) could not be applied and is recorded as failed: %s",
                self.tenant,
                cmd.seq,
                op,
                reason,
            )
            if live:
                raise CommandFailed(
                    f"command {cmd.seq} ({op}) was logged but could not be applied "
                    f"({type(exc).__name__}); it is recorded as failed and has no effect",
                    "nothing to undo; correct the request and send it again (report the "
                    "failure: the server should have refused it before logging)",
                    seq=cmd.seq,
                ) from exc
            return 0

    def _apply(self, cmd: Command, *, index: bool) -> int:
        h = cmd.header
        op = h.get("op")
        idem = None
        if h.get("idem"):
            idem = (h["idem"][0], h["idem"][1], canonical_json(h["response"]).encode())
        if op == "upsert":
            nf = int(h["n_features"])
            feats = np.frombuffer(cmd.blob, dtype="<u8", count=nf).astype(np.uint64)
            kb = cmd.blob[8 * nf : 8 * nf + 4 * self.bands]
            keys = np.frombuffer(kb, dtype="<u4").astype(np.uint32)
            text = None
            if h.get("text_bytes") is not None:
                text = cmd.blob[8 * nf + 4 * self.bands :].decode("utf-8")
            pos = int(h["pos"])
            self.store.apply_upsert(
                cmd.seq,
                pos=pos,
                item_id=h["item_id"],
                content_hash=int(h["content_hash"]),
                features=feats,
                bandkeys=keys,
                text=text,
                media_type=h.get("media_type"),
                source_time=h.get("source_time"),
                replaces=h.get("replaces"),
                idem=idem,
                event=h.get("event"),
            )
            if h.get("event") is not None:
                self._applied_event(h["event"])
            if index:
                old = h.get("replaces")
                if old is not None and self.index.tombstone(int(old)):
                    self._live -= 1
                self.index.add(pos, keys)
                self._live += 1
                self._screen_add(int(h["content_hash"]))
            self._next_pos = max(self._next_pos, pos + 1) if hasattr(self, "_next_pos") else pos + 1
        elif op == "tombstone":
            self.store.apply_tombstone(
                cmd.seq, pos=int(h["pos"]), epoch=int(h["epoch"]), idem=idem, event=h.get("event")
            )
            if h.get("event") is not None:
                self._applied_event(h["event"])
            if index and self.index.tombstone(int(h["pos"])):
                self._live -= 1
        elif op == "event":
            self.store.apply_event(cmd.seq, h["event"], idem)
            self._applied_event(h["event"])
        elif op == "compact":
            n = self.store.apply_compact(cmd.seq)
            self.seq = max(getattr(self, "seq", 0), cmd.seq)
            return n
        else:
            raise CorruptFile(self.log.path, f"unknown command {op!r} at sequence {cmd.seq}")
        self.seq = max(getattr(self, "seq", 0), cmd.seq)
        return 0

    def _applied_event(self, event: dict[str, Any]) -> None:
        self._last_hash = chain_hash(event)
        if event["kind"] == "policy":
            self.policy = Policy.from_dict(event["policy"])

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

    # -- snapshots ---------------------------------------------------------------
    def snapshot(self) -> bytes:
        """A self-verifying snapshot of this tenant (also kept under ``snapshots/``).

        Layout: an uncompressed tar of ``manifest.json`` (format version, tenant,
        scheme descriptor, last applied sequence, per-file SHA-256), ``manifest.hmac``
        (HMAC-SHA256 of the manifest under the tenant's snapshot key) and
        ``features.sqlite.sealed`` (the store, AES-GCM sealed).  Never contains the
        master secret or any key.
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
        if manifest.get("format_version") != SNAPSHOT_FORMAT:
            raise CorruptFile(what, f"format version {manifest.get('format_version')} unsupported")
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
        db = self._snap_sealer.open(
            sealed, f"snapshot\x00{self.tenant}\x00{seq}".encode(), what=what
        )
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
            check = FeatureStore(new_store, self._sealer, self.tenant)
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
        survey = CommandLog.salvage(damage.path, t._log_sealer, aad=t._aad)
        store_path = t._path(f"features-{gen}.sqlite")
        try:
            store = FeatureStore(store_path, t._sealer, t.tenant)
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

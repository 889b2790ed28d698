"""The state every part of a tenant shares, and small shared records and helpers."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from neardup.core.config import Config
from neardup.service._crypto import LegacySealer, MasterSecret, Sealer
from neardup.service.cmdlog import Command, CommandLog
from neardup.service.decisions import Policy
from neardup.service.online import BandIndex
from neardup.service.store import FeatureStore
from neardup.service.tenant.config import Candidate, Prepared, TenantConfig
from neardup.service.tenant.writer import Writer
from neardup.sketch.minhash import MinHasher
from neardup.sketch.screen import BloomFilter
from neardup.text.hashing import HashKey, SchemeDescriptor
from neardup.text.normalize import Normalizer


@dataclass
class Counters:
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
class Preverified:
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


def exact_scores(a: npt.NDArray[np.uint64], b: npt.NDArray[np.uint64]) -> tuple[int, int]:
    inter = int(np.intersect1d(a, b, assume_unique=True).shape[0])
    return inter, int(a.shape[0] + b.shape[0] - inter)


class TenantState:
    """The attributes a tenant sets at open, and the methods its parts call on each
    other (declared here for type checking; each is defined by one part).

    A part that builds on another inherits it instead, and calls its methods as
    declared there: ``ingest`` and ``links`` build on ``query``, ``snapshots`` on
    ``policies``.
    """

    root: str
    tenant: str
    config: TenantConfig
    dedup: Config
    key: HashKey
    hasher: MinHasher
    scheme: SchemeDescriptor
    bands: int
    rows: int
    predicted_recall: float
    request_budget_s: float | None
    verify_budget: int
    snapshot_keep: int
    explain_max_chars: int
    max_scan: int
    compact_delta: int
    audit_rate: float
    audit_interval_s: float
    audit_max_items: int
    counters: Counters
    trimmed_bytes: int
    replayed: int
    recovered: dict[str, Any] | None
    stopped: str | None
    failed_commands: int
    generation: int
    seq: int
    policy: Policy
    store: FeatureStore
    log: CommandLog
    index: BandIndex
    _sealer: Sealer
    _log_sealer: Sealer
    _snap_mac: bytes
    _snap_sealer: Sealer
    _legacy_sealer: LegacySealer
    _legacy_log_sealer: LegacySealer
    _legacy_snap_sealer: LegacySealer
    _master_fp: str
    _master: MasterSecret
    _norm: Normalizer
    _writer: Writer | None
    _batch_writes: bool
    _audit_busy: threading.Lock
    _audit_last: float
    _closed: bool
    _lock: threading.RLock
    _compacting: threading.Lock
    _dir_lock: int | None
    _last_hash: str
    _live: int
    _next_pos: int
    _screen: BloomFilter
    _screen_cap: int
    _screen_n: int
    _store_identity: tuple[int, int]

    if TYPE_CHECKING:

        @property
        def scheme_descriptor(self) -> dict[str, Any]: ...

        def _path(self, name: str) -> str: ...

        def _current_gen(self) -> int: ...

        def _open_store(self, path: str) -> FeatureStore: ...

        def _open(self) -> None: ...

        @property
        def _aad(self) -> bytes: ...

        def prepare(self, content: str, *, max_token_bytes: int = 1024) -> Prepared: ...

        def predicted_recall_at(self, threshold: float) -> float: ...

        def _canonical(
            self, item_id: str, relinks: dict[str, dict[str, Any]] | None = None
        ) -> str: ...

        def _handoff(self, item_id: str) -> list[dict[str, Any]]: ...

        def _envelope(self) -> dict[str, Any]: ...

        def _event(
            self, seq: int, kind: str, item_id: str | None, actor: str | None, **fields: Any
        ) -> dict[str, Any]: ...

        def _record(
            self, kind: str, item_id: str | None, actor: str | None, **fields: Any
        ) -> dict[str, Any]: ...

        def maybe_audit(
            self, prep: Prepared, cands: list[Candidate], *, itself: str | None = None
        ) -> bool: ...

        def _initial_policy(self) -> Policy: ...

        def verify(self, left: str, right: str) -> dict[str, Any]: ...

        def _maybe_compact_index(self) -> None: ...

        def _commit(self, cmd: Command) -> int: ...

        def _verify_snapshot(self, blob: bytes) -> tuple[dict[str, Any], bytes]: ...

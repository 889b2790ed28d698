"""The multi-tenant dedup service as a library: tenants, auth, limits, audit, metrics.

:class:`Service` is what ``neardup serve`` puts behind HTTP (``neardup.service.server``);
it can be embedded directly too.  Every operation takes the authenticated
:class:`~neardup.service.auth.Principal` and checks its role and tenant scope first, then
limits (rate, size), then does the work on that tenant only — there is no code
path from one tenant's request to another tenant's index, store or key.

Data directory layout::

    <data_dir>/audit.jsonl          hash-chained audit log of privileged calls
    <data_dir>/tenants/<tenant>/    one tenant (see ``neardup.service.tenant``)

The master secret and the API key file live *outside* the data directory
(:class:`ServiceConfig` refuses paths inside it), so a copied data directory or
snapshot never carries the keys that decrypt it.

Example:
    >>> import tempfile, os
    >>> base = tempfile.mkdtemp()
    >>> svc, token = Service.init(ServiceConfig(data_dir=os.path.join(base, "data"),
    ...     master_key_file=os.path.join(base, "master.key"),
    ...     keys_file=os.path.join(base, "keys.json")), operator_tenants=["t1"])
    >>> op = svc.keyring.authenticate(f"Bearer {token}")
    >>> _ = svc.create_tenant(op, "t1", {"threshold": 0.75, "shingle": "word:2"})
    >>> prod = svc.keyring.authenticate("Bearer " + svc.add_key(op, "producer", ["t1"]))
    >>> _ = svc.upsert(prod, "t1", {"item_id": "A", "content": "red fox runs very fast"})
    >>> r = svc.upsert(prod, "t1", {"item_id": "B", "content": "red fox runs very fast today"})
    >>> [(c["item_id"], c["score"]) for c in r["candidates"]], r["decision"]["state"]
    ([('A', 0.8)], 'duplicate')
    >>> svc.close()
"""

from __future__ import annotations

import contextvars
import functools
import logging
import os
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from neardup.core._errors import (
    Busy,
    Conflict,
    CorruptFile,
    DocumentTooLarge,
    EmptyDocument,
    Forbidden,
    InvalidConfig,
    LimitExceeded,
    NeardupError,
    NeardupIOError,
    NotFound,
    SchemeMismatch,
    TenantUnavailable,
)
from neardup.core.persist import atomic_write
from neardup.service._crypto import MasterSecret
from neardup.service._validate import INT64_MAX, check, check_int, short
from neardup.service.auth import PERMISSIONS, AuditLog, Keyring, Principal
from neardup.service.decisions import Policy, PolicyGuard
from neardup.service.migration import (
    Migration,
    VersionGate,
    is_tenant_root,
    load_tenant,
    remove_version,
)
from neardup.service.schemas import SCHEMAS
from neardup.service.tenant import Tenant, TenantConfig, valid_tenant_id

__all__ = ["Service", "ServiceConfig"]

_log = logging.getLogger("neardup.service.manager")

#: Request validation: every field that reaches a command (and so the command log)
#: is checked against these schemas first (they are what /openapi.json publishes).
_ITEM_ID = SCHEMAS["UpsertRequest"]["properties"]["item_id"]
_IDEMPOTENCY_KEY = SCHEMAS["UpsertRequest"]["properties"]["idempotency_key"]


_P = ParamSpec("_P")
_R = TypeVar("_R")

#: The version-gate leases of the request running in this context (see _request).
_LEASES: contextvars.ContextVar[list[VersionGate] | None] = contextvars.ContextVar(
    "neardup_leases", default=None
)


def _request(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """One request: the leases its tenant lookups take (:meth:`Service.tenant`) are
    held until it returns.  Nested calls (``decide`` storing through ``upsert``)
    belong to the outer request and reuse its leases."""

    @functools.wraps(fn)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        if _LEASES.get() is not None:
            return fn(*args, **kwargs)
        held: list[VersionGate] = []
        token = _LEASES.set(held)
        try:
            return fn(*args, **kwargs)
        finally:
            _LEASES.reset(token)
            for gate in reversed(held):
                gate.release()

    return run


def _inside(path: str, root: str) -> bool:
    p, r = os.path.realpath(path), os.path.realpath(root)
    return os.path.commonpath([p, r]) == r


@dataclass(frozen=True, kw_only=True, slots=True)
class ServiceConfig:
    """Server-wide settings (frozen, keyword-only, validated).

    ``content_roots`` are the only places ``content_uri`` may point to
    (``file://`` URIs under one of them; every other scheme is refused).
    """

    data_dir: str
    master_key_file: str
    keys_file: str
    max_body_bytes: int = 1 << 20
    max_token_bytes: int = 256
    max_candidates: int = 100
    max_scan: int = 20_000
    compact_delta: int = 16_384
    content_roots: tuple[str, ...] = ()
    #: Policy thresholds operators may set; outside it a change is refused.
    policy_threshold_range: tuple[float, float] = (0.5, 0.99)
    #: A policy whose review band starts where the layout's candidate recall is
    #: below this is refused (it needs a new layout: a shadow index).
    policy_min_recall: float = 0.9
    #: The candidate recall at its threshold a tenant's layout should reach.  A new
    #: tenant below ``policy_min_recall`` is refused; below this target it is created
    #: with a ``warnings`` entry naming a layout that reaches it.
    recall_target: float = 0.995
    #: Share of queries that also run an exact search in the background (recall
    #: measured, not only predicted); at most one per tenant per interval.
    audit_sample_rate: float = 0.01
    audit_interval_s: float = 60.0
    audit_max_items: int = 20_000
    #: Work budgets per request (deterministic, so decisions replay exactly): shingle
    #: hashes compared in exact verification (query + candidate sizes, summed; past
    #: it the remaining candidates are reported as capped), and the longest content
    #: whose shared spans an explanation computes.
    verify_budget: int = 4_000_000
    explain_max_chars: int = 100_000
    #: Snapshots each tenant keeps under its snapshots/ folder (the newest).
    snapshot_keep: int = 3
    #: How long a version switch (shadow promote / rollback / retire, reopen) waits
    #: for the tenant's requests in flight; past it the switch answers 503 ``busy``
    #: and changes nothing.  Requests arriving meanwhile wait for the switch.
    switch_wait_s: float = 5.0
    #: Seconds a write (upsert, tombstone) may take before it is logged: waiting
    #: for the tenant's writer included.  Past it: 503 ``deadline_exceeded``,
    #: nothing recorded.  A logged write is always completed.
    request_budget_s: float = 5.0

    def __post_init__(self) -> None:
        lo, hi = self.policy_threshold_range
        if not 0 < lo <= hi <= 1:
            raise InvalidConfig(
                "policy_threshold_range",
                self.policy_threshold_range,
                "must satisfy 0 < lo <= hi <= 1",
                "use e.g. (0.5, 0.99)",
            )
        if not 0 < self.request_budget_s <= 3600:
            raise InvalidConfig(
                "request_budget_s",
                self.request_budget_s,
                "must be in (0, 3600] seconds",
                "use e.g. 5",
            )
        if not 0 < self.switch_wait_s <= 600:
            raise InvalidConfig(
                "switch_wait_s", self.switch_wait_s, "must be in (0, 600] seconds", "use e.g. 5"
            )
        if not 0 <= self.audit_sample_rate <= 1 or self.audit_interval_s < 0:
            raise InvalidConfig(
                "audit_sample_rate",
                (self.audit_sample_rate, self.audit_interval_s),
                "needs a rate in [0, 1] and an interval >= 0",
                "use e.g. 0.01 and 60",
            )
        if not 0 < self.policy_min_recall <= 1:
            raise InvalidConfig(
                "policy_min_recall", self.policy_min_recall, "must be in (0, 1]", "use e.g. 0.9"
            )
        if not self.policy_min_recall <= self.recall_target <= 1:
            raise InvalidConfig(
                "recall_target",
                self.recall_target,
                f"must be in [policy_min_recall={self.policy_min_recall}, 1]",
                "use e.g. 0.995",
            )
        for name in ("master_key_file", "keys_file"):
            path = getattr(self, name)
            if _inside(path, self.data_dir):
                raise InvalidConfig(
                    name,
                    path,
                    "must live outside the data directory",
                    f"move it out of {self.data_dir} (a copied data directory must not "
                    "carry its keys)",
                )
        for name, lo, hi in (
            ("max_body_bytes", 1024, 1 << 30),
            ("max_token_bytes", 8, 1 << 20),
            ("max_candidates", 1, 10_000),
            ("max_scan", 1, 1 << 30),
            ("compact_delta", 16, 1 << 24),
            ("verify_budget", 1, 1 << 40),
            ("explain_max_chars", 0, 1 << 40),
            ("snapshot_keep", 1, 1000),
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise InvalidConfig(name, v, f"must be an integer in [{lo}, {hi}]", "fix it")


@dataclass
class _Bucket:
    rate: float
    burst: float
    tokens: float
    stamp: float = field(default_factory=time.monotonic)

    def take(self) -> float | None:
        """None if allowed, else seconds until a token is available."""
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return None
        return (1.0 - self.tokens) / self.rate


def load_master(path: str) -> MasterSecret:
    try:
        with open(path, "rb") as fh:
            raw = fh.read().strip()
    except FileNotFoundError:
        raise InvalidConfig(
            "master_key_file",
            path,
            "does not exist",
            "start `neardup serve --data-dir DIR` once to create it (or pass the right path)",
        ) from None
    except OSError as exc:
        raise NeardupIOError(path, exc) from exc
    try:
        return MasterSecret(bytes.fromhex(raw.decode("ascii")))
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptFile(path, "master key file must hold hex digits") from exc


class Service:
    """A multi-tenant dedup service over one data directory (see module docstring)."""

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self.guard = PolicyGuard(
            threshold_range=config.policy_threshold_range,
            min_recall=config.policy_min_recall,
            recall_target=config.recall_target,
        )
        self.master = load_master(config.master_key_file)
        self.keyring = Keyring.load(config.keys_file)
        os.makedirs(os.path.join(config.data_dir, "tenants"), exist_ok=True)
        self.audit = AuditLog(os.path.join(config.data_dir, "audit.jsonl"))
        self._lock = threading.Lock()
        self._tenants: dict[str, Tenant] = {}
        self._migrations: dict[str, Migration] = {}
        #: Per tenant: requests hold a shared lease, version switches hold it alone.
        self._gates: dict[str, VersionGate] = {}
        self._buckets: dict[str, _Bucket] = {}
        self.started = time.time()
        self.counts: dict[str, int] = {}
        #: Tenants that could not start (or were closed after a storage error), with
        #: the cause and the repair step; every other tenant serves as usual.
        self.failed: dict[str, dict[str, Any]] = {}
        tdir = os.path.join(config.data_dir, "tenants")
        for name in sorted(os.listdir(tdir)):
            if is_tenant_root(os.path.join(tdir, name)):
                self._open_tenant(name)

    def _open_tenant(self, name: str) -> Tenant | None:
        """Open one tenant; a failure marks it failed and never stops the others."""
        root = os.path.join(self.config.data_dir, "tenants", name)
        try:
            t, mig = load_tenant(root, self.master, **self._tenant_kw())
        except Exception as exc:  # one tenant's damage or defect must not stop the rest
            self._mark_failed(name, exc)
            return None
        self._migrations[name] = mig
        if t.trimmed_bytes:
            _log.warning(
                "tenant %s: trimmed a torn command-log tail of %d bytes", name, t.trimmed_bytes
            )
        if t.recovered:
            _log.warning(
                "tenant %s: feature store damaged (%s); moved to %s and rebuilt "
                "from %s + the command log",
                name,
                t.recovered["damage"],
                t.recovered["damaged_store_moved_to"],
                t.recovered["snapshot"],
            )
        if t.failed_commands:
            _log.warning(
                "tenant %s: %d logged commands are recorded as failed (skipped); "
                "GET /v1/tenants/%s lists them",
                name,
                t.failed_commands,
                name,
            )
        self._tenants[name] = t
        self.failed.pop(name, None)
        return t

    def _mark_failed(self, name: str, exc: BaseException) -> None:
        reason = str(exc) if isinstance(exc, NeardupError) else f"{type(exc).__name__}: {exc}"
        # Responses name files relative to the data directory, never server paths.
        reason = reason.replace(os.path.abspath(self.config.data_dir), "DATA_DIR")
        info = {
            "error": type(exc).__name__,
            "reason": reason[:2000],
            "since": round(time.time(), 3),
            "runbook": (
                f"neardup repair --data-dir DATA_DIR --tenant {name}, then "
                f"POST /v1/tenants/{name}/reopen (docs/service.md, 'A tenant that "
                "cannot start')"
            ),
        }
        self.failed[name] = info
        _log.error("tenant %s cannot serve: %s", name, reason, exc_info=exc)
        try:
            self.audit.write(None, "tenant_failed", name, error=info["error"], reason=reason)
        except NeardupError:  # the audit log's own disk problem is logged by it
            _log.error("tenant %s: could not audit the failure", name)

    def reopen(self, principal: Principal, tenant_id: str) -> dict[str, Any]:
        """Open a failed or stopped tenant again (after a repair or a disk fix)."""
        valid_tenant_id(tenant_id)
        principal.require("tenant", tenant_id)
        # Its versions are closed and opened again: not under a request in flight.
        with self._gate(tenant_id).exclusive(self.config.switch_wait_s, "reopen"), self._lock:
            cur = self._tenants.get(tenant_id)
            if cur is not None and cur.stopped is None:
                return {**cur.stats(), "reopened": False}
            if cur is None and tenant_id not in self.failed:
                raise NotFound(
                    f"tenant {tenant_id!r} does not exist",
                    "ask an operator to create it (PUT /v1/tenants/{tenant})",
                )
            if cur is not None:
                self._tenants.pop(tenant_id, None)
                mig = self._migrations.pop(tenant_id, None)
                try:
                    cur.close()
                    if mig is not None and mig.other is not None:
                        mig.other.close()
                except Exception as exc:  # a stopped tenant may fail to close cleanly
                    _log.warning("tenant %s: close before reopen: %s", tenant_id, exc)
            t = self._open_tenant(tenant_id)
        self.audit.write(principal, "reopen_tenant", tenant_id, ok=t is not None)
        if t is None:
            info = self.failed[tenant_id]
            raise TenantUnavailable(
                f"tenant {tenant_id!r} still cannot start ({info['error']}): {info['reason']}",
                info["runbook"],
            )
        return {**t.stats(), "reopened": True}

    @classmethod
    def init(
        cls, config: ServiceConfig, *, operator_tenants: Sequence[str] = ()
    ) -> tuple[Service, str]:
        """Create the master secret and key file if absent; returns the service and a
        new operator token for ``operator_tenants`` (shown once; store it safely)."""
        token = cls.bootstrap(config, operator_tenants=operator_tenants)
        return cls(config), token

    @staticmethod
    def bootstrap(config: ServiceConfig, *, operator_tenants: Sequence[str] = ()) -> str:
        """:meth:`init` without opening the service: the master secret if absent and a
        new operator key (its token is returned)."""
        if not os.path.exists(config.master_key_file):
            os.makedirs(os.path.dirname(os.path.abspath(config.master_key_file)), exist_ok=True)
            atomic_write(config.master_key_file, secrets.token_hex(32).encode() + b"\n")
            os.chmod(config.master_key_file, 0o600)
        os.makedirs(os.path.dirname(os.path.abspath(config.keys_file)), exist_ok=True)
        return Keyring().add_saved(
            config.keys_file, "operator", list(operator_tenants) or ["default"]
        )

    def _tenant_kw(self) -> dict[str, Any]:
        return {
            "max_scan": self.config.max_scan,
            "compact_delta": self.config.compact_delta,
            "audit_rate": self.config.audit_sample_rate,
            "audit_interval_s": self.config.audit_interval_s,
            "audit_max_items": self.config.audit_max_items,
            "batch_writes": True,
            "verify_budget": self.config.verify_budget,
            "explain_max_chars": self.config.explain_max_chars,
            "snapshot_keep": self.config.snapshot_keep,
            "request_budget_s": self.config.request_budget_s,
        }

    def close(self) -> None:
        with self._lock:
            gates = list(self._gates.values())
        held = []
        deadline = time.monotonic() + self.config.switch_wait_s
        for gate in gates:
            # Requests in flight finish first (bounded); new ones wait, then find
            # the tenant gone.  A request still running past the wait is not waited for.
            try:
                gate.acquire_all(max(0.01, deadline - time.monotonic()), "close")
                held.append(gate)
            except Busy as exc:
                _log.warning("closing while requests are in flight: %s", exc)
        try:
            with self._lock:
                for t in self._tenants.values():
                    t.close()
                for mig in self._migrations.values():
                    if mig.other is not None:
                        mig.other.close()
                self._tenants.clear()
                self._migrations.clear()
        finally:
            for gate in held:
                gate.release_all()

    # -- plumbing ----------------------------------------------------------------
    def _gate(self, tenant_id: str) -> VersionGate:
        gate = self._gates.get(tenant_id)
        if gate is None:
            with self._lock:
                gate = self._gates.setdefault(tenant_id, VersionGate(tenant_id))
        return gate

    def _lease(self, tenant_id: str) -> None:
        """Hold a shared lease on the tenant's versions for the running request (see
        :func:`_request`): no version it uses is switched, closed or removed under it."""
        held = _LEASES.get()
        if held is None or tenant_id not in self._tenants:
            # Not inside a request (a direct call), or no open tenant (the lookup
            # answers 404 / 503): nothing to hold.
            return
        gate = self._gate(tenant_id)
        if gate not in held:
            # Waits only while a switch waits or runs, which is bounded by
            # switch_wait_s plus the switch itself (a reopen replays its log).
            gate.acquire(self.config.switch_wait_s + 60.0)
            held.append(gate)

    def tenant(
        self, principal: Principal, op: str, tenant_id: str, *, lease: bool = True
    ) -> Tenant:
        """Authorize ``op`` on ``tenant_id``, apply its rate limit, and return it.

        Inside a request (:func:`_request`) a lease on the tenant's versions is held
        from here to the request's end (``lease=False``: a switch, which takes the
        tenant's gate exclusively itself)."""
        principal.require(op, tenant_id)
        if lease:
            self._lease(tenant_id)
        t = self._tenants.get(tenant_id)
        if t is None and tenant_id in self.failed:
            info = self.failed[tenant_id]
            raise TenantUnavailable(
                f"tenant {tenant_id!r} cannot start ({info['error']}): {info['reason']}",
                info["runbook"],
            )
        if t is None:
            raise NotFound(
                f"tenant {tenant_id!r} does not exist",
                "ask an operator to create it (PUT /v1/tenants/{tenant})",
            )
        b = self._buckets.get(tenant_id)
        if b is None:
            b = self._buckets.setdefault(
                tenant_id,
                _Bucket(t.config.rate_per_s, float(t.config.burst), float(t.config.burst)),
            )
        wait = b.take()
        if wait is not None:
            raise LimitExceeded(
                f"tenant {tenant_id!r} is over its rate of {t.config.rate_per_s}/s",
                "retry after the Retry-After delay",
                status=429,
                retry_after=wait,
            )
        self.counts[op] = self.counts.get(op, 0) + 1
        return t

    def migration(self, tenant_id: str) -> Migration | None:
        return self._migrations.get(tenant_id)

    def tenants(self) -> dict[str, Tenant]:
        return dict(self._tenants)

    def _content(self, body: dict[str, Any]) -> str:
        content, uri = body.get("content"), body.get("content_uri")
        if (content is None) == (uri is None):
            raise InvalidConfig(
                "content",
                None,
                "send exactly one of content or content_uri",
                "put the text in content, or a file:// URI in content_uri",
            )
        if content is not None:
            if not isinstance(content, str):
                raise InvalidConfig(
                    "content", type(content).__name__, "must be a string", "send text"
                )
            return content
        return self.resolve(uri)

    def resolve(self, uri: Any) -> str:
        """Read ``file://`` content under a configured root; anything else is refused."""
        if not isinstance(uri, str):
            raise InvalidConfig("content_uri", uri, "must be a string", "send a file:// URI")
        parsed = urllib.parse.urlparse(uri)
        if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
            raise InvalidConfig(
                "content_uri",
                uri,
                "only file:// URIs are resolved",
                "send the content inline, or a file:// URI under a content root",
            )
        path = urllib.parse.unquote(parsed.path)
        if "\x00" in path:
            raise InvalidConfig(
                "content_uri", uri, "holds a NUL character", "send the URI of a real file"
            )
        if not any(_inside(path, root) for root in self.config.content_roots):
            raise InvalidConfig(
                "content_uri",
                uri,
                "is outside every configured content root",
                "start the server with --content-root covering it",
            )
        try:
            size = os.path.getsize(path)
            if size > self.config.max_body_bytes:
                raise LimitExceeded(
                    f"{uri} is {size} bytes, over {self.config.max_body_bytes}",
                    "send a smaller item",
                    status=413,
                )
            with open(path, "rb") as fh:
                raw = fh.read(self.config.max_body_bytes + 1)
        except OSError as exc:
            raise InvalidConfig(
                "content_uri", uri, f"cannot be read ({exc.strerror})", "check the path"
            ) from exc
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidConfig(
                "content_uri", uri, f"is not UTF-8 (byte {exc.start})", "convert the file to UTF-8"
            ) from exc

    @staticmethod
    def _check_item(body: Any, tenant_id: str, schema: str = "UpsertRequest") -> None:
        """Validate an item request completely (types, lengths, encodings) before any
        of it can reach the command log."""
        if not isinstance(body, dict):
            raise InvalidConfig(
                "body", type(body).__name__, "must be a JSON object", 'send {"item_id": ...}'
            )
        nv = body.get("normalization_version")
        if isinstance(nv, int) and not isinstance(nv, bool) and nv != 1:
            # A producer on another normalizer version: counted as a cross-version attempt.
            raise SchemeMismatch(
                f"normalization version {short(nv)}", "normalization version 1", "an item"
            )
        check(SCHEMAS[schema], body, "body")
        if body.get("tenant_id", tenant_id) != tenant_id:
            raise InvalidConfig(
                "tenant_id",
                body.get("tenant_id"),
                "does not match the URL",
                "send the item to its own tenant",
            )

    @staticmethod
    def _check_id(item_id: Any, field: str = "item_id") -> str:
        check(_ITEM_ID, item_id, field)
        return str(item_id)

    # -- operations ----------------------------------------------------------------
    def create_tenant(
        self, principal: Principal, tenant_id: str, config: dict[str, Any]
    ) -> dict[str, Any]:
        valid_tenant_id(tenant_id)
        principal.require("tenant", tenant_id)
        check(SCHEMAS["TenantConfig"], config, "config")
        cfg = TenantConfig.from_dict(config)
        warnings = self._recall_guard(cfg)
        with self._lock:
            if tenant_id in self.failed:
                raise TenantUnavailable(
                    f"tenant {tenant_id!r} exists but cannot start: "
                    f"{self.failed[tenant_id]['reason']}",
                    self.failed[tenant_id]["runbook"],
                )
            if tenant_id in self._tenants:
                existing = self._tenants[tenant_id]
                if existing.config == cfg:
                    return self._tenant_answer(existing.stats(), warnings)
                raise Conflict(
                    f"tenant {tenant_id!r} exists with another configuration",
                    "a scheme change needs a new tenant or a migration",
                )
            root = os.path.join(self.config.data_dir, "tenants", tenant_id)
            t = Tenant.create(root, tenant_id, cfg, self.master, **self._tenant_kw())
            self._tenants[tenant_id] = t
            self._migrations[tenant_id] = Migration(root, self.master, t, self._tenant_kw())
        self.audit.write(
            principal,
            "create_tenant",
            tenant_id,
            config_fingerprint=cfg.fingerprint,
            warnings=warnings,
        )
        return self._tenant_answer(t.stats(), warnings)

    def _tenant_answer(self, stats: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
        return {**stats, "recall_target": self.config.recall_target, "warnings": warnings}

    def _recall_guard(self, cfg: TenantConfig, policy: Policy | None = None) -> list[str]:
        """The guard of every path that changes a live threshold or layout.

        ``policy`` (default: the configuration's initial policy) is to be live under
        ``cfg``'s layout: tenant creation, ``PUT /policy``, a shadow's start and its
        promotion, promoting a previous version back, restores.  Refused
        (:class:`InvalidConfig`) outside ``policy_threshold_range`` or when the
        predicted recall ``1 - (1 - s**rows)**bands`` at the start of the review band
        is below ``policy_min_recall``; below ``recall_target`` at the threshold the
        answer carries a warning naming a layout that reaches it
        (:class:`~neardup.service.decisions.PolicyGuard`).
        """
        bands, rows = cfg.dedup_config().layout
        pol = policy if policy is not None else cfg.initial_policy()
        return self.guard.check(pol, bands=bands, rows=rows, num_perm=cfg.num_perm)

    def key_request(self, principal: Principal, body: Any) -> str:
        """``POST /v1/keys``: authorized first, then the body validated, then the key."""
        self._require_role(principal, "tenant")
        check(SCHEMAS["KeyRequest"], body, "body")
        return self.add_key(principal, body["role"], body["tenants"])

    @staticmethod
    def _require_role(principal: Principal, op: str) -> None:
        if op not in PERMISSIONS[principal.role]:
            raise Forbidden(
                f"role {principal.role!r} of key {principal.key_id!r} may not {op!r}",
                f"use a key with a role allowed to {op!r}",
            )

    def add_key(self, principal: Principal, role: str, tenants: Sequence[str]) -> str:
        self._require_role(principal, "tenant")
        ts = list(tenants) if isinstance(tenants, list | tuple) else tenants
        check(SCHEMAS["KeyRequest"], {"role": role, "tenants": ts}, "body")
        for t in tenants:
            principal.require("tenant", t)
        with self._lock:
            # Under a file lock, after rereading the file: other server processes
            # (``--workers``) and ``neardup apikey`` add keys to the same file.
            token = self.keyring.add_saved(self.config.keys_file, role, tenants)
        self.audit.write(
            principal, "add_key", ",".join(tenants), role=role, key_id=token.split("_")[1]
        )
        return token

    @_request
    def upsert(self, principal: Principal, tenant_id: str, body: dict[str, Any]) -> dict[str, Any]:
        self.tenant(principal, "upsert", tenant_id)
        self._check_item(body, tenant_id, "UpsertRequest")
        content = self._content(body)
        return self._store(
            tenant_id,
            {
                "item_id": body["item_id"],
                "content": content,
                "media_type": body.get("media_type"),
                "source_time": body.get("source_time"),
                "idempotency_key": body.get("idempotency_key"),
                "replace": bool(body.get("replace", False)),
                "body": body,
                "max_token_bytes": self.config.max_token_bytes,
                "actor": principal.key_id,
            },
        )

    def _store(self, tenant_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        """Upsert into the live version, mirrored to a shadow / previous version.

        Under the request's lease: no switch happens between the two, so a write is
        acknowledged only once both versions have it (or the companion's miss is
        counted, and it is never promoted)."""
        mig = self._migrations[tenant_id]
        out = mig.live.upsert(**kwargs)
        cmp = mig.mirror_upsert(kwargs, out)
        return out if cmp is None else {**out, "shadow": cmp}

    @_request
    def candidates(
        self, principal: Principal, tenant_id: str, body: dict[str, Any], limit: int | None = None
    ) -> dict[str, Any]:
        t = self.tenant(principal, "candidates", tenant_id)
        self._check_item(body, tenant_id, "QueryRequest")
        lim = body.get("limit", limit if limit is not None else 10)
        check_int("limit", lim, 1, INT64_MAX)
        cap = min(self.config.max_candidates, t.config.max_candidates)
        if lim > cap:
            raise LimitExceeded(
                f"limit={lim} exceeds the server cap of {cap} candidates", f"ask for at most {cap}"
            )
        content = self._content(body)
        out = t.candidates(content, limit=lim, max_token_bytes=self.config.max_token_bytes)
        cmp = self._migrations[tenant_id].compare_query(content, out)
        return out if cmp is None else {**out, "shadow": cmp}

    @_request
    def decide(self, principal: Principal, tenant_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """Decide an item and record it; with ``item_id`` the item is stored too (and
        linked or quarantined by the decision), without it only the decision is logged."""
        t = self.tenant(principal, "decide", tenant_id)
        self._check_item(body, tenant_id, "DecideRequest")
        try:
            return self._decide(principal, t, tenant_id, body)
        except (LimitExceeded, EmptyDocument, DocumentTooLarge) as exc:
            if isinstance(exc, LimitExceeded) and exc.retry_after is not None:
                raise  # a rate limit says "later", not "this item is rejected"
            item = body.get("item_id")
            return t.reject(
                str(exc), actor=principal.key_id, item_id=item if isinstance(item, str) else None
            )

    def _decide(
        self, principal: Principal, t: Tenant, tenant_id: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        if body.get("item_id"):
            out = self.upsert(principal, tenant_id, body)
            return {
                **{k: v for k, v in out.items() if k != "candidates"},
                "decision_seq": out.get("seq"),
                "evidence": out.get("candidates", [])[:5],
            }
        return t.decide(
            self._content(body),
            max_token_bytes=self.config.max_token_bytes,
            actor=principal.key_id,
        )

    # -- decision layer ------------------------------------------------------------
    @_request
    def set_policy(
        self, principal: Principal, tenant_id: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        self.tenant(principal, "policy", tenant_id)
        mig = self._migrations[tenant_id]
        try:
            check(SCHEMAS["Policy"], body, "policy")
            with mig.lock:  # no shadow starts or promotion in between
                if mig.role == "shadow":
                    raise Conflict(
                        f"tenant {tenant_id!r} has a shadow index, which brings its own "
                        "policy (the next version) when promoted",
                        "promote or roll back the shadow first",
                    )
                out = mig.live.set_policy(body, actor=principal.key_id, guard=self.guard)
        except NeardupError as exc:
            self.audit.write(
                principal, "policy", tenant_id, outcome="refused", error=str(exc)[:500]
            )
            raise
        self.audit.write(
            principal,
            "policy",
            tenant_id,
            outcome="ok",
            version=out["policy"]["version"],
            fingerprint=out["fingerprint"],
        )
        return out

    @_request
    def threshold_report(self, principal: Principal, tenant_id: str) -> dict[str, Any]:
        return self.tenant(principal, "decisions", tenant_id).threshold_report()

    @_request
    def policies(self, principal: Principal, tenant_id: str) -> dict[str, Any]:
        return self.tenant(principal, "read", tenant_id).policies()

    @_request
    def events(
        self, principal: Principal, tenant_id: str, after: int = 0, limit: int = 1000
    ) -> dict[str, Any]:
        t = self.tenant(principal, "decisions", tenant_id)
        check_int("after", after, 0, INT64_MAX)
        check_int("limit", limit, 1, 10_000)
        return t.events(after=after, limit=limit)

    @_request
    def item_state(self, principal: Principal, tenant_id: str, item_id: str) -> dict[str, Any]:
        t = self.tenant(principal, "read", tenant_id)
        return t.state(self._check_id(item_id))

    @_request
    def resolve_item(
        self, principal: Principal, tenant_id: str, item_id: str, action: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        """``unlink`` a duplicate or ``release`` a quarantined item (audited events)."""
        t = self.tenant(principal, "resolve", tenant_id)
        self._check_id(item_id)
        check(SCHEMAS["ResolveRequest"], body, "body")
        rationale = str(body.get("rationale", ""))
        if action == "unlink":
            out = t.unlink(item_id, actor=principal.key_id, rationale=rationale)
        else:
            out = t.release(
                item_id,
                actor=principal.key_id,
                as_state=str(body.get("as", "unique")),
                of=body.get("of"),
                rationale=rationale,
            )
        self.audit.write(principal, action, tenant_id, item_id=item_id, seq=out["event"]["seq"])
        return out

    @_request
    def label(self, principal: Principal, tenant_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """A reviewer label for a pair (``left``, ``right``) or for a recorded decision
        (``decision_seq``: its item and the candidate it was compared with)."""
        t = self.tenant(principal, "feedback", tenant_id)
        check(SCHEMAS["LabelRequest"], body, "body")
        seq = body.get("decision_seq")
        pair = {"left", "right"} <= set(body)
        if not (pair or seq is not None):
            raise InvalidConfig(
                "body",
                short(body),
                "needs label and either left + right or decision_seq",
                'send {"left": "A", "right": "B", "label": "duplicate"}',
            )
        if pair:
            left, right = str(body["left"]), str(body["right"])
        else:
            left, right = t.decision_pair(int(seq))  # type: ignore[arg-type]
        out = t.label(
            left,
            right,
            str(body["label"]),
            actor=principal.key_id,
            rationale=str(body.get("rationale", "")),
            decision_seq=seq,
        )
        self.audit.write(principal, "label", tenant_id, seq=out["event"]["seq"])
        return out

    @_request
    def verify(self, principal: Principal, tenant_id: str, left: str, right: str) -> dict[str, Any]:
        t = self.tenant(principal, "verify", tenant_id)
        return t.verify(self._check_id(left, "left"), self._check_id(right, "right"))

    @_request
    def verify_request(self, principal: Principal, tenant_id: str, body: Any) -> dict[str, Any]:
        """``POST .../verify``: the body validated after the caller is authorized."""
        principal.require("verify", tenant_id)
        check(SCHEMAS["VerifyRequest"], body, "body")
        return self.verify(principal, tenant_id, body["left"], body["right"])

    @_request
    def tombstone(
        self,
        principal: Principal,
        tenant_id: str,
        item_id: str,
        epoch: int | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        t = self.tenant(principal, "tombstone", tenant_id)
        self._check_id(item_id)
        if epoch is not None:
            check_int("epoch", epoch, 0, INT64_MAX)
        if idempotency_key is not None:
            check(_IDEMPOTENCY_KEY, idempotency_key, "idempotency_key")
        out = t.tombstone(
            item_id, epoch=epoch, idempotency_key=idempotency_key, actor=principal.key_id
        )
        self._migrations[tenant_id].mirror_tombstone(item_id)
        return out

    # -- shadow indexes ------------------------------------------------------------
    @_request
    def shadow(
        self, principal: Principal, tenant_id: str, action: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """start (body = the new TenantConfig) / status / promote / rollback / retire.

        A switch (promote, rollback, retire) holds the tenant's version gate alone:
        it waits up to ``switch_wait_s`` for the requests in flight (503 ``busy``
        past it, nothing changed), switches, and closes and removes a dropped
        version only once no request can reach it (see :mod:`neardup.service.migration`)."""
        switch = action in ("promote", "rollback", "retire")
        self.tenant(
            principal, "shadow" if action != "status" else "read", tenant_id, lease=not switch
        )
        mig = self._migrations[tenant_id]
        actor = principal.key_id
        if action == "status":
            return mig.status()
        try:
            if action == "start":
                check(SCHEMAS["TenantConfig"], body or {}, "config")
                out = mig.start(
                    TenantConfig.from_dict(body or {}), actor=actor, guard=self._recall_guard
                )
            elif switch:
                out = self._switch(tenant_id, action, actor)
                mig = self._migrations[tenant_id]
            else:
                raise NotFound(f"no shadow action {action!r}", "use promote, rollback or retire")
        except NeardupError as exc:
            self.audit.write(
                principal, f"shadow_{action}", tenant_id, outcome="refused", error=str(exc)[:500]
            )
            raise
        self.audit.write(
            principal,
            f"shadow_{action}",
            tenant_id,
            outcome="ok",
            role=mig.role,
            live=mig.live.config.fingerprint,
        )
        return out

    def _switch(self, tenant_id: str, action: str, actor: str | None) -> dict[str, Any]:
        """Promote, roll back or retire under the tenant's gate, held alone."""
        building = self._migrations[tenant_id].building
        if building:
            # It holds a lease until it is built: waiting for it would only hold
            # the tenant's requests back for switch_wait_s.
            raise Busy(
                f"tenant {tenant_id!r} is building a shadow ({building})",
                f"retry the {action} once PUT .../shadow has answered",
            )
        with self._gate(tenant_id).exclusive(self.config.switch_wait_s, action):
            mig = self._migrations.get(tenant_id)
            if mig is None:  # reopened meanwhile and failed to start
                raise NotFound(f"tenant {tenant_id!r} is not open", "see GET /readyz")
            with mig.lock:
                if action == "promote":
                    live, warnings = mig.promote(actor=actor, guard=self._recall_guard)
                    with self._lock:
                        self._tenants[tenant_id] = live
                    return {**mig.status(), "warnings": warnings}
                dropped, rel = mig.detach(
                    actor=actor, expect="shadow" if action == "rollback" else "previous"
                )
                out = mig.status()
                # Still under the migration's lock (a new shadow of the same folder
                # name waits), no longer under the gate: requests go on meanwhile, and
                # none can reach the detached version.
                mig.lock.acquire()
        try:
            remove_version(mig.root, dropped, rel)
        finally:
            mig.lock.release()
        return out

    @_request
    def compact(self, principal: Principal, tenant_id: str) -> dict[str, Any]:
        t = self.tenant(principal, "compact", tenant_id)
        out = t.compact()
        self.audit.write(principal, "compact", tenant_id, seq=out["seq"])
        return out

    @_request
    def snapshot(self, principal: Principal, tenant_id: str) -> bytes:
        t = self.tenant(principal, "snapshot", tenant_id)
        blob = t.snapshot()
        self.audit.write(principal, "snapshot", tenant_id, seq=t.seq, bytes=len(blob))
        return blob

    @_request
    def restore(self, principal: Principal, tenant_id: str, blob: bytes) -> dict[str, Any]:
        t = self.tenant(principal, "restore", tenant_id)
        mig = self._migrations[tenant_id]
        try:
            with mig.lock:
                if mig.other is not None:
                    # The companion mirrors the live state; a restore would leave it
                    # describing another history.
                    raise Conflict(
                        f"tenant {tenant_id!r} has a {mig.role} version attached",
                        "roll back the shadow or retire the previous version, then restore",
                    )
                out = t.restore(blob, guard=self._recall_guard, actor=principal.key_id)
        except Exception as exc:
            self.audit.write(
                principal, "restore", tenant_id, outcome="refused", error=type(exc).__name__
            )
            raise
        self.audit.write(principal, "restore", tenant_id, outcome="ok", seq=out["restored_seq"])
        return out

    @_request
    def item(self, principal: Principal, tenant_id: str, item_id: str) -> dict[str, Any]:
        t = self.tenant(principal, "read", tenant_id)
        return t.item(self._check_id(item_id))

    @_request
    def content(self, principal: Principal, tenant_id: str, item_id: str) -> dict[str, Any]:
        """Retained text of an item: reviewer role only, and every attempt is audited."""
        try:
            t = self.tenant(principal, "content", tenant_id)
            out = t.content(self._check_id(item_id))
        except NeardupError as exc:
            self.audit.write(
                principal,
                "content",
                tenant_id,
                item_id=item_id,
                outcome="refused",
                error=type(exc).__name__,
            )
            raise
        self.audit.write(
            principal,
            "content",
            tenant_id,
            item_id=item_id,
            outcome="ok",
            version=out["version"],
            chars=len(out["text"]),
        )
        return out

    @_request
    def digest(self, principal: Principal, tenant_id: str) -> dict[str, Any]:
        t = self.tenant(principal, "stats", tenant_id)
        return {"tenant_id": tenant_id, "seq": t.seq, "digest": t.digest()}

    @_request
    def stats(self, principal: Principal, tenant_id: str) -> dict[str, Any]:
        return self.tenant(principal, "read", tenant_id).stats()

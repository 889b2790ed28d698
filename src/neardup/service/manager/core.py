"""The Service class: its tenant registry (open, failed, reopen, create), keys, close.

The operations live in mixins by concern (``gating``, ``intake``, ``items``,
``review``, ``versions``; see :mod:`neardup.service.manager`); this module assembles
them and owns what they share: which tenants are open or failed, their migrations,
the key file and the audit log.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from collections.abc import Sequence
from typing import Any

from neardup.core._errors import (
    Busy,
    Conflict,
    Forbidden,
    NeardupError,
    NotFound,
    TenantUnavailable,
)
from neardup.core.config import TOKENIZER
from neardup.core.persist import atomic_write
from neardup.service.auth import PERMISSIONS, AuditLog, Keyring, Principal
from neardup.service.decisions import Policy, PolicyGuard
from neardup.service.manager._state import Bucket
from neardup.service.manager.config import ServiceConfig, load_master
from neardup.service.manager.gating import GatingMixin
from neardup.service.manager.intake import IntakeMixin
from neardup.service.manager.items import ItemsMixin
from neardup.service.manager.review import ReviewMixin
from neardup.service.manager.versions import VersionsMixin
from neardup.service.migration import Migration, VersionGate, is_tenant_root, load_tenant
from neardup.service.models.checks import validate
from neardup.service.models.requests import KeyRequest
from neardup.service.models.requests import TenantConfig as TenantConfigBody
from neardup.service.tenant import Tenant, TenantConfig, valid_tenant_id

__all__ = ["Service"]

_log = logging.getLogger("neardup.service.manager")


class Service(GatingMixin, IntakeMixin, ItemsMixin, ReviewMixin, VersionsMixin):
    """A multi-tenant dedup service over one data directory (see :mod:`neardup.service.manager`)."""

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
        self._buckets: dict[str, Bucket] = {}
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

    def migration(self, tenant_id: str) -> Migration | None:
        return self._migrations.get(tenant_id)

    def tenants(self) -> dict[str, Tenant]:
        return dict(self._tenants)

    def create_tenant(
        self, principal: Principal, tenant_id: str, config: dict[str, Any]
    ) -> dict[str, Any]:
        valid_tenant_id(tenant_id)
        principal.require("tenant", tenant_id)
        validate(TenantConfigBody, config, "config")
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
                old_words = existing.config.scheme.shingle.tokenizer
                if "tokenizer" not in config and existing.config == cfg.with_tokenizer(old_words):
                    # A tenant made before the tokenizer default changed, asked for
                    # again by a client that does not name one: it stays as it is.
                    return self._tenant_answer(
                        existing.stats(),
                        [*warnings, _tokenizer_warning(tenant_id, old_words)],
                    )
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
        bands, rows = cfg.scheme.layout
        pol = policy if policy is not None else cfg.initial_policy()
        return self.guard.check(pol, bands=bands, rows=rows, num_perm=cfg.scheme.num_perm)

    def key_request(self, principal: Principal, body: Any) -> str:
        """``POST /v1/keys``: authorized first, then the body validated, then the key."""
        self._require_role(principal, "tenant")
        validate(KeyRequest, body, "body")
        return self.add_key(
            principal, body["role"], body["tenants"], policies=body.get("policies")
        )

    @staticmethod
    def _require_role(principal: Principal, op: str) -> None:
        if op not in PERMISSIONS[principal.role]:
            raise Forbidden(
                f"role {principal.role!r} of key {principal.key_id!r} may not {op!r}",
                f"use a key with a role allowed to {op!r}",
            )

    def add_key(
        self,
        principal: Principal,
        role: str,
        tenants: Sequence[str],
        *,
        policies: Sequence[str] | None = None,
    ) -> str:
        self._require_role(principal, "tenant")
        ts = list(tenants) if isinstance(tenants, list | tuple) else tenants
        ps = list(policies) if isinstance(policies, list | tuple) else policies
        validate(KeyRequest, {"role": role, "tenants": ts, "policies": ps}, "body")
        for t in tenants:
            principal.require("tenant", t)
        with self._lock:
            # Under a file lock, after rereading the file: other server processes
            # (``--workers``) and ``neardup apikey`` add keys to the same file.
            token = self.keyring.add_saved(
                self.config.keys_file, role, tenants, policies=policies
            )
        extra = {} if policies is None else {"policies": list(policies)}
        self.audit.write(
            principal, "add_key", ",".join(tenants), role=role, key_id=token.split("_")[1], **extra
        )
        return token


def _tokenizer_warning(tenant_id: str, tokenizer: int) -> str:
    return (
        f"tenant {tenant_id!r} keeps word tokenizer {tokenizer} (it was created with it); "
        f"new tenants get tokenizer {TOKENIZER}, which finds Chinese, Japanese and Thai near "
        "duplicates: migrate it with a shadow version of this configuration and "
        f'"tokenizer": {TOKENIZER} (rebuilt from its retained text), or send "tokenizer": '
        f"{tokenizer} to silence this"
    )

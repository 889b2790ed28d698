"""Tenant versions: shadow indexes (start, promote, roll back, retire), compaction,
snapshots and restore.

A switch between versions holds the tenant's version gate alone (see
:mod:`neardup.service.migration`); kept apart from the item operations because these
are the calls that replace what a tenant's requests run against.
"""

from __future__ import annotations

from typing import Any

from neardup.core._errors import Busy, Conflict, NeardupError, NotFound
from neardup.service.auth import Principal
from neardup.service.manager._state import ServiceState
from neardup.service.manager.gating import request_scope
from neardup.service.migration import remove_version
from neardup.service.models.checks import validate
from neardup.service.models.requests import TenantConfig as TenantConfigBody
from neardup.service.tenant import TenantConfig

__all__ = ["VersionsMixin"]


class VersionsMixin(ServiceState):
    @request_scope
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
                validate(TenantConfigBody, body or {}, "config")
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

    @request_scope
    def compact(self, principal: Principal, tenant_id: str) -> dict[str, Any]:
        t = self.tenant(principal, "compact", tenant_id)
        out = t.compact()
        self.audit.write(principal, "compact", tenant_id, seq=out["seq"])
        return out

    @request_scope
    def snapshot(self, principal: Principal, tenant_id: str) -> bytes:
        t = self.tenant(principal, "snapshot", tenant_id)
        blob = t.snapshot()
        self.audit.write(principal, "snapshot", tenant_id, seq=t.seq, bytes=len(blob))
        return blob

    @request_scope
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

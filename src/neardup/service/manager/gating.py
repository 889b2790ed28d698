"""Request gating: a request's version-gate leases, rate limits, the tenant lookup.

Every :class:`~neardup.service.manager.Service` operation finds its tenant through
:meth:`GatingMixin.tenant`: role and scope checked, a shared lease on the tenant's
versions held for the request (:func:`request_scope`), its rate limit applied.  Kept
apart from the tenant registry (``core``) so that the parts of the service that
serve requests share one way in.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from neardup.core._errors import LimitExceeded, NotFound, TenantUnavailable
from neardup.service.auth import Principal
from neardup.service.manager._state import Bucket, ServiceState
from neardup.service.migration import VersionGate
from neardup.service.tenant import Tenant

__all__ = ["LEASES", "GatingMixin", "request_scope"]

_P = ParamSpec("_P")
_R = TypeVar("_R")

#: The version-gate leases of the request running in this context (see request_scope).
LEASES: contextvars.ContextVar[list[VersionGate] | None] = contextvars.ContextVar(
    "neardup_leases", default=None
)


def request_scope(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """One request: the leases its tenant lookups take (:meth:`Service.tenant`) are
    held until it returns.  Nested calls (``decide`` storing through ``upsert``)
    belong to the outer request and reuse its leases."""

    @functools.wraps(fn)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        if LEASES.get() is not None:
            return fn(*args, **kwargs)
        held: list[VersionGate] = []
        token = LEASES.set(held)
        try:
            return fn(*args, **kwargs)
        finally:
            LEASES.reset(token)
            for gate in reversed(held):
                gate.release()

    return run


class GatingMixin(ServiceState):
    def _gate(self, tenant_id: str) -> VersionGate:
        gate = self._gates.get(tenant_id)
        if gate is None:
            with self._lock:
                gate = self._gates.setdefault(tenant_id, VersionGate(tenant_id))
        return gate

    def _lease(self, tenant_id: str) -> None:
        """Hold a shared lease on the tenant's versions for the running request (see
        :func:`request_scope`): no version it uses is switched, closed or removed under it."""
        held = LEASES.get()
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

        Inside a request (:func:`request_scope`) a lease on the tenant's versions is held
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
                Bucket(t.config.rate_per_s, float(t.config.burst), float(t.config.burst)),
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

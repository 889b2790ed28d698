"""The state every part of :class:`~neardup.service.manager.Service` shares.

The attributes the service sets at open, the methods its parts call on each other
(declared here for type checking; each is defined by one part), and the rate-limit
bucket they keep per tenant — as ``neardup.service.tenant._state`` does for a tenant.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from neardup.service._crypto import MasterSecret
from neardup.service.auth import AuditLog, Keyring, Principal
from neardup.service.decisions import Policy, PolicyGuard
from neardup.service.manager.config import ServiceConfig
from neardup.service.migration import Migration, VersionGate
from neardup.service.tenant import Tenant, TenantConfig


@dataclass
class Bucket:
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


class ServiceState:
    """The attributes a service sets at open, and the methods its parts share."""

    config: ServiceConfig
    guard: PolicyGuard
    master: MasterSecret
    keyring: Keyring
    audit: AuditLog
    started: float
    counts: dict[str, int]
    failed: dict[str, dict[str, Any]]
    _lock: threading.Lock
    _tenants: dict[str, Tenant]
    _migrations: dict[str, Migration]
    _gates: dict[str, VersionGate]
    _buckets: dict[str, Bucket]

    if TYPE_CHECKING:

        def _gate(self, tenant_id: str) -> VersionGate: ...

        def tenant(
            self, principal: Principal, op: str, tenant_id: str, *, lease: bool = True
        ) -> Tenant: ...

        def _content(self, body: dict[str, Any]) -> str: ...

        @staticmethod
        def _check_item(body: Any, tenant_id: str, schema: str = "UpsertRequest") -> None: ...

        @staticmethod
        def _check_id(item_id: Any, field: str = "item_id") -> str: ...

        def _recall_guard(self, cfg: TenantConfig, policy: Policy | None = None) -> list[str]: ...

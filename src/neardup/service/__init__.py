"""The multi-tenant HTTP service: tenants, command log, embedded store, band index,
decisions, feedback, auth, routes, workers.

The service's public types are importable from here::

    from neardup.service import Service, ServiceConfig, TenantConfig
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from neardup.core.lazy import lazy_exports

if TYPE_CHECKING:
    from neardup.core._errors import (
        Busy,
        Conflict,
        DeadlineExceeded,
        Degraded,
        Forbidden,
        LimitExceeded,
        NotFound,
        ServiceError,
        Unauthorized,
    )
    from neardup.service.auth import (
        Keyring,
        Principal,
    )
    from neardup.service.cmdlog import CommandLog
    from neardup.service.feedback import (
        FeedbackPolicy,
        Label,
        ThresholdReport,
        evaluate_feedback,
    )
    from neardup.service.manager import (
        Service,
        ServiceConfig,
    )
    from neardup.service.online import BandIndex
    from neardup.service.tenant import (
        Tenant,
        TenantConfig,
    )

_LAZY: dict[str, str] = {
    "BandIndex": "neardup.service.online",
    "Busy": "neardup.core._errors",
    "CommandLog": "neardup.service.cmdlog",
    "Conflict": "neardup.core._errors",
    "DeadlineExceeded": "neardup.core._errors",
    "Degraded": "neardup.core._errors",
    "FeedbackPolicy": "neardup.service.feedback",
    "Forbidden": "neardup.core._errors",
    "Keyring": "neardup.service.auth",
    "Label": "neardup.service.feedback",
    "LimitExceeded": "neardup.core._errors",
    "NotFound": "neardup.core._errors",
    "Principal": "neardup.service.auth",
    "Service": "neardup.service.manager",
    "ServiceConfig": "neardup.service.manager",
    "ServiceError": "neardup.core._errors",
    "Tenant": "neardup.service.tenant",
    "TenantConfig": "neardup.service.tenant",
    "ThresholdReport": "neardup.service.feedback",
    "Unauthorized": "neardup.core._errors",
    "evaluate_feedback": "neardup.service.feedback",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "BandIndex",
    "Busy",
    "CommandLog",
    "Conflict",
    "DeadlineExceeded",
    "Degraded",
    "FeedbackPolicy",
    "Forbidden",
    "Keyring",
    "Label",
    "LimitExceeded",
    "NotFound",
    "Principal",
    "Service",
    "ServiceConfig",
    "ServiceError",
    "Tenant",
    "TenantConfig",
    "ThresholdReport",
    "Unauthorized",
    "evaluate_feedback",
]

"""Optional OpenTelemetry spans (the ``otel`` extra); nothing happens without it.

One request of the service becomes one trace: the route's span, and inside it
``normalize``, ``signature``, ``band_read``, ``verify`` and ``decide``.  Exporters
and sampling are the application's choice (configure the OpenTelemetry SDK as
usual); neardup only creates spans through the global tracer provider.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def span(name: str, **attributes: Any) -> Iterator[None]:
    try:
        from opentelemetry import trace
    except ImportError:
        yield
        return
    with trace.get_tracer("neardup").start_as_current_span(name, attributes=attributes):
        yield

"""Optional OpenTelemetry spans (the ``otel`` extra); nothing happens without it.

One request of the service becomes one trace: the route's span, and inside it
``normalize``, ``signature``, ``band_read``, ``verify`` and ``decide``.  Exporters
and sampling are the application's choice (configure the OpenTelemetry SDK as
usual); neardup only creates spans through the global tracer provider.
"""

from __future__ import annotations

import contextlib
from typing import Any

_MISSING = object()
# The opentelemetry module, None when it is not installed, or _MISSING before the
# first span: a failed import is looked up once, not on every request.
_otel: Any = _MISSING


def _trace_module() -> Any:
    global _otel
    if _otel is _MISSING:
        try:
            from opentelemetry import trace as module
        except ImportError:
            _otel = None
        else:
            _otel = module
    return _otel


_NULL: contextlib.AbstractContextManager[None] = contextlib.nullcontext()


def span(name: str, **attributes: Any) -> contextlib.AbstractContextManager[Any]:
    """A span named ``name`` under the current one (a shared no-op context when
    OpenTelemetry is absent or no SDK provider is configured)."""
    trace = _trace_module()
    # Without a configured SDK the global provider is a proxy of no-op tracers:
    # creating those spans costs time on every request, for nothing.
    if trace is None or isinstance(
        trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider
    ):
        return _NULL
    cm: contextlib.AbstractContextManager[Any] = trace.get_tracer(
        "neardup"
    ).start_as_current_span(name, attributes=attributes)
    return cm

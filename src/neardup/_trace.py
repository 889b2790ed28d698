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


@contextlib.contextmanager
def span(name: str, **attributes: Any) -> Iterator[None]:
    trace = _trace_module()
    if trace is None:
        yield
        return
    with trace.get_tracer("neardup").start_as_current_span(name, attributes=attributes):
        yield

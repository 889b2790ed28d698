"""The exception tree mapped to answers: status, ``{"error", "message", "fix"}``."""

from __future__ import annotations

import logging
from typing import Any

from starlette.responses import JSONResponse

from neardup.core._errors import (
    CorruptFile,
    DocumentTooLarge,
    EmptyDocument,
    InputError,
    InvalidConfig,
    NeardupError,
    NeardupIOError,
    SchemeMismatch,
    ServiceError,
)

_log = logging.getLogger("neardup.service.server")


def _status(exc: NeardupError) -> int:
    if isinstance(exc, ServiceError):
        return exc.status
    if isinstance(exc, DocumentTooLarge):
        return 413
    if isinstance(exc, SchemeMismatch):
        return 409
    if isinstance(exc, EmptyDocument):
        return 422
    if isinstance(exc, NeardupIOError):
        # The server's own disk failed (e.g. a poisoned log after a failed fsync):
        # not the client's fault, and retrying elsewhere or later may succeed.
        return 503
    if isinstance(exc, InvalidConfig | InputError | CorruptFile):
        return 400
    return 400


_CODES = {
    "DocumentTooLarge": "too_large",
    "SchemeMismatch": "scheme_mismatch",
    "EmptyDocument": "empty_content",
    "InvalidConfig": "invalid_parameter",
    "InvalidType": "invalid_parameter",
    "InputError": "invalid_input",
    "CorruptFile": "corrupt",
    "NeardupIOError": "io_error",
}


def safe_text(s: str) -> str:
    """``s`` safe to send as JSON text (a lone surrogate from a request becomes ``\\ud800``)."""
    return s.encode("utf-8", "backslashreplace").decode("utf-8")


def _fix(exc: NeardupError) -> str:
    """The fix of an error: its ``fix`` attribute, else the message's "; fix: ..." tail."""
    fix = getattr(exc, "fix", None)
    if isinstance(fix, str) and fix:
        return fix
    _, sep, tail = str(exc).rpartition("; fix: ")
    return tail if sep and tail else "see the message; /openapi.json describes every request"


def error_response(exc: NeardupError) -> JSONResponse:
    status = _status(exc)
    if isinstance(exc, NeardupIOError):
        # Server paths and OS errors stay in the server's log, not in responses.
        _log.error("storage error: %s", exc)
        return JSONResponse(
            {
                "error": "io_error",
                "message": "the server could not write or read its storage",
                "fix": "an operator checks the disk and restarts the server; then retry "
                "with the same idempotency key",
            },
            status_code=status,
        )
    body: dict[str, Any] = {
        "error": getattr(exc, "code", _CODES.get(type(exc).__name__, "invalid_request")),
        "message": safe_text(str(exc)),
        "fix": safe_text(_fix(exc)),
    }
    headers = {}
    retry_after = getattr(exc, "retry_after", None)  # LimitExceeded (429), Busy (503)
    if isinstance(retry_after, int | float):
        headers["Retry-After"] = str(max(1, int(retry_after + 0.999)))
    return JSONResponse(body, status_code=status, headers=headers)

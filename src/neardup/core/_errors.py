"""One exception tree.  Every message says what was wrong, the offending value and the fix."""

from __future__ import annotations

import errno
from typing import Any

__all__ = [
    "Busy",
    "CommandFailed",
    "Conflict",
    "CorruptFile",
    "Degraded",
    "DocumentTooLarge",
    "EmptyDocument",
    "Forbidden",
    "InputError",
    "InvalidConfig",
    "InvalidType",
    "LimitExceeded",
    "MemoryLimitExceeded",
    "NeardupError",
    "NeardupIOError",
    "NoFeasibleParameters",
    "NotFound",
    "RetryLater",
    "SchemeMismatch",
    "ServiceError",
    "TenantUnavailable",
    "Unauthorized",
    "ZeroVector",
    "shown",
]


def shown(value: Any, limit: int = 80) -> Any:
    """``value`` as an error message shows it: itself when its repr is short, else
    its repr cut to ``limit`` characters (a long signature or list stays readable)."""
    r = repr(value)
    return value if len(r) <= limit else r[: limit - 3] + "..."


class NeardupError(Exception):
    """Base class of every error raised by neardup.

    Every error survives a round trip through :mod:`pickle` with its class, its
    message and its attributes, so that one raised in a Ray worker reaches the
    caller as itself (subclasses take other arguments than their message).
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


def _rebuild(cls: type[NeardupError], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    try:
        err = cls.__new__(cls)
    except TypeError:  # MemoryError's __new__ refuses a subclass that mixes in another base
        err = Exception.__new__(cls)
    Exception.__init__(err, *args)
    err.__dict__.update(state)
    return err


class InvalidConfig(NeardupError, ValueError):
    """A configuration value is invalid; raised before anything is allocated.

    Attributes: ``field`` (the parameter), ``value`` (what was given), ``reason``
    and ``fix`` (what to do instead).
    """

    def __init__(self, field: str, value: Any, reason: str, fix: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        self.fix = fix
        super().__init__(f"invalid {field}={value!r}: {reason}; fix: {fix}")


class InvalidType(InvalidConfig, TypeError):
    """A value of the wrong type where an entry point takes text, a batch of
    texts or one of neardup's objects (an int or bytes where a str belongs).

    An :class:`InvalidConfig` (so one ``except`` catches every bad argument) and a
    :class:`TypeError` (as Python's own type checks would raise).
    """


class NoFeasibleParameters(InvalidConfig):
    """No LSH layout meets the requested recall and candidate budget."""


class EmptyDocument(NeardupError, ValueError):
    """A document has no shingle after normalization (empty or only separators)."""

    def __init__(self, index: int | str | None, detail: str = "") -> None:
        self.index = index
        where = "" if index is None else f" {index!r}"
        extra = f" ({detail})" if detail else ""
        super().__init__(
            f"document{where} is empty after normalization{extra}; fix: drop it, or use "
            "a character/byte shingle or the 'raw' normalizer if its content matters"
        )


class DocumentTooLarge(NeardupError, ValueError):
    """A document is larger than ``Config.max_document_bytes``."""

    def __init__(self, index: int | str | None, size: int, limit: int) -> None:
        self.index = index
        self.size = size
        self.limit = limit
        where = "" if index is None else f" {index!r}"
        super().__init__(
            f"document{where} has {size} bytes, over the limit of {limit}; fix: split it, "
            "or raise max_document_bytes"
        )


class MemoryLimitExceeded(NeardupError, MemoryError):
    """The estimated memory of an operation exceeds its ``memory_limit`` (a
    :class:`~neardup.core.config.RunOptions` field; checked first)."""

    def __init__(self, usage_bytes: int, limit_bytes: int, what: str) -> None:
        self.usage_bytes = usage_bytes
        self.limit_bytes = limit_bytes
        super().__init__(
            f"{what} needs about {usage_bytes:,} bytes, over memory_limit={limit_bytes:,}; "
            "fix: raise memory_limit, lower num_perm or max_shingles, or process in shards"
        )


class SchemeMismatch(NeardupError, ValueError):
    """Signatures, sets or indexes built under different schemes were combined."""

    def __init__(self, left: str, right: str, what: str = "signatures", differ: str = "") -> None:
        self.left = left
        self.right = right
        detail = f" (they differ in {differ})" if differ else ""
        super().__init__(
            f"cannot combine {what} of scheme {left} with scheme {right}{detail}; fix: recompute "
            "one side with the other's configuration (same normalizer, shingles, hash, "
            "seed or key, signature and bands)"
        )


class CorruptFile(NeardupError, ValueError):
    """A persisted file failed its format or checksum check.

    Attributes: ``path``, ``reason`` and ``fix`` (by default: restore or rebuild).
    """

    def __init__(self, path: str, reason: str, fix: str | None = None) -> None:
        self.path = path
        self.reason = reason
        self.fix = fix or "restore it from a backup or rebuild it from the source data"
        super().__init__(f"{path}: {reason}; fix: {self.fix}")


class NeardupIOError(NeardupError, OSError):
    """An operating-system I/O error, wrapped with the path it concerned.

    The fix is chosen by errno (disk full, quota, permissions, ...); ``where_else``,
    if given, says where else to write (e.g. ``--work-dir`` for working files)."""

    def __init__(self, path: str, error: OSError, where_else: str | None = None) -> None:
        self.path = path
        self.error = error
        fix = _IO_FIXES.get(error.errno or 0, "check the path and permissions")
        if where_else and error.errno in _NO_ROOM:
            fix = f"{fix}; or {where_else}"
        # A message given with the errno (``OSError(errno, detail)``) says more.
        detail = error.strerror or str(error)
        super().__init__(f"{path}: {detail}; fix: {fix}")


_IO_FIXES = {
    errno.ENOSPC: "the disk is full: free space on it (or write somewhere else), then run again",
    errno.EFBIG: "the file grew past the largest file this process may write (ulimit -f) or "
    "the file system holds: raise that limit, or write somewhere else",
    errno.EDQUOT: "free space within your disk quota (or write somewhere else)",
    errno.EACCES: "check the permissions of the path, or write somewhere else",
    errno.EPERM: "check the permissions of the path, or write somewhere else",
    errno.EROFS: "the file system is read-only: write somewhere else",
    errno.ENOENT: "check the path: it, or a folder on it, does not exist",
    errno.ENOTDIR: "check the path: a part of it is a file, not a folder",
    errno.EBUSY: "the path is in use (a mount point, or the current folder): use another",
    errno.EIO: "the disk reported an error: check it (dmesg, SMART) before retrying",
}


_NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class InputError(NeardupError, ValueError):
    """A record or file of the input cannot be read as asked.

    Attributes: ``path``, ``line`` (1-based, or None), ``reason`` and ``fix``.
    """

    def __init__(self, path: str, line: int | None, reason: str, fix: str) -> None:
        self.path = path
        self.line = line
        self.reason = reason
        self.fix = fix
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {reason}; fix: {fix}")


class ZeroVector(NeardupError, ValueError):
    """A vector has zero norm (no angle) or a non-finite component."""

    def __init__(self, index: int | str | None, detail: str = "has zero norm") -> None:
        self.index = index
        where = "" if index is None else f" {index!r}"
        super().__init__(
            f"vector{where} {detail}, so its cosine to anything is undefined; fix: drop it "
            "before deduplicating, or use metric='l2' if magnitude is what matters"
        )


class ServiceError(NeardupError):
    """A request to the service cannot be served as sent.

    ``status`` is the HTTP status the server answers with, ``code`` a stable
    machine-readable name, ``fix`` what the caller should do instead.
    """

    status = 400
    code = "bad_request"

    def __init__(self, reason: str, fix: str) -> None:
        self.reason = reason
        self.fix = fix
        super().__init__(f"{reason}; fix: {fix}")


class NotFound(ServiceError):
    """The tenant, item or snapshot named does not exist (or is tombstoned)."""

    status = 404
    code = "not_found"


class Conflict(ServiceError):
    """The request contradicts stored state: an idempotency key reused with another
    body, an item id reused for other content, a stale tombstone epoch."""

    status = 409
    code = "conflict"


class Unauthorized(ServiceError):
    """No valid API key was presented."""

    status = 401
    code = "unauthorized"


class Forbidden(ServiceError):
    """The API key is valid but its role or tenant scope does not allow the call."""

    status = 403
    code = "forbidden"


class Degraded(ServiceError):
    """The tenant runs in a degraded mode (e.g. exact-hash-only: its feature store is
    unavailable) and cannot do this safely now; decisions still answer, as ``review``."""

    status = 503
    code = "degraded"


class CommandFailed(ServiceError):
    """A logged command could not be applied (a defect, not the caller's input).

    The command stays in the log and is recorded as failed in the tenant's store,
    so every replay skips it the same way; the tenant goes on serving.  ``seq`` is
    the command's sequence number.
    """

    status = 422
    code = "command_failed"

    def __init__(self, reason: str, fix: str, *, seq: int) -> None:
        super().__init__(reason, fix)
        self.seq = seq


class TenantUnavailable(ServiceError):
    """The tenant could not start, or stopped writing after a storage error; the
    other tenants are not affected.  The message names the cause and the repair."""

    status = 503
    code = "tenant_unavailable"


class RetryLater(ServiceError):
    """A 503 that changed nothing and says when to try again: ``retry_after``
    seconds (the server sends it as ``Retry-After``)."""

    status = 503

    def __init__(self, reason: str, fix: str, *, retry_after: float = 1.0) -> None:
        super().__init__(reason, fix)
        self.retry_after = retry_after


class Busy(RetryLater):
    """The tenant is switching versions (a shadow promoted, rolled back or retired, or
    the tenant reopened) and the requests in flight did not finish in the bounded
    wait: nothing was changed; retry after ``retry_after`` seconds."""

    code = "busy"


class DeadlineExceeded(RetryLater):
    """A request used up its time budget (``request_budget_s``) before it was logged:
    nothing was stored or recorded; retry after ``retry_after`` seconds (with the
    same idempotency key, if it had one).  A request that was logged is always
    completed and acknowledged, however long it took."""

    code = "deadline_exceeded"


class LimitExceeded(ServiceError):
    """A configured limit was hit before anything was allocated.

    ``status`` is 413 (body too large), 422 (content over a per-item limit) or 429
    (rate or quota; ``retry_after`` seconds says when to try again).
    """

    code = "limit_exceeded"

    def __init__(
        self, reason: str, fix: str, *, status: int = 422, retry_after: float | None = None
    ) -> None:
        super().__init__(reason, fix)
        self.status = status
        self.retry_after = retry_after

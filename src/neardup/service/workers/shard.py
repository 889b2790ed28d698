"""The worker side: a service serving only its tenants, and the worker process."""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

from neardup.core._errors import NeardupError, NotFound, TenantUnavailable
from neardup.core._posix import require_file_locks
from neardup.service.auth import Principal
from neardup.service.manager import Service, ServiceConfig
from neardup.service.tenant import Tenant, valid_tenant_id
from neardup.service.workers.assign import Assignments


class ShardService(Service):
    """A :class:`Service` that opens and creates only the tenants the worker table
    assigns to its worker, each under an exclusive file lock (see the package doc)."""

    def __init__(
        self, config: ServiceConfig, *, shard: int, workers: int, lock_timeout: float = 60.0
    ) -> None:
        self.shard, self.workers = shard, workers
        self.lock_timeout = lock_timeout
        self._held: dict[str, int] = {}
        self.table = Assignments(os.path.join(config.data_dir, "workers.json"), workers)
        os.makedirs(os.path.join(config.data_dir, ".locks"), exist_ok=True)
        super().__init__(config)

    def owns(self, tenant_id: str) -> bool:
        self.table.refresh()
        return self.table.owner.get(tenant_id) == self.shard

    def _hold(self, name: str) -> None:
        """Take the tenant's lock (waiting up to ``lock_timeout`` for a previous owner)."""
        if name in self._held:
            return
        path = os.path.join(self.config.data_dir, ".locks", f"{name}.lock")
        fcntl = require_file_locks("serving a tenant from worker processes")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + self.lock_timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() > deadline:
                    os.close(fd)
                    raise TenantUnavailable(
                        f"tenant {name!r} is held by another process "
                        f"(lock DATA_DIR/.locks/{name}.lock)",
                        "stop the other neardup serve on this data directory",
                    ) from exc
                time.sleep(0.05)
        self._held[name] = fd

    def _open_tenant(self, name: str) -> Tenant | None:
        if not self.owns(name):
            return None  # another worker's tenant
        try:
            self._hold(name)
        except TenantUnavailable as exc:
            self._mark_failed(name, exc)
            return None
        return super()._open_tenant(name)

    def create_tenant(
        self, principal: Principal, tenant_id: str, config: dict[str, Any]
    ) -> dict[str, Any]:
        # The same checks, in the same order, as a single process (401/403/400 first).
        valid_tenant_id(tenant_id)
        principal.require("tenant", tenant_id)
        if not self.owns(tenant_id):
            # Only reachable by bypassing the front: never create another's tenant.
            raise NotFound(
                f"tenant {tenant_id!r} is not assigned to worker {self.shard}",
                "send requests to the front process, not to a worker",
            )
        self._hold(tenant_id)
        return super().create_tenant(principal, tenant_id, config)

    def close(self) -> None:
        super().close()
        for fd in self._held.values():
            os.close(fd)
        self._held.clear()


def worker_command(
    config: ServiceConfig, index: int, workers: int, socket: str, *, log_level: str = "warning"
) -> list[str]:
    """The command line of worker ``index`` (``python -m neardup.service._worker SPEC``)."""
    spec = {
        "config": dataclasses.asdict(config),
        "shard": index,
        "workers": workers,
        "socket": socket,
        "parent": os.getpid(),
        "log_level": log_level,
    }
    return [sys.executable, "-m", "neardup.service._worker", json.dumps(spec)]


def worker_main(argv: Sequence[str]) -> None:
    """Run one worker (see :func:`worker_command`): a :class:`ShardService` behind the
    usual app, on its Unix socket."""
    import uvicorn

    from neardup.service.server import create_app

    spec = json.loads(argv[0])
    die_with_parent(int(spec["parent"]))
    c = dict(spec["config"])
    for name in ("content_roots", "policy_threshold_range"):
        c[name] = tuple(c[name])
    try:
        svc = ShardService(
            ServiceConfig(**c), shard=int(spec["shard"]), workers=int(spec["workers"])
        )
    except NeardupError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        sys.exit(2)
    app = create_app(svc, close_on_shutdown=True)
    # The front keeps connections to its workers open; it drops them after 300 s
    # idle on its side, well before this.
    uvicorn.run(app, uds=spec["socket"], log_level=spec["log_level"], timeout_keep_alive=3600)


def die_with_parent(parent: int) -> None:
    """Linux: SIGKILL this process when its parent (the front) exits."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - non-Linux
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)

"""``neardup serve --workers N``: tenants spread over N worker processes behind a front.

One Python process serves a tenant on about one core (the GIL; see
``docs/service.md``).  To use every core of a host, ``neardup serve`` starts N
worker processes (default: the CPUs this process may run on) and a front process
that listens on ``--host``/``--port``:

* **Ownership.**  ``DATA_DIR/workers.json`` (written by the front) assigns each
  tenant to one worker: at start-up every tenant on disk keeps its worker or, if it
  has none, goes to the worker serving the fewest tenants; a tenant created later
  (``PUT /v1/tenants/{t}`` by an operator scoped to it) goes to the least loaded
  worker too, so N tenants on N workers use every worker.  Each worker opens only
  its tenants from the shared data directory and creates only tenants assigned to
  it, so exactly one process writes a tenant; it also holds an exclusive ``flock``
  on ``DATA_DIR/.locks/<tenant>.lock`` while it serves the tenant, so a second
  process (a worker restarted before the old one is gone, or a stray server on the
  same directory) waits instead of writing the same files.  Assignments are
  stable while N is; with fewer workers, tenants of the missing ones move at
  start-up (nothing on disk moves).
* **The front** forwards ``/v1/tenants/{t}`` and everything under it to the owner
  over a private Unix socket (headers and body unchanged, streamed both ways), and
  ``/v1/keys`` and every other route to worker 0.  It answers ``/healthz`` itself,
  aggregates ``/readyz`` (a worker that is down makes the service ``degraded`` and
  names its tenants) and merges every worker's ``/metrics`` into the exposition
  one process would give (per-tenant series from the owner, request counters and
  latency histograms summed), plus ``neardup_worker_up`` and
  ``neardup_worker_restarts_total`` by ``worker``.
* **Shared files.**  The master key file is read by each worker.  The API key file
  is shared: a key issued through any worker (or ``neardup apikey``) is written
  under a file lock and picked up by every worker at its next request.  The audit
  log is one hash chain appended by all workers under a file lock.
* **Failures.**  A worker that exits is restarted (back-off 0.5 s doubling to 30 s
  while it keeps failing); meanwhile its tenants answer ``503 worker_unavailable``
  with ``Retry-After`` and the other workers keep serving.  An acknowledged write
  was fsynced by the worker before its answer, so the restarted worker replays it.
  A request in flight when its worker dies answers 503 (outcome unknown: retry
  with the same idempotency key).  Workers die with the front (``PR_SET_PDEATHSIG``).
* **Shutdown.**  SIGTERM/SIGINT to the front: it stops accepting, finishes the
  requests in flight, then stops the workers (SIGTERM, each closes its tenants).

``--workers 1`` is the single-process server, with no front.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import errno
import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from neardup.core._errors import CorruptFile, NeardupError, NotFound, TenantUnavailable
from neardup.core._posix import require_file_locks
from neardup.core.persist import atomic_write
from neardup.service.auth import Keyring, Principal
from neardup.service.manager import Service, ServiceConfig
from neardup.service.migration import is_tenant_root
from neardup.service.tenant import Tenant, valid_tenant_id

__all__ = ["Assignments", "Front", "ShardService", "default_workers", "shard_of"]

_log = logging.getLogger("neardup.service.workers")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: Request headers not forwarded (hop-by-hop, or re-framed by the front).
_HOP_REQ = {
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"te",
    b"trailer",
    b"transfer-encoding",
    b"upgrade",
    b"expect",
    b"content-length",
}
#: Response headers not forwarded.
_HOP_RESP = {b"connection", b"keep-alive", b"transfer-encoding", b"trailer", b"upgrade"}


def shard_of(tenant: str, workers: int) -> int:
    """The worker (0 .. workers-1) that owns ``tenant``: stable across processes."""
    h = hashlib.sha256(tenant.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(h[:8], "big") % workers


def default_workers() -> int:
    """The number of CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


class Assignments:
    """Which worker serves each tenant: ``DATA_DIR/workers.json``, written by the front.

    Tenants are spread by count: a new tenant goes to the worker serving the fewest
    (ties: the lowest index), so two tenants on two workers always use both.  An
    assignment never changes while the number of workers stays the same; a tenant
    whose worker no longer exists (fewer workers) is reassigned at start-up.
    Workers read the file and reread it when it changes (one ``stat`` per check).
    """

    FORMAT = "neardup-workers-v1"

    def __init__(self, path: str, workers: int) -> None:
        self.path, self.workers = path, workers
        self.owner: dict[str, int] = {}
        self._sig: tuple[int, int, int] | None = None
        self.refresh()

    def refresh(self) -> None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self.owner, self._sig = {}, None
            return
        sig = (st.st_ino, st.st_mtime_ns, st.st_size)
        if sig == self._sig:
            return
        try:
            with open(self.path, encoding="utf-8") as fh:
                doc = json.load(fh)
        except ValueError as exc:
            raise CorruptFile(self.path, f"not JSON ({exc})") from exc
        if not isinstance(doc, dict) or doc.get("format") != self.FORMAT:
            raise CorruptFile(self.path, f"not a worker table (format must be {self.FORMAT})")
        self.owner = {str(t): int(w) for t, w in doc.get("tenants", {}).items()}
        self._sig = sig

    def save(self) -> None:
        doc = {"format": self.FORMAT, "workers": self.workers, "tenants": self.owner}
        atomic_write(self.path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())
        self.refresh()

    def _least_loaded(self) -> int:
        counts = [0] * self.workers
        for w in self.owner.values():
            if 0 <= w < self.workers:
                counts[w] += 1
        return counts.index(min(counts))

    def assign(self, tenant: str) -> int:
        """The tenant's worker, assigning (and saving) it first if it has none."""
        w = self.owner.get(tenant)
        if w is None or not 0 <= w < self.workers:
            w = self.owner[tenant] = self._least_loaded()
            self.save()
        return w

    def sync(self, tenants: Sequence[str]) -> None:
        """At start-up: drop tenants not on disk, keep valid assignments, assign the
        rest (sorted, each to the least loaded worker)."""
        present = set(tenants)
        keep = {t: w for t, w in self.owner.items() if t in present and w < self.workers}
        changed = keep != self.owner
        self.owner = keep
        for t in sorted(tenants):
            if t not in self.owner:
                self.owner[t] = self._least_loaded()
                changed = True
        if changed or not os.path.exists(self.path):
            self.save()


# -- the worker side ---------------------------------------------------------------
class ShardService(Service):
    """A :class:`Service` that opens and creates only the tenants the worker table
    assigns to its worker, each under an exclusive file lock (see the module doc)."""

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


# -- the front side ----------------------------------------------------------------
class _Conn:
    __slots__ = ("reader", "used", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.used = time.monotonic()


class WorkerDown(Exception):
    """The worker did not take the request (connection refused or reset before it
    was sent): nothing reached it."""


class WorkerLost(Exception):
    """The worker's connection broke after the request was sent."""


@dataclass
class Worker:
    index: int
    socket: str
    proc: subprocess.Popen[bytes] | None = None
    up: bool = False
    restarts: int = 0
    started: float = 0.0
    backoff: float = 0.5
    idle: list[_Conn] = field(default_factory=list)

    def drop_idle(self) -> None:
        for c in self.idle:
            c.writer.close()
        self.idle.clear()

    async def connect(self) -> _Conn:
        now = time.monotonic()
        while self.idle:
            c = self.idle.pop()
            # An idle connection the worker closed (restart) or that idled long
            # (the worker's keep-alive is longer) is not reused.
            if c.reader.at_eof() or c.writer.is_closing() or now - c.used > 300:
                c.writer.close()
                continue
            return c
        try:
            r, w = await asyncio.open_unix_connection(self.socket, limit=1 << 20)
        except OSError as exc:
            raise WorkerDown(str(exc)) from exc
        return _Conn(r, w)

    def release(self, c: _Conn) -> None:
        c.used = time.monotonic()
        if len(self.idle) < 256:
            self.idle.append(c)
        else:
            c.writer.close()


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, list[tuple[bytes, bytes]]]:
    # One read for the whole head: a readline per header costs an await each.
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head[:-4].split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    headers: list[tuple[bytes, bytes]] = []
    for h in lines[1:]:
        k, _, v = h.partition(b":")
        headers.append((k.strip().lower(), v.strip()))
    return status, headers


async def forward(
    worker: Worker, scope: Scope, receive: Receive, send: Send, *, timeout: float = 600.0
) -> None:
    """Send one request to ``worker`` and stream its answer back (see module doc)."""
    conn = await worker.connect()
    try:
        await _exchange(conn, scope, receive, send, timeout)
    except BaseException:
        conn.writer.close()
        raise
    worker.release(conn)


async def _exchange(
    conn: _Conn, scope: Scope, receive: Receive, send: Send, timeout: float
) -> None:
    path = scope.get("raw_path") or scope["path"].encode()
    if scope.get("query_string"):
        path += b"?" + scope["query_string"]
    headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _HOP_REQ]
    declared = next((v for k, v in scope["headers"] if k.lower() == b"content-length"), None)
    msg = await receive()
    body, more = msg.get("body", b""), msg.get("more_body", False)
    if not more:
        framing = b"content-length: %d\r\n" % len(body)
        chunked = False
    elif declared is not None and declared.isdigit():
        framing = b"content-length: " + declared + b"\r\n"
        chunked = False
    else:
        framing, chunked = b"transfer-encoding: chunked\r\n", True
    head = b"%s %s HTTP/1.1\r\n" % (scope["method"].encode(), path)
    head += b"".join(k + b": " + v + b"\r\n" for k, v in headers) + framing + b"\r\n"
    w = conn.writer
    try:
        if not more and not chunked:
            w.write(head + body)  # the usual case: one write
        else:
            w.write(head)
            while True:
                if body:
                    w.write(b"%x\r\n%s\r\n" % (len(body), body) if chunked else body)
                    await w.drain()
                if not more:
                    break
                msg = await receive()
                if msg["type"] == "http.disconnect":
                    raise ConnectionResetError("client went away")
                body, more = msg.get("body", b""), msg.get("more_body", False)
            if chunked:
                w.write(b"0\r\n\r\n")
        if w.transport.get_write_buffer_size() > 1 << 16:
            await w.drain()
    except (ConnectionError, BrokenPipeError) as exc:
        raise WorkerDown(str(exc)) from exc
    r = conn.reader
    try:
        async with asyncio.timeout(timeout):
            status, rh = await _read_head(r)
        length = next((int(v) for k, v in rh if k == b"content-length"), None)
        te = any(k == b"transfer-encoding" and b"chunked" in v.lower() for k, v in rh)
        out = [(k, v) for k, v in rh if k not in _HOP_RESP]
        if length is not None and not te and length <= 1 << 20:
            # Small answers (all but snapshots): read whole, sent in one message.
            data = await r.readexactly(length) if length else b""
            await send({"type": "http.response.start", "status": status, "headers": out})
            await send({"type": "http.response.body", "body": data})
            return
        await send({"type": "http.response.start", "status": status, "headers": out})
        if scope["method"] == "HEAD" or status in (204, 304) or (length == 0 and not te):
            await send({"type": "http.response.body", "body": b""})
            return
        if length is not None and not te:
            left = length
            while left:
                chunk = await r.read(min(left, 1 << 20))
                if not chunk:
                    raise asyncio.IncompleteReadError(b"", left)
                left -= len(chunk)
                await send({"type": "http.response.body", "body": chunk, "more_body": left > 0})
            return
        if te:
            while True:
                size = int((await r.readline()).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while (await r.readline()) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                chunk = await r.readexactly(size)
                await r.readexactly(2)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
            return
        # No framing: the body runs to the end of the connection.
        data = await r.read()
        await send({"type": "http.response.body", "body": data})
        raise WorkerLost("unframed answer")  # the connection is done
    except (
        ConnectionError,
        asyncio.IncompleteReadError,
        asyncio.LimitOverrunError,
        ValueError,
        IndexError,
    ) as exc:
        raise WorkerLost(str(exc) or type(exc).__name__) from exc


def _json(status: int, doc: dict[str, Any], headers: Sequence[tuple[bytes, bytes]] = ()) -> Any:
    body = json.dumps(doc).encode()

    async def respond(send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    *headers,
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return respond


class Front:
    """The front process: worker supervision (in the ASGI lifespan) and forwarding."""

    def __init__(
        self,
        worker_cmd: Callable[[int, str], list[str]],
        workers: int,
        data_dir: str,
        keys_file: str,
        *,
        run_dir: str | None = None,
        stop_timeout: float = 30.0,
    ) -> None:
        self.n = workers
        self.worker_cmd = worker_cmd
        self.data_dir = data_dir
        self.keyring = Keyring.load(keys_file)
        self.table = Assignments(os.path.join(data_dir, "workers.json"), workers)
        self.run_dir = run_dir or tempfile.mkdtemp(prefix="neardup-workers-")
        self.stop_timeout = stop_timeout
        self.workers = [
            Worker(i, os.path.join(self.run_dir, f"w{i}.sock")) for i in range(workers)
        ]
        self._monitor: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[bool]] = set()
        self._stopping = False

    # -- supervision -----------------------------------------------------------
    def _spawn(self, w: Worker) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(w.socket)
        w.up = False
        w.drop_idle()
        w.started = time.monotonic()
        # Own session: a terminal's Ctrl-C reaches only the front, which then stops
        # the workers in order.
        cmd = self.worker_cmd(w.index, w.socket)  # built by the CLI, not from a request
        w.proc = subprocess.Popen(cmd, start_new_session=True)  # noqa: S603

    async def _healthy(self, w: Worker) -> bool:
        try:
            r, wr = await asyncio.wait_for(asyncio.open_unix_connection(w.socket), 2)
        except (OSError, TimeoutError):
            return False
        try:
            wr.write(b"GET /healthz HTTP/1.1\r\nhost: worker\r\nconnection: close\r\n\r\n")
            line = await asyncio.wait_for(r.readline(), 5)
            return line.split(b" ")[1:2] == [b"200"]
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            return False
        finally:
            wr.close()

    async def _wait_up(self, w: Worker, deadline: float | None = None) -> bool:
        while deadline is None or time.monotonic() < deadline:
            if w.proc is None or w.proc.poll() is not None:
                return False
            if await self._healthy(w):
                w.up = True  # the back-off restarts only after a minute up (see _watch)
                return True
            await asyncio.sleep(0.1)
        return False

    async def start(self) -> None:
        self.table.sync(self._tenants_on_disk())
        for w in self.workers:
            self._spawn(w)
        for w in self.workers:
            if not await self._wait_up(w):
                code = w.proc.returncode if w.proc is not None else None
                await self.stop()
                raise RuntimeError(f"worker {w.index} exited with {code} while starting")
        self._monitor = asyncio.create_task(self._watch())

    async def _watch(self) -> None:
        while not self._stopping:
            await asyncio.sleep(0.2)
            for w in self.workers:
                if self._stopping or w.proc is None or w.proc.poll() is None:
                    continue
                code = w.proc.returncode
                w.up = False
                w.drop_idle()
                _log.error(
                    "worker %d (pid %d) exited with %s; restarting in %.1f s",
                    w.index, w.proc.pid, code, w.backoff,
                )
                print(
                    f"neardup: worker {w.index} exited with {code}; restarting",
                    file=sys.stderr, flush=True,
                )
                delay = w.backoff
                # A worker that ran a while before dying starts the back-off again.
                if time.monotonic() - w.started > 60:
                    delay = 0.5
                w.backoff = min(30.0, delay * 2)
                await asyncio.sleep(delay)
                if self._stopping:
                    return
                w.restarts += 1
                self._spawn(w)
                task = asyncio.create_task(self._wait_up(w))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def stop(self) -> None:
        self._stopping = True
        if self._monitor is not None:
            self._monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._monitor
        for w in self.workers:
            w.drop_idle()
            if w.proc is not None and w.proc.poll() is None:
                w.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        for w in self.workers:
            while w.proc is not None and w.proc.poll() is None:
                if time.monotonic() > deadline:
                    w.proc.kill()
                    w.proc.wait()
                    break
                await asyncio.sleep(0.05)
            w.up = False
        shutil.rmtree(self.run_dir, ignore_errors=True)

    # -- requests --------------------------------------------------------------
    def worker_for(self, scope: Scope) -> tuple[Worker, str | None]:
        path = scope["path"]
        if not path.startswith("/v1/tenants/"):
            return self.workers[0], None
        tenant, _, rest = path[len("/v1/tenants/") :].partition("/")
        if not tenant:
            return self.workers[0], None
        w = self.table.owner.get(tenant)
        if w is None and scope["method"] == "PUT" and not rest and self._may_create(scope, tenant):
            w = self.table.assign(tenant)
        if w is None or not 0 <= w < self.n:
            # No such tenant: any worker gives the single-process answer (401, 403, 404).
            w = shard_of(tenant, self.n)
        return self.workers[w], tenant

    def _may_create(self, scope: Scope, tenant: str) -> bool:
        """Whether this PUT may create ``tenant`` (checked before the tenant gets a
        worker, so that unauthenticated requests cannot fill the worker table)."""
        auth = next((v for k, v in scope["headers"] if k.lower() == b"authorization"), None)
        try:
            valid_tenant_id(tenant)
            p = self.keyring.authenticate(auth.decode("latin-1") if auth else None)
            p.require("tenant", tenant)
        except NeardupError:
            return False
        return True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":  # pragma: no cover - websockets are not served
            return
        path = scope["path"]
        if path == "/healthz" and scope["method"] == "GET":
            await _json(200, {"status": "ok", "workers": self.n})(send)
            return
        if path == "/readyz" and scope["method"] == "GET":
            status, doc = await self.readyz()
            await _json(status, doc)(send)
            return
        if path == "/metrics" and scope["method"] == "GET":
            body = await self.metrics()
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", b"text/plain; version=0.0.4; charset=utf-8"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        w, tenant = self.worker_for(scope)
        what = f"tenant {tenant!r}" if tenant else "this route"
        try:
            await forward(w, scope, receive, send)
        except WorkerDown:
            await _json(
                503,
                {
                    "error": "worker_unavailable",
                    "message": f"the worker process serving {what} is restarting",
                    "fix": "retry after the Retry-After delay (other tenants are served)",
                },
                [(b"retry-after", b"1")],
            )(send)
        except TimeoutError:
            await _json(
                504,
                {
                    "error": "worker_timeout",
                    "message": f"the worker process serving {what} did not answer in time",
                    "fix": "retry with the same idempotency key; check the server log",
                },
            )(send)
        except WorkerLost:
            # The request reached the worker, which died before answering in full: the
            # outcome is unknown.  If the answer had started, the connection is closed.
            with contextlib.suppress(Exception):
                await _json(
                    503,
                    {
                        "error": "worker_unavailable",
                        "message": f"the worker process serving {what} stopped while "
                        "handling this request; it may or may not have been applied",
                        "fix": "retry with the same idempotency key after Retry-After",
                    },
                    [(b"retry-after", b"1")],
                )(send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                try:
                    await self.start()
                except Exception as exc:
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await self.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _get(self, w: Worker, path: str) -> tuple[int, bytes] | None:
        """GET ``path`` from worker ``w`` (None if it does not answer).

        A restarted worker serves as soon as its socket listens, a moment before the
        supervisor's health poll sees it: an answer here marks it up, so ``/readyz``
        never calls a worker down that has just served a request."""
        if w.proc is None or w.proc.poll() is not None:
            return None
        out: dict[str, Any] = {"status": 0, "body": []}

        async def receive() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(msg: Message) -> None:
            if msg["type"] == "http.response.start":
                out["status"] = msg["status"]
            else:
                out["body"].append(msg.get("body", b""))

        scope = {"method": "GET", "path": path, "raw_path": path.encode(), "query_string": b"",
                 "headers": [(b"host", b"worker")]}
        try:
            await asyncio.wait_for(forward(w, scope, receive, send), 30)
        except (WorkerDown, WorkerLost, TimeoutError):
            return None
        w.up = True
        return int(out["status"]), b"".join(out["body"])

    def _tenants_on_disk(self) -> list[str]:
        tdir = os.path.join(self.data_dir, "tenants")
        try:
            names = sorted(os.listdir(tdir))
        except OSError:
            return []
        return [n for n in names if is_tenant_root(os.path.join(tdir, n))]

    async def readyz(self) -> tuple[int, dict[str, Any]]:
        answers = await asyncio.gather(*(self._get(w, "/readyz") for w in self.workers))
        tenants = 0
        degraded: dict[str, Any] = {}
        failed: dict[str, Any] = {}
        workers: dict[str, str] = {}
        down: list[int] = []
        for w, a in zip(self.workers, answers, strict=True):
            doc: dict[str, Any] | None = None
            if a is not None and a[0] == 200:
                with contextlib.suppress(ValueError):
                    doc = json.loads(a[1])
            if doc is None:
                workers[str(w.index)] = "down"
                down.append(w.index)
                continue
            workers[str(w.index)] = "up"
            tenants += int(doc.get("tenants", 0))
            degraded.update(doc.get("degraded_tenants", {}))
            failed.update(doc.get("failed_tenants", {}))
        for t in self._tenants_on_disk():
            if self.table.owner.get(t) in down:
                degraded[t] = "worker_down"
                tenants += 1
        ready = len(down) < self.n
        return (200 if ready else 503), {
            "ready": ready,
            "mode": "degraded" if degraded or down else "normal",
            "tenants": tenants,
            "degraded_tenants": dict(sorted(degraded.items())),
            "failed_tenants": dict(sorted(failed.items())),
            "workers": workers,
        }

    async def metrics(self) -> bytes:
        answers = await asyncio.gather(*(self._get(w, "/metrics") for w in self.workers))
        texts = {
            str(w.index): a[1].decode("utf-8", "replace")
            for w, a in zip(self.workers, answers, strict=True)
            if a is not None and a[0] == 200
        }
        return merge_metrics(
            texts,
            {str(w.index): w.up for w in self.workers},
            {str(w.index): w.restarts for w in self.workers},
        )


def merge_metrics(
    texts: dict[str, str], up: dict[str, bool], restarts: dict[str, int]
) -> bytes:
    """The workers' expositions as one, as a single process would export them.

    Per-tenant series come from the tenant's owner only; process-wide counters and
    histograms (requests, latency) are summed over the workers (a restarted
    worker's counters restart from 0, which Prometheus reads as a counter reset);
    ``*_created`` timestamps keep the earliest.  Worker liveness and restarts are
    added with a ``worker`` label.
    """
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.metrics_core import Metric
    from prometheus_client.parser import text_string_to_metric_families

    families: dict[str, Metric] = {}
    values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for _, text in sorted(texts.items()):
        for fam in text_string_to_metric_families(text):
            if fam.name not in families:
                families[fam.name] = Metric(fam.name, fam.documentation, fam.type)
                values[fam.name] = {}
            vals = values[fam.name]
            for smp in fam.samples:
                key = (smp.name, tuple(sorted(smp.labels.items())))
                if key not in vals:
                    vals[key] = smp.value
                elif smp.name.endswith("_created"):
                    vals[key] = min(vals[key], smp.value)
                else:
                    vals[key] += smp.value
    for name, fam in families.items():
        for (sname, labels), v in values[name].items():
            fam.add_sample(sname, dict(labels), v)
    wup = Metric("neardup_worker_up", "1 while the worker process answers", "gauge")
    wre = Metric("neardup_worker_restarts", "times the worker process was restarted", "counter")
    for worker in sorted(up):
        wup.add_sample("neardup_worker_up", {"worker": worker}, 1.0 if up[worker] else 0.0)
        wre.add_sample("neardup_worker_restarts_total", {"worker": worker}, restarts[worker])
    merged = [*families.values(), wup, wre]

    class _Collector:
        def collect(self) -> Any:
            yield from merged

    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Collector())
    return bytes(generate_latest(reg))


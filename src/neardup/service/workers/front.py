"""The front process: it supervises the workers and forwards requests to them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from neardup.core._errors import NeardupError
from neardup.service.auth import Keyring
from neardup.service.migration import is_tenant_root
from neardup.service.tenant import valid_tenant_id
from neardup.service.workers.assign import Assignments, shard_of
from neardup.service.workers.forward import (
    Message,
    Receive,
    Scope,
    Send,
    Worker,
    WorkerDown,
    WorkerLost,
    forward,
)
from neardup.service.workers.metrics import merge_metrics

_log = logging.getLogger("neardup.service.workers")


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

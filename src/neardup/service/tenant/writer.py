"""A tenant's single writer thread: queued upserts applied in batches."""

from __future__ import annotations

import contextvars
import queue
import threading
from typing import Any, Protocol

from neardup.service.cmdlog import CommandLog


class WriterHost(Protocol):
    """What the writer needs of its tenant."""

    tenant: str
    seq: int
    log: CommandLog
    _lock: threading.RLock

    def _upsert_locked(self, *args: Any, **kw: Any) -> dict[str, Any]: ...


class WriteJob:
    """One upsert waiting for the tenant's writer thread."""

    __slots__ = ("args", "context", "done", "error", "kw", "result")

    def __init__(self, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        self.args = args
        self.kw = kw
        # The request's context (trace spans, ...) follows it to the writer thread.
        self.context = contextvars.copy_context()
        self.done = threading.Event()
        self.result: dict[str, Any] | None = None
        self.error: BaseException | None = None


class Writer:
    """A tenant's single writer: drains queued upserts in batches under one lock
    acquisition and one fsync.

    Many request threads taking the tenant lock in turn spend more CPU on lock and
    GIL hand-offs than on the work itself once dozens are in flight; here each
    request thread waits on its own event and wakes exactly once.
    """

    def __init__(self, tenant: WriterHost, max_batch: int = 256) -> None:
        self.tenant = tenant
        self.max_batch = max_batch
        self.queue: queue.SimpleQueue[WriteJob | None] = queue.SimpleQueue()
        self.thread = threading.Thread(
            target=self._run, name=f"writer-{tenant.tenant}", daemon=True
        )
        self.thread.start()

    def submit(self, job: WriteJob) -> None:
        self.queue.put(job)

    def stop(self) -> None:
        self.queue.put(None)
        self.thread.join(timeout=30)

    def _run(self) -> None:
        t = self.tenant
        while True:
            first = self.queue.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while len(batch) < self.max_batch:
                try:
                    nxt = self.queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                batch.append(nxt)
            sync_to = 0
            with t._lock:
                for job in batch:
                    try:
                        job.result = job.context.run(t._upsert_locked, *job.args, **job.kw)
                    except BaseException as exc:  # handed to the waiting request
                        job.error = exc
                sync_to = t.seq
            try:
                t.log.sync(sync_to)
            except BaseException as exc:
                for job in batch:
                    if job.error is None:
                        job.error = exc
            for job in batch:
                job.done.set()
            if stop:
                return

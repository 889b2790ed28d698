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

The parts: ``assign`` (:class:`Assignments`, the worker table; :func:`shard_of`,
:func:`default_workers`), ``shard`` (the worker side: :class:`ShardService`, the
worker's command line and main), ``forward`` (the front's connections to the
workers: :class:`Worker`, :func:`forward`), ``front`` (:class:`Front`: supervision
and forwarding) and ``metrics`` (:func:`merge_metrics`).
"""

from __future__ import annotations

from neardup.service.workers.assign import Assignments, default_workers, shard_of
from neardup.service.workers.forward import Message as Message
from neardup.service.workers.forward import Receive as Receive
from neardup.service.workers.forward import Scope as Scope
from neardup.service.workers.forward import Send as Send
from neardup.service.workers.forward import Worker as Worker
from neardup.service.workers.forward import WorkerDown as WorkerDown
from neardup.service.workers.forward import WorkerLost as WorkerLost
from neardup.service.workers.forward import forward as forward
from neardup.service.workers.front import Front
from neardup.service.workers.metrics import merge_metrics as merge_metrics
from neardup.service.workers.shard import ShardService
from neardup.service.workers.shard import die_with_parent as die_with_parent
from neardup.service.workers.shard import worker_command as worker_command
from neardup.service.workers.shard import worker_main as worker_main

__all__ = ["Assignments", "Front", "ShardService", "default_workers", "shard_of"]

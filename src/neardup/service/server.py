"""HTTP routes of ``neardup serve``: a thin starlette shell over :class:`~neardup.service.Service`.

Every route authenticates, caps the body *before* reading it whole, parses JSON,
calls one library method in a worker thread and maps the exception tree to 4xx
answers (``{"error", "message", "fix"}``); anything unexpected is a logged 500.
Needs the ``service`` extra (starlette, uvicorn, prometheus-client, cryptography).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import numpy as np
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from neardup.core._errors import (
    CorruptFile,
    DocumentTooLarge,
    EmptyDocument,
    Forbidden,
    InputError,
    InvalidConfig,
    LimitExceeded,
    NeardupError,
    NeardupIOError,
    SchemeMismatch,
    ServiceError,
)
from neardup.core._trace import span
from neardup.service._validate import INT64_MAX, check_json
from neardup.service.auth import PERMISSIONS, Principal
from neardup.service.manager import Service
from neardup.service.schemas import PERMISSION, openapi

__all__ = ["create_app"]

_log = logging.getLogger("neardup.service.server")
Handler = Callable[[Request], Awaitable[Response]]


def _version() -> str:
    try:
        return version("neardup")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0"


class _Metrics:
    """Prometheus metrics of one app (its own registry: no process-global state)."""

    def __init__(self, service: Service) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram
        from prometheus_client.core import GaugeMetricFamily

        self.registry = CollectorRegistry()
        self.requests = Counter(
            "neardup_requests_total", "HTTP requests", ["route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "neardup_request_seconds",
            "request latency",
            ["route"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2.5),
        )
        self.candidates = Histogram(
            "neardup_candidates_per_query",
            "exactly verified candidates per query",
            ["tenant"],
            registry=self.registry,
            buckets=(0, 1, 2, 5, 10, 20, 50, 100, 1000),
        )
        self.scores = Histogram(
            "neardup_verification_score",
            "exact Jaccard of verified candidates",
            ["tenant"],
            registry=self.registry,
            buckets=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0),
        )
        self.decisions = Counter(
            "neardup_decisions_total",
            "decisions by state",
            ["tenant", "state"],
            registry=self.registry,
        )
        svc = service

        class _TenantGauges:
            def collect(self) -> Any:
                items = GaugeMetricFamily("neardup_items", "live items", labels=["tenant"])
                ibytes = GaugeMetricFamily("neardup_index_bytes", "index bytes", labels=["tenant"])
                over = GaugeMetricFamily(
                    "neardup_bucket_overflow", "inserts cut by the bucket cap", labels=["tenant"]
                )
                capped = GaugeMetricFamily(
                    "neardup_candidate_cap_hits",
                    "queries whose candidates hit a cap",
                    labels=["tenant"],
                )
                age = GaugeMetricFamily(
                    "neardup_snapshot_age_seconds",
                    "seconds since the last snapshot (-1: none)",
                    labels=["tenant"],
                )
                seq = GaugeMetricFamily(
                    "neardup_applied_seq", "last applied command", labels=["tenant"]
                )
                g = {
                    name: GaugeMetricFamily(name, doc, labels=labels)
                    for name, doc, labels in (
                        (
                            "neardup_ingest_lag_seconds",
                            "now minus the newest source_time indexed (-1: none sent)",
                            ["tenant"],
                        ),
                        (
                            "neardup_commands_not_durable",
                            "commands written but not yet fsynced",
                            ["tenant"],
                        ),
                        (
                            "neardup_bucket_size",
                            "bucket sizes of the band index (main arrays)",
                            ["tenant", "quantile"],
                        ),
                        (
                            "neardup_tombstone_lag_entries",
                            "index entries of tombstoned items awaiting compaction",
                            ["tenant"],
                        ),
                        (
                            "neardup_labelled",
                            "precision / recall at the current threshold on reviewer labels "
                            "(last threshold report; -1: none)",
                            ["tenant", "measure"],
                        ),
                        (
                            "neardup_shadow_queries",
                            "queries compared between live and shadow / previous",
                            ["tenant"],
                        ),
                        (
                            "neardup_shadow_disagreements",
                            "compared queries whose candidates or decisions differ",
                            ["tenant", "kind"],
                        ),
                        (
                            "neardup_audit_total",
                            "sampled exact audits: queries, pairs at the threshold, misses",
                            ["tenant", "what"],
                        ),
                        (
                            "neardup_decisions_rejected",
                            "decisions recorded as rejected",
                            ["tenant"],
                        ),
                        (
                            "neardup_cross_version_attempts",
                            "requests refused for another scheme or policy version",
                            ["tenant"],
                        ),
                        (
                            "neardup_mode",
                            "1 for the tenant's current mode (normal, exact-hash-only, "
                            "stopped: writes stopped after a storage error, failed: cannot "
                            "start)",
                            ["tenant", "mode"],
                        ),
                        (
                            "neardup_failed_commands",
                            "logged commands recorded as failed (skipped on replay)",
                            ["tenant"],
                        ),
                    )
                }
                now = time.time()
                for name, t in sorted(svc.tenants().items()):
                    c = t.counters
                    items.add_metric([name], len(t))
                    ibytes.add_metric([name], t.index.nbytes)
                    over.add_metric([name], t.index.overflow)
                    capped.add_metric([name], c.capped)
                    last = c.last_snapshot_time
                    age.add_metric([name], -1 if last is None else now - last)
                    seq.add_metric([name], t.seq)
                    lag = -1 if c.last_source_time is None else now - c.last_source_time
                    g["neardup_ingest_lag_seconds"].add_metric([name], lag)
                    g["neardup_commands_not_durable"].add_metric(
                        [name], t.log.last_seq - t.log.durable_seq
                    )
                    sizes = t.index.bucket_sizes()
                    for q in (0.5, 0.9, 0.99, 1.0):
                        v = float(np.quantile(sizes, q)) if sizes.size else 0.0
                        g["neardup_bucket_size"].add_metric([name, str(q)], v)
                    g["neardup_tombstone_lag_entries"].add_metric([name], t.index.dead_entries())
                    rep = c.last_report or {}
                    for m in ("precision", "recall"):
                        val = rep.get(m)
                        g["neardup_labelled"].add_metric([name, m], -1 if val is None else val)
                    mig = svc.migration(name)
                    if mig is not None:
                        mc = mig.counts
                        g["neardup_shadow_queries"].add_metric([name], mc.queries)
                        g["neardup_shadow_disagreements"].add_metric(
                            [name, "candidates"], mc.candidate_disagreements
                        )
                        g["neardup_shadow_disagreements"].add_metric(
                            [name, "decisions"], mc.decision_disagreements
                        )
                    for what, val in (
                        ("queries", c.audits),
                        ("pairs", c.audit_pairs),
                        ("misses", c.audit_misses),
                    ):
                        g["neardup_audit_total"].add_metric([name, what], val)
                    g["neardup_decisions_rejected"].add_metric([name], c.rejected)
                    g["neardup_cross_version_attempts"].add_metric([name], c.cross_version)
                    g["neardup_mode"].add_metric([name, t.mode], 1)
                    g["neardup_failed_commands"].add_metric([name], t.failed_commands)
                for name in sorted(svc.failed):
                    g["neardup_mode"].add_metric([name, "failed"], 1)
                yield from (items, ibytes, over, capped, age, seq, *g.values())

        self.registry.register(_TenantGauges())

    def render(self) -> bytes:
        from prometheus_client import generate_latest

        return bytes(generate_latest(self.registry))


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
    "InputError": "invalid_input",
    "CorruptFile": "corrupt",
    "NeardupIOError": "io_error",
}


def _text(s: str) -> str:
    """``s`` safe to send as JSON text (a lone surrogate from a request becomes ``\\ud800``)."""
    return s.encode("utf-8", "backslashreplace").decode("utf-8")


def _fix(exc: NeardupError) -> str:
    """The fix of an error: its ``fix`` attribute, else the message's "; fix: ..." tail."""
    fix = getattr(exc, "fix", None)
    if isinstance(fix, str) and fix:
        return fix
    _, sep, tail = str(exc).rpartition("; fix: ")
    return tail if sep and tail else "see the message; /openapi.json describes every request"


def _error(exc: NeardupError) -> JSONResponse:
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
        "message": _text(str(exc)),
        "fix": _text(_fix(exc)),
    }
    headers = {}
    retry_after = getattr(exc, "retry_after", None)  # LimitExceeded (429), Busy (503)
    if isinstance(retry_after, int | float):
        headers["Retry-After"] = str(max(1, int(retry_after + 0.999)))
    return JSONResponse(body, status_code=status, headers=headers)


def _canonical_path(raw: bytes) -> str:
    """The request path with each segment percent-decoded (strict UTF-8) and encoded
    again in one canonical way, so an encoded ``/`` (``%2F``) stays inside its segment.

    The server routes on this form: ``/items/a%2Fb/content`` is item ``a/b``, while
    the decoded path (``/items/a/b/content``) could not tell it from item ``a``.
    Path parameters are decoded once, when a handler reads them.
    """
    out = []
    for seg in raw.split(b"/"):
        text = urllib.parse.unquote_to_bytes(seg).decode("utf-8")  # strict
        out.append(urllib.parse.quote(text, safe=""))
    return "/".join(out)


class _RawPathRouting:
    """ASGI middleware: route on :func:`_canonical_path` of the raw request path."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw = scope.get("raw_path")
            if raw is None:
                raw = urllib.parse.quote(scope["path"], safe="/").encode("ascii")
            try:
                path = _canonical_path(raw.split(b"?", 1)[0])
            except UnicodeDecodeError as exc:
                resp = JSONResponse(
                    {
                        "error": "invalid_parameter",
                        "message": f"the URL path {raw[:200]!r} is not percent-encoded UTF-8 "
                        f"(byte {exc.start} of a segment)",
                        "fix": "percent-encode path parameters as UTF-8 (e.g. %C3%A9 for é)",
                    },
                    status_code=400,
                )
                await resp(scope, receive, send)
                return
            scope = {**scope, "path": path}
        await self.app(scope, receive, send)


_DIGITS = re.compile(r"[0-9]{1,19}")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def create_app(
    service: Service,
    *,
    max_snapshot_bytes: int = 8 << 30,
    close_on_shutdown: bool = False,
    worker_threads: int = 32,
) -> Starlette:
    """The ASGI app serving ``service`` (see ``neardup.service.schemas`` for the API)."""
    metrics = _Metrics(service)
    doc = openapi(_version())
    cfg = service.config

    async def body_bytes(request: Request, cap: int) -> bytes:
        n = request.headers.get("content-length")
        if n is not None and (not _DIGITS.fullmatch(n) or int(n) > cap):
            raise LimitExceeded(
                f"request body of {n} bytes exceeds {cap} bytes", "send a smaller body", status=413
            )
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > cap:
                raise LimitExceeded(
                    f"request body exceeds {cap} bytes", "send a smaller body", status=413
                )
            chunks.append(chunk)
        return b"".join(chunks)

    async def json_body(request: Request) -> Any:
        raw = await body_bytes(request, cfg.max_body_bytes)
        try:
            doc = json.loads(raw.decode("utf-8"), parse_constant=_no_constant) if raw else {}
        except UnicodeDecodeError as exc:
            raise InvalidConfig(
                "body", f"byte {exc.start}", "is not UTF-8", "send UTF-8 JSON"
            ) from None
        except RecursionError:
            raise InvalidConfig(
                "body",
                f"{len(raw)} bytes",
                "is nested too deeply to parse",
                "send a flat JSON document (requests nest at most a few levels)",
            ) from None
        except ValueError as exc:
            raise InvalidConfig(
                "body", str(exc)[:80], "is not valid JSON", "send a JSON object"
            ) from None
        check_json(doc)
        return doc

    def principal(request: Request) -> Principal:
        p = request.scope.get("neardup.principal")
        if not isinstance(p, Principal):
            p = service.keyring.authenticate(request.headers.get("authorization"))
            request.scope["neardup.principal"] = p
        return p

    def authorize(request: Request, op: str) -> None:
        """Authenticate and check the role (and tenant scope, when the path names a
        tenant) before anything of the request is read or validated."""
        p = principal(request)
        tenant = request.path_params.get("tenant")
        if tenant is None:
            if op not in PERMISSIONS[p.role]:
                raise Forbidden(
                    f"role {p.role!r} of key {p.key_id!r} may not {op!r}",
                    f"use a key with a role allowed to {op!r}",
                )
        else:
            p.require(op, tenant)

    def route(
        name: str, fn: Callable[[Request], Awaitable[Response]], op: str | None = None
    ) -> Handler:
        async def handler(request: Request) -> Response:
            t0 = time.perf_counter()
            try:
                # Routing ran on the canonical (still encoded) path: decode once here.
                request.scope["path_params"] = {
                    k: urllib.parse.unquote(v) if isinstance(v, str) else v
                    for k, v in request.path_params.items()
                }
                with span(f"neardup.{name}", tenant=request.path_params.get("tenant", "")):
                    if op is not None:
                        authorize(request, op)
                    resp = await fn(request)
            except NeardupError as exc:
                if isinstance(exc, SchemeMismatch):
                    t = service.tenants().get(request.path_params.get("tenant", ""))
                    if t is not None:
                        t.counters.cross_version += 1
                resp = _error(exc)
            except Exception:
                _log.exception("internal error in %s", name)
                resp = JSONResponse(
                    {
                        "error": "internal",
                        "message": "internal error; see the server log",
                        "fix": "report it",
                    },
                    status_code=500,
                )
            metrics.requests.labels(name, str(resp.status_code)).inc()
            metrics.latency.labels(name).observe(time.perf_counter() - t0)
            return resp

        return handler

    def observe(tenant: str, result: dict[str, Any]) -> None:
        cands = result.get("candidates", result.get("evidence", []))
        metrics.candidates.labels(tenant).observe(len(cands))
        scores = metrics.scores.labels(tenant)
        for c in cands:
            scores.observe(c["score"])
        d = result.get("decision")
        if d:
            metrics.decisions.labels(tenant, d["state"]).inc()

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        modes = {name: t.mode for name, t in sorted(service.tenants().items())}
        failed = dict(sorted(service.failed.items()))
        modes.update({n: "failed" for n in failed})
        degraded = sorted(n for n, m in modes.items() if m != "normal")
        # Ready while any tenant can serve: one failed tenant must not take the
        # others out of a load balancer; it is named here, in metrics and in the audit log.
        return JSONResponse(
            {
                "ready": True,
                "mode": "degraded" if degraded else "normal",
                "tenants": len(modes),
                "degraded_tenants": {n: modes[n] for n in degraded},
                "failed_tenants": {
                    n: {k: f[k] for k in ("error", "reason", "runbook")}
                    for n, f in failed.items()
                },
            }
        )

    async def metrics_route(request: Request) -> Response:
        return Response(metrics.render(), media_type="text/plain; version=0.0.4")

    async def openapi_route(request: Request) -> Response:
        return JSONResponse(doc)

    def tenant_call(
        method: Callable[..., Any],
        *fixed: str,
        item: bool = False,
        body: bool = False,
        watch: bool = False,
    ) -> Handler:
        """A handler answering ``method(principal, tenant[, item_id], *fixed[, body])``
        (run in a worker thread) as JSON; ``body``: the request's JSON body is the last
        argument; ``watch``: the answer's candidates and decision go to the metrics."""

        async def handle(request: Request) -> Response:
            p = principal(request)
            tenant = request.path_params["tenant"]
            args: list[Any] = [tenant, request.path_params["item_id"]] if item else [tenant]
            args += fixed
            if body:
                args.append(await json_body(request))
            out = await run_in_threadpool(method, p, *args)
            if watch:
                observe(tenant, out)
            return JSONResponse(out)

        return handle

    async def add_key(request: Request) -> Response:
        p, body = principal(request), await json_body(request)
        token = await run_in_threadpool(service.key_request, p, body)
        return JSONResponse({"token": token})

    def int_param(request: Request, name: str, lo: int, hi: int) -> int | None:
        """An integer query parameter in ``[lo, hi]``: ASCII digits only (``str.isdigit``
        also accepts "²", which ``int`` refuses), at most 64-bit."""
        raw = request.query_params.get(name)
        if raw is None:
            return None
        if not _DIGITS.fullmatch(raw) or not lo <= int(raw) <= hi:
            raise InvalidConfig(
                name, raw[:40], f"must be an integer in [{lo}, {hi}]", f"send ?{name}=N"
            )
        return int(raw)

    async def tombstone(request: Request) -> Response:
        p = principal(request)
        epoch = int_param(request, "epoch", 0, INT64_MAX)
        out = await run_in_threadpool(
            service.tombstone,
            p,
            request.path_params["tenant"],
            request.path_params["item_id"],
            epoch,
            request.headers.get("idempotency-key"),
        )
        return JSONResponse(out)

    async def get_events(request: Request) -> Response:
        p = principal(request)
        after = int_param(request, "after", 0, INT64_MAX)
        limit = int_param(request, "limit", 1, 10_000)
        after = 0 if after is None else after
        limit = 1000 if limit is None else limit
        out = await run_in_threadpool(
            service.events, p, request.path_params["tenant"], after, limit
        )
        return JSONResponse(out)

    async def snapshot(request: Request) -> Response:
        p = principal(request)
        blob = await run_in_threadpool(service.snapshot, p, request.path_params["tenant"])
        return Response(blob, media_type="application/octet-stream")

    async def restore(request: Request) -> Response:
        p = principal(request)
        p.require("restore", request.path_params["tenant"])
        blob = await body_bytes(request, max_snapshot_bytes)
        out = await run_in_threadpool(service.restore, p, request.path_params["tenant"], blob)
        return JSONResponse(out)

    t, item = "/v1/tenants/{tenant}", "/v1/tenants/{tenant}/items/{item_id}"
    # (path, method, metrics name, handler); the permission each needs is
    # schemas.PERMISSION, checked before the request body is read.
    table: list[tuple[str, str, str, Callable[[Request], Awaitable[Response]]]] = [
        ("/healthz", "GET", "healthz", healthz),
        ("/readyz", "GET", "readyz", readyz),
        ("/metrics", "GET", "metrics", metrics_route),
        ("/openapi.json", "GET", "openapi", openapi_route),
        ("/v1/keys", "POST", "keys", add_key),
        (t, "PUT", "tenant_put", tenant_call(service.create_tenant, body=True)),
        (t, "GET", "tenant_get", tenant_call(service.stats)),
        (f"{t}/reopen", "POST", "tenant_reopen", tenant_call(service.reopen)),
        (f"{t}/items", "POST", "upsert", tenant_call(service.upsert, body=True, watch=True)),
        (item, "DELETE", "tombstone", tombstone),
        (item, "GET", "item", tenant_call(service.item, item=True)),
        (f"{item}/content", "GET", "content", tenant_call(service.content, item=True)),
        (f"{item}/decision", "GET", "item_state", tenant_call(service.item_state, item=True)),
        *[
            (f"{item}/{a}", "POST", a, tenant_call(service.resolve_item, a, item=True, body=True))
            for a in ("unlink", "release")
        ],
        (f"{t}/policy", "PUT", "policy_put", tenant_call(service.set_policy, body=True)),
        (f"{t}/policy", "GET", "policy_get", tenant_call(service.policies)),
        (f"{t}/decisions", "GET", "decisions", get_events),
        (f"{t}/labels", "POST", "labels", tenant_call(service.label, body=True)),
        (f"{t}/shadow", "PUT", "shadow_start", tenant_call(service.shadow, "start", body=True)),
        (f"{t}/shadow", "GET", "shadow_status", tenant_call(service.shadow, "status")),
        *[
            (f"{t}/shadow/{a}", "POST", f"shadow_{a}", tenant_call(service.shadow, a))
            for a in ("promote", "rollback", "retire")
        ],
        (f"{t}/threshold-report", "GET", "threshold_report", tenant_call(service.threshold_report)),
        (f"{t}/digest", "GET", "digest", tenant_call(service.digest)),
        (
            f"{t}/candidates",
            "POST",
            "candidates",
            tenant_call(service.candidates, body=True, watch=True),
        ),
        (f"{t}/decide", "POST", "decide", tenant_call(service.decide, body=True, watch=True)),
        (f"{t}/verify", "POST", "verify", tenant_call(service.verify_request, body=True)),
        (f"{t}/compact", "POST", "compact", tenant_call(service.compact)),
        (f"{t}/snapshot", "POST", "snapshot", snapshot),
        (f"{t}/restore", "POST", "restore", restore),
    ]
    # Content reads are authorized by the service itself: refused ones are audited too.
    pre_authorized = {k: v for k, v in PERMISSION.items() if v != "content"}
    routes = [
        Route(path, route(name, fn, pre_authorized.get((method, path))), methods=[method])
        for path, method, name, fn in table
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        code = getattr(exc, "status_code", 404)
        headers = {}
        if code == 405:
            # Every method of the path (several routes may share it), not only the
            # first route's: RFC 9110 requires Allow on a 405.
            allowed: set[str] = set()
            for r in routes:
                match, _ = r.matches(request.scope)
                if match is not Match.NONE:
                    allowed |= r.methods or set()
            headers["Allow"] = ", ".join(sorted(allowed))
        return JSONResponse(
            {
                "error": "not_found" if code == 404 else "method_not_allowed",
                "message": _text(f"no route {request.method} {request.url.path}"),
                "fix": "see /openapi.json"
                if code == 404
                else f"use one of {headers['Allow']} on this path, or see /openapi.json",
            },
            status_code=code,
            headers=headers,
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        import anyio.to_thread

        # Requests in flight per process: enough writers waiting on one fsync for
        # group commit to amortize it (with 4, a slow disk capped upserts at about
        # 4 per fsync), few enough that GIL switching stays cheap.
        anyio.to_thread.current_default_thread_limiter().total_tokens = worker_threads
        yield
        if close_on_shutdown:
            service.close()

    return Starlette(
        routes=routes,
        exception_handlers={404: not_found, 405: not_found},
        middleware=[Middleware(_RawPathRouting)],
        lifespan=lifespan,
    )

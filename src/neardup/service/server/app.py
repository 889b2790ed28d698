"""The ASGI app: every route's handler, the route table and the lifespan."""

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

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, Route

from neardup.core._errors import (
    Forbidden,
    InvalidConfig,
    LimitExceeded,
    NeardupError,
    SchemeMismatch,
)
from neardup.core._trace import span
from neardup.service.auth import PERMISSIONS, Principal
from neardup.service.manager import Service
from neardup.service.models.checks import check_json
from neardup.service.models.fields import INT64_MAX
from neardup.service.models.openapi import PERMISSION, openapi
from neardup.service.server.errors import error_response, safe_text
from neardup.service.server.metrics import Metrics
from neardup.service.server.paths import RawPathRouting

_log = logging.getLogger("neardup.service.server")
Handler = Callable[[Request], Awaitable[Response]]


def _version() -> str:
    try:
        return version("neardup")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0"


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
    """The ASGI app serving ``service`` (``neardup.service.models`` declares the API)."""
    metrics = Metrics(service)
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
                resp = error_response(exc)
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

    async def content(request: Request) -> Response:
        p = principal(request)
        out = await run_in_threadpool(
            service.content,
            p,
            request.path_params["tenant"],
            request.path_params["item_id"],
            request.query_params.get("purpose"),
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
    # models.openapi.PERMISSION, checked before the request body is read.
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
        (f"{item}/content", "GET", "content", content),
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
                "message": safe_text(f"no route {request.method} {request.url.path}"),
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
        middleware=[Middleware(RawPathRouting)],
        lifespan=lifespan,
    )

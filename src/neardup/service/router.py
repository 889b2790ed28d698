"""Route tenants to ``neardup serve`` processes: the first step past one machine.

A deployment grows by partitioning *tenants* across service processes (on one
host or many); a routing table maps each tenant id to the base URL of the process
that owns it, and this router forwards ``/v1/tenants/{tenant}/...`` there
unchanged (headers and body, including ``Authorization``).  A tenant missing from
the table is a 404 naming the fix; a backend that does not answer is a 503.  The
router holds no tenant state and never merges answers across tenants, so tenant
isolation is exactly that of the backends.

Routing table (JSON)::

    {"format": "neardup-routes-v1",
     "tenants": {"acme": "http://10.0.0.5:8731", "globex": "http://10.0.0.6:8731"}}

Example:
    >>> table = RoutingTable({"acme": "http://127.0.0.1:8731"})
    >>> table.backend("acme")
    'http://127.0.0.1:8731'
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

from neardup.core._errors import InvalidConfig, NotFound
from neardup.core.persist import read_format_file
from neardup.service.tenant import valid_tenant_id

__all__ = ["RoutingTable", "create_router"]

_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "host", "content-length"}


class RoutingTable:
    """Tenant id → backend base URL (validated)."""

    def __init__(self, tenants: Mapping[str, str]) -> None:
        self._map: dict[str, str] = {}
        for t, url in tenants.items():
            valid_tenant_id(t)
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise InvalidConfig(
                    f"tenants.{t}",
                    url,
                    "must be an http(s) base URL",
                    "write e.g. http://10.0.0.5:8731",
                )
            self._map[t] = url.rstrip("/")

    @classmethod
    def load(cls, path: str) -> RoutingTable:
        doc = read_format_file(path, "neardup-routes-v1", "a routing table")
        return cls(doc.get("tenants", {}))

    def backend(self, tenant: str) -> str:
        url = self._map.get(tenant)
        if url is None:
            raise NotFound(
                f"tenant {tenant!r} is not in the routing table",
                "add it to the routing table and restart the router",
            )
        return url

    def backends(self) -> list[str]:
        return sorted(set(self._map.values()))


def create_router(table: RoutingTable, *, timeout: float = 30.0) -> Any:
    """An ASGI app forwarding each tenant's requests to its backend."""
    import httpx
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    state: dict[str, httpx.AsyncClient] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state["client"] = httpx.AsyncClient(timeout=timeout)
        try:
            yield
        finally:
            await state["client"].aclose()

    def err(status: int, code: str, message: str, fix: str) -> Response:
        return JSONResponse({"error": code, "message": message, "fix": fix}, status_code=status)

    async def forward(request: Request) -> Response:
        tenant = request.path_params["tenant"]
        try:
            base = table.backend(tenant)
        except NotFound as exc:
            return err(404, exc.code, str(exc), exc.fix)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        url = base + request.url.path + (f"?{request.url.query}" if request.url.query else "")
        try:
            r = await state["client"].request(
                request.method, url, headers=headers, content=await request.body()
            )
        except httpx.HTTPError as exc:
            return err(
                503,
                "backend_unavailable",
                f"backend {base} for tenant {tenant!r} did not answer ({type(exc).__name__})",
                "retry; check the backend",
            )
        out = {k: v for k, v in r.headers.items() if k.lower() not in _HOP | {"content-encoding"}}
        return Response(r.content, status_code=r.status_code, headers=out)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "backends": table.backends()})

    async def readyz(request: Request) -> Response:
        status = {}
        for b in table.backends():
            try:
                status[b] = (await state["client"].get(b + "/readyz")).status_code == 200
            except httpx.HTTPError:
                status[b] = False
        ok = all(status.values())
        return JSONResponse({"ready": ok, "backends": status}, status_code=200 if ok else 503)

    methods = ["GET", "POST", "PUT", "DELETE"]
    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/v1/tenants/{tenant}", forward, methods=methods),
        Route("/v1/tenants/{tenant}/{rest:path}", forward, methods=methods),
    ]
    return Starlette(routes=routes, lifespan=lifespan)

"""Routing on the raw request path: an encoded ``/`` stays inside its segment."""

from __future__ import annotations

import urllib.parse

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send


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


class RawPathRouting:
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

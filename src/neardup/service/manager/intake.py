"""Request intake: item bodies validated and ``content_uri`` fetched.

Every field that reaches a command (and so the command log) is checked here first,
against the models ``/openapi.json`` publishes (:mod:`neardup.service.models`);
content sent by reference is read only from ``file://`` URIs under a configured
content root.  Apart from the operations so that every route checks its input the same way.
"""

from __future__ import annotations

import os
import urllib.parse
from typing import Any

from neardup.core._errors import InvalidConfig, LimitExceeded, SchemeMismatch
from neardup.service.manager._state import ServiceState
from neardup.service.manager.config import inside
from neardup.service.models.checks import short, validate
from neardup.service.models.fields import ItemId
from neardup.service.models.requests import DecideRequest, QueryRequest, UpsertRequest

__all__ = ["IntakeMixin"]

#: The model of each item request, by the name the callers pass.
_ITEM_MODELS = {m.__name__: m for m in (UpsertRequest, QueryRequest, DecideRequest)}


class IntakeMixin(ServiceState):
    def _content(self, body: dict[str, Any]) -> str:
        content, uri = body.get("content"), body.get("content_uri")
        if (content is None) == (uri is None):
            raise InvalidConfig(
                "content",
                None,
                "send exactly one of content or content_uri",
                "put the text in content, or a file:// URI in content_uri",
            )
        if content is not None:
            if not isinstance(content, str):
                raise InvalidConfig(
                    "content", type(content).__name__, "must be a string", "send text"
                )
            return content
        return self.resolve(uri)

    def resolve(self, uri: Any) -> str:
        """Read ``file://`` content under a configured root; anything else is refused."""
        if not isinstance(uri, str):
            raise InvalidConfig("content_uri", uri, "must be a string", "send a file:// URI")
        parsed = urllib.parse.urlparse(uri)
        if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
            raise InvalidConfig(
                "content_uri",
                uri,
                "only file:// URIs are resolved",
                "send the content inline, or a file:// URI under a content root",
            )
        path = urllib.parse.unquote(parsed.path)
        if "\x00" in path:
            raise InvalidConfig(
                "content_uri", uri, "holds a NUL character", "send the URI of a real file"
            )
        if not any(inside(path, root) for root in self.config.content_roots):
            raise InvalidConfig(
                "content_uri",
                uri,
                "is outside every configured content root",
                "start the server with --content-root covering it",
            )
        try:
            size = os.path.getsize(path)
            if size > self.config.max_body_bytes:
                raise LimitExceeded(
                    f"{uri} is {size} bytes, over {self.config.max_body_bytes}",
                    "send a smaller item",
                    status=413,
                )
            with open(path, "rb") as fh:
                raw = fh.read(self.config.max_body_bytes + 1)
        except OSError as exc:
            raise InvalidConfig(
                "content_uri", uri, f"cannot be read ({exc.strerror})", "check the path"
            ) from exc
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidConfig(
                "content_uri", uri, f"is not UTF-8 (byte {exc.start})", "convert the file to UTF-8"
            ) from exc

    @staticmethod
    def _check_item(body: Any, tenant_id: str, schema: str = "UpsertRequest") -> None:
        """Validate an item request completely (types, lengths, encodings) before any
        of it can reach the command log."""
        if not isinstance(body, dict):
            raise InvalidConfig(
                "body", type(body).__name__, "must be a JSON object", 'send {"item_id": ...}'
            )
        nv = body.get("normalization_version")
        if isinstance(nv, int) and not isinstance(nv, bool) and nv != 1:
            # A producer on another normalizer version: counted as a cross-version attempt.
            raise SchemeMismatch(
                f"normalization version {short(nv)}", "normalization version 1", "an item"
            )
        validate(_ITEM_MODELS[schema], body, "body")
        if body.get("tenant_id", tenant_id) != tenant_id:
            raise InvalidConfig(
                "tenant_id",
                body.get("tenant_id"),
                "does not match the URL",
                "send the item to its own tenant",
            )

    @staticmethod
    def _check_id(item_id: Any, field: str = "item_id") -> str:
        validate(ItemId, item_id, field)
        return str(item_id)

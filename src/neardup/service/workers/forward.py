"""The front's connections to its workers: one request forwarded over a Unix
socket, headers and body streamed both ways."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

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


class Conn:
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
    idle: list[Conn] = field(default_factory=list)

    def drop_idle(self) -> None:
        for c in self.idle:
            c.writer.close()
        self.idle.clear()

    async def connect(self) -> Conn:
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
        return Conn(r, w)

    def release(self, c: Conn) -> None:
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
    """Send one request to ``worker`` and stream its answer back (see the package doc)."""
    conn = await worker.connect()
    try:
        await _exchange(conn, scope, receive, send, timeout)
    except BaseException:
        conn.writer.close()
        raise
    worker.release(conn)


async def _exchange(
    conn: Conn, scope: Scope, receive: Receive, send: Send, timeout: float
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

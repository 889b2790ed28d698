"""HTTP routes of ``neardup serve``: a thin starlette shell over :class:`~neardup.service.Service`.

Every route authenticates, caps the body *before* reading it whole, parses JSON,
calls one library method in a worker thread and maps the exception tree to 4xx
answers (``{"error", "message", "fix"}``); anything unexpected is a logged 500.
Needs the ``service`` extra (starlette, uvicorn, prometheus-client, cryptography).

The parts: ``app`` (:func:`create_app`: the handlers, the route table, the
lifespan), ``metrics`` (the Prometheus metrics of one app), ``errors`` (the
exception tree mapped to answers) and ``paths`` (routing on the raw path).
"""

from __future__ import annotations

from neardup.service.server.app import create_app

__all__ = ["create_app"]

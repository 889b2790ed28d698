"""The service's requests, responses and log records, declared once as
``msgspec.Struct`` models.

From the same definitions come the validation of every request body
(:func:`~neardup.service.models.checks.validate`, before anything reaches a
command log), the OpenAPI document served at ``/openapi.json``
(:func:`~neardup.service.models.openapi.openapi`) and the JSON Schemas in
``docs/schemas`` (``scripts/export_schemas.py``).

* :mod:`~neardup.service.models.fields` — the shared constrained types (ids, positions);
* :mod:`~neardup.service.models.requests` — request bodies (unknown fields refused);
* :mod:`~neardup.service.models.responses` — response bodies;
* :mod:`~neardup.service.models.events` — command-, decision- and audit-log records;
* :mod:`~neardup.service.models.checks` — validation at the boundary;
* :mod:`~neardup.service.models.openapi` — the document, the schemas, the permissions.
"""

from __future__ import annotations

from neardup.service.models.checks import validate
from neardup.service.models.openapi import PERMISSION, json_schemas, openapi

__all__ = ["PERMISSION", "json_schemas", "openapi", "validate"]

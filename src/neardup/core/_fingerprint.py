"""Stable fingerprints: SHA-256 over canonical JSON (sorted keys, no whitespace)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

FORMAT_VERSION = 1


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def fingerprint(obj: Any) -> str:
    """First 16 hex digits of SHA-256 of the canonical JSON of ``obj``."""
    return hashlib.sha256(canonical_json(obj).encode("ascii")).hexdigest()[:16]

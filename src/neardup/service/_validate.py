"""Request validation at the service boundary, driven by the published JSON Schemas.

A request is checked completely *before* anything is written to a tenant's command
log: a command the apply step cannot apply (an integer SQLite cannot store, a
string UTF-8 cannot encode) would otherwise be in the log already.  Two layers:

* :func:`check_json` — what any request document must satisfy: nested at most
  :data:`MAX_DEPTH` deep, every string (keys too) encodable as UTF-8 (JSON
  escapes can carry lone surrogates, which no store or log can write), every
  integer a signed 64-bit one (SQLite's ``INTEGER``), every number finite;
* :func:`check` — one of the request schemas of :mod:`neardup.service.schemas` (the same
  document ``/openapi.json`` publishes, so the contract and the server agree).

Both raise :class:`~neardup.core._errors.InvalidConfig` naming the field (a JSON
path such as ``body.tenants[0]``), the offending value (shortened) and the fix.

Example:
    >>> check({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}},
    ...       {"n": 0}, "body")
    Traceback (most recent call last):
    ...
    neardup.core._errors.InvalidConfig: invalid body.n=0: must be >= 1; fix: send an integer >= 1
"""

from __future__ import annotations

import math
import re
from typing import Any

from neardup.core._errors import InvalidConfig

__all__ = [
    "INT64_MAX",
    "MAX_DEPTH",
    "check",
    "check_int",
    "check_json",
    "check_string",
    "short",
]

#: The largest integer SQLite stores (``INTEGER`` is signed 64-bit).
INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)
#: Deepest nesting of arrays and objects a request document may have.
MAX_DEPTH = 32

_SUPPORTED = frozenset(
    {
        "type",
        "enum",
        "const",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "minLength",
        "maxLength",
        "pattern",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "minItems",
        "maxItems",
        "description",
        "format",
        "examples",
    }
)
_JSON_TYPES = {
    "object": "a JSON object",
    "array": "an array",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


def short(value: Any, n: int = 60) -> Any:
    """``value`` as shown in an error message: long strings and documents shortened."""
    if isinstance(value, str):
        return value if len(value) <= n else value[:n] + "..."
    if isinstance(value, dict | list):
        text = repr(value)
        return value if len(text) <= n else f"{type(value).__name__} {text[:n]}..."
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**30:
        return f"an integer of {len(str(abs(value)))} digits"
    return value


def _encodable(s: str) -> int | None:
    """Index of the first character UTF-8 cannot encode (a lone surrogate), or None."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def check_string(field: str, value: Any) -> None:
    """Refuse a string UTF-8 cannot encode (a lone surrogate such as ``"\\ud800"``)."""
    if isinstance(value, str):
        at = _encodable(value)
        if at is not None:
            raise InvalidConfig(
                field,
                short(value),
                f"holds a lone surrogate (U+{ord(value[at]):04X} at character {at}), "
                "which is not valid Unicode text",
                "send valid UTF-8 text (JSON escapes \\ud800-\\udfff only as a pair)",
            )


def check_int(field: str, value: Any, lo: int = INT64_MIN, hi: int = INT64_MAX) -> int:
    """``value`` if it is an integer (not a bool) in ``[lo, hi]``; else InvalidConfig."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidConfig(
            field, short(value), "must be an integer", f"send an integer in [{lo}, {hi}]"
        )
    if not lo <= value <= hi:
        raise InvalidConfig(
            field, short(value), f"is outside [{lo}, {hi}]", f"send an integer in [{lo}, {hi}]"
        )
    return value


def check_json(value: Any, field: str = "body") -> None:
    """What every request document must satisfy (see the module docstring)."""
    stack: list[tuple[str, Any, int]] = [(field, value, 0)]
    while stack:
        where, v, depth = stack.pop()
        if isinstance(v, str):
            check_string(where, v)
        elif isinstance(v, bool) or v is None:
            continue
        elif isinstance(v, int):
            if not INT64_MIN <= v <= INT64_MAX:
                raise InvalidConfig(
                    where,
                    short(v),
                    "does not fit in a signed 64-bit integer",
                    f"send an integer in [{INT64_MIN}, {INT64_MAX}]",
                )
        elif isinstance(v, float):
            if not math.isfinite(v):
                raise InvalidConfig(where, v, "is not a finite number", "send a finite number")
        elif isinstance(v, dict | list):
            if depth >= MAX_DEPTH:
                raise InvalidConfig(
                    where,
                    type(v).__name__,
                    f"is nested more than {MAX_DEPTH} levels deep",
                    "send a flat document (requests nest at most a few levels)",
                )
            if isinstance(v, dict):
                for k, item in v.items():
                    if not isinstance(k, str):
                        raise InvalidConfig(where, short(k), "has a non-string key", "use strings")
                    check_string(f"{where} key", k)
                    stack.append((f"{where}.{k}", item, depth + 1))
            else:
                stack.extend((f"{where}[{i}]", item, depth + 1) for i, item in enumerate(v))
        else:
            raise InvalidConfig(
                where, type(v).__name__, "is not a JSON value", "send JSON data types only"
            )


def _is(kind: str, v: Any) -> bool:
    if kind == "object":
        return isinstance(v, dict)
    if kind == "array":
        return isinstance(v, list)
    if kind == "string":
        return isinstance(v, str)
    if kind == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if kind == "number":
        return isinstance(v, int | float) and not isinstance(v, bool)
    if kind == "boolean":
        return isinstance(v, bool)
    if kind == "null":
        return v is None
    raise ValueError(f"unsupported JSON Schema type {kind!r}")


def check(schema: dict[str, Any], value: Any, field: str = "body") -> None:
    """Validate ``value`` against ``schema`` (the subset of JSON Schema the request
    schemas use; an unsupported keyword is a programming error, ``ValueError``)."""
    check_json(value, field)
    _check(schema, value, field)


def _check(schema: dict[str, Any], v: Any, field: str) -> None:
    unknown = set(schema) - _SUPPORTED
    if unknown:
        raise ValueError(f"unsupported JSON Schema keywords {sorted(unknown)} at {field}")
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is(k, v) for k in kinds):
            want = " or ".join(_JSON_TYPES[k] for k in kinds)
            raise InvalidConfig(field, short(v), f"must be {want}", f"send {want}")
    if "const" in schema and (v != schema["const"] or type(v) is not type(schema["const"])):
        raise InvalidConfig(
            field, short(v), f"must be {schema['const']!r}", f"send {schema['const']!r}"
        )
    if "enum" in schema and not any(v == e and type(v) is type(e) for e in schema["enum"]):
        choices = ", ".join(repr(e) for e in schema["enum"])
        raise InvalidConfig(field, short(v), "is not one of the allowed values", f"use {choices}")
    if isinstance(v, int | float) and not isinstance(v, bool):
        _check_number(schema, v, field)
    if isinstance(v, str):
        _check_text(schema, v, field)
    if isinstance(v, dict):
        _check_object(schema, v, field)
    if isinstance(v, list):
        lo, hi = schema.get("minItems", 0), schema.get("maxItems")
        if len(v) < lo or (hi is not None and len(v) > hi):
            span = f"{lo} to {hi}" if hi is not None else f"at least {lo}"
            raise InvalidConfig(field, short(v), f"has {len(v)} entries", f"send {span} entries")
        items = schema.get("items")
        if items is not None:
            for i, item in enumerate(v):
                _check(items, item, f"{field}[{i}]")


def _check_number(schema: dict[str, Any], v: float, field: str) -> None:
    kind = "an integer" if isinstance(v, int) else "a number"
    lo, hi, xlo = schema.get("minimum"), schema.get("maximum"), schema.get("exclusiveMinimum")
    if lo is not None and v < lo:
        raise InvalidConfig(field, short(v), f"must be >= {lo}", f"send {kind} >= {lo}")
    if xlo is not None and v <= xlo:
        raise InvalidConfig(field, short(v), f"must be > {xlo}", f"send {kind} > {xlo}")
    if hi is not None and v > hi:
        raise InvalidConfig(field, short(v), f"must be <= {hi}", f"send {kind} <= {hi}")


def _check_text(schema: dict[str, Any], v: str, field: str) -> None:
    lo, hi = schema.get("minLength", 0), schema.get("maxLength")
    if len(v) < lo or (hi is not None and len(v) > hi):
        span = f"{lo} to {hi}" if hi is not None else f"at least {lo}"
        raise InvalidConfig(field, short(v), f"has {len(v)} characters", f"send {span} characters")
    pattern = schema.get("pattern")
    # JSON Schema patterns are ECMA-262: "$" is the end of the text, never before a
    # final newline as in Python's re.
    if pattern is not None and not re.search(re.sub(r"(?<!\\)\$$", r"\\Z", pattern), v):
        raise InvalidConfig(
            field, short(v), f"does not match {pattern}", f"send a value matching {pattern}"
        )


def _check_object(schema: dict[str, Any], v: dict[str, Any], field: str) -> None:
    props: dict[str, Any] = schema.get("properties", {})
    if schema.get("additionalProperties") is False:
        extra = sorted(set(v) - set(props))
        if extra:
            raise InvalidConfig(
                field,
                short(extra[0]),
                "is not a known field",
                f"use only {', '.join(sorted(props))}",
            )
    missing = [k for k in schema.get("required", ()) if k not in v]
    if missing:
        raise InvalidConfig(
            field, short(v), f"lacks the required field {missing[0]!r}", f"send {missing[0]}"
        )
    for k, sub in props.items():
        if k in v:
            _check(sub, v[k], f"{field}.{k}")

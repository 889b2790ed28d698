"""Request validation at the service boundary, driven by the models.

A request is checked completely *before* anything is written to a tenant's command
log: a command the apply step cannot apply (an integer SQLite cannot store, a
string UTF-8 cannot encode) would otherwise be in the log already.  Two layers:

* :func:`check_json` — what any request document must satisfy: nested at most
  :data:`MAX_DEPTH` deep, every string (keys too) encodable as UTF-8 (JSON
  escapes can carry lone surrogates, which no store or log can write), every
  integer a signed 64-bit one (SQLite's ``INTEGER``), every number finite;
* :func:`validate` — one of the models of :mod:`neardup.service.models` (the same
  definitions ``/openapi.json`` publishes, so the contract and the server agree),
  checked by ``msgspec.convert``.

Both raise :class:`~neardup.core._errors.InvalidConfig` naming the field (a JSON
path such as ``body.tenants[0]``), the offending value (shortened) and the fix.

Example:
    >>> from neardup.service.models.requests import VerifyRequest
    >>> validate(VerifyRequest, {"left": "a", "right": 7}, "body")
    Traceback (most recent call last):
    ...
    neardup.core._errors.InvalidConfig: invalid body.right=7: expected a string, got an integer; ...
"""

from __future__ import annotations

import functools
import math
import re
from typing import Any, TypeVar

import msgspec

from neardup.core._errors import InvalidConfig
from neardup.service.models.fields import INT64_MAX, INT64_MIN, AccessPolicy

__all__ = [
    "MAX_DEPTH",
    "check_access_policy",
    "check_int",
    "check_json",
    "check_string",
    "short",
    "validate",
]

T = TypeVar("T")

#: Deepest nesting of arrays and objects a request document may have.
MAX_DEPTH = 32

# msgspec's names of JSON types in its messages, as this service's messages say them.
_TYPE_WORDS = {
    "object": "a JSON object",
    "array": "an array",
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean",
    "null": "null",
}
_SCHEMA_TYPES = {
    "object": "a JSON object",
    "array": "an array",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "null": "null",
}
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")


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


def validate(model: type[T] | Any, value: Any, field: str = "body") -> T:
    """``value`` (parsed JSON) checked by :func:`check_json` and converted to
    ``model`` (a ``msgspec.Struct`` or a constrained type of
    :mod:`~neardup.service.models.fields`); refused with
    :class:`~neardup.core._errors.InvalidConfig` naming the field, the value and the
    fix.  An object's unknown fields are reported first, then its fields in the
    model's order, whatever order they were sent in."""
    check_json(value, field)
    try:
        out: T = msgspec.convert(_in_model_order(model, value), model)
    except msgspec.ValidationError as exc:
        raise _refusal(model, value, field, str(exc)) from None
    return out


def _in_model_order(model: Any, value: Any) -> Any:
    if not (isinstance(value, dict) and isinstance(model, type)):
        return value
    if not issubclass(model, msgspec.Struct):
        return value
    names = _field_names(model)
    extra = [k for k in value if k not in names]
    return {k: value[k] for k in (*extra, *(n for n in names if n in value))}


@functools.cache
def _field_names(model: type[msgspec.Struct]) -> dict[str, None]:
    """A model's field names as sent, in its order (``structs.fields`` resolves the
    type hints on every call: far slower than the conversion itself)."""
    return dict.fromkeys(f.encode_name for f in msgspec.structs.fields(model))


def _refusal(model: Any, value: Any, field: str, message: str) -> InvalidConfig:
    """The InvalidConfig of msgspec's ``message`` ("... - at `$.a[0]`")."""
    text, sep, path = message.rpartition(" - at `")
    text, path = (text, path.rstrip("`")) if sep else (message, "$")
    steps = [
        m.group(1) if m.group(1) is not None else int(m.group(2)) for m in _STEP.finditer(path)
    ]
    where = field + path[1:]
    schema = _schema(model)
    unknown = re.fullmatch(r"Object contains unknown field `(.*)`", text)
    if unknown:
        known = ", ".join(sorted(_at(schema, steps, schema).get("properties", {})))
        return InvalidConfig(where, short(unknown[1]), "is not a known field", f"use only {known}")
    missing = re.fullmatch(r"Object missing required field `(.*)`", text)
    target = _walk(value, steps)
    if missing:
        return InvalidConfig(
            where, short(target), f"lacks the required field {missing[1]!r}", f"send {missing[1]}"
        )
    reason = re.sub(
        r"`([^`]*)`", lambda m: " or ".join(_TYPE_WORDS.get(t, t) for t in m[1].split(" | ")), text
    )
    reason = reason[:1].lower() + reason[1:]
    if "length" in reason and isinstance(target, str | list):
        unit = "characters" if isinstance(target, str) else "entries"
        reason += f", not {len(target)} {unit}"
    return InvalidConfig(
        where, short(target), reason, "send " + _describe(_at(schema, steps, schema))
    )


def _walk(value: Any, steps: list[str | int]) -> Any:
    for s in steps:
        try:
            value = value[s]
        except (KeyError, IndexError, TypeError):
            return None
    return value


@functools.cache
def _schema(model: Any) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.json.schema(model)
    return out


def _at(node: dict[str, Any], steps: list[str | int], root: dict[str, Any]) -> dict[str, Any]:
    """The (non-null) schema of the value at ``steps``."""
    node = _resolve(node, root)
    for s in steps:
        sub = node.get("items", {}) if isinstance(s, int) else node.get("properties", {}).get(s, {})
        node = _resolve(sub, root)
    return node


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while True:
        if "$ref" in node:
            node = root["$defs"][node["$ref"].rsplit("/", 1)[1]]
        elif "anyOf" in node:
            branches = [b for b in node["anyOf"] if b.get("type") != "null"]
            if len(branches) != 1:
                return node
            node = branches[0]
        else:
            return node


def _describe(schema: dict[str, Any]) -> str:
    """What a value of ``schema`` is, for a fix ("an integer in [1, 4096]")."""
    if "enum" in schema:
        return "one of " + ", ".join(repr(e) for e in schema["enum"])
    kind = schema.get("type")
    if kind is None:
        return "a value as /openapi.json describes it"
    if kind == "object":
        return "a JSON object of the fields " + ", ".join(sorted(schema.get("properties", {})))
    what = _SCHEMA_TYPES[kind]
    if "pattern" in schema:
        return f"{what} matching {schema['pattern']}"
    lo = schema.get("minLength", schema.get("minItems"))
    hi = schema.get("maxLength", schema.get("maxItems"))
    unit = "characters" if kind == "string" else "entries"
    if hi is not None:
        return f"{what} of {lo} to {hi} {unit}" if lo else f"{what} of at most {hi} {unit}"
    if lo is not None:
        return f"{what} of at least {lo} {unit}"
    opening, low = (
        ("(", schema["exclusiveMinimum"])
        if "exclusiveMinimum" in schema
        else ("[", schema.get("minimum"))
    )
    high = schema.get("maximum")
    if low is not None and high is not None:
        return f"{what} in {opening}{low}, {high}]"
    if low is not None:
        return f"{what} {'>' if opening == '(' else '>='} {low}"
    return what if high is None else f"{what} <= {high}"


def check_access_policy(value: Any) -> str | None:
    """``value`` if it is None or a valid access-policy label
    (:data:`~neardup.service.models.fields.AccessPolicy`), else
    :class:`~neardup.core._errors.InvalidConfig` naming ``access_policy``.

    >>> check_access_policy("eu-only")
    'eu-only'
    """
    if value is None:
        return None
    return str(validate(AccessPolicy, value, "access_policy"))

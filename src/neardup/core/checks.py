"""Checks of the plain values the public helpers take (numbers, hash collections,
positions), raising :class:`~neardup.InvalidConfig` with the value and the fix —
never numpy's own ``ValueError``/``TypeError``/``OverflowError``.

Example:
    >>> check_positions("a", [0, 2], 3).tolist()
    [0, 2]
    >>> check_float("radius", float("nan"), "pass a distance")
    Traceback (most recent call last):
    ...
    neardup.core._errors.InvalidConfig: invalid radius=nan: must be a finite number; ...
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from neardup.core._errors import InvalidConfig, InvalidType, shown

__all__ = [
    "check_float",
    "check_int",
    "check_layout_targets",
    "check_pairs",
    "check_positions",
    "check_same",
    "check_text",
    "check_texts",
    "check_type",
    "hash_array",
]

T = TypeVar("T")


def check_float(name: str, value: object, fix: str) -> float:
    """``value`` as a float; :class:`InvalidConfig` unless it is a finite real number
    (a bool is not a number here)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(float(value))
    ):
        raise InvalidConfig(name, shown(value), "must be a finite number", fix)
    return float(value)


def check_int(name: str, value: object, lo: int, hi: int, fix: str) -> int:
    """``value`` as an int; :class:`InvalidConfig` unless it is an integer (not a
    bool) in [lo, hi]."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Integral)
        or not lo <= int(value) <= hi
    ):
        raise InvalidConfig(name, shown(value), f"must be an integer in [{lo}, {hi}]", fix)
    return int(value)


def check_layout_targets(
    recall: object, far_budget: object, n: object
) -> tuple[float, float, int]:
    """The targets of a band-layout search, checked: ``recall`` in (0, 1),
    ``far_budget`` (expected far candidates per query) > 0 and ``n`` (stored items)
    an integer >= 1; :class:`InvalidConfig` names the first one that is not.

    >>> check_layout_targets(0.995, 10, 1_000_000)
    (0.995, 10.0, 1000000)
    """
    r = check_float("recall", recall, "e.g. recall=0.995")
    if not 0.0 < r < 1.0:
        raise InvalidConfig("recall", r, "must be in (0, 1)", "e.g. recall=0.995")
    budget = check_float("far_budget", far_budget, "e.g. far_budget=10")
    if not budget > 0.0:
        raise InvalidConfig("far_budget", budget, "must be > 0", "e.g. far_budget=10")
    items = check_int("n", n, 1, 1 << 62, "pass the number of stored items, e.g. n=1000000")
    return r, budget, items


def check_same(name: str, a: object, b: object, what_is_wrong: str, fix: str) -> None:
    """:class:`InvalidConfig` with the value ``(a, b)`` unless ``a == b``: two inputs
    that must agree (lengths, shapes, dimensions).

    >>> check_same("a/b", 3, 4, "lengths differ", "pass one b for every a")
    Traceback (most recent call last):
    ...
    neardup.core._errors.InvalidConfig: invalid a/b=(3, 4): lengths differ; ...
    """
    if a != b:
        raise InvalidConfig(name, (a, b), what_is_wrong, fix)


def check_type(name: str, value: object, cls: type[T], fix: str) -> T:
    """``value`` if it is a ``cls``; :class:`InvalidType` naming the type it is.

    >>> check_type("config", 0.8, dict, "pass Config(...)")
    Traceback (most recent call last):
    ...
    neardup.core._errors.InvalidType: invalid config=0.8: has type float, expected dict; ...
    """
    if isinstance(value, cls):
        return value
    what = f"has type {type(value).__name__}, expected {cls.__name__}"
    raise InvalidType(name, shown(value), what, fix)


def _not_text(name: str, value: object) -> InvalidType:
    if isinstance(value, bytes | bytearray | memoryview):
        fix = "decode it first, e.g. data.decode('utf-8')"
    else:
        fix = "pass the document's text as a str"
    return InvalidType(name, shown(value), f"has type {type(value).__name__}, expected str", fix)


def check_text(name: str, value: object) -> str:
    """``value`` if it is a ``str`` (a document's text); :class:`InvalidType`
    naming the type it is otherwise (bytes: decode them first).

    >>> check_text("text", b"abc")
    Traceback (most recent call last):
    ...
    neardup.core._errors.InvalidType: invalid text=b'abc': has type bytes, expected str; ...
    """
    if isinstance(value, str):
        return value
    raise _not_text(name, value)


def check_texts(name: str, values: object) -> Sequence[str]:
    """``values`` if it is a sized collection of ``str`` (a list, tuple, array or
    column of texts, not one str or bytes); :class:`InvalidType` otherwise, naming
    the first document that is not a str by its position.

    One pass over the element types (no per-document Python code unless one is
    wrong), made once where a batch enters the library; none for a column whose
    class sets ``holds_checked_str = True`` (it checks each text as it is added).

    >>> check_texts("texts", ["a", 1])
    Traceback (most recent call last):
    ...
    neardup.core._errors.InvalidType: invalid texts[1]=1: has type int, expected str; ...
    """
    if (
        isinstance(values, str | bytes | bytearray | memoryview)
        or not hasattr(values, "__len__")
        or not hasattr(values, "__iter__")
    ):
        raise InvalidType(
            name,
            shown(values),
            f"has type {type(values).__name__}, expected a collection of str",
            "pass a list of texts (one text: [text])",
        )
    if getattr(type(values), "holds_checked_str", False) is True:
        # A column whose texts were checked as they were added and which would build
        # each str afresh when iterated (``neardup.io.columns.TextColumn``: 383k
        # decoded strings cost a run 0.4 s here).
        return values  # type: ignore[return-value]
    if not all(issubclass(t, str) for t in set(map(type, values))):
        for i, v in enumerate(values):
            if not isinstance(v, str):
                raise _not_text(f"{name}[{i}]", v)
    return values  # type: ignore[return-value]


def _integers(v: object) -> npt.NDArray[Any] | None:
    """``v`` as a 1-D array of integers, or None when it is not one."""
    try:
        items = v if isinstance(v, np.ndarray) else list(v)  # type: ignore[call-overload]
        arr = np.asarray(items)
    except (ValueError, TypeError, OverflowError):
        return None
    if arr.ndim == 1 and arr.dtype.kind in "Of" and not isinstance(items, np.ndarray):
        # Python ints past 2**63 (numpy makes them float64 or objects): exact as uint64.
        if all(
            isinstance(x, numbers.Integral) and not isinstance(x, bool) and 0 <= int(x) < 1 << 64
            for x in items
        ):
            return np.array(items, dtype=np.uint64)
        return None
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "ui"):
        return None
    return arr


def hash_array(name: str, v: object) -> npt.NDArray[np.uint64]:
    """``v`` (an array or an iterable of ints) as a 1-D ``uint64`` array; anything
    but integers in [0, 2**64) raises (numpy would wrap a negative number)."""
    arr = _integers(v)
    if arr is None or (arr.dtype.kind == "i" and arr.size and int(arr.min()) < 0):
        raise InvalidConfig(
            name,
            shown(v),
            "is not a collection of 64-bit hashes (integers in [0, 2**64))",
            "pass shingle hashes, e.g. hash_documents(texts, config).get(i)",
        )
    return arr.astype(np.uint64)


def check_positions(name: str, v: object, n: int) -> npt.NDArray[np.int64]:
    """``v`` as a contiguous ``int64`` array of positions in [0, n); anything else
    raises before a kernel indexes with it."""
    arr = _integers(v)
    if arr is None or (arr.size and (int(arr.min()) < 0 or int(arr.max()) >= n)):
        raise InvalidConfig(
            name,
            shown(v),
            f"is not a 1-D array of positions in [0, {n})",
            f"pass positions 0 <= i < {n}",
        )
    return np.ascontiguousarray(arr, dtype=np.int64)


def check_pairs(
    a: object, b: object, n: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``a`` and ``b`` as equally long position arrays (:func:`check_positions`): the
    pairs ``(a[i], b[i])`` of items ``0 … n-1``.

    >>> [x.tolist() for x in check_pairs([0, 1], [2, 2], 3)]
    [[0, 1], [2, 2]]
    """
    aa = check_positions("a", a, n)
    bb = check_positions("b", b, n)
    check_same("a/b", aa.shape[0], bb.shape[0], "lengths differ", "pass one b for every a")
    return aa, bb

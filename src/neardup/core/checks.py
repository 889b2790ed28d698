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
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.core._errors import InvalidConfig, shown

__all__ = ["check_float", "check_int", "check_positions", "hash_array"]


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

"""Small NumPy building blocks shared by the layers above.

>>> concat_ranges(np.array([10, 3]), np.array([2, 3])).tolist()
[10, 11, 3, 4, 5]
>>> distinct(np.array([3, 1, 3, 2])).tolist()
[1, 2, 3]
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt

__all__ = ["concat_ranges", "distinct"]

_G = TypeVar("_G", bound=np.generic)


def concat_ranges(
    starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """``range(starts[t], starts[t] + lengths[t])`` for every ``t``, end to end, as
    one array (lengths >= 0): the positions of many slices, for one gather."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(np.asarray(starts, dtype=np.int64), lengths) + within


def distinct(values: npt.NDArray[_G]) -> npt.NDArray[_G]:
    """The distinct values of a 1-D array of integers (or of any type whose values
    all compare equal to themselves), ascending: ``np.unique(values)``.

    ``np.unique`` without ``return_*`` asks ``numpy.ma`` whether the array is
    masked, and the first such call in a process imports ``numpy.ma``: a fixed
    cost of every short run that this sort and neighbour test does not pay.
    """
    ordered: npt.NDArray[_G] = np.sort(np.asarray(values).ravel())
    if ordered.shape[0] < 2:
        return ordered
    first: npt.NDArray[np.bool_] = np.empty(ordered.shape[0], dtype=np.bool_)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    kept: npt.NDArray[_G] = ordered[first]
    return kept

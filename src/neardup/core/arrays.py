"""Small NumPy building blocks shared by the layers above.

>>> concat_ranges(np.array([10, 3]), np.array([2, 3])).tolist()
[10, 11, 3, 4, 5]
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["concat_ranges"]


def concat_ranges(
    starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """``range(starts[t], starts[t] + lengths[t])`` for every ``t``, end to end, as
    one array (lengths >= 0): the positions of many slices, for one gather."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(np.asarray(starts, dtype=np.int64), lengths) + within

"""neardup.core.arrays: NumPy building blocks."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from neardup.core.arrays import concat_ranges


@given(st.lists(st.tuples(st.integers(-50, 50), st.integers(0, 6)), max_size=12))
def test_concat_ranges_is_the_ranges_end_to_end(spans: list[tuple[int, int]]) -> None:
    starts = np.array([s for s, _ in spans], dtype=np.int64)
    lengths = np.array([n for _, n in spans], dtype=np.int64)
    got = concat_ranges(starts, lengths)
    assert got.dtype == np.int64
    assert got.tolist() == [i for s, n in spans for i in range(s, s + n)]

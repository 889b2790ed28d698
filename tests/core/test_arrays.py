"""neardup.core.arrays: NumPy building blocks."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from fresh_python import fresh_python
from neardup.core.arrays import concat_ranges, distinct


@given(st.lists(st.tuples(st.integers(-50, 50), st.integers(0, 6)), max_size=12))
def test_concat_ranges_is_the_ranges_end_to_end(spans: list[tuple[int, int]]) -> None:
    starts = np.array([s for s, _ in spans], dtype=np.int64)
    lengths = np.array([n for _, n in spans], dtype=np.int64)
    got = concat_ranges(starts, lengths)
    assert got.dtype == np.int64
    assert got.tolist() == [i for s, n in spans for i in range(s, s + n)]


@given(st.lists(st.integers(-(2**62), 2**62), max_size=40))
def test_distinct_is_np_unique(values: list[int]) -> None:
    arr = np.array(values, dtype=np.int64)
    got = distinct(arr)
    assert got.dtype == np.int64
    assert got.tolist() == np.unique(arr).tolist()


def test_distinct_keeps_unsigned_values() -> None:
    arr = np.array([2**64 - 1, 3, 2**64 - 1, 0], dtype=np.uint64)
    assert distinct(arr).tolist() == [0, 3, 2**64 - 1]
    assert distinct(arr).dtype == np.uint64


def test_distinct_does_not_load_numpy_ma() -> None:
    # The reason it exists: np.unique(x) imports numpy.ma on its first call.
    code = (
        "import sys, numpy as np\n"
        "from neardup.core.arrays import distinct\n"
        "distinct(np.array([3, 1, 3]))\n"
        "print('numpy.ma' in sys.modules)\n"
    )
    assert fresh_python(code).strip() == "False"

"""The numba intrinsics of the kernels, compiled by numba's JIT here."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np


def test_a_borrowed_array_reads_and_writes_the_same_memory() -> None:
    import numba

    from neardup.kernels import _intrinsics

    borrow: Any = _intrinsics.borrow  # an intrinsic: typed by numba, not mypy

    @numba.njit
    def helper(a, i):  # type: ignore[no-untyped-def]
        a[i] += 1
        return a[i]

    @numba.njit
    def run(a):  # type: ignore[no-untyped-def]
        b = borrow(a)
        total = 0
        for i in range(b.shape[0]):
            total += helper(b, i)
        return total, b.shape[0], b.strides[0]

    a = np.arange(10, dtype=np.int64)
    before = sys.getrefcount(a)
    total, n, stride = run(a)
    assert (total, n, stride) == (int(np.arange(1, 11).sum()), 10, 8)
    assert a.tolist() == list(range(1, 11))
    # Nothing kept a reference to the caller's array, nor dropped one.
    assert sys.getrefcount(a) == before


def test_a_borrowed_strided_view_keeps_its_strides() -> None:
    import numba

    from neardup.kernels import _intrinsics

    borrow: Any = _intrinsics.borrow  # an intrinsic: typed by numba, not mypy

    @numba.njit
    def column_sum(m, j):  # type: ignore[no-untyped-def]
        b = borrow(m[:, j])
        s = 0
        for i in range(b.shape[0]):
            s += b[i]
        return s

    m = np.arange(12, dtype=np.int64).reshape(4, 3)
    assert column_sum(m, 1) == int(m[:, 1].sum())

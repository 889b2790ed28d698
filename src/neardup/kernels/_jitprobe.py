"""The smallest cached kernel: calling it once initialises numba's compiler
target (see :mod:`neardup.kernels._jit`)."""

from __future__ import annotations

from numba import njit

__all__ = ["touch"]


@njit(cache=True)
def touch(x: int) -> int:
    return x + 1

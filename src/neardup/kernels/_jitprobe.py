"""The smallest cached kernel: calling it once initialises numba's compiler
target (see :mod:`neardup.kernels._jit`)."""

from __future__ import annotations

from neardup.kernels._kernel import kernel

__all__ = ["touch"]


@kernel
def touch(x: int) -> int:
    return x + 1

"""Starting numba's compiler once per process, without its BLAS probe.

The first compiled kernel a process loads makes numba initialise its compiler
target, which imports its NumPy implementations; one of them checks whether
``np.dot`` can be compiled by importing ``scipy.linalg`` (when SciPy is installed,
as in most ML environments).  That import took 0.18 s of a 3 s batch run and
starts an OpenBLAS thread pool; neardup's kernels call no BLAS.  The command line
calls :func:`start_numba` before its first kernel so that the probe finds no
SciPy; numba then merely marks ``np.dot`` as unavailable in compiled code.
"""

from __future__ import annotations

import sys

from numba import njit

__all__ = ["start_numba"]


@njit(cache=True)
def _touch(x: int) -> int:
    return x + 1


def start_numba() -> None:
    """Initialise numba's compiler target with SciPy hidden from it (a no-op once
    numba is initialised, and SciPy stays importable afterwards).  For programs
    that own their process, such as the CLI; a library call must not hide a
    module that other threads may be importing."""
    # numba's own import already loads the light ``scipy`` package; the probe's
    # cost is ``scipy.linalg``.
    hide = "scipy.linalg" not in sys.modules
    if hide:
        sys.modules["scipy.linalg"] = None  # type: ignore[assignment]
    try:
        _touch(1)
    finally:
        if hide and "scipy.linalg" in sys.modules and sys.modules["scipy.linalg"] is None:
            del sys.modules["scipy.linalg"]

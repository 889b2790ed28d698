"""Process settings that native libraries read once, when they load.

They belong to a program's entry point (the ``neardup`` command, a service
worker), never to a library call: :func:`process_defaults` is called first thing
by :mod:`neardup._launch` and :mod:`neardup.service._worker`, before NumPy loads.
An explicit user setting always wins.
"""

from __future__ import annotations

import os

__all__ = ["process_defaults"]


def process_defaults() -> None:
    """Thread settings for a neardup process; an explicit user setting wins."""
    # OpenMP threads (numba's "omp" layer) spin between parallel regions by default;
    # batch runs overlap a reading thread with the kernels, and spinning threads
    # would take that thread's core.  Sleeping waiters cost only a wake-up per
    # region.  Read when the first kernel loads OpenMP.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    # NumPy's OpenBLAS starts a busy-waiting thread pool when NumPy is imported;
    # neardup never calls BLAS.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

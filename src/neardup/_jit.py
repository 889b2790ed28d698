"""Starting numba once per process, without the optional packages it probes.

Importing numba and loading the first compiled kernel (which initialises its
compiler target) import optional packages for features neardup's kernels never
use: ``scipy.linalg`` (numba checks whether ``np.dot`` can be compiled; 0.18 s of
a 3 s batch run, and an OpenBLAS thread pool), ``cffi`` with ``pycparser`` (cffi
function types, 0.03 s) and ``yaml`` (a config file format, 0.01 s).  The
command line calls :func:`start_numba` before its first kernel, so that numba
finds them absent and merely leaves those features off.
"""

from __future__ import annotations

import sys

__all__ = ["start_numba"]

_PROBED = ("scipy.linalg", "cffi", "yaml")


def start_numba() -> None:
    """Import numba and initialise its compiler target with the packages above
    hidden from it (a no-op once numba is initialised; they stay importable
    afterwards).  For programs that own their process, such as the CLI; a library
    call must not hide a module that other threads may be importing."""
    hidden = [m for m in _PROBED if m not in sys.modules]
    for m in hidden:
        sys.modules[m] = None  # type: ignore[assignment]
    try:
        from ._jitprobe import touch

        touch(1)
    finally:
        for m in hidden:
            if m in sys.modules and sys.modules[m] is None:
                del sys.modules[m]

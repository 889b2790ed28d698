"""The ``neardup`` program's entry point.

Process-wide settings that native libraries read once, when they load, must be in
the environment before the command line imports NumPy (which loads OpenBLAS), so
the program starts here rather than in :mod:`neardup.cli`.
"""

from __future__ import annotations

import os
import sys

__all__ = ["main", "process_defaults"]


def process_defaults() -> None:
    """Thread settings for a neardup process; an explicit user setting wins."""
    # OpenMP threads (numba's "omp" layer) spin between parallel regions by default;
    # batch runs overlap a reading thread with the kernels, and spinning threads
    # took that thread's core (~1.3 s of CPU per 313k-document run).  Sleeping
    # waiters cost only a wake-up per region.  Read when the first kernel loads
    # OpenMP.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    # NumPy's OpenBLAS starts a thread pool when NumPy is imported, and its threads
    # busy-wait (0.1 s of CPU per run); neardup never calls BLAS.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main() -> None:
    """Run the command line (the ``neardup`` console script)."""
    process_defaults()
    if sys.argv[1:2] == ["dedup"]:
        from .leftovers import install_signal_handlers

        # Before the slow imports, so a stop at any moment of a run ends the same way.
        install_signal_handlers()
    try:
        from .cli import main as cli_main
    except KeyboardInterrupt:
        # Ctrl-C while the program loads: nothing was started, so no traceback.
        os.write(2, b"neardup: stopped by SIGINT while starting; nothing was done\n")
        os._exit(130)
    cli_main()

"""The ``neardup`` program's entry point.

Process-wide settings that native libraries read once, when they load, must be in
the environment before the command line imports NumPy (which loads OpenBLAS), so
the program starts here rather than in :mod:`neardup.cli`.
"""

from __future__ import annotations

import gc
import os
import sys

from neardup.core.procenv import process_defaults

__all__ = ["main"]


def main() -> None:
    """Run the command line (the ``neardup`` console script)."""
    process_defaults()
    if sys.argv[1:2] == ["dedup"]:
        from neardup.core.leftovers import install_signal_handlers

        # Before the slow imports, so a stop at any moment of a run ends the same way.
        install_signal_handlers()
    # Loading the program makes only long-lived objects (modules, classes,
    # functions): collecting during it freed about 200 objects and took 11 ms of
    # every run.  Frozen afterwards, later full collections skip them.
    gc.disable()
    try:
        from neardup.cli import main as cli_main
    except KeyboardInterrupt:
        # Ctrl-C while the program loads: nothing was started, so no traceback.
        os.write(2, b"neardup: stopped by SIGINT while starting; nothing was done\n")
        os._exit(130)
    gc.freeze()
    gc.enable()
    cli_main()

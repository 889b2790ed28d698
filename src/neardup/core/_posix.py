"""What neardup needs of POSIX, asked for where it is used.

The batch job, the library and the command line import and run on any platform;
the features that need POSIX file locks say so when they are used.  ``fcntl``
(advisory file locks) and ``resource`` (peak memory) exist on Linux and macOS,
not on Windows:

* owner locks of a run's temporary folders (:mod:`neardup.core.leftovers`): without
  them a run cannot tell a live run's folder from a dead one's, so it reports
  leftovers and never removes them;
* the service (tenant folder locks, the key file, worker supervision): refused
  with :func:`require_file_locks`'s error;
* ``peak_memory_bytes`` in ``stats.json``: ``null`` where unmeasurable.

>>> peak_rss_bytes() is None or peak_rss_bytes() > 0
True
"""

from __future__ import annotations

import sys
from types import ModuleType

from neardup.core._errors import NeardupError

__all__ = ["file_locks", "peak_rss_bytes", "require_file_locks"]


def file_locks() -> ModuleType | None:
    """The ``fcntl`` module, or None where the platform has no POSIX file locks."""
    try:
        import fcntl
    except ImportError:
        return None
    return fcntl


def require_file_locks(feature: str) -> ModuleType:
    """The ``fcntl`` module; raises :class:`~neardup.NeardupError` naming
    ``feature`` where the platform has none (Windows)."""
    mod = file_locks()
    if mod is None:
        raise NeardupError(
            f"{feature} needs POSIX file locks (fcntl), which {sys.platform} lacks; "
            "fix: run it on Linux or macOS (the batch job and the library need none)"
        )
    return mod


def peak_rss_bytes() -> int | None:
    """This process's peak resident memory in bytes, or None where the platform
    cannot tell (no ``resource`` module)."""
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return int(peak if sys.platform == "darwin" else peak * 1024)

"""Starting numba once per process, without the work its start-up does for nothing.

Two costs of numba's start are for features neardup's cached kernels never use:

* Importing numba and loading the first compiled kernel import optional packages:
  ``scipy.linalg`` (numba checks whether ``np.dot`` can be compiled; it also
  starts an OpenBLAS thread pool), ``cffi`` with ``pycparser`` (cffi function
  types) and ``yaml`` (a config file format).
  :func:`start_numba` hides them, so that numba finds them absent and merely
  leaves those features off.
* Before loading each kernel from its on-disk cache, numba refreshes its whole
  compiler registry: it imports ~100 modules of typing and lowering rules
  (``numba.cpython.*``, ``numba.np.*``, ``numba.typed.*``) and installs them, about
  0.2 s.  Loading machine code that is already compiled consults none of them; it
  needs only numba's runtime (NRT), which is still initialised.  After
  :func:`start_numba`, cache loads skip that refresh.  A kernel that is not cached
  yet is compiled as usual, and compiling refreshes the registry itself; a load
  that fails without the refresh is retried with it.

The command line calls :func:`start_numba` before its first kernel.  Results do
not depend on either measure, only start-up time does.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from neardup.kernels._kernel import before_numba

__all__ = ["on_numba", "start_numba"]

_PROBED = ("scipy.linalg", "cffi", "yaml")


def _load_without_refresh() -> None:
    """Make numba's cache loads skip the registry refresh (see the module docstring).

    Only where numba's cache has the shape this relies on (numba 0.60-0.68 at
    least); otherwise nothing changes.
    """
    from numba.core import caching

    cache_cls: Any = caching.Cache
    original = cache_cls.load_overload
    if getattr(original, "_neardup_fast", False):
        return
    if not all(
        hasattr(cache_cls, name) for name in ("_load_overload", "_guard_against_spurious_io_errors")
    ):
        return
    try:
        from numba.core.runtime.nrt import rtsys
    except ImportError:
        return

    def load_overload(self: Any, sig: Any, target_context: Any) -> Any:
        try:
            rtsys.initialize(target_context)
            with self._guard_against_spurious_io_errors():
                return self._load_overload(sig, target_context)
        except Exception:
            # Whatever the cached code needed that was not there: numba's own path.
            return original(self, sig, target_context)

    load_overload._neardup_fast = True  # type: ignore[attr-defined]
    cache_cls.load_overload = load_overload


def start_numba() -> None:
    """For programs that own their process, such as the CLI: when numba is first
    needed (a kernel that has no native build for its call, see
    :mod:`neardup.kernels._kernel`), import it and initialise its compiler target
    with the packages above hidden from it, and make later cache loads skip the
    registry refresh (at once if numba is already in use; a no-op once done; the
    hidden packages stay importable afterwards).  A library call must not hide a
    module that other threads may be importing, nor change how numba loads for
    its host."""
    global _armed
    if not _armed:
        _armed = True
        before_numba(_fast_start)


def on_numba(callback: Callable[[], None]) -> None:
    """Run ``callback`` once numba is first needed by neardup's kernels (now, if it
    has been)."""
    before_numba(callback)


_armed = False


def _fast_start() -> None:
    hidden = [m for m in _PROBED if m not in sys.modules]
    for m in hidden:
        sys.modules[m] = None  # type: ignore[assignment]
    try:
        _load_without_refresh()
        from neardup.kernels._jitprobe import touch

        touch.dispatcher(1)
    finally:
        for m in hidden:
            if m in sys.modules and sys.modules[m] is None:
                del sys.modules[m]

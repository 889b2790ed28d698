"""A kernel: one Python function, run from the native module built ahead of time
when that build fits the call, else from numba's JIT, loaded on first need.

Importing a kernel module costs no numba: :func:`kernel` returns a :class:`Kernel`
that makes numba's dispatcher only when a call needs it (see
:mod:`neardup.kernels._native` for the build that avoids numba altogether).
Names a kernel's code takes from numba (``prange``, intrinsics) are written as
:func:`lazy` placeholders in its module and replaced by numba's objects just
before numba first compiles or loads that module's kernels.

Guarantees: both builds run the same source and give the same results (a call
goes to the native build only when its argument types are exactly those the
native build was made for); a kernel that is not in the native build, or a call
with other types, behaves as ``numba.njit(cache=True, **options)`` would.

>>> from neardup.kernels._kernel import kernel
>>> @kernel
... def add_one(x):
...     return x + 1
>>> add_one(1)  # doctest: +SKIP
2
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from neardup.kernels import _native
from neardup.kernels.threads import apply_to_numba, get_threads

__all__ = ["PARALLEL_BYTES", "Kernel", "arg_key", "before_numba", "kernel", "lazy"]

PARALLEL_BYTES = 32 << 20
"""A ``parallel=True`` kernel whose largest array argument holds at least this
many bytes runs on numba's threads (JIT) even when the native build fits, if
the calling thread may use more than one: below it the native build's single
thread finishes before numba would have loaded."""

_lock = threading.RLock()
_numba_hooks: list[Callable[[], None]] = []
_numba_started = False


def before_numba(hook: Callable[[], None]) -> None:
    """Run ``hook`` once, just before this process makes its first numba dispatcher
    (at once if it already has): how a program that owns its process arranges
    numba's start (:func:`neardup.kernels._jit.start_numba`)."""
    with _lock:
        if not _numba_started:
            _numba_hooks.append(hook)
            return
    hook()


class lazy:  # noqa: N801 - used like a function in kernel modules
    """A placeholder for ``module.name`` in a kernel module's globals, imported
    only when numba compiles that module (``prange: Any = lazy("numba", "prange")``)."""

    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name

    def resolve(self) -> Any:
        return getattr(importlib.import_module(self.module), self.name)

    def __repr__(self) -> str:
        return f"lazy({self.module!r}, {self.name!r})"


prange: Any = lazy("numba", "prange")
"""numba's ``prange`` for kernel modules (``from neardup.kernels._kernel import prange``)."""


def _resolve_placeholders(namespace: dict[str, Any]) -> None:
    for name, value in list(namespace.items()):
        if isinstance(value, lazy):
            namespace[name] = value.resolve()


class Kernel:
    """A kernel function (see the module docstring).  Attributes other than those
    below are numba's dispatcher's (``overloads``, ``compile``, ``py_func``...)."""

    def __init__(self, fn: Callable[..., Any], options: dict[str, Any]) -> None:
        self.py_func = fn
        self.options = options
        self.parallel = bool(options.get("parallel"))
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__module__ = fn.__module__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        self._dispatcher: Any = None
        self._native: tuple[tuple[tuple[Any, ...], Any], ...] = ()
        self._generation = -1

    @property
    def dispatcher(self) -> Any:
        """numba's dispatcher for this kernel (numba is imported on first use)."""
        disp = self._dispatcher
        if disp is None:
            with _lock:
                if self._dispatcher is None:
                    self._dispatcher = _make_dispatcher(self.py_func, self.options)
                disp = self._dispatcher
        return disp

    @property
    def _numba_type_(self) -> Any:
        # How numba types a kernel named in another kernel's code: as its dispatcher.
        return self.dispatcher._numba_type_

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_dispatcher", "_native", "_generation"):
            raise AttributeError(name)
        return getattr(self.dispatcher, name)

    def native_builds(self) -> tuple[tuple[tuple[Any, ...], Any], ...]:
        """(argument key, function) of each native build of this kernel that this
        process has found (looked up again after a build)."""
        generation = _native.generation
        if self._generation != generation:
            # Builds first, then the generation: a thread that sees the new
            # generation also sees its builds.
            self._native = _native.builds_of(self.__module__, self.__name__)
            self._generation = generation
        return self._native

    def __call__(self, *args: Any) -> Any:
        builds = self._native if self._generation == _native.generation else self.native_builds()
        if builds:
            key = arg_key(args)
            for k, fn in builds:
                if k == key or _runs_as(k, key, args):
                    if self.parallel and get_threads() > 1 and _largest(args) >= PARALLEL_BYTES:
                        break
                    return fn(*args)
        disp = self.dispatcher
        if self.parallel:
            apply_to_numba()
        return disp(*args)

    def __repr__(self) -> str:
        return f"<kernel {self.__module__}.{self.__qualname__}>"


def _runs_as(build: tuple[Any, ...], key: tuple[Any, ...], args: tuple[Any, ...]) -> bool:
    """Whether a build made for ``build`` runs ``args`` (typed ``key``) as well: an
    array both C- and F-contiguous (a dimension of length one, as a single
    document's band keys have) is typed C, yet its elements lie in F order too, so
    a build for either layout indexes it alike."""
    if len(build) != len(key):
        return False
    for want, got, a in zip(build, key, args, strict=True):
        if want == got:
            continue
        if not (
            isinstance(a, np.ndarray)
            and a.flags.c_contiguous
            and a.flags.f_contiguous
            and isinstance(want, tuple)
            and want[3] in ("C", "F")
            and want[:3] == got[:3]
            and want[4] == got[4]
        ):
            return False
    return True


def _largest(args: tuple[Any, ...]) -> int:
    return max((a.nbytes for a in args if isinstance(a, np.ndarray)), default=0)


def _make_dispatcher(fn: Callable[..., Any], options: dict[str, Any]) -> Any:
    global _numba_started
    with _lock:
        if not _numba_started:
            _numba_started = True
            while _numba_hooks:
                _numba_hooks.pop(0)()
        _native.dispatchers_made += 1
    from numba import njit

    from neardup.kernels._cache import kernel_cache_class

    _resolve_placeholders(fn.__globals__)
    if _native.serial:
        # The native build's worker: kernels linked into the module must not call
        # numba's thread pool, and a serial compile must not reach numba's cache.
        return njit(**{**options, "parallel": False})(fn)
    cls = kernel_cache_class()
    if cls is None:
        return njit(cache=True, **options)(fn)
    disp = njit(**options)(fn)
    # What numba's own ``enable_caching`` does, with the dependency-aware class.
    disp._cache = cls(disp.py_func)
    return disp


def kernel(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """``numba.njit(cache=True, **options)``, made lazily and with a native build
    (see the module docstring).  Used bare (``@kernel``) or with numba's options
    (``@kernel(parallel=True, nogil=True)``)."""
    if "cache" in options:
        raise TypeError("kernel() always caches; do not pass cache=")

    def wrap(f: Callable[..., Any]) -> Kernel:
        return Kernel(f, dict(options))

    return wrap if fn is None else wrap(fn)


_SCALARS: dict[type, str] = {bool: "bool", float: "float64"}


def arg_key(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The types of ``args`` as numba would infer them, spelled as the kernel
    manifest spells them: ``("array", dtype, ndim, layout, readonly)`` or a scalar
    type name; ``None`` for anything else (no native build takes it)."""
    out: list[Any] = []
    for a in args:
        if isinstance(a, np.ndarray):
            flags = a.flags
            layout = "C" if flags.c_contiguous else "F" if flags.f_contiguous else "A"
            out.append(("array", a.dtype.name, a.ndim, layout, not flags.writeable))
        elif type(a) is int:
            out.append("int64" if -(1 << 63) <= a < (1 << 63) else "uint64")
        elif type(a) in _SCALARS:
            out.append(_SCALARS[type(a)])
        elif isinstance(a, np.generic) and a.dtype.kind in "biuf":
            out.append(a.dtype.name)
        else:
            out.append(None)
    return tuple(out)

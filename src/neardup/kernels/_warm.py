"""Compiling the kernels a run needs once per machine, on every core, and saying so.

neardup's kernels are compiled by numba for the machine they run on and cached
on disk (next to the package, or in numba's per-user cache folder when the
package folder is read-only).  The first run on a machine therefore compiles:
about 30 s of one core for the kernels of a text ``dedup``.  Compiling them one
after the other, as numba does on first call, leaves the other cores idle and
says nothing.  :func:`compile_kernels` looks up which kernels of a kind of run
(a *group*: ``dedup``, ``library``, ``vectors``, ``service``) are not cached
yet, and compiles them in parallel worker processes, largest first, printing one
progress line; later calls find them cached and return in milliseconds.

The groups and argument types come from ``manifest.json`` (package data, read by
:func:`kernel_groups`), recorded by ``scripts/kernel_manifest.py`` from real
runs.  A kernel a run calls with types the manifest does not list is compiled on
first call, as before; the command line announces each such compile
(:func:`announce_compiles`), so nothing stalls silently.

>>> from neardup import compile_kernels
>>> report = compile_kernels(["dedup"])  # doctest: +SKIP
>>> report["missing"]  # doctest: +SKIP
0
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from neardup.core._errors import InvalidConfig
from neardup.kernels._manifest import Entry, kernel_groups, numba_type

__all__ = ["announce_compiles", "compile_kernels"]

_announcing = False


def _dispatcher(entry: Entry) -> Any:
    module = importlib.import_module(f"neardup.{entry[0]}")
    return getattr(module, entry[1])


def _cached(entry: Entry) -> bool | None:
    """Whether numba's disk cache holds ``entry`` for this machine; None when that
    cannot be told (an unexpected numba internals layout: then nothing is
    compiled ahead and kernels compile on first call, as without this module)."""
    try:
        disp = _dispatcher(entry)
        sig = tuple(numba_type(s) for s in entry[2])
        if tuple(sig) in disp.overloads:
            return True
        cache = disp._cache
        key = cache._index_key(sig, disp.targetctx.codegen())
        return key in cache._cache_file._load_index()
    except Exception:  # any surprise means "cannot tell"
        return None


def _ignore_sigint() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _compile_one(entry: Entry) -> tuple[str, float]:
    """In a worker process: compile (or load) one kernel; returns its name and time."""
    from neardup.kernels._jit import start_numba

    start_numba()
    t0 = time.perf_counter()
    _dispatcher(entry).compile(tuple(numba_type(s) for s in entry[2]))
    return entry[1], time.perf_counter() - t0


def compile_kernels(
    groups: Iterable[str] = ("dedup",),
    *,
    processes: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Compile the kernels of ``groups`` that are not cached for this machine yet.

    Guarantees: returns only when every listed kernel of the groups is cached (or
    raises); compiles each in a worker process (``processes``, default: the
    usable cores), largest first; the calling process compiles nothing and its
    numba state is untouched.  Results of later runs do not depend on it, only
    their start-up time does.  ``progress`` receives one line before compiling
    and one after (nothing when all is cached).

    A group is built into one native module (:mod:`neardup.kernels._native`: runs
    then load its kernels without numba) where this machine can build it; else,
    or if that build failed before, its kernels are compiled into numba's cache.

    Returns ``{"groups", "kernels", "missing", "native", "seconds", "processes"}``
    (``native``: the groups built natively by this call).

    >>> compile_kernels(["dedup"], progress=print)  # doctest: +SKIP
    neardup: compiling 11 kernels for this machine on 2 cores (first run only, about 24 s)...
    neardup: kernels compiled in 15 s; later runs start at once
    """
    manifest = kernel_groups()
    wanted = list(groups)
    unknown = [g for g in wanted if g not in manifest]
    if unknown:
        raise InvalidConfig(
            "groups", unknown[0], "is not a kernel group", f"use one of {sorted(manifest)}"
        )
    if processes is not None and processes < 1:
        raise InvalidConfig("processes", processes, "must be at least 1", "use 1 or more")
    from neardup.kernels import _native

    native: list[str] = []
    entries: dict[tuple[str, str, str], Entry] = {}
    for g in wanted:
        st = _native.state(g)
        if st == "built":
            continue
        if st == "missing" and _native.can_build():
            native.append(g)
            continue
        for e in manifest[g]:
            entries.setdefault((e[0], e[1], repr(e[2])), e)
    todo = [e for e in entries.values() if _cached(e) is False]
    # Work items: ("native", (group, part)) or ("jit", entry), with a time estimate.
    # numba's ahead-of-time build takes about half the JIT times the manifest
    # records (no parallel loops to compile), plus ~5 s for numba's C runtime.
    work: list[tuple[str, Any, float]] = [
        ("native", (g, p), 5.0 + 0.5 * sum(manifest[g][i][3] for i in idx))
        for g in native
        for p, idx in enumerate(_native.parts(manifest[g]))
    ]
    work += [("jit", e, e[3]) for e in todo]
    n_kernels = sum(len(manifest[g]) for g in native) + len(todo)
    out: dict[str, Any] = {
        "groups": wanted,
        "kernels": len({(e[0], e[1], repr(e[2])) for g in wanted for e in manifest[g]}),
        "missing": n_kernels,
        "native": native,
        "seconds": 0.0,
        "processes": 0,
    }
    if not work:
        return out
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    n = max(1, min(processes or cores or 1, len(work)))
    work.sort(key=lambda w: -w[2])
    # Longest first on n workers: the wall time is about max(longest, total / n).
    total = sum(w[2] for w in work)
    guess = max(work[0][2], total / n)
    if progress is not None:
        progress(
            f"neardup: compiling {n_kernels} kernels for this machine on {n} "
            f"{'core' if n == 1 else 'cores'} (first run only, about {guess:.0f} s)..."
        )
    t0 = time.perf_counter()
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from neardup.core.leftovers import handlers_installed

    ctx = multiprocessing.get_context("spawn")
    # Under `neardup dedup` a Ctrl-C is the parent's to handle (it ends the workers):
    # a worker of the terminal's process group must not print its own traceback.
    init = _ignore_sigint if handlers_installed() else None
    failed: list[str] = []
    with ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=init) as pool:
        futures = {
            pool.submit(_build_native if kind == "native" else _compile_one, item): (kind, item)
            for kind, item, _ in work
        }
        for fut in as_completed(futures):
            kind, item = futures[fut]
            if kind == "jit":
                fut.result()
                continue
            try:
                fut.result()
            except Exception as exc:  # the JIT still runs these kernels: say so, go on
                failed.append(item[0])
                if progress is not None:
                    progress(
                        f"neardup: could not build the native kernels of {item[0]!r} "
                        f"({type(exc).__name__}: {exc}); they compile on first use instead"
                    )
    _native.forget()
    out["seconds"] = round(time.perf_counter() - t0, 2)
    out["processes"] = n
    out["native"] = [g for g in native if g not in failed]
    if progress is not None:
        progress(f"neardup: kernels compiled in {out['seconds']:.0f} s; later runs start at once")
    return out


def _build_native(item: tuple[str, int]) -> str:
    """In a worker process: build one native module (group, part)."""
    from neardup.kernels import _native

    return str(_native.build(*item))


def announce_compiles(stream: Any = None) -> None:
    """Print a line on ``stream`` (stderr) whenever a kernel compiles at run time.

    Process-wide (a numba event listener): for programs that own their process,
    such as the command line; a library call never installs it.
    """
    global _announcing
    if _announcing:
        return
    _announcing = True
    from neardup.kernels._jit import on_numba

    on_numba(lambda: _register_announcer(stream or sys.stderr))


def _register_announcer(out: Any) -> None:
    from numba.core import event

    class Announcer(event.Listener):
        depth = 0

        def on_start(self, ev: Any) -> None:
            self.depth += 1
            if self.depth == 1:
                disp = (ev.data or {}).get("dispatcher")
                name = getattr(getattr(disp, "py_func", None), "__qualname__", "a kernel")
                print(
                    f"neardup: compiling {name} for this machine (first run only)...",
                    file=out,
                    flush=True,
                )

        def on_end(self, ev: Any) -> None:
            self.depth -= 1

    register: Any = event.register
    register("numba:compile", Announcer())

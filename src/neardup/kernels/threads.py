"""How many threads the kernels' parallel loops use, set and read without loading
numba.

numba keeps one thread count per calling thread.  neardup's kernels may run from
the native module built ahead of time (:mod:`neardup.kernels._native`, no numba
in the process) or from numba's JIT, which is loaded only when a call needs it;
the count a thread asked for must hold in both cases.  This module keeps it per
thread, as numba does, and hands it to numba before each parallel JIT kernel
runs (:func:`apply_to_numba`).

Guarantees: results never depend on the count, only speed does; reading or
setting it never imports numba; the default is numba's (``NUMBA_NUM_THREADS``,
else the cores this process may use).

>>> with limited_threads(1):
...     get_threads()
1
"""

from __future__ import annotations

import functools
import itertools
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

__all__ = [
    "apply_to_numba",
    "get_threads",
    "limited_threads",
    "max_threads",
    "run_calls",
    "set_threads",
    "split_rows",
]

_local = threading.local()


def max_threads() -> int:
    """The most threads a parallel kernel may use in this process (numba's
    ``NUMBA_NUM_THREADS`` setting: the environment variable of that name, read by
    numba at its start, else the usable cores)."""
    numba = sys.modules.get("numba")
    if numba is not None and hasattr(numba, "config"):
        return int(numba.config.NUMBA_NUM_THREADS)
    setting = os.environ.get("NUMBA_NUM_THREADS", "").strip()
    if setting.isdigit() and int(setting) > 0:
        return int(setting)
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def get_threads() -> int:
    """The threads the calling thread's parallel kernels use (default
    :func:`max_threads`)."""
    n: int | None = getattr(_local, "threads", None)
    return max_threads() if n is None else n


def set_threads(threads: int) -> None:
    """Make the calling thread's parallel kernels use ``threads`` threads.

    Raises :class:`~neardup.InvalidConfig` outside ``[1, max_threads()]``.
    """
    from neardup.core._errors import InvalidConfig

    limit = max_threads()
    if not 1 <= threads <= limit:
        raise InvalidConfig(
            "threads", threads, f"must be in [1, {limit}] on this machine", f"use 1 to {limit}"
        )
    _local.threads = int(threads)
    apply_to_numba()


@contextmanager
def limited_threads(threads: int) -> Iterator[None]:
    """The calling thread's kernels use ``threads`` threads inside the block."""
    before: int | None = getattr(_local, "threads", None)
    set_threads(threads)
    try:
        yield
    finally:
        _local.threads = before
        apply_to_numba()


def apply_to_numba() -> None:
    """Give numba the calling thread's count, if numba is loaded and the thread
    set one (numba reads its own per-thread count when a parallel kernel starts)."""
    numba = sys.modules.get("numba")
    if numba is None or not hasattr(numba, "set_num_threads"):
        return
    n: int | None = getattr(_local, "threads", None)
    numba.set_num_threads(max_threads() if n is None else n)


def split_rows(n: int, run: Callable[[int, int], object], *, grain: int = 2048) -> None:
    """Call ``run(lo, hi)`` on contiguous parts of ``range(n)`` that cover it once,
    on up to :func:`get_threads` threads (a serial kernel that releases the GIL
    gets the parallelism of numba's ``prange``, in any build of the kernels).

    Parts hold at least ``grain`` rows; there are up to four per thread, taken in
    turn, so that parts of unequal cost still share out.  Below ``2 * grain`` rows,
    or on one thread, ``run(0, n)`` runs in the calling thread.  Exceptions of any
    part propagate.
    """
    threads = min(get_threads(), n // grain)
    if threads <= 1:
        run(0, n)
        return
    parts = min(4 * threads, n // grain)
    bounds = [n * i // parts for i in range(parts + 1)]
    run_calls(
        [functools.partial(run, lo, hi) for lo, hi in itertools.pairwise(bounds)],
        threads,
        name="neardup-rows",
    )


def run_calls(calls: Sequence[Callable[[], object]], threads: int, *, name: str) -> None:
    """Make every call of ``calls`` once, on up to ``threads`` threads (the calling
    thread among them), each thread taking the next call in order when it is free.

    Once a call has raised, no thread starts another (those running finish);
    then the exception of the first call that raised, in the order given,
    propagates, the others' are dropped.  So a KeyboardInterrupt in the calling
    thread stops the work as soon as the running calls end.

    >>> out = []
    >>> run_calls([lambda i=i: out.append(i) for i in range(5)], 2, name="demo")
    >>> sorted(out)
    [0, 1, 2, 3, 4]
    """
    # Plain threads rather than concurrent.futures, whose import brings logging:
    # a fixed cost of every run, for a pool that lives one call.
    errors: list[tuple[int, BaseException]] = []
    todo = iter(enumerate(calls))
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                item = None if errors else next(todo, None)
            if item is None:
                return
            i, call = item
            try:
                call()
            except BaseException as exc:  # re-raised below, in the calling thread
                with lock:
                    errors.append((i, exc))

    helpers = [
        threading.Thread(target=work, name=f"{name}_{k}", daemon=True)
        for k in range(min(threads, len(calls)) - 1)
    ]
    for t in helpers:
        t.start()
    try:
        work()
    finally:
        for t in helpers:
            t.join()
    if errors:
        raise min(errors, key=lambda e: e[0])[1]

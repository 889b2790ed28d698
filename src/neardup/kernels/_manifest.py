"""The kernel manifest: which kernels each kind of run calls from Python, with
which argument types (``manifest.json``, package data, recorded from real runs
by ``scripts/kernel_manifest.py``).  Read by the native build
(:mod:`neardup.kernels._native`) and by compiling ahead
(:mod:`neardup.kernels._warm`).

>>> sorted(kernel_groups())[:2]
['dedup', 'dedup-exact']
"""

from __future__ import annotations

import json
import pkgutil
from typing import Any

__all__ = ["MANIFEST", "Entry", "kernel_groups", "numba_type"]

Entry = tuple[str, str, list[Any], float]
MANIFEST = "manifest.json"
"""The kernel manifest's file name in the ``neardup.kernels`` package (package data)."""


def kernel_groups() -> dict[str, list[Entry]]:
    """The kernels each kind of run calls from Python: group -> entries (module below
    ``neardup``, function, argument types as :func:`numba_type` spells them, compile
    seconds measured on the machine that generated the manifest).

    Read from :data:`MANIFEST`, shipped inside the package (so it works from a
    wheel or a zip), each call afresh: the caller may change what it gets.
    """
    # pkgutil asks the package's loader, as importlib.resources does, at a
    # fraction of its import cost (every run reads the manifest).
    data = pkgutil.get_data("neardup.kernels", MANIFEST)
    if data is None:  # pragma: no cover - a loader without get_data
        raise FileNotFoundError(f"neardup.kernels/{MANIFEST}: this package's loader reads no data")
    text = data.decode("utf-8")
    return {
        str(g): [(str(m), str(f), list(s), float(t)) for m, f, s, t in es]
        for g, es in json.loads(text).items()
    }


def numba_type(spec: Any) -> Any:
    """A numba type from the manifest's spelling of it (data, never evaluated)."""
    from numba.core import types as numba_types

    types: Any = numba_types

    if isinstance(spec, str):
        t = getattr(types, {"bool": "boolean"}.get(spec, spec), None)
        if not isinstance(t, types.Type):
            raise ValueError(f"unknown scalar type {spec!r}")
        return t
    kind = spec[0]
    if kind == "array":
        return types.Array(numba_type(spec[1]), int(spec[2]), str(spec[3]), readonly=bool(spec[4]))
    if kind == "unituple":
        return types.UniTuple(numba_type(spec[1]), int(spec[2]))
    if kind == "dict":
        return types.DictType(numba_type(spec[1]), numba_type(spec[2]))
    raise ValueError(f"unknown type spelling {spec!r}")

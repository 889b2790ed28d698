"""numba's on-disk cache for neardup's kernels, kept fresh across kernel files.

numba stamps a cached kernel with the hash of **its own** source file.  A kernel
that calls a kernel of another file carries that callee's machine code inside its
own cache entry (numba inlines or links it), so after an edit of the callee's file
numba would keep loading the caller's stale code.  A kernel's dispatcher
(:func:`neardup.kernels._kernel.kernel`) gets :func:`kernel_cache_class`: its cache is
stamped with the SHA-256 of its file **and of every** ``neardup.kernels`` **module
that file imports, transitively** (found by reading the imports, so a new
dependency needs no bookkeeping).  An edit therefore recompiles the kernels of the
edited file and of the files that import it, and nothing else: the kernels are
split by concern (``_hashes``, ``_tokens``, ``_arrays``, ``_signatures``,
``_bandjoin``, ``_exact``, ``_writes``, ...) so that an edit stays local.

Where the cache lives is numba's choice as before (``NUMBA_CACHE_DIR``, else
``__pycache__`` next to the file, else numba's per-user folder).  Only neardup's
own dispatchers get this cache class; numba's defaults for other code are
untouched.  On a numba whose caching internals differ from the shape used here
(0.60-0.68 at least), kernels fall back to plain ``cache=True``.

>>> from neardup.kernels._cache import dependencies
>>> [p.rsplit("/", 1)[-1] for p in dependencies(__file__)]
['_cache.py']
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
from pathlib import Path
from typing import Any

__all__ = ["NOT_KERNEL_CODE", "dependencies", "kernel_cache_class", "source_stamp"]

_PACKAGE = "neardup.kernels"

NOT_KERNEL_CODE = frozenset(
    {"_cache", "_kernel", "_manifest", "_native", "_warm", "_jit", "threads"}
)
"""Modules that wrap, build or schedule kernels but hold no code a kernel runs:
editing them never makes compiled kernels stale."""


def _stat_key(path: str) -> tuple[str, int, int]:
    st = os.stat(path)
    return path, st.st_mtime_ns, st.st_size


@functools.cache
def _file_digest(path: str, mtime_ns: int, size: int) -> bytes:
    # mtime and size are in the key so that a file edited while the process runs is
    # hashed again (the same rule as numba's own source stamp).
    return hashlib.sha256(Path(path).read_bytes()).digest()


@functools.cache
def _direct_imports(path: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    """Files of the sibling kernel modules that ``path`` imports, at any depth of
    its code (a function-level import links code just the same)."""
    tree = ast.parse(Path(path).read_bytes(), filename=path)
    here = Path(path).parent
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 1:
                names.update([module.split(".")[0]] if module else [a.name for a in node.names])
            elif node.level == 0 and module == _PACKAGE:
                names.update(a.name for a in node.names)
            elif node.level == 0 and module.startswith(_PACKAGE + "."):
                names.add(module.split(".")[2])
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "lazy"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and str(node.args[0].value).startswith(_PACKAGE + ".")
        ):
            # lazy("neardup.kernels._x", name): compiled in just the same
            names.add(str(node.args[0].value).split(".")[2])
        elif isinstance(node, ast.Import):
            names.update(
                a.name.split(".")[2] for a in node.names if a.name.startswith(_PACKAGE + ".")
            )
    files = (here / f"{n}.py" for n in sorted(names - NOT_KERNEL_CODE))
    return tuple(str(f) for f in files if f.is_file())


def dependencies(path: str | os.PathLike[str]) -> list[str]:
    """``path`` and the files of every kernel module it imports, transitively,
    sorted; a sibling ``<name>.py`` counts for ``neardup.kernels.<name>``."""
    start = os.path.abspath(path)
    seen = {start}
    todo = [start]
    while todo:
        for dep in _direct_imports(*_stat_key(todo.pop())):
            dep = os.path.abspath(dep)
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return sorted(seen)


def source_stamp(path: str | os.PathLike[str]) -> str:
    """The freshness stamp of the kernels defined in ``path``: one SHA-256 over the
    names and contents of :func:`dependencies`.  It changes when any of those files
    changes, and only then."""
    h = hashlib.sha256()
    for f in dependencies(path):
        h.update(os.path.basename(f).encode())
        h.update(b"\0")
        h.update(_file_digest(*_stat_key(f)))
    return h.hexdigest()


class _DependencyStamp:
    """Mixin over numba's file-backed locators: the stamp covers the imported
    kernel files as well."""

    _py_file: str

    def get_source_stamp(self) -> Any:
        return source_stamp(self._py_file)


@functools.lru_cache(maxsize=1)
def kernel_cache_class() -> type | None:
    """numba's ``FunctionCache`` with dependency-aware locators, or None where
    numba's caching internals are not the shape this relies on."""
    try:
        from numba.core import caching
    except ImportError:  # pragma: no cover - numba is a core dependency
        return None
    bases = []
    for name in ("UserProvidedCacheLocator", "InTreeCacheLocator", "UserWideCacheLocator"):
        base = getattr(caching, name, None) or getattr(caching, "_" + name, None)
        if base is None:
            return None
        bases.append(base)
    impl_base = getattr(caching, "CompileResultCacheImpl", None)
    cache_base = getattr(caching, "FunctionCache", None)
    if impl_base is None or cache_base is None or not hasattr(impl_base, "_locator_classes"):
        return None
    locators = [type(f"Kernel{b.__name__.lstrip('_')}", (_DependencyStamp, b), {}) for b in bases]
    impl = type("KernelCacheImpl", (impl_base,), {"_locator_classes": locators})
    return type("KernelCache", (cache_base,), {"_impl_class": impl})

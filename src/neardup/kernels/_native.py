"""The kernels of a kind of run compiled ahead of time into one extension module,
so that a run loads them without importing numba.

Starting numba and loading its cached kernels costs a fixed 0.3-0.6 s per
process (the numbers are in ``benchmarks/README.md``), more than a run on 10,000
short documents spends on its work.  :func:`build` compiles the kernels a group
of the manifest lists (:func:`neardup.kernels._manifest.kernel_groups`), with the
exact argument types recorded there, into an extension module with numba's
ahead-of-time compiler, for this machine's CPU, with the GIL released in every
kernel (they touch no Python object).  :func:`builds_of` finds, per kernel, the
builds made for the current sources; :class:`~neardup.kernels._kernel.Kernel`
calls one when the argument types are exactly the recorded ones.

Guarantees:

* a module is used only if it was built from the same kernel sources, manifest,
  numba, Python and CPU: all are in its file name, so anything else is never
  loaded (and an edited kernel is rebuilt, or runs under the JIT meanwhile);
* a module is written to a temporary name and renamed into place, so a crash
  leaves no partial file under the real name; one that fails to load is ignored;
* a build that fails (no C compiler, a numba without the ahead-of-time
  compiler) leaves a ``.failed`` note beside it, is not retried for the same
  sources, and costs nothing else: the kernels run under numba's JIT as before;
* results never depend on which build ran (the same source; the kernels are
  deterministic; the parallel loops run serially in the native build).

Modules live where numba keeps its cache: in ``$NUMBA_CACHE_DIR/neardup`` when
that is set, else in the package's ``__pycache__`` when it can be written, else in
the per-user cache folder (``$XDG_CACHE_HOME/neardup`` or ``~/.cache/neardup``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import importlib.machinery
import importlib.util
import json
import os
import shutil
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path
from typing import Any

from neardup.kernels._cache import NOT_KERNEL_CODE
from neardup.kernels._manifest import kernel_groups, numba_type

__all__ = [
    "PARTS",
    "build",
    "builds_of",
    "can_build",
    "forget",
    "generation",
    "module_paths",
    "parts",
    "state",
    "use_native",
]

_FORMAT = 1
_lock = threading.Lock()
generation = 0
_enabled = True
serial = False
"""Set in the native build's worker process: its numba dispatchers are serial
and uncached (see :func:`neardup.kernels._kernel.Kernel.dispatcher`)."""
dispatchers_made = 0
"""numba dispatchers made in this process (counted by the kernels)."""
"""Bumped by :func:`forget`: kernels look their builds up again."""
_loaded: dict[tuple[str, str], list[tuple[tuple[Any, ...], Any]]] | None = None


def _package_dir() -> Path:
    return Path(__file__).resolve().parent.parent


def _folders() -> list[Path]:
    # Where numba keeps its cache, neardup keeps its modules: NUMBA_CACHE_DIR when
    # set, else beside the package, else the per-user folder.
    numba_dir = os.environ.get("NUMBA_CACHE_DIR")
    if numba_dir:
        return [Path(numba_dir) / "neardup"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return [_package_dir() / "__pycache__", Path(base) / "neardup"]


@functools.cache
def _cpu() -> str:
    """This machine's CPU model and features (a module is built for them)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            lines = fh.read().split("\n\n", 1)[0].splitlines()
        wanted = ("model name", "flags", "vendor_id", "cpu family", "model\t")
        return "\n".join(ln for ln in lines if ln.startswith(wanted))
    except OSError:
        import platform

        return f"{platform.machine()} {platform.processor()}"


@functools.cache
def _numba_version() -> str:
    spec = importlib.util.find_spec("numba")
    if spec is None or spec.origin is None:
        return "absent"
    try:
        return (Path(spec.origin).parent / "_version.py").read_text(encoding="utf-8")
    except OSError:
        return spec.origin


def _suffix() -> str:
    return importlib.machinery.EXTENSION_SUFFIXES[0]


@functools.cache
def _kernel_sources() -> str:
    """One digest of every file of kernel code (each run computes it: reading the
    files is cheaper than following their imports, and an edit of any of them
    rebuilding every group is a price paid only while developing)."""
    h = hashlib.sha256()
    folder = Path(__file__).resolve().parent
    for f in sorted(folder.glob("*.py")):
        if f.stem not in NOT_KERNEL_CODE:
            h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _identity(group: str, entries: list[Any]) -> str:
    parts: list[Any] = [_FORMAT, group, entries, sys.version, _suffix(), _cpu(), _numba_version()]
    parts.append(_kernel_sources())
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:20]


PARTS = 2
"""A group is built as this many modules, in as many worker processes: the
largest kernels (by the manifest's compile times) are spread over them first.
Fixed, so that the modules' names do not depend on the machine's cores."""


def parts(entries: list[Any]) -> list[list[int]]:
    """The manifest indexes of ``entries`` in each part (non-empty parts only)."""
    bins: list[list[int]] = [[] for _ in range(PARTS)]
    load = [0.0] * PARTS
    for i in sorted(range(len(entries)), key=lambda i: (-float(entries[i][3]), i)):
        j = load.index(min(load))
        bins[j].append(i)
        load[j] += float(entries[i][3])
    return [sorted(b) for b in bins if b]


def _module_name(group: str, entries: list[Any], part: int) -> str:
    return f"_neardup_{group.replace('-', '_')}_{part}_{_identity(group, entries)}"


def module_paths(group: str) -> list[Path]:
    """The built modules of ``group`` (all its parts, or none)."""
    entries = kernel_groups()[group]
    found: list[Path] = []
    for part in range(len(parts(entries))):
        name = _module_name(group, entries, part) + _suffix()
        path = next((f / name for f in _folders() if (f / name).is_file()), None)
        if path is None:
            return []
        found.append(path)
    return found


def state(group: str) -> str:
    """``"built"``, ``"failed"`` (a build failed for these sources: not retried)
    or ``"missing"``."""
    entries = kernel_groups()[group]
    names = [_module_name(group, entries, p) for p in range(len(parts(entries)))]
    for folder in _folders():
        if any((folder / (n + ".failed")).is_file() for n in names):
            return "failed"
    return "built" if module_paths(group) else "missing"


def can_build() -> bool:
    """Whether this machine has what a build needs: numba's ahead-of-time
    compiler and the C compiler Python was built with."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()
    if not cc or shutil.which(cc[0]) is None:
        return False
    spec = importlib.util.find_spec("numba")  # finds, does not import
    return bool(spec and spec.origin and (Path(spec.origin).parent / "pycc").is_dir())


def _load(path: Path) -> Any:
    name = path.name[: -len(_suffix())]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _registry() -> dict[tuple[str, str], list[tuple[tuple[Any, ...], Any]]]:
    global _loaded
    with _lock:
        if _loaded is not None:
            return _loaded
        found: dict[tuple[str, str], list[tuple[tuple[Any, ...], Any]]] = {}
        try:
            groups = kernel_groups() if _enabled else {}
        except (OSError, ValueError):  # no manifest (a partial copy of the package)
            groups = {}
        for group, entries in groups.items():
            try:
                modules = [_load(path) for path in module_paths(group)]
            except (ImportError, OSError):
                continue  # a foreign or damaged file: the JIT runs these kernels
            for i, (mod, func, spec, _) in enumerate(entries):
                fn = next((getattr(m, f"k{i}") for m in modules if hasattr(m, f"k{i}")), None)
                if fn is None:
                    continue
                builds = found.setdefault((f"neardup.{mod}", func), [])
                key = _key(spec)
                if all(k != key for k, _ in builds):
                    builds.append((key, fn))
        _loaded = found
        return found


def _key(spec: list[Any]) -> tuple[Any, ...]:
    return tuple(tuple(s) if isinstance(s, list) else s for s in spec)


def builds_of(module: str, func: str) -> tuple[tuple[tuple[Any, ...], Any], ...]:
    """(argument key, function) of the native builds of ``module.func`` that this
    process can use (loading the built modules on the first call)."""
    return tuple(_registry().get((module, func), ()))


def use_native(enabled: bool) -> None:
    """Whether this process runs kernels from native modules (default True).  For
    tests and benchmarks of the JIT path: results are the same either way."""
    global _enabled
    _enabled = bool(enabled)
    forget()


def forget() -> None:
    """Look for built modules again on the next kernel call (after a build)."""
    global _loaded, generation
    with _lock:
        _loaded = None
        generation += 1


def build(group: str, part: int) -> Path:
    """Compile the kernels of part ``part`` of ``group`` (see :func:`parts`) into
    their module, in this process, which must not have run a kernel under the JIT
    yet (the caller runs it in a fresh worker).  Returns the module's path; raises
    on failure after leaving the ``.failed`` note."""
    from neardup.core.persist import fsync_dir

    entries = kernel_groups()[group]
    name = _module_name(group, entries, part)
    chosen = parts(entries)[part]
    errors: list[str] = []
    for folder in _folders():
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=folder, prefix=".neardup-build-") as tmp:
                made = _compile(name, [(i, entries[i]) for i in chosen], Path(tmp))
                final = folder / made.name
                os.replace(made, final)
                fsync_dir(str(folder))
                return final
        except PermissionError as exc:
            errors.append(f"{folder}: {exc}")
            continue  # a read-only installation: the per-user folder
        except Exception as exc:
            note = folder / (name + ".failed")
            with contextlib.suppress(OSError):
                note.write_text(f"{type(exc).__name__}: {exc}\n", encoding="utf-8")
            raise
    raise PermissionError("no writable folder for the native kernels: " + "; ".join(errors))


def _compile(name: str, entries: list[tuple[int, Any]], out: Path) -> Path:
    from llvmlite import binding

    global serial
    if dispatchers_made and not serial:
        raise RuntimeError("the native kernels are built in a fresh process")
    serial = True
    pycc: Any = importlib.import_module("numba.pycc")
    pycc_compiler: Any = importlib.import_module("numba.pycc.compiler")
    base: Any = pycc_compiler.Flags

    class ReleasingFlags(base):  # type: ignore[misc]
        """The ahead-of-time compiler's flags with the GIL released in every
        exported kernel, as ``nogil=True`` does under the JIT."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.release_gil = True

    pycc_compiler.Flags = ReleasingFlags
    # Kernels called by the exported ones are compiled by numba's JIT first and
    # linked into the module as IR, which the module's own -O3 optimization
    # then covers: their separate optimization and machine code are thrown away,
    # so they are made at -O0 (a third of the build time; the same module code).
    from numba.core.registry import cpu_target

    config: Any = importlib.import_module("numba.core.config")
    opt = config.OPT
    config.OPT = type(opt)(0)
    try:
        jit_codegen: Any = cpu_target.target_context.codegen()
    finally:
        config.OPT = opt
    make_passes = jit_codegen._pass_builder
    jit_codegen._pass_builder = lambda **kw: make_passes(**{**kw, "opt": 0})
    try:
        cc = pycc.CC(name)
        # numba's C runtime: -O1 without debug info builds in 40 % less time.
        cc._extra_cflags = {sys.platform: ["-O1", "-g0"]}
        cc.output_dir = str(out)
        cc.target_cpu = binding.get_host_cpu_name()
        cc.verbose = False
        for i, (mod, func, spec, _) in entries:
            k = getattr(importlib.import_module(f"neardup.{mod}"), func)
            cc.export(f"k{i}", tuple(numba_type(s) for s in spec))(k.dispatcher.py_func)
        cc.compile()
    finally:
        pycc_compiler.Flags = base
    made = out / (name + _suffix())
    if not made.is_file():
        raise FileNotFoundError(f"numba's compiler wrote no {made.name}")
    with open(made, "rb") as fh:
        os.fsync(fh.fileno())
    return made

"""The kernels' on-disk cache: stamped with each kernel file and the kernel files it
imports, so that an edit of a callee's file never leaves a caller's stale code."""

from __future__ import annotations

import importlib
import inspect
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from neardup.kernels import _cache
from neardup.kernels._cache import dependencies, kernel_cache_class, source_stamp
from neardup.kernels._kernel import kernel

KERNELS = Path(_cache.__file__).parent
MODULES = (
    "_hashes",
    "_tokens",
    "_arrays",
    "_signatures",
    "_bandjoin",
    "_exact",
    "_writes",
    "_vkernels",
    "_okernels",
    "_unionfind",
    "_jsonscan",
    "_jitprobe",
)


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    # A later edit within the same clock tick must still read as a change.
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_dependencies_follow_every_import_form_transitively(tmp_path: Path) -> None:
    _write(tmp_path / "a.py", "from neardup.kernels.b import x\nfrom neardup.kernels import c\n")
    _write(tmp_path / "b.py", "def f():\n    from . import d\n")
    _write(tmp_path / "c.py", "import neardup.kernels.e\nimport numpy\n")
    _write(tmp_path / "d.py", "")
    _write(tmp_path / "e.py", "from neardup.kernels.a import y  # a cycle ends\n")
    _write(tmp_path / "unrelated.py", "")
    names = [Path(p).name for p in dependencies(tmp_path / "a.py")]
    assert names == ["a.py", "b.py", "c.py", "d.py", "e.py"]
    assert [Path(p).name for p in dependencies(tmp_path / "d.py")] == ["d.py"]


def test_the_stamp_changes_with_a_dependency_and_only_then(tmp_path: Path) -> None:
    _write(tmp_path / "top.py", "from neardup.kernels.dep import f\n")
    _write(tmp_path / "dep.py", "def f(): return 1\n")
    _write(tmp_path / "other.py", "def g(): return 1\n")
    before = source_stamp(tmp_path / "top.py")
    _write(tmp_path / "other.py", "def g(): return 2\n")
    assert source_stamp(tmp_path / "top.py") == before
    _write(tmp_path / "dep.py", "def f(): return 2\n")
    after = source_stamp(tmp_path / "top.py")
    assert after != before
    _write(tmp_path / "dep.py", "def f(): return 1\n")
    assert source_stamp(tmp_path / "top.py") == before  # contents, not times


def test_every_kernel_uses_the_dependency_aware_cache() -> None:
    cls = kernel_cache_class()
    assert cls is not None, "numba's caching internals changed: kernels fall back"
    count = 0
    for name in MODULES:
        module = importlib.import_module(f"neardup.kernels.{name}")
        for obj in vars(module).values():
            if hasattr(obj, "py_func") and hasattr(obj, "_cache"):
                if inspect.getmodule(obj.py_func) is not module:
                    continue  # imported from a sibling
                assert isinstance(obj._cache, cls), f"{name}.{obj.py_func.__name__}"
                count += 1
    assert count > 80


def test_kernel_refuses_a_cache_option() -> None:
    with pytest.raises(TypeError, match="always caches"):
        kernel(cache=False)


# Run in a fresh process against a private copy of a two-file kernel package: the
# caller's cached machine code must follow an edit of the callee's file.
_PROGRAM = """
from neardup.kernels import _top
print(_top.g(), _top.g.stats.cache_hits.get(_top.g.signatures[0], 0))
"""


@pytest.mark.slow
def test_an_edit_of_a_callee_file_recompiles_its_callers(tmp_path: Path) -> None:
    pkg = tmp_path / "neardup" / "kernels"
    pkg.mkdir(parents=True)
    (tmp_path / "neardup" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    for infra in ("_cache.py", "_kernel.py", "_native.py", "_manifest.py", "threads.py"):
        shutil.copy(KERNELS / infra, pkg / infra)
    (tmp_path / "neardup" / "core").mkdir()
    (tmp_path / "neardup" / "core" / "__init__.py").write_text("")
    core = tmp_path / "neardup" / "core"
    shutil.copy(KERNELS.parent / "core" / "_errors.py", core / "_errors.py")
    _write(
        pkg / "_dep.py",
        "from neardup.kernels._kernel import kernel\n\n"
        "@kernel(inline='always')\ndef f():\n    return 1\n",
    )
    _write(
        pkg / "_top.py",
        "from neardup.kernels._kernel import kernel\nfrom neardup.kernels._dep import f\n\n"
        "@kernel\ndef g():\n    return f() + 10\n",
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    env.pop("NUMBA_CACHE_DIR", None)

    def run() -> list[str]:
        out = subprocess.run(
            [sys.executable, "-c", _PROGRAM],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        )
        return out.stdout.split()

    assert run() == ["11", "0"]  # compiled
    assert run() == ["11", "1"]  # loaded from the cache
    _write(
        pkg / "_dep.py",
        "from neardup.kernels._kernel import kernel\n\n"
        "@kernel(inline='always')\ndef f():\n    return 2\n",
    )
    assert run() == ["12", "0"]  # plain numba caching would load the stale 11
    assert run() == ["12", "1"]

"""neardup.core.lazy: names load on first use, unknown names fail like attributes."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

from neardup.core.lazy import lazy_exports


def test_a_name_is_loaded_once_and_cached_in_the_package() -> None:
    pkg = types.ModuleType("lazy_pkg_for_test")
    sys.modules[pkg.__name__] = pkg
    try:
        getattr_, dir_ = lazy_exports(pkg.__name__, {"dumps": "json"})
        import json

        assert getattr_("dumps") is json.dumps
        assert vars(pkg)["dumps"] is json.dumps  # cached: the next lookup is direct
        assert "dumps" in dir_()
        with pytest.raises(AttributeError, match="'lazy_pkg_for_test' has no attribute 'nope'"):
            getattr_("nope")
    finally:
        del sys.modules[pkg.__name__]


def test_the_facades_load_nothing_heavy_until_a_name_is_used() -> None:
    code = (
        "import sys, neardup, neardup.service, neardup.vectors; "
        "heavy = ('numba', 'starlette', 'neardup.service.tenant'); "
        "heavy = [m for m in heavy if m in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"

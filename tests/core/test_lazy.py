"""neardup.core.lazy: a facade's names are imported on first use, then cached, and
``import neardup`` loads neither numba nor the service."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

from neardup.core.lazy import lazy_exports


def test_names_are_read_on_first_use_then_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = types.ModuleType("fake_facade")
    monkeypatch.setitem(sys.modules, "fake_facade", pkg)
    getattr_, dir_ = lazy_exports("fake_facade", {"Config": "neardup.core.config"})
    assert "Config" not in vars(pkg)
    from neardup.core.config import Config

    assert getattr_("Config") is Config
    assert vars(pkg)["Config"] is Config  # cached in the package
    assert "Config" in dir_() and dir_() == sorted(dir_())
    with pytest.raises(AttributeError, match="'fake_facade' has no attribute 'Nope'"):
        getattr_("Nope")


def test_import_neardup_loads_no_heavy_module() -> None:
    code = (
        "import sys, neardup\n"
        "heavy = [m for m in ('numba', 'neardup.service', 'ray') if m in sys.modules]\n"
        "print(heavy)\n"
        "neardup.Config\n"
        "print('neardup.core.config' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    assert out == ["[]", "True"]

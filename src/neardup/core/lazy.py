"""Lazy re-exports for a package's public names.

``import neardup`` must not load numba, the service or Ray: a facade package lists
each public name with the module that defines it, and the module is imported on
first use of the name.

>>> getattr_, dir_ = lazy_exports("neardup", {"Config": "neardup.core.config"})
>>> getattr_("Config").__name__
'Config'
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, table: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: each name in ``table`` is read from
    the module it maps to on first access, then cached in the package."""

    def getattr_(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def dir_() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    return getattr_, dir_

"""The package's shape, checked from its source (docs/architecture.md).

import-linter checks the layers (the contracts in pyproject.toml); this module
runs it and checks what it does not: no module imports another module's
underscore names, no import cycle between modules, and module size.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "neardup"

# Modules still over the size ceiling, each with the issue that splits it.
OVERSIZE_ALLOWED: set[str] = set()
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    out = {}
    for p in SRC.rglob("*.py"):
        parts = list(p.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = p
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for every neardup import."""
    is_pkg = path.name == "__init__.py"
    pkg = name if is_pkg else name.rsplit(".", 1)[0]
    found: list[tuple[str, str | None, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                mod = ".".join(base) + (f".{node.module}" if node.module else "")
            else:
                mod = node.module or ""
            if mod == "neardup" or mod.startswith("neardup."):
                for alias in node.names:
                    sub = f"{mod}.{alias.name}"
                    if sub in MODULES:
                        found.append((sub, None, node.lineno))
                    else:
                        found.append((mod, alias.name, node.lineno))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("neardup"):
                    found.append((alias.name, None, node.lineno))
    return found


def test_import_linter_contracts_hold() -> None:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    out = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_no_module_imports_another_modules_underscore_names() -> None:
    bad = [
        f"{name}:{line} imports {mod}.{what}"
        for name, path in MODULES.items()
        for mod, what, line in _imports(name, path)
        if what is not None and what.startswith("_") and mod != name
    ]
    assert not bad, "\n".join(bad)


def test_no_import_cycles_between_modules() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in MODULES.items():
        for mod, _what, _line in _imports(name, path):
            # a package's __init__ is not an edge to its own modules
            if mod in MODULES and mod != name and name != "neardup":
                graph[name].add(mod)
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(MODULES):
        if node not in state:
            visit(node, [])
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_modules_stay_small() -> None:
    sizes = {name: len(p.read_text(encoding="utf-8").splitlines()) for name, p in MODULES.items()}
    over = {n for n, s in sizes.items() if s > MAX_LINES}
    assert over <= OVERSIZE_ALLOWED, f"over {MAX_LINES} lines: {sorted(over - OVERSIZE_ALLOWED)}"
    # The list only shrinks: a module split below the ceiling leaves it.
    assert not (OVERSIZE_ALLOWED - over), f"now small, drop: {sorted(OVERSIZE_ALLOWED - over)}"


def test_every_module_belongs_to_a_layer() -> None:
    layers = {
        "core",
        "kernels",
        "io",
        "text",
        "graph",
        "sketch",
        "verify",
        "vectors",
        "batch",
        "lineage",
        "engines",
        "service",
        "cli",
    }
    top = {"neardup", "neardup.__main__", "neardup._launch", "neardup.testing"}
    stray = [n for n in MODULES if n not in top and n.split(".")[1] not in layers]
    assert not stray

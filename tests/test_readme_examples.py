"""Every Python code block of README.md runs and prints what its comments say.

A block is run statement by statement in one namespace.  An expression statement
followed by a comment is checked: the comment, up to an em dash (what follows it
is prose), is the ``repr`` of the value, with ``...`` standing for any text (the
README elides long reprs that way).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
BLOCKS = BLOCK.findall(README.read_text(encoding="utf-8"))


def expected_repr(comment: str) -> re.Pattern[str]:
    """The pattern a value's repr must match for a README comment."""
    shown = comment.split(" — ")[0].strip()
    return re.compile(".*?".join(re.escape(part) for part in shown.split("...")), re.S)


def checks(source: str) -> list[tuple[str, str, str]]:
    """Run ``source``; (expression, comment, repr) of each commented expression."""
    lines = source.splitlines()
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    out = []
    for stmt in ast.parse(source).body:
        end = lines[(stmt.end_lineno or stmt.lineno) - 1]
        _, hash_, comment = end.partition("  # ")
        if isinstance(stmt, ast.Expr):
            value = eval(compile(ast.Expression(stmt.value), "README.md", "eval"), namespace)
            if hash_:
                out.append((ast.unparse(stmt.value), comment, repr(value)))
        else:
            exec(compile(ast.Module([stmt], []), "README.md", "exec"), namespace)
    return out


def test_the_readme_has_python_examples() -> None:
    assert len(BLOCKS) >= 2


def test_the_checker_sees_a_wrong_comment() -> None:
    found = checks("x = [1, 2]\nlen(x)  # 3\nx  # [1, ...]\n")
    assert [(e, c) for e, c, _ in found] == [("len(x)", "3"), ("x", "[1, ...]")]
    assert not expected_repr(found[0][1]).fullmatch(found[0][2])
    assert expected_repr(found[1][1]).fullmatch(found[1][2])


def test_expected_repr_reads_elisions_and_prose() -> None:
    pat = expected_repr("[Match(key='A', ..., duplicate=True)] — prose")
    assert pat.fullmatch("[Match(key='A', jaccard=0.8, duplicate=True)]")
    assert not pat.fullmatch("[Match(key='B', jaccard=0.8, duplicate=True)]")


@pytest.mark.timeout(900)  # a cold kernel cache compiles on first use
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_block_prints_what_it_says(index: int) -> None:
    found = checks(BLOCKS[index])
    assert found, "a README example with no checked value"
    wrong = [
        (expr, comment, got)
        for expr, comment, got in found
        if not expected_repr(comment).fullmatch(got)
    ]
    assert wrong == []

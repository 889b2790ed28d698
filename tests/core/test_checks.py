"""Plain values of the public helpers checked into InvalidConfig (core/checks.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup import InvalidConfig
from neardup.core.checks import (
    check_float,
    check_int,
    check_layout_targets,
    check_pairs,
    check_positions,
    check_same,
    check_text,
    check_texts,
    check_type,
    hash_array,
)


@pytest.mark.parametrize("bad", [None, "1", True, float("nan"), float("inf"), [1.0]])
def test_check_float_refuses_what_is_not_a_finite_number(bad: object) -> None:
    with pytest.raises(InvalidConfig, match="finite number"):
        check_float("x", bad, "pass a number")


def test_check_float_and_int_take_numpy_scalars() -> None:
    assert check_float("x", np.float32(0.5), "") == 0.5
    assert check_int("n", np.int64(7), 1, 10, "") == 7
    with pytest.raises(InvalidConfig, match=r"integer in \[1, 10\]"):
        check_int("n", 11, 1, 10, "use fewer")
    with pytest.raises(InvalidConfig):
        check_int("n", True, 0, 10, "")


@given(st.lists(st.integers(0, 2**64 - 1), max_size=20))
def test_hash_array_keeps_every_64_bit_value(values: list[int]) -> None:
    assert hash_array("a", values).tolist() == values
    assert hash_array("a", iter(values)).tolist() == values


def test_check_positions_refuses_out_of_range_and_non_integers() -> None:
    assert check_positions("a", np.array([0, 4], dtype=np.uint32), 5).dtype == np.int64
    for bad in ([5], [-1], [0.5], [[0]], "0", None):
        with pytest.raises(InvalidConfig, match=r"positions in \[0, 5\)"):
            check_positions("a", bad, 5)


@pytest.mark.parametrize(
    ("recall", "far_budget", "n", "named"),
    [
        (0.0, 10, 5, "recall"),
        (1.0, 10, 5, "recall"),
        ("0.9", 10, 5, "recall"),
        (0.9, 0, 5, "far_budget"),
        (0.9, float("inf"), 5, "far_budget"),
        (0.9, 10, 0, "n"),
        (0.9, 10, 2.5, "n"),
    ],
)
def test_check_layout_targets_names_the_target_out_of_range(
    recall: object, far_budget: object, n: object, named: str
) -> None:
    with pytest.raises(InvalidConfig, match=rf"invalid {named}=.*fix: ") as e:
        check_layout_targets(recall, far_budget, n)
    assert e.value.field == named


def test_check_same_and_check_pairs_say_both_values() -> None:
    check_same("x", (2, 3), (2, 3), "differ", "")
    with pytest.raises(InvalidConfig, match=r"invalid x=\(2, 3\): shapes differ; fix: one scheme"):
        check_same("x", 2, 3, "shapes differ", "one scheme")
    aa, bb = check_pairs([0, 1], np.array([2, 0]), 3)
    assert (aa.tolist(), bb.tolist(), aa.dtype, bb.dtype) == ([0, 1], [2, 0], np.int64, np.int64)
    with pytest.raises(InvalidConfig, match=r"invalid a/b=\(2, 1\): lengths differ"):
        check_pairs([0, 1], [2], 3)
    with pytest.raises(InvalidConfig, match=r"positions in \[0, 3\)"):
        check_pairs([0], [3], 3)


def test_check_texts_takes_collections_of_str_and_names_the_first_other() -> None:
    arr = np.array(["a b", "c d"])  # numpy's str_ is a str
    assert check_texts("texts", arr) is arr
    assert list(check_texts("texts", ("x", "y"))) == ["x", "y"]
    assert check_text("text", "x") == "x" and check_type("n", 3, int, "") == 3
    for bad in ("one text", b"bytes", (t for t in ["a"]), 3, None):
        with pytest.raises(InvalidConfig, match="expected a collection of str"):
            check_texts("texts", bad)
    with pytest.raises(InvalidConfig, match=r"texts\[2\]=None: has type NoneType") as e:
        check_texts("texts", ["a", "b", None, 1])
    assert e.value.field == "texts[2]"
    with pytest.raises(InvalidConfig, match=r"decode it first"):
        check_text("text", bytearray(b"x"))


def test_check_texts_trusts_only_a_class_that_says_it_checked() -> None:
    from neardup import InvalidType
    from neardup.core.checks import check_texts as check

    class Checked(list):  # type: ignore[type-arg]
        holds_checked_str = True

    class Claims(list):  # type: ignore[type-arg]
        holds_checked_str = "yes"  # not True: checked like any collection

    odd = Checked([1])
    assert check("texts", odd) is odd
    with pytest.raises(InvalidType, match=r"texts\[0\]"):
        check("texts", Claims([1]))

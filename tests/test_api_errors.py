"""Every error of the public helpers is a NeardupError (the README's promise): the
functions that take plain values are swept with bad inputs of every kind, and
whatever they raise must come from the one exception tree."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import neardup
import neardup.vectors as nv
from neardup import Config, hash_documents

BAD: list[Any] = [
    None,
    "x",
    "9f3",
    "zz",
    b"\x00",
    -1,
    0,
    1.5,
    float("nan"),
    float("inf"),
    [],
    ["a"],
    [-1],
    [[1, 2], [3]],
    [1.5, 2.0],
    {"a": -1.0},
    {"a": "x"},
    object(),
    np.array([[1, 2], [3, 4]]),
    np.array([-3, 4]),
    2**70,
]

SETS = hash_documents(["a b c d e f", "a b c d e f g"], Config())

ONE_ARG: dict[str, Callable[[Any], Any]] = {
    "normalize_vector": nv.normalize_vector,
    "hyperplane_collision": nv.hyperplane_collision,
    "pick_width": nv.pick_width,
    "weighted_bags": lambda x: nv.weighted_bags([x]),
    "verify_pairs sets": lambda x: neardup.verify_pairs(x, [0], [1]),
    "candidate_probability": lambda x: neardup.candidate_probability(x, 4, 2),
    "candidate_probability bands": lambda x: neardup.candidate_probability(0.5, x, 2),
    "default_layout": lambda x: neardup.default_layout(x, 128),
    "default_layout num_perm": lambda x: neardup.default_layout(0.8, x),
    "optimal_params near": lambda x: neardup.optimal_params(
        near=x, far=0.3, recall=0.95, far_budget=10, n=100, max_perm=16
    ),
    "optimal_params n": lambda x: neardup.optimal_params(
        near=0.8, far=0.3, recall=0.95, far_budget=10, n=x, max_perm=16
    ),
}

TWO_ARGS: dict[str, Callable[[Any, Any], Any]] = {
    "jaccard": neardup.jaccard,
    "verify_pairs": lambda a, b: neardup.verify_pairs(SETS, a, b),
    "hamming_distance": nv.hamming_distance,
    "angular_distance": nv.angular_distance,
    "cosine_from_hamming": nv.cosine_from_hamming,
    "pstable_collision": nv.pstable_collision,
    "weighted_jaccard": nv.weighted_jaccard,
    "vector_layout": lambda m, t: nv.vector_layout(m, t, far=0.5, n=1000),
    "vector_scores": lambda v, a: nv.vector_scores(v, a, [0]),
}


def _only_neardup_errors(call: Callable[..., Any], args: tuple[Any, ...], what: str) -> None:
    message = ""
    try:
        call(*args)
    except neardup.NeardupError as exc:
        message = str(exc)
    except Exception as exc:  # the point: nothing else may escape
        pytest.fail(f"{what} raised {type(exc).__name__}: {exc}")
    if message:  # what was wrong, the value and the fix
        assert "fix" in message or "use" in message, (what, message)


@pytest.mark.parametrize("name", sorted(ONE_ARG))
def test_one_argument_helpers_raise_only_neardup_errors(name: str) -> None:
    for x in BAD:
        _only_neardup_errors(ONE_ARG[name], (x,), f"{name}({x!r})")


@pytest.mark.parametrize("name", sorted(TWO_ARGS))
def test_two_argument_helpers_raise_only_neardup_errors(name: str) -> None:
    good = {
        "jaccard": [1, 2],
        "verify_pairs": [0],
        "hamming_distance": "9f3a",
        "angular_distance": [1.0, 0.0],
        "cosine_from_hamming": 3,
        "pstable_collision": 1.0,
        "weighted_jaccard": {"a": 1.0},
        "vector_layout": "cosine",
        "vector_scores": np.ones((2, 2)),
    }[name]
    for x, y in itertools.chain(
        itertools.product(BAD, BAD), ((good, y) for y in BAD), ((x, good) for x in BAD)
    ):
        _only_neardup_errors(TWO_ARGS[name], (x, y), f"{name}({x!r}, {y!r})")


def test_the_raw_errors_of_the_issue_are_neardup_errors_now() -> None:
    with pytest.raises(neardup.InvalidConfig, match="64-bit hashes"):
        neardup.jaccard(["a", "b"], ["b"])
    with pytest.raises(neardup.InvalidConfig, match="hex"):
        nv.hamming_distance("9f3a", "9f3g")
    with pytest.raises(neardup.InvalidConfig, match="lengths in bytes differ"):
        nv.hamming_distance("9f3a", "9f3a00")

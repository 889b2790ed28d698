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


# Issue 25: the text entry points took anything and failed deep inside with Python's
# own TypeError/AttributeError (``'int' object has no attribute 'isascii'``).
NOT_TEXT: list[Any] = [123, None, b"abc", 1.5, ["a b c"], object()]
NOT_TEXTS: list[Any] = [123, None, "a b c d e f", b"abc", 1.5, object()]  # one str is no batch
NOT_OBJECT: list[Any] = [123, "x", 1.5, ["a"], object()]  # where a Config, scheme... belongs

_CFG = Config()
_MH = neardup.MinHasher(_CFG)
_SIG = _MH.signature("a b c d e f g")
_SIGS = _MH.signatures(["a b c d e f g", "a b c d e f h"])

WRONG_TYPES: dict[str, tuple[Callable[[Any], Any], list[Any]]] = {
    "Normalizer(text)": (lambda x: neardup.get_normalizer("nfkc-casefold")(x), NOT_TEXT),
    "Normalizer(text) raw": (lambda x: neardup.get_normalizer("raw")(x), NOT_TEXT),
    "Normalizer.with_offsets": (
        lambda x: neardup.get_normalizer("nfkc-casefold").with_offsets(x),
        NOT_TEXT,
    ),
    "get_normalizer": (neardup.get_normalizer, NOT_OBJECT),
    "shingles text": (lambda x: neardup.shingles(x, _CFG.shingle), NOT_TEXT),
    "shingles spec": (lambda x: neardup.shingles("a b c d e f", x), NOT_OBJECT),
    "hash_documents texts": (lambda x: hash_documents(x, _CFG), NOT_TEXTS),
    "hash_documents text": (lambda x: hash_documents(["a b c", x], _CFG), NOT_TEXT),
    "hash_documents config": (lambda x: hash_documents(["a b c"], x), NOT_OBJECT),
    "hash_documents key": (lambda x: hash_documents(["a b c"], _CFG, key=x), NOT_OBJECT),
    "find_duplicates texts": (neardup.find_duplicates, NOT_TEXTS),
    "find_duplicates text": (lambda x: neardup.find_duplicates(["a b c", x]), NOT_TEXT),
    "find_duplicates config": (
        lambda x: neardup.find_duplicates(["a b c"], config=x),
        NOT_OBJECT,
    ),
    "MinHasher config": (neardup.MinHasher, NOT_OBJECT),
    "MinHasher.signature": (_MH.signature, [x for x in NOT_TEXT if not isinstance(x, bytes)]),
    "MinHasher.signatures": (_MH.signatures, NOT_TEXTS),
    "MinHasher.signatures text": (lambda x: _MH.signatures([x]), NOT_TEXT),
    "MinHasher.from_hashes": (_MH.from_hashes, [None, 1.5, ["a b"], object()]),
    "MinHasher.from_sets": (_MH.from_sets, NOT_OBJECT),
    "MinHasher.require_compatible": (_MH.require_compatible, NOT_OBJECT),
    "Signature.similarity": (_SIG.similarity, NOT_OBJECT),
    "Signature.standard_error": (_SIG.standard_error, NOT_OBJECT),
    "Signature.band": (_SIG.band, [None, "0", 1.5, [0], object()]),
    "Signature.band_hash": (_SIG.band_hash, [None, "0", 1.5, [0], object()]),
    "Signature.from_hex scheme": (
        lambda x: neardup.Signature.from_hex(_SIG.hex(), x),
        NOT_OBJECT,
    ),
    "SignatureSet.concat": (_SIGS.concat, NOT_OBJECT),
    "jaccard": (lambda x: neardup.jaccard(x, [1, 2]), [123, None, "ab", 1.5, ["a"], object()]),
    "LSHIndex scheme": (lambda x: neardup.LSHIndex(x, threshold=0.8), NOT_OBJECT),
    "LSHIndex threshold": (lambda x: neardup.LSHIndex(_MH.scheme, threshold=x), NOT_OBJECT),
    "LSHIndex.query": (lambda x: neardup.LSHIndex(_MH.scheme, threshold=0.8).query(x), NOT_OBJECT),
    "Deduplicator config": (neardup.Deduplicator, NOT_OBJECT),
    "Deduplicator.add": (lambda x: neardup.Deduplicator().add("k", x), NOT_TEXT),
    "Deduplicator.query": (lambda x: neardup.Deduplicator().query(x), NOT_TEXT),
    "unique_records": (lambda x: list(neardup.unique_records(x)), [123, None, "a", 1.5]),
    "unique_records record": (lambda x: list(neardup.unique_records([x])), NOT_TEXT),
    "dedup_records": (neardup.dedup_records, [123, None, "a", 1.5]),
    "dedup_records record": (lambda x: neardup.dedup_records([x]), NOT_TEXT),
    "dedup_records text field": (  # None: the field is missing, which the message says
        lambda x: neardup.dedup_records([{"text": x}]),
        [x for x in NOT_TEXT if x is not None],
    ),
}


@pytest.mark.parametrize("name", sorted(WRONG_TYPES))
def test_wrong_types_raise_neardup_errors_naming_the_type_and_the_fix(name: str) -> None:
    call, wrong = WRONG_TYPES[name]
    for x in wrong:
        with pytest.raises(neardup.NeardupError) as info:
            call(x)
        message = str(info.value)
        if "has type" in message and not isinstance(info.value, neardup.InputError):
            # An argument's type check (a record's field is bad data: InputError).
            assert isinstance(info.value, neardup.InvalidType), (name, x, message)
            assert isinstance(info.value, TypeError), (name, x)
        assert "fix" in message, (name, x, message)
        assert type(x).__name__ in message or repr(x) in message, (name, x, message)


def test_the_type_errors_of_issue_25_say_what_to_pass() -> None:
    with pytest.raises(TypeError, match=r"text=123: has type int, expected str"):
        neardup.get_normalizer("nfkc-casefold")(123)
    with pytest.raises(neardup.InvalidConfig, match=r"text=123: has type int, expected str"):
        neardup.get_normalizer("nfkc-casefold")(123)
    with pytest.raises(neardup.InvalidConfig, match=r"texts\[1\]=b'x'.*decode it first"):
        hash_documents(["a", b"x"], Config())
    with pytest.raises(neardup.InvalidConfig, match="expected a collection of str"):
        neardup.find_duplicates("one text")
    with pytest.raises(neardup.InvalidConfig, match="has type int, expected Signature"):
        _SIG.similarity(3)

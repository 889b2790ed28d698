"""The exception tree: every error pickles as itself (a Ray worker's error reaches
the caller with its class, message and attributes)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from neardup.core import _errors as E

SAMPLES: list[Any] = [
    E.InvalidConfig("threshold", 2.0, "must be in (0, 1]", "use e.g. 0.8"),
    E.NoFeasibleParameters("far", 0.9, "too close", "lower it"),
    E.EmptyDocument(3, "is blank"),
    E.DocumentTooLarge("doc-1", 10, 5),
    E.MemoryLimitExceeded(10, 5, "the run"),
    E.SchemeMismatch("abc", "def", differ="seed"),
    E.CorruptFile("/x/index", "checksum mismatch"),
    E.NeardupIOError("/x/out", OSError(28, "No space left on device")),
    E.InputError("/x/in.jsonl", 7, "malformed JSON", "fix the line"),
    E.ZeroVector(4),
    E.ServiceError("tenant is read-only", "promote the shadow first"),
    E.LimitExceeded("too many shingles", "shorten the text"),
    E.NotFound("no item 'a'", "upsert it first"),
    E.CommandFailed("apply failed", "retry", seq=12),
    E.RetryLater("queue full", "retry", retry_after=2.5),
    E.Busy("busy", "retry", retry_after=0.5),
]


@pytest.mark.parametrize("err", SAMPLES, ids=lambda e: type(e).__name__)
def test_every_error_pickles_as_itself(err: E.NeardupError) -> None:
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err)
    assert str(back) == str(err)
    assert back.args == err.args
    assert {k: repr(v) for k, v in vars(back).items()} == {k: repr(v) for k, v in vars(err).items()}


def test_every_class_of_the_tree_is_sampled() -> None:
    def tree(cls: type[Exception]) -> set[type]:
        out: set[type] = {cls}
        for c in cls.__subclasses__():
            out |= tree(c)
        return out

    public = {getattr(E, n) for n in E.__all__ if isinstance(getattr(E, n), type)}
    sampled = {type(e) for e in SAMPLES}
    concrete = {c for c in tree(E.NeardupError) & public if "__init__" in vars(c)}
    assert concrete <= sampled, concrete - sampled

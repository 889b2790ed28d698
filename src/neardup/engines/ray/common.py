"""What every stage of the Ray engine shares: the job shipped to each task, the
shuffle key, and column access on Arrow tables.

Every shuffle adds a ``_part`` column (:func:`part_key` of the row's key) and
groups on it, so rows of one key meet in one reduce.  Documents are named by
their *position* in the whole input (shard offset + row), as in the local engine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from neardup.core.config import Config
from neardup.sketch.screen import mix64
from neardup.text.hashing import HashKey

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "BASE_COLUMNS",
    "I64",
    "U64",
    "Job",
    "column",
    "eligible",
    "feature_path",
    "mix",
    "one_thread",
    "part_key",
    "positions",
    "schema",
]

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]

BASE_COLUMNS = ("shard", "row", "raw", "big")
"""Feature columns every stage reads: a document's position and its eligibility."""


@dataclass(frozen=True, slots=True)
class Job:
    """What every task needs to know (shipped to the workers by Ray)."""

    config: Config
    key: HashKey | None
    text_field: str
    id_field: str | None
    skip_bad: bool
    keep: str
    work: str
    parts: int
    offsets: tuple[int, ...] = ()
    shards: tuple[str, ...] = ()
    formats: tuple[str, ...] = ()
    cap: int = 64


def mix(x: npt.NDArray[Any]) -> U64:
    """fmix64 of each value (partitioning must not follow the key's low bits)."""
    return mix64(x.astype(np.uint64))


def part_key(x: npt.NDArray[Any]) -> I64:
    """The shuffle key column: a non-negative 63-bit hash (taken modulo the
    partition count when the shuffle's size is known, see ``Run.shuffle``)."""
    return (mix(x) >> np.uint64(1)).astype(np.int64)


def column(table: pa.Table, name: str) -> npt.NDArray[Any]:
    """Column ``name`` of ``table`` as a numpy array."""
    return np.asarray(table.column(name).to_numpy())


def one_thread() -> None:
    """Inside a Ray task: one numba thread (Ray schedules one task per CPU)."""
    from neardup.kernels.threads import set_threads

    set_threads(1)


def positions(job: Job, t: pa.Table) -> I64:
    """Input positions of the rows of a feature table (shard offset + row)."""
    off = np.asarray(job.offsets, dtype=np.int64)
    out: I64 = off[column(t, "shard")] + column(t, "row")
    return out


def eligible(t: pa.Table) -> npt.NDArray[np.bool_]:
    """Documents that take part in matching: not empty and not too large."""
    out: npt.NDArray[np.bool_] = (column(t, "raw") > 0) & ~column(t, "big")
    return out


def feature_path(work: str, shard: int) -> str:
    """The feature file of input shard ``shard`` in the work folder."""
    return os.path.join(work, "features", f"shard-{shard:05d}.parquet")


def schema(spec: str, **types: pa.DataType) -> pa.Schema:
    """The Arrow schema of rows a stage shuffles: ``spec`` lists ``name:type``
    fields in order, ``type`` a pyarrow type without arguments (``int64``,
    ``string``) or a key of ``types``."""
    import pyarrow as pa

    fields = [f.split(":") for f in spec.split()]
    return pa.schema([(n, types[t] if t in types else getattr(pa, t)()) for n, t in fields])

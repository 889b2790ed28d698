"""What a batch deduplication run answers: :class:`DedupRun`.

:func:`neardup.run_dedup`, :func:`neardup.batch.vjob.run_vector_dedup` and
:func:`neardup.engines.ray.run_dedup_ray` return one; the counts a caller reads are
named fields, and ``stats`` is the whole mapping that the run wrote to
``stats.json`` (every key is explained in ``docs/outputs.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["DedupRun"]


@dataclass(frozen=True, slots=True)
class DedupRun:
    """A finished run (frozen).

    ``output`` is the folder written, None for a dry run (nothing written).
    ``documents_out``, ``near_duplicates`` and ``clusters`` are None only when the
    run did not count them (a dry run of the Ray engine counts no kept set).
    """

    output: str | None
    documents_in: int
    documents_out: int | None
    exact_duplicates: int
    near_duplicates: int | None
    clusters: int | None
    bad_records: int
    stats: Mapping[str, Any]

    @classmethod
    def from_stats(cls, stats: Mapping[str, Any], output: str | None) -> DedupRun:
        """The run whose ``stats.json`` mapping is ``stats``."""

        def count(name: str) -> int | None:
            value = stats.get(name)
            return None if value is None else int(value)

        return cls(
            output=output,
            documents_in=int(stats["documents_in"]),
            documents_out=count("documents_out"),
            exact_duplicates=int(stats["exact_duplicates"]),
            near_duplicates=count("near_duplicates"),
            clusters=count("clusters"),
            bad_records=int(stats.get("bad_records", 0)),
            stats=stats,
        )

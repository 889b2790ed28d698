"""What the text pipeline returns: a batch run's :class:`DedupResult`, and the
:class:`Match` an online :class:`~neardup.batch.online.Deduplicator` answers with."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.batch.index import DedupIndex
from neardup.core._errors import InvalidConfig
from neardup.graph.cluster import Cluster, Edge
from neardup.sketch.minhash import SignatureSet
from neardup.text.hashing import SchemeDescriptor, ShingleSets

__all__ = ["DedupResult", "Match"]


@dataclass(frozen=True, eq=False, slots=True)
class DedupResult:
    """What :func:`find_duplicates` found.

    Positions count the documents of a ``prior`` index first (``n_prior`` of them),
    then the new texts.  ``duplicate_of[i]`` is the representative of document i's
    cluster, or -1 when i is kept (unique or a representative).  ``kept`` lists kept
    positions ascending; ``empty``, ``too_large`` and ``truncated`` list the
    documents that were not (or not fully) compared; ``stats`` has counts,
    parameters and timings.
    """

    clusters: list[Cluster]
    duplicate_of: npt.NDArray[np.int64]
    empty: npt.NDArray[np.int64]
    too_large: npt.NDArray[np.int64]
    truncated: npt.NDArray[np.int64]
    stats: dict[str, Any]
    scheme: SchemeDescriptor
    config_fingerprint: str
    sets: ShingleSets | None = field(default=None, repr=False)
    signatures: SignatureSet | None = field(default=None, repr=False)
    n_prior: int = 0
    config: dict[str, Any] | None = field(default=None, repr=False)

    def to_index(self, ids: Sequence[Any]) -> DedupIndex:
        """Everything needed to dedup later inputs against this run (and its prior)."""
        if self.sets is None:  # pragma: no cover - find_duplicates always sets it
            raise InvalidConfig("sets", None, "result has no shingle sets", "rerun")
        if len(ids) != len(self.sets):
            raise InvalidConfig(
                "ids",
                len(ids),
                f"need one id per document ({len(self.sets)})",
                "pass the prior ids followed by this run's ids",
            )
        return DedupIndex(self.sets, list(ids), self.edges, self.config_fingerprint, self.config)

    @property
    def kept(self) -> npt.NDArray[np.int64]:
        """Positions of kept new documents (unique or representative), ascending."""
        return (np.flatnonzero(self.duplicate_of[self.n_prior :] < 0) + self.n_prior).astype(
            np.int64
        )

    @property
    def duplicates(self) -> npt.NDArray[np.int64]:
        """Positions of new documents removed as duplicates, ascending."""
        return (np.flatnonzero(self.duplicate_of[self.n_prior :] >= 0) + self.n_prior).astype(
            np.int64
        )

    @property
    def edges(self) -> list[Edge]:
        return [e for c in self.clusters for e in c.edges]

    def pairs(self, *, expand_identical: bool = True) -> set[tuple[int, int]]:
        """Verified duplicate pairs (a < b) found by this run.

        Exact-content copies are collapsed before the near-duplicate search, so a
        copy's near pairs are implied, not listed, by the edges.  With
        ``expand_identical`` every verified edge is expanded over the identical
        groups at both ends (their shingle-hash sets are equal, so the expanded
        pairs have the same exact score), and pairs inside each group are added.
        """
        base = {(e.a, e.b) for e in self.edges}
        if not expand_identical:
            return base
        group: dict[int, list[int]] = {}
        leader: dict[int, int] = {}
        for e in self.edges:
            if e.method == "identical":
                root = leader.get(e.a, e.a)
                leader[e.b] = root
                group.setdefault(root, [root]).append(e.b)
        out: set[tuple[int, int]] = set()
        for members in group.values():
            out.update(
                (min(x, y), max(x, y)) for i, x in enumerate(members) for y in members[i + 1 :]
            )
        for e in self.edges:
            if e.method == "identical":
                continue
            for x in group.get(leader.get(e.a, e.a), [e.a]):
                for y in group.get(leader.get(e.b, e.b), [e.b]):
                    out.add((min(x, y), max(x, y)))
        return out

    def near_pairs(self) -> set[tuple[int, int]]:
        """Pairs joined by a verified near-duplicate edge (not exact-content edges)."""
        return {(e.a, e.b) for e in self.edges if e.method != "identical"}


@dataclass(frozen=True, slots=True)
class Match:
    """A stored item that matched a query, with its verified score."""

    key: Hashable
    jaccard: float | None
    estimate: float
    method: str
    duplicate: bool

"""What the text pipeline returns: a batch run's :class:`DedupResult`, and the
:class:`Match` an online :class:`~neardup.batch.online.Deduplicator` answers with
(the one match type of text and vectors, :class:`neardup.graph.cluster.Match`);
and the parts of ``stats`` that the local and Ray engines report alike
(:func:`search_stats`, :func:`size_histogram`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.batch.index import DedupIndex
from neardup.core._errors import InvalidConfig
from neardup.core.config import Config
from neardup.graph.cluster import Cluster, Deduplicated, Edge, Match
from neardup.sketch.lsh import candidate_probability
from neardup.sketch.minhash import SignatureSet
from neardup.text.hashing import SchemeDescriptor, ShingleSets

__all__ = ["DedupResult", "Match", "search_stats", "size_histogram"]


@dataclass(frozen=True, eq=False, slots=True)
class DedupResult(Deduplicated):
    """What :func:`find_duplicates` found.

    Positions count the documents of a ``prior`` index first (``n_prior`` of them),
    then the new texts.  ``duplicate_of[i]`` is the representative of document i's
    cluster, or -1 when i is kept (unique or a representative).  ``kept`` lists kept
    positions ascending; ``empty``, ``too_large`` and ``truncated`` list the
    documents that were not (or not fully) compared; ``stats`` has counts,
    parameters and timings.  ``scripts``, when the run detected them, is the
    script id of each new document (not of prior ones;
    :data:`neardup.text.scripts.SCRIPTS` names them).
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
    scripts: npt.NDArray[np.uint8] | None = field(default=None, repr=False)

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

    def _own(self) -> tuple[int, npt.NDArray[np.bool_]]:
        # Only the new documents are this run's: ``kept`` and ``duplicates`` list them.
        return self.n_prior, self.duplicate_of[self.n_prior :] >= 0

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


def search_stats(
    cfg: Config, scheme: SchemeDescriptor, method: str, counters: Mapping[str, int]
) -> dict[str, Any]:
    """The ``stats`` of a text run that describe its search, in this order: method,
    verification and layout, the predicted recall at the threshold (1.0 for
    ``method="exact"``), ``counters`` (candidate and verified pairs, overflow,
    skipped), then the scheme and the fingerprints.  Local and Ray runs report
    them through this one function."""
    bands, rows = cfg.layout
    return {
        "method": method,
        "verify": cfg.verify,
        "threshold": cfg.threshold,
        "bands": bands,
        "rows": rows,
        "num_perm": cfg.num_perm,
        "predicted_recall_at_threshold": candidate_probability(cfg.threshold, bands, rows)
        if method == "lsh"
        else 1.0,
        **counters,
        "scheme": scheme.to_dict(),
        "scheme_fingerprint": scheme.fingerprint,
        "config_fingerprint": cfg.fingerprint,
    }


def size_histogram(counts: Mapping[int, int] | Iterable[int]) -> dict[str, int]:
    """``cluster_size_histogram``: clusters per size, sizes as strings, ascending.
    ``counts`` is the sizes, or a count per size (summed over pieces, say)."""
    if not isinstance(counts, Mapping):
        seen: dict[int, int] = {}
        for size in counts:
            seen[size] = seen.get(size, 0) + 1
        counts = seen
    return {str(k): v for k, v in sorted(counts.items())}

"""Stage 7 — clusters: connected components of verified edges.

A cluster is a connected component of the graph whose edges are verified
near-duplicate pairs (and exact-content duplicates).  Components are transitive
by construction: if A~B and B~C, A and C share a cluster even when J(A, C) is
below the threshold — which is why every cluster carries the edges that joined it.

Representative rules (``keep=``), all deterministic:

* ``first``: the member that came first in the input (lowest position);
* ``longest`` / ``shortest``: the member with the most / fewest bytes of normalized
  text, ties broken by position.

Example:
    >>> cs = build_clusters(4, [Edge(a=0, b=2, jaccard=0.9, estimate=0.88, band=3)])
    >>> [(c.representative, c.members) for c in cs]
    [(0, (0, 2))]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from neardup.core._errors import InvalidConfig

__all__ = [
    "Cluster",
    "Component",
    "Edge",
    "Joining",
    "KeepRule",
    "build_clusters",
    "check_keep",
    "choose_representative",
    "group_clusters",
]

KeepRule = Literal["first", "longest", "shortest"]
KEEP_RULES: tuple[str, ...] = ("first", "longest", "shortest")
I64 = npt.NDArray[np.int64]


class Joining(Protocol):
    """What a cluster needs of an edge (:class:`Edge`, ``VectorEdge``): its two ends
    (positions) and its JSON form."""

    @property
    def a(self) -> int: ...

    @property
    def b(self) -> int: ...

    def to_dict(self) -> dict[str, object]: ...


E = TypeVar("E", bound=Joining)
C = TypeVar("C")


@dataclass(frozen=True, slots=True, kw_only=True)
class Edge:
    """A verified pair (``a < b`` by position).

    ``jaccard`` is the exact score (None when verification was by estimate only,
    which ``method`` then says); ``estimate`` the signature agreement; ``band``
    the first LSH band in which the pair collided (None for exact-content
    duplicates found by hash); ``method`` is ``exact``, ``estimate`` or ``identical``.
    """

    a: int
    b: int
    jaccard: float | None
    estimate: float | None
    band: int | None
    method: str = "exact"
    intersection: int | None = None
    union: int | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "a": self.a,
            "b": self.b,
            "jaccard": self.jaccard,
            "estimate": self.estimate,
            "band": self.band,
            "method": self.method,
            "intersection": self.intersection,
            "union": self.union,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Component(Generic[E]):
    """A connected component of verified edges: ``members`` (positions, ascending),
    the ``representative`` kept, and the edges that joined it (of text or vectors)."""

    id: int
    representative: int
    members: tuple[int, ...]
    edges: tuple[E, ...]

    def __len__(self) -> int:
        return len(self.members)

    def to_dict(self) -> dict[str, object]:
        return {
            "cluster": self.id,
            "representative": self.representative,
            "members": list(self.members),
            "edges": [e.to_dict() for e in self.edges],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Cluster(Component[Edge]):
    """A family of near duplicates: members (positions, ascending) and its edges."""


def check_keep(rule: str) -> None:
    """Refuse a representative rule that is not one of :data:`KEEP_RULES`."""
    if rule not in KEEP_RULES:
        raise InvalidConfig("keep", rule, "unknown representative rule", f"use one of {KEEP_RULES}")


def choose_representative(members: Sequence[int], rule: str, lengths: I64 | None) -> int:
    if rule == "first" or lengths is None:
        return min(members)
    if rule == "longest":
        return min(members, key=lambda m: (-int(lengths[m]), m))
    if rule == "shortest":
        return min(members, key=lambda m: (int(lengths[m]), m))
    raise InvalidConfig("keep", rule, "unknown representative rule", f"use one of {KEEP_RULES}")


def build_clusters(
    n: int,
    edges: Iterable[Edge],
    *,
    keep: str = "first",
    lengths: I64 | None = None,
) -> list[Cluster]:
    """Connected components (size >= 2) of ``edges`` over ``n`` items.

    Clusters are numbered by their smallest member; members are ascending; each
    cluster lists the edges inside it in the order given.
    """
    check_keep(keep)
    edge_list = list(edges)
    if not edge_list:
        return []
    from neardup.kernels import _unionfind as UF  # numba loads only when clusters are built

    ea, eb = _ends(edge_list)
    # Union-find compiled, then grouping by sorting: a Python union-find over
    # dictionaries costs a Python object per edge.
    roots = UF.component_roots(n, ea, eb)
    return group_clusters(roots, edge_list, Cluster, keep=keep, lengths=lengths, ab=(ea, eb))


def _ends(edges: Sequence[Joining]) -> tuple[I64, I64]:
    m = len(edges)
    ea = np.fromiter((e.a for e in edges), dtype=np.int64, count=m)
    eb = np.fromiter((e.b for e in edges), dtype=np.int64, count=m)
    return ea, eb


def group_clusters(
    roots: I64,
    edges: Sequence[E],
    make: Callable[..., C],
    *,
    keep: str = "first",
    lengths: I64 | None = None,
    ab: tuple[I64, I64] | None = None,
) -> list[C]:
    """The clusters of ``edges`` given the component root of every item (the
    smallest member of its component, as the union-find of
    :mod:`neardup.kernels._unionfind` leaves it), each made by
    ``make(id=, representative=, members=, edges=)`` (:class:`Cluster`, or the
    vectors' ``VectorCluster``).  ``roots`` must join exactly the ends of ``edges``.

    Numbered by smallest member, members ascending, each cluster's edges in the
    order given.  ``ab``: the edges' ``a`` and ``b`` as arrays, if already made.
    """
    if not edges:
        return []
    ea, eb = ab if ab is not None else _ends(edges)
    touched = np.unique(np.concatenate([ea, eb]))  # ascending
    member_roots = roots[touched]
    by_member = np.argsort(member_roots, kind="stable")  # members stay ascending
    member_list = touched[by_member].tolist()
    starts = np.flatnonzero(np.r_[True, np.diff(member_roots[by_member]) != 0])
    ends = np.r_[starts[1:], len(member_list)]
    edge_roots = roots[ea]
    by_edge = np.argsort(edge_roots, kind="stable")  # edges keep their given order
    edge_order = by_edge.tolist()
    cluster_roots = member_roots[by_member][starts]
    edge_starts = np.searchsorted(edge_roots[by_edge], cluster_roots, side="left").tolist()
    edge_ends = np.searchsorted(edge_roots[by_edge], cluster_roots, side="right").tolist()
    out: list[C] = []
    # Roots are the smallest members, so clusters come in order of their smallest
    # member, as they are numbered.
    for cid, (s, e, es, ee) in enumerate(
        zip(starts.tolist(), ends.tolist(), edge_starts, edge_ends, strict=True)
    ):
        members = tuple(member_list[s:e])
        out.append(
            make(
                id=cid,
                representative=choose_representative(members, keep, lengths),
                members=members,
                edges=tuple(edges[i] for i in edge_order[es:ee]),
            )
        )
    return out

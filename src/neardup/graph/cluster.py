"""Stage 7 — clusters: connected components of verified edges.

A cluster is a connected component of the graph whose edges are verified
near-duplicate pairs (and exact-content duplicates).  Components are transitive
by construction: if A~B and B~C, A and C share a cluster even when J(A, C) is
below the threshold — which is why every cluster carries the edges that joined it.
Text and vectors share one :class:`Edge`, :class:`Cluster` and :class:`Match`:
the score is the exact value of the edge's ``metric`` (``jaccard`` for text).

Representative rules (``keep=``), all deterministic:

* ``first``: the member that came first in the input (lowest position);
* ``longest`` / ``shortest``: the member with the most / fewest bytes of normalized
  text, ties broken by position.

Example:
    >>> cs = build_clusters(4, [Edge(a=0, b=2, score=0.9, estimate=0.88, band=3)])
    >>> [(c.representative, c.members) for c in cs]
    [(0, (0, 2))]
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Literal

import numpy as np
import numpy.typing as npt

from neardup.core._errors import InvalidConfig

__all__ = [
    "Cluster",
    "Deduplicated",
    "Edge",
    "KeepRule",
    "Match",
    "build_clusters",
    "check_keep",
    "choose_representative",
    "group_clusters",
    "join_edges",
]

KeepRule = Literal["first", "longest", "shortest"]
KEEP_RULES: tuple[str, ...] = ("first", "longest", "shortest")
I64 = npt.NDArray[np.int64]


def _edge_maker() -> Callable[..., Edge]:
    """A constructor of :class:`Edge` taking all nine fields positionally, in
    declaration order, for values this module has already made (nothing is
    checked, no default is filled in).

    The ``__init__`` of a frozen dataclass assigns each field through
    ``object.__setattr__``; writing the slots through their descriptors is more
    than twice as fast, which counts at tens of thousands of edges per run.  The
    instances are the same (equality, hashing, repr).
    """
    new = object.__new__
    (put_a, put_b, put_score, put_estimate, put_band, put_method, put_metric, put_inter,
     put_union) = (getattr(Edge, f.name).__set__ for f in fields(Edge))

    def make(
        a: int,
        b: int,
        score: float | None,
        estimate: float | None,
        band: int | None,
        method: str,
        metric: str,
        intersection: int | None,
        union: int | None,
    ) -> Edge:
        e = new(Edge)
        put_a(e, a)
        put_b(e, b)
        put_score(e, score)
        put_estimate(e, estimate)
        put_band(e, band)
        put_method(e, method)
        put_metric(e, metric)
        put_inter(e, intersection)
        put_union(e, union)
        return e

    return make


def _cluster_maker() -> Callable[[int, int, tuple[int, ...], tuple[Edge, ...]], Cluster]:
    """:func:`_edge_maker` for :class:`Cluster` (id, representative, members, edges)."""
    new = object.__new__
    put_id, put_rep, put_members, put_edges = (
        getattr(Cluster, f.name).__set__ for f in fields(Cluster)
    )

    def make(cid: int, rep: int, members: tuple[int, ...], edges: tuple[Edge, ...]) -> Cluster:
        c = new(Cluster)
        put_id(c, cid)
        put_rep(c, rep)
        put_members(c, members)
        put_edges(c, edges)
        return c

    return make


@dataclass(frozen=True, slots=True, kw_only=True)
class Edge:
    """A verified pair (``a < b`` by position) of texts or of vectors.

    ``score`` is the exact value of ``metric``: ``jaccard`` for text (None when
    verification was by estimate only, which ``method`` then says), else the
    vector metric (``cosine``, ``l2``, ``l1``, ``weighted_jaccard``).  ``estimate``
    is the signatures' view of the score; ``band`` the first LSH band in which the
    pair collided (None for exact-content duplicates found by hash); ``method`` is
    ``exact``, ``estimate`` or ``identical``.  ``intersection`` and ``union`` are
    the shingle counts behind an exact Jaccard (None otherwise, and for vectors).
    """

    a: int
    b: int
    score: float | None
    estimate: float | None
    band: int | None
    method: str = "exact"
    metric: str = "jaccard"
    intersection: int | None = None
    union: int | None = None

    @property
    def jaccard(self) -> float | None:
        """The exact Jaccard of a text edge (None for a vector edge)."""
        return self.score if self.metric == "jaccard" else None

    @classmethod
    def identical(cls, a: int, b: int) -> Edge:
        """The edge of two documents of identical content (found by hash, confirmed)."""
        return cls(a=a, b=b, score=1.0, estimate=1.0, band=None, method="identical")

    @staticmethod
    def identical_many(a: Iterable[int], b: Iterable[int]) -> list[Edge]:
        """``[Edge.identical(x, y) for x, y in zip(a, b)]``, made faster.

        >>> Edge.identical_many([0, 1], [2, 3]) == [Edge.identical(0, 2), Edge.identical(1, 3)]
        True
        """
        make = _make_edge
        return [
            make(x, y, 1.0, 1.0, None, "identical", "jaccard", None, None)
            for x, y in zip(a, b, strict=True)
        ]

    def to_dict(self) -> dict[str, object]:
        """JSON form: the score under its metric's name; a text edge adds its
        shingle counts."""
        d: dict[str, object] = {
            "a": self.a,
            "b": self.b,
            self.metric: self.score,
            "estimate": self.estimate,
            "band": self.band,
            "method": self.method,
        }
        if self.metric == "jaccard":
            d["intersection"] = self.intersection
            d["union"] = self.union
        return d


def join_edges(
    a: I64, b: I64, band: I64, inter: I64, union: I64, matches: I64, num_perm: int
) -> list[Edge]:
    """The text edges of band-join rows, in their order: ``inter`` and ``union``
    are the exact shingle counts (-1 when verified by estimate only), ``matches``
    the signature rows that agree out of ``num_perm``."""
    out: list[Edge] = []
    make = _make_edge
    for ea, eb, eband, ei, eu, em in zip(
        a.tolist(), b.tolist(), band.tolist(), inter.tolist(), union.tolist(), matches.tolist(),
        strict=True,
    ):
        if ei >= 0:
            out.append(make(ea, eb, ei / eu, em / num_perm, eband, "exact", "jaccard", ei, eu))
        else:
            out.append(make(ea, eb, None, em / num_perm, eband, "estimate", "jaccard", None, None))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Cluster:
    """A family of near duplicates (texts or vectors): a connected component of
    verified edges, its ``members`` (positions, ascending), the ``representative``
    kept, and the edges that joined it."""

    id: int
    representative: int
    members: tuple[int, ...]
    edges: tuple[Edge, ...]

    def __len__(self) -> int:
        return len(self.members)

    def to_dict(self) -> dict[str, object]:
        return {
            "cluster": self.id,
            "representative": self.representative,
            "members": list(self.members),
            "edges": [e.to_dict() for e in self.edges],
        }


_make_edge = _edge_maker()
_make_cluster = _cluster_maker()


@dataclass(frozen=True, slots=True)
class Match:
    """A stored item that matched a query (online text or vector index).

    ``score`` is the exact value of ``metric`` (Jaccard for text — None when
    verification was by estimate only — or the vector metric); ``estimate`` the
    signatures' view; ``duplicate`` whether the match passes the threshold.
    """

    key: Hashable
    score: float | None
    estimate: float
    method: str = "exact"
    duplicate: bool = True
    metric: str = "jaccard"

    @property
    def jaccard(self) -> float | None:
        """The exact Jaccard of a text match (None for a vector match)."""
        return self.score if self.metric == "jaccard" else None


class Deduplicated:
    """What a batch result of text or vectors shares: which of its items were kept.

    A subclass says which positions are its own (``_own``: the first one and a
    mask over them of the removed duplicates); positions are in its numbering.
    """

    __slots__ = ()

    def _own(self) -> tuple[int, npt.NDArray[np.bool_]]:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def kept(self) -> I64:
        """Positions of kept items (unique or representative), ascending."""
        first, removed = self._own()
        return (np.flatnonzero(~removed) + first).astype(np.int64)

    @property
    def duplicates(self) -> I64:
        """Positions of items removed as duplicates, ascending."""
        first, removed = self._own()
        return (np.flatnonzero(removed) + first).astype(np.int64)


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
    return group_clusters(roots, edge_list, keep=keep, lengths=lengths, ab=(ea, eb))


def _ends(edges: Sequence[Edge]) -> tuple[I64, I64]:
    m = len(edges)
    ea = np.fromiter((e.a for e in edges), dtype=np.int64, count=m)
    eb = np.fromiter((e.b for e in edges), dtype=np.int64, count=m)
    return ea, eb


def group_clusters(
    roots: I64,
    edges: Sequence[Edge],
    *,
    keep: str = "first",
    lengths: I64 | None = None,
    ab: tuple[I64, I64] | None = None,
) -> list[Cluster]:
    """The clusters of ``edges`` given the component root of every item (the
    smallest member of its component, as the union-find of
    :mod:`neardup.kernels._unionfind` leaves it).  ``roots`` must join exactly
    the ends of ``edges``.

    Numbered by smallest member, members ascending, each cluster's edges in the
    order given.  ``ab``: the edges' ``a`` and ``b`` as arrays, if already made.
    """
    if not edges:
        return []
    ea, eb = ab if ab is not None else _ends(edges)
    both = np.sort(np.concatenate([ea, eb]))
    # A sort and a neighbour test: np.unique would load numpy.ma for this alone.
    touched = both[np.r_[True, both[1:] != both[:-1]]]  # ascending
    member_roots = roots[touched]
    by_member = np.argsort(member_roots, kind="stable")  # members stay ascending
    member_list = touched[by_member].tolist()
    starts = np.flatnonzero(np.r_[True, np.diff(member_roots[by_member]) != 0])
    ends = np.r_[starts[1:], len(member_list)]
    edge_roots = roots[ea]
    by_edge = np.argsort(edge_roots, kind="stable")  # edges keep their given order
    ordered_edges = [edges[i] for i in by_edge.tolist()]
    cluster_roots = member_roots[by_member][starts]
    edge_starts = np.searchsorted(edge_roots[by_edge], cluster_roots, side="left").tolist()
    edge_ends = np.searchsorted(edge_roots[by_edge], cluster_roots, side="right").tolist()
    out: list[Cluster] = []
    # Roots are the smallest members, so clusters come in order of their smallest
    # member, as they are numbered.
    by_first = keep == "first" or lengths is None  # members ascending: the first
    make = _make_cluster
    for cid, (s, e, es, ee) in enumerate(
        zip(starts.tolist(), ends.tolist(), edge_starts, edge_ends, strict=True)
    ):
        members = tuple(member_list[s:e])
        rep = members[0] if by_first else choose_representative(members, keep, lengths)
        out.append(make(cid, rep, members, tuple(ordered_edges[es:ee])))
    return out

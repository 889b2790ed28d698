"""The one union-find of neardup: disjoint sets over ``0..n-1`` in an int64 array.

Every connected-components computation in neardup goes through this module: the
band joins of the text and vector paths (:mod:`neardup.kernels._bandjoin`,
:mod:`neardup.kernels._vkernels`) skip pairs already connected and join verified ones,
:func:`neardup.graph.cluster.build_clusters` groups edges into clusters,
:mod:`neardup.graph.components` labels components and picks spanning forests for the Ray
engine, and :class:`UnionFind` serves Python callers (``LSHIndex.find_clusters``,
families, the vector clusters).

The state is a ``parent`` array (``np.arange(n)`` at the start; ``parent[x] == x``
for a root).  :func:`find` halves paths as it walks them.

**Root rule: the root of every set is its smallest element.**  :func:`union` links
the larger of the two roots under the smaller one (no union by size or rank), so
after any sequence of unions the root of ``x`` is the minimum of ``x``'s component.
Hence every observable result — :func:`find`, the return value of :func:`union`
(whether two sets were merged), :func:`roots`, :func:`component_roots`, the edges
:func:`kruskal` keeps — depends only on the partition built so far and, for
:func:`kruskal`, on the order of the edges, never on the order or direction of
earlier unions.  Cluster numbering, representatives (``keep="first"``) and the
edges of ``clusters.jsonl`` rely on this rule.

The kernels are compiled with numba and validate nothing: ids must lie in
``0..parent.size-1``.  They are called from other kernels as well as from
Python; the cache of a kernel that calls them is stamped with this file too
(:mod:`neardup.kernels._cache`), so an edit here recompiles those callers.

Example:
    >>> uf = UnionFind(6)
    >>> uf.union(5, 3), uf.union(3, 4), uf.union(1, 0), uf.union(4, 5)
    (True, True, True, False)
    >>> uf.roots().tolist()
    [0, 0, 2, 3, 3, 3]
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from neardup.kernels._kernel import kernel

__all__ = [
    "UnionFind",
    "component_roots",
    "find",
    "flatten",
    "kruskal",
    "roots",
    "union",
    "union_edges",
]

I64 = npt.NDArray[np.int64]


@kernel
def find(parent, x):  # type: ignore[no-untyped-def]
    """Root of ``x`` (the smallest element of its set), halving the path walked."""
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@kernel
def union(parent, a, b):  # type: ignore[no-untyped-def]
    """Join the sets of ``a`` and ``b``; False when they were already one set.

    The smaller root becomes the root of the union (see the module docstring)."""
    ra = find(parent, a)
    rb = find(parent, b)
    if ra == rb:
        return False
    if ra < rb:
        parent[rb] = ra
    else:
        parent[ra] = rb
    return True


@kernel
def union_edges(parent, a, b):  # type: ignore[no-untyped-def]
    """:func:`union` of ``a[i]`` with ``b[i]`` for every ``i``."""
    for i in range(a.shape[0]):
        union(parent, a[i], b[i])


@kernel
def kruskal(parent, a, b, order, kept):  # type: ignore[no-untyped-def]
    """Visit edges ``(a[i], b[i])`` for ``i`` in ``order``: ``kept[i]`` is True iff the
    edge joined two sets (its ends were not yet connected).  With an empty
    ``parent`` start, the kept edges are the spanning forest Kruskal picks."""
    for t in range(order.shape[0]):
        i = order[t]
        kept[i] = union(parent, a[i], b[i])


@kernel
def flatten(parent):  # type: ignore[no-untyped-def]
    """Point every element straight at its root, in place: ``parent`` becomes the
    root of every element."""
    for x in range(parent.shape[0]):
        parent[x] = find(parent, x)


@kernel
def component_roots(n, a, b):  # type: ignore[no-untyped-def]
    """Root of each of ``n`` items after joining ``a[i]`` with ``b[i]`` for every
    ``i``: the smallest index of its connected component."""
    parent = np.arange(n, dtype=np.int64)
    union_edges(parent, a, b)
    flatten(parent)
    return parent


def roots(parent: I64) -> I64:
    """Root of every element of the sets ``parent`` holds (a new array)."""
    out = np.array(parent, dtype=np.int64, copy=True)
    flatten(out)
    return out


class UnionFind:
    """Disjoint sets over ``0..n-1`` for Python callers: a ``parent`` array and the
    kernels above (path halving; the smallest element is the root)."""

    __slots__ = ("parent",)

    def __init__(self, n: int) -> None:
        self.parent: I64 = np.arange(n, dtype=np.int64)

    def _check(self, x: int) -> None:
        # The kernels do not check bounds: an id out of range would write anywhere.
        if not 0 <= x < self.parent.shape[0]:
            raise IndexError(f"element {x} is not in 0..{self.parent.shape[0] - 1}")

    def find(self, x: int) -> int:
        self._check(x)
        return int(find(self.parent, x))

    def union(self, a: int, b: int) -> bool:
        self._check(a)
        self._check(b)
        return bool(union(self.parent, a, b))

    def roots(self) -> I64:
        """Root of every element (a new array)."""
        return roots(self.parent)

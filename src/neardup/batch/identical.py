"""Exact-content duplicates: documents whose normalized text is the same, grouped
by content hash and confirmed byte for byte (:func:`exact_groups`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from neardup.graph.cluster import Edge
from neardup.text.hashing import ShingleSets

__all__ = ["exact_groups"]


def exact_groups(
    text_of: Callable[[int], bytes] | None,
    n_prior: int,
    sets: ShingleSets,
    eligible: npt.NDArray[np.bool_],
    raw_of: Callable[[int], str | bytes] | None = None,
) -> tuple[list[Edge], npt.NDArray[np.bool_]]:
    """Exact-content duplicate edges and the mask of group leaders.

    Equal content hashes are confirmed byte for byte when both texts are at hand
    (``text_of(i - n_prior)`` for the documents from position ``n_prior`` on), else
    (a document from a saved index) by equality of the shingle-hash sets.  Texts are
    normalized again on demand, for group members only; when ``raw_of`` gives the
    original texts, two equal originals are confirmed without normalizing them
    (normalization is a function of the text, so their normalized bytes are equal).
    """

    def text(i: int) -> bytes | None:
        return text_of(i - n_prior) if text_of is not None and i >= n_prior else None

    def raw(i: int) -> str | bytes | None:
        return raw_of(i - n_prior) if raw_of is not None and i >= n_prior else None

    idx = np.flatnonzero(eligible)
    leaders = eligible.copy()
    edges: list[Edge] = []
    if idx.size < 2:
        return edges, leaders
    h = sets.content_hash[idx]
    order = np.argsort(h, kind="stable")
    hs = h[order]
    starts = np.flatnonzero(np.r_[True, hs[1:] != hs[:-1]])
    ends = np.r_[starts[1:], hs.shape[0]]
    # Only groups of two or more can hold a duplicate; most hashes are unique, so
    # the Python loop runs over those groups alone.
    multi = np.flatnonzero(ends - starts >= 2)
    normalized: dict[int, bytes | None] = {}

    def norm(i: int) -> bytes | None:
        if i not in normalized:
            normalized[i] = text(i)
        return normalized[i]

    originals: dict[int, str | bytes | None] = {}
    for s, e in zip(starts[multi].tolist(), ends[multi].tolist(), strict=True):
        members = sorted(idx[order[s:e]].tolist())
        firsts: list[int] = []
        normalized.clear()
        originals.clear()
        for m in members:
            rm = originals[m] = raw(m)
            for f in firsts:
                if rm is not None and rm == originals[f]:
                    same = True
                else:
                    eb, fb = norm(m), norm(f)
                    same = (
                        eb == fb
                        if eb is not None and fb is not None
                        else bool(np.array_equal(sets.get(m), sets.get(f)))
                    )
                if same:
                    leaders[m] = False
                    edges.append(Edge.identical(f, m))
                    break
            else:
                firsts.append(m)
    edges.sort(key=lambda x: (x.a, x.b))
    return edges, leaders

"""Exact-content duplicates: documents whose normalized text is the same, grouped
by content hash and confirmed byte for byte (:func:`exact_groups`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

from neardup.core.arrays import concat_ranges, distinct
from neardup.graph.cluster import Edge
from neardup.text.hashing import ShingleSets

__all__ = ["RawEqual", "exact_groups"]

RawEqual: TypeAlias = Callable[
    [npt.NDArray[np.int64], npt.NDArray[np.int64]], npt.NDArray[np.bool_]
]
"""``raw_equal(a, b)[t]``: whether documents ``a[t]`` and ``b[t]`` have equal
original texts (e.g. :meth:`neardup.io.columns.TextColumn.equal_encoded`)."""


def exact_groups(
    text_of: Callable[[int], bytes] | None,
    n_prior: int,
    sets: ShingleSets,
    eligible: npt.NDArray[np.bool_],
    raw_equal: RawEqual | None = None,
) -> tuple[list[Edge], npt.NDArray[np.bool_]]:
    """Exact-content duplicate edges and the mask of group leaders.

    Equal content hashes are confirmed byte for byte when both texts are at hand
    (``text_of(i - n_prior)`` for the documents from position ``n_prior`` on), else
    (a document from a saved index) by equality of the shingle-hash sets.  Texts are
    normalized again on demand, for group members only.  ``raw_equal(a, b)``, when
    given, says for many pairs of new documents at once (positions less
    ``n_prior``) whether their original texts are equal: a member whose original
    equals its group's first member's is confirmed without normalizing either
    (normalization is a function of the text, so their normalized bytes are equal).
    """
    idx = np.flatnonzero(eligible)
    leaders = eligible.copy()
    if idx.size < 2:
        return [], leaders
    h = sets.content_hash[idx]
    order = np.argsort(h)
    hs = h[order]
    starts = np.flatnonzero(np.r_[True, hs[1:] != hs[:-1]])
    sizes = np.diff(np.r_[starts, hs.shape[0]])
    # Only groups of two or more can hold a duplicate; most hashes are unique, so
    # the work below is on the members of those groups alone, gathered here at
    # once: group by group, ascending within each group.
    multi = np.flatnonzero(sizes >= 2)
    if multi.size == 0:
        return [], leaders
    counts = sizes[multi]
    group = np.repeat(np.arange(multi.size), counts)
    members = idx[order[concat_ranges(starts[multi], counts)]]
    by_group = np.lexsort((members, group))
    members = members[by_group]
    group_first = np.cumsum(counts) - counts  # each group's first (smallest) member
    first_of = members[np.repeat(group_first, counts)]
    # Most members are copies of their group's first: settled in bulk when the
    # originals are at hand and equal.
    settled = np.zeros(members.shape[0], dtype=np.bool_)
    if raw_equal is not None:
        ask = np.flatnonzero((members != first_of) & (members >= n_prior) & (first_of >= n_prior))
        if ask.size:
            settled[ask] = raw_equal(members[ask] - n_prior, first_of[ask] - n_prior)
    # The rest, group by group as the first member's copies leave them: each
    # member joins the first earlier distinct content it equals, else starts one.
    rest_groups = distinct(group[~settled & (members != first_of)])
    normalized: dict[int, bytes | None] = {}

    def norm(i: int) -> bytes | None:
        if i not in normalized:
            normalized[i] = text_of(i - n_prior) if text_of is not None and i >= n_prior else None
        return normalized[i]

    bounds = np.r_[0, np.cumsum(counts)].tolist()
    members_list = members.tolist()
    settled_list = settled.tolist()
    more_a: list[int] = []
    more_b: list[int] = []
    for g in rest_groups.tolist():
        normalized.clear()
        firsts: list[int] = []
        for k in range(bounds[g], bounds[g + 1]):
            if settled_list[k]:
                continue
            m = members_list[k]
            for f in firsts:
                eb, fb = norm(m), norm(f)
                same = (
                    eb == fb
                    if eb is not None and fb is not None
                    else bool(np.array_equal(sets.get(m), sets.get(f)))
                )
                if same:
                    more_a.append(f)
                    more_b.append(m)
                    break
            else:
                firsts.append(m)
    a = np.concatenate([first_of[settled], np.asarray(more_a, dtype=np.int64)])
    b = np.concatenate([members[settled], np.asarray(more_b, dtype=np.int64)])
    leaders[b] = False
    ordered = np.lexsort((b, a))
    return Edge.identical_many(a[ordered].tolist(), b[ordered].tolist()), leaders

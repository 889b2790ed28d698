"""Exact-content duplicates: documents whose normalized text is the same, grouped
by content hash and confirmed byte for byte (:func:`exact_groups`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

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
    raw_of: Callable[[list[int]], Sequence[str | bytes]] | None = None,
) -> tuple[list[Edge], npt.NDArray[np.bool_]]:
    """Exact-content duplicate edges and the mask of group leaders.

    Equal content hashes are confirmed byte for byte when both texts are at hand
    (``text_of(i - n_prior)`` for the documents from position ``n_prior`` on), else
    (a document from a saved index) by equality of the shingle-hash sets.  Texts are
    normalized again on demand, for group members only; when ``raw_of`` gives the
    original texts (``raw_of([i - n_prior, ...])``, many at once), two equal
    originals are confirmed without normalizing them (normalization is a function
    of the text, so their normalized bytes are equal).
    """

    idx = np.flatnonzero(eligible)
    leaders = eligible.copy()
    if idx.size < 2:
        return [], leaders
    h = sets.content_hash[idx]
    order = np.argsort(h, kind="stable")
    hs = h[order]
    starts = np.flatnonzero(np.r_[True, hs[1:] != hs[:-1]])
    sizes = np.diff(np.r_[starts, hs.shape[0]])
    # Only groups of two or more can hold a duplicate; most hashes are unique, so
    # the Python loop below runs over the members of those groups alone, gathered
    # here at once: group by group, ascending within each group.
    multi = np.flatnonzero(sizes >= 2)
    if multi.size == 0:
        return [], leaders
    counts = sizes[multi]
    group = np.repeat(np.arange(multi.size), counts)
    offset = np.arange(group.size) - np.repeat(np.cumsum(counts) - counts, counts)
    members = idx[order[np.repeat(starts[multi], counts) + offset]]
    by_group = np.lexsort((members, group))
    members_list = members[by_group].tolist()
    bounds = np.r_[0, np.cumsum(counts)].tolist()
    originals: list[str | bytes | None] = [None] * len(members_list)
    if raw_of is not None:
        new = [k for k, m in enumerate(members_list) if m >= n_prior]
        for k, got in zip(new, raw_of([members_list[k] - n_prior for k in new]), strict=True):
            originals[k] = got
    normalized: dict[int, bytes | None] = {}

    def norm(i: int) -> bytes | None:
        if i not in normalized:
            normalized[i] = text_of(i - n_prior) if text_of is not None and i >= n_prior else None
        return normalized[i]

    firsts_of: list[int] = []  # edge (firsts_of[j], dups_of[j]): a copy and its first
    dups_of: list[int] = []
    for g in range(multi.size):
        lo, hi = bounds[g], bounds[g + 1]
        firsts: list[int] = []  # positions in members_list
        normalized.clear()
        for k in range(lo, hi):
            m, rm = members_list[k], originals[k]
            for fk in firsts:
                if rm is not None and rm == originals[fk]:
                    same = True
                else:
                    f = members_list[fk]
                    eb, fb = norm(m), norm(f)
                    same = (
                        eb == fb
                        if eb is not None and fb is not None
                        else bool(np.array_equal(sets.get(m), sets.get(f)))
                    )
                if same:
                    firsts_of.append(members_list[fk])
                    dups_of.append(m)
                    break
            else:
                firsts.append(k)
    a = np.asarray(firsts_of, dtype=np.int64)
    b = np.asarray(dups_of, dtype=np.int64)
    leaders[b] = False
    ordered = np.lexsort((b, a))
    pairs = zip(a[ordered].tolist(), b[ordered].tolist(), strict=True)
    return [Edge.identical(x, y) for x, y in pairs], leaders

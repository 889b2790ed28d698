"""Stage 9 — exact oracles: all pairs with Jaccard >= threshold, with 100% recall.

* :func:`brute_force_pairs` compares every pair — O(n²) — for small inputs and as
  the reference of the tests.
* :func:`allpairs_join` is an exact set-similarity self-join with prefix and
  length filtering (AllPairs, Bayardo, Ma & Srikant 2007; the prefix filter of
  PPJoin): shingles are ranked rarest first, each document indexes its prefix of
  |x| - ceil(t·|x|) + 1 rarest shingles, and only documents meeting in a prefix
  list and within the size bound t·|x| <= |y| are verified.  It returns exactly the
  pairs that brute force returns, usually after verifying a small fraction.

Both work on :class:`~neardup.text.hashing.ShingleSets`; empty documents never pair.

Example:
    >>> from neardup import Config
    >>> from neardup.text.hashing import hash_documents
    >>> sets = hash_documents(["a b c d e f", "a b c d e f g", "x y z"], Config())
    >>> sorted(allpairs_join(sets, 0.3).pairs())
    [(0, 1)]
"""

from __future__ import annotations

import numpy as np

from neardup.core._errors import InvalidConfig
from neardup.kernels import _exact as KX
from neardup.text.hashing import ShingleSets
from neardup.verify.exact import PairScores

__all__ = ["allpairs_join", "brute_force_pairs"]

_EPS = 1e-9


def _check_threshold(threshold: float) -> float:
    if not 0.0 < threshold <= 1.0:
        raise InvalidConfig("threshold", threshold, "must be in (0, 1]", "use e.g. 0.8")
    return float(threshold)


def _sorted_pairs(p: PairScores) -> PairScores:
    order = np.lexsort((p.b, p.a))
    return PairScores(p.a[order], p.b[order], p.intersection[order], p.union[order])


def brute_force_pairs(sets: ShingleSets, threshold: float) -> PairScores:
    """Every pair (a < b) with exact Jaccard >= threshold, by comparing all pairs."""
    t = _check_threshold(threshold)
    n = len(sets)
    counts = np.zeros(n, dtype=np.int64)
    if n:
        KX.brute_force_counts(sets.data, sets.indptr, t, counts)
    offs = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offs[1:])
    total = int(offs[-1])
    b = np.empty(total, dtype=np.int64)
    inter = np.empty(total, dtype=np.int64)
    union = np.empty(total, dtype=np.int64)
    if n:
        KX.brute_force_fill(sets.data, sets.indptr, t, offs, b, inter, union)
    a = np.repeat(np.arange(n, dtype=np.int64), counts)
    return PairScores(a, b, inter, union)


def allpairs_join(sets: ShingleSets, threshold: float) -> PairScores:
    """Exact self-join: the same pairs as :func:`brute_force_pairs`, much faster."""
    t = _check_threshold(threshold)
    n = len(sets)
    if n == 0 or sets.data.size == 0:
        z = np.empty(0, dtype=np.int64)
        return PairScores(z, z, z, z)
    # Tokens ranked rare-first (ties by value), then each set sorted by rank: the
    # same arrays np.unique + two np.lexsorts gave, in linear passes instead of
    # three sorts.
    tokens = KX.rank_tokens(sets.data)
    KX.sort_segments(tokens, sets.indptr)
    sizes = sets.sizes()
    order = np.lexsort((np.arange(n), sizes)).astype(np.int64)
    a, b, inter, union, _ = KX.allpairs_join(tokens, sets.indptr, order, t, _EPS)
    return _sorted_pairs(PairScores(a, b, inter, union))

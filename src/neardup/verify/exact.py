"""Stage 6 — exact verification over retained shingle-hash sets.

The authoritative score of a candidate pair is the Jaccard similarity of the two
documents' sorted sets of distinct 64-bit shingle hashes, computed by an exact
merge.  Verification by signature estimate exists only when asked for explicitly
(``Config(verify="estimate")``) and is labelled ``method="estimate"`` wherever it
appears, because an estimate near the threshold is wrong about half the time.

Example:
    >>> jaccard([1, 2, 3, 4], [2, 3, 4, 5])
    0.6
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from neardup.core._errors import InvalidConfig
from neardup.core.arrays import distinct
from neardup.core.checks import check_pairs, hash_array
from neardup.kernels import _arrays as KA
from neardup.kernels import _exact as KX
from neardup.text.hashing import ShingleSets

__all__ = ["PairScores", "jaccard", "verify_pairs"]


def jaccard(
    a: Iterable[int] | npt.NDArray[np.uint64], b: Iterable[int] | npt.NDArray[np.uint64]
) -> float:
    """Exact Jaccard of two collections of hashes (duplicates ignored; 0.0 if both empty).

    The hashes are integers in [0, 2**64) (shingle hashes, e.g. ``ShingleSets.get(i)``);
    anything else — strings, nested lists, negative numbers — raises
    :class:`~neardup.InvalidConfig` (to compare texts, hash them first with
    :func:`neardup.hash_documents`).
    """
    x = distinct(hash_array("a", a))
    y = distinct(hash_array("b", b))
    inter = int(KA.intersect_count(x, 0, x.shape[0], y, 0, y.shape[0]))
    union = x.shape[0] + y.shape[0] - inter
    return inter / union if union else 0.0


@dataclass(frozen=True, eq=False, slots=True)
class PairScores:
    """Exact scores of pairs ``(a[i], b[i])``: intersection and union sizes."""

    a: npt.NDArray[np.int64]
    b: npt.NDArray[np.int64]
    intersection: npt.NDArray[np.int64]
    union: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.a.shape[0])

    @property
    def jaccard(self) -> npt.NDArray[np.float64]:
        with np.errstate(invalid="ignore", divide="ignore"):
            j = self.intersection / self.union
        return np.where(self.union > 0, j, 0.0)

    def pairs(self) -> set[tuple[int, int]]:
        return {(int(x), int(y)) for x, y in zip(self.a, self.b, strict=True)}


def verify_pairs(sets: ShingleSets, a: npt.ArrayLike, b: npt.ArrayLike) -> PairScores:
    """Exact intersection/union of many pairs at once (parallel kernel).

    ``a`` and ``b`` are positions in ``sets`` of equal length; anything else raises
    :class:`~neardup.InvalidConfig` before the kernel runs.

    >>> from neardup import Config
    >>> from neardup.text.hashing import hash_documents
    >>> sets = hash_documents(["a b c d e f", "a b c d e f g"], Config())
    >>> verify_pairs(sets, [0], [1]).jaccard.round(4).tolist()   # 2 of 3 word 5-grams
    [0.6667]
    """
    if not isinstance(sets, ShingleSets):
        raise InvalidConfig(
            "sets",
            type(sets).__name__,
            "is not ShingleSets",
            "pass hash_documents(texts, config)",
        )
    n = len(sets)
    aa, bb = check_pairs(a, b, n)
    inter = np.empty(aa.shape[0], dtype=np.int64)
    union = np.empty(aa.shape[0], dtype=np.int64)
    if aa.size:
        KX.jaccard_pairs(sets.data, sets.indptr, aa, bb, inter, union)
    return PairScores(aa, bb, inter, union)

"""Named similarity ranges: the band layouts one :class:`~neardup.LSHIndex` holds.

A range is a name, the similarity threshold its queries need, and the (bands,
rows) layout tuned for that threshold.  An index of one range is the index it
always was; an index of two (for example ``{"near": 0.9, "related": 0.5}``)
files every item under both layouts and answers each query with the layout of
the range it names.

Every layout bands a *prefix* of the same signature: band ``i`` of a layout of
``r`` rows covers rows ``[i·r, (i+1)·r)``, so each layout may use up to all
``num_perm`` rows.  Disjoint slices would make the layouts' collisions
independent of each other, which buys nothing — a query reads one layout, and
within a layout the bands still use distinct rows, so each layout's candidate
probability is exactly ``1 - (1 - s**r)**b`` — while it would halve the rows
each layout may use and so its sharpness.

>>> r = SimilarityRange.for_threshold("near", 0.9, 128)
>>> (r.name, r.threshold, r.bands, r.rows)
('near', 0.9, 14, 9)
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from neardup.core._errors import InvalidConfig
from neardup.core.checks import check_float, check_int
from neardup.core.layout import candidate_probability, default_layout, false_positive_mass
from neardup.graph.cluster import Edge

__all__ = [
    "INDEX_FORMAT",
    "LSHStats",
    "RangeStats",
    "SimilarityRange",
    "index_ranges",
    "layouts_text",
    "range_stats",
    "reaches",
    "resolve_ranges",
]

DEFAULT_RANGE = "default"
"""The name of the one range of an index built without ``ranges``."""


INDEX_FORMAT = 2
"""The ``lsh-index`` meta layout :meth:`~neardup.LSHIndex.save` writes.  1 (no
``index_format`` key): one layout, the scheme's.  2: ``ranges`` lists every layout.
Versioned here rather than by the container's format version, which every
config fingerprint includes."""


@dataclass(frozen=True, slots=True)
class SimilarityRange:
    """A named threshold and the band layout its queries use (``bands·rows`` rows
    of the signature's prefix)."""

    name: str
    threshold: float
    bands: int
    rows: int

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidConfig(
                "range name", self.name, "must be a non-empty string", "name it, e.g. 'near'"
            )
        t = check_float("threshold", self.threshold, f"e.g. {self.name}=0.8")
        if not 0.0 < t <= 1.0:
            raise InvalidConfig(
                f"ranges[{self.name!r}]", t, "a threshold must be in (0, 1]", "use e.g. 0.8"
            )
        object.__setattr__(self, "threshold", t)
        fix = f"give range {self.name!r} a positive number of bands and rows"
        object.__setattr__(self, "bands", check_int("bands", self.bands, 1, 1 << 20, fix))
        object.__setattr__(self, "rows", check_int("rows", self.rows, 1, 1 << 20, fix))

    @classmethod
    def for_threshold(
        cls, name: str, threshold: float, num_perm: int, *, recall: float = 0.995
    ) -> SimilarityRange:
        """The range of :func:`~neardup.default_layout` at ``threshold``: candidate
        probability >= ``recall`` there, least mass below it."""
        checked = cls(name, threshold, 1, 1)  # the name and threshold, checked first
        bands, rows = default_layout(checked.threshold, num_perm, recall=recall)
        return cls(name, checked.threshold, bands, rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "threshold": self.threshold,
            "bands": self.bands,
            "rows": self.rows,
        }

    @classmethod
    def from_dict(cls, d: Any) -> SimilarityRange:
        try:
            return cls(d["name"], d["threshold"], d["bands"], d["rows"])
        except (KeyError, TypeError) as exc:
            raise InvalidConfig(
                "range", d, f"not a similarity range ({exc!r})", "rebuild the index"
            ) from exc


def resolve_ranges(
    ranges: Mapping[str, float] | Iterable[SimilarityRange],
    *,
    num_perm: int,
    recall: float = 0.995,
) -> tuple[SimilarityRange, ...]:
    """The ranges of ``ranges`` (name → threshold, each given the default layout of
    its threshold, or :class:`SimilarityRange` objects), checked against a signature
    of ``num_perm`` rows: at least one, distinct names, distinct layouts,
    ``bands·rows <= num_perm`` each.  The first is the index's default range.

    >>> [(r.name, r.bands, r.rows) for r in resolve_ranges({"near": 0.9, "related": 0.5},
    ...                                                       num_perm=128)]
    [('near', 14, 9), ('related', 42, 3)]
    """
    if isinstance(ranges, Mapping):
        out = tuple(
            SimilarityRange.for_threshold(name, t, num_perm, recall=recall)
            for name, t in ranges.items()
        )
    else:
        out = tuple(ranges)
        for r in out:
            if not isinstance(r, SimilarityRange):
                raise InvalidConfig(
                    "ranges",
                    r,
                    "is not a SimilarityRange",
                    "pass {name: threshold, ...} or SimilarityRange objects",
                )
    if not out:
        raise InvalidConfig(
            "ranges", {}, "names no range", "pass e.g. ranges={'near': 0.9, 'related': 0.5}"
        )
    names = [r.name for r in out]
    if len(set(names)) != len(names):
        raise InvalidConfig("ranges", names, "names a range twice", "give each range its own name")
    seen: dict[tuple[int, int], str] = {}
    for r in out:
        if r.bands * r.rows > num_perm:
            raise InvalidConfig(
                f"ranges[{r.name!r}]",
                (r.bands, r.rows),
                f"bands*rows = {r.bands * r.rows} exceeds the signature's num_perm={num_perm}",
                f"use rows <= {num_perm // r.bands} or a longer signature",
            )
        other = seen.setdefault((r.bands, r.rows), r.name)
        if other != r.name:
            raise InvalidConfig(
                f"ranges[{r.name!r}]",
                (r.bands, r.rows),
                f"has the layout of range {other!r}: a second copy of the same buckets",
                f"drop one of them, or give {r.name!r} another threshold or layout",
            )
    return out


def index_ranges(
    ranges: Mapping[str, float] | Iterable[SimilarityRange] | None,
    *,
    threshold: float | None,
    num_perm: int,
    layout: tuple[int, int],
) -> tuple[SimilarityRange, ...]:
    """The ranges of an index over signatures of ``num_perm`` rows: without
    ``ranges``, one range named ``"default"`` at ``threshold`` with the scheme's
    ``layout``; with them, :func:`resolve_ranges` (``threshold``, if given, must be
    the first range's)."""
    if ranges is None:
        if threshold is None:
            raise InvalidConfig(
                "threshold", None, "is required without ranges", "pass e.g. threshold=0.8"
            )
        t = check_float("threshold", threshold, "use e.g. 0.8")
        if not 0.0 < t <= 1.0:
            raise InvalidConfig("threshold", t, "must be in (0, 1]", "use e.g. 0.8")
        return (SimilarityRange(DEFAULT_RANGE, t, *layout),)
    out = resolve_ranges(ranges, num_perm=num_perm)
    if threshold is not None and threshold != out[0].threshold:
        raise InvalidConfig(
            "threshold",
            threshold,
            f"differs from the first range's ({out[0].name!r}: {out[0].threshold})",
            "leave threshold unset: with ranges the first range's threshold is the index's",
        )
    return out


def reaches(e: Edge, threshold: float) -> bool:
    """Whether ``e`` scores at least ``threshold`` (exact Jaccard, else the estimate)."""
    score = e.jaccard if e.jaccard is not None else e.estimate
    return score is not None and score >= threshold


def layouts_text(ranges: Iterable[SimilarityRange]) -> str:
    """``name: bands x rows`` of each range, for messages."""
    return ", ".join(f"{r.name}: {r.bands}x{r.rows}" for r in ranges)


@dataclass(frozen=True, slots=True)
class RangeStats:
    """One range's layout, buckets, memory and predicted behaviour at its threshold."""

    name: str
    threshold: float
    bands: int
    rows: int
    buckets: int
    largest_bucket: int
    bucket_overflow: int
    predicted_recall: float
    predicted_fp_rate: float
    band_key_bytes: int
    """8 bytes per band and stored item: the layout's keys as a compact store (a
    database column, ``neardup signatures``) holds them."""
    table_bytes: int
    """The layout's bucket tables as this process holds them (dicts, lists and
    keys, measured with ``sys.getsizeof``)."""


@dataclass(frozen=True, slots=True)
class LSHStats:
    """Counts describing an index and its predicted behaviour at the threshold.

    The layout fields (``bands`` … ``predicted_fp_rate_at_half_threshold``) are
    those of the first (default) range; ``ranges`` has one :class:`RangeStats`
    per range, the first included.
    """

    documents: int
    tombstoned: int
    bands: int
    rows: int
    buckets: int
    largest_bucket: int
    bucket_overflow: int
    candidate_overflow: int
    threshold: float
    predicted_recall: float
    predicted_fp_rate: float
    """Mean candidate probability of pairs below the threshold (s uniform in [0, t)):
    the share of sub-threshold pairs that cost a verification."""
    predicted_fp_rate_at_half_threshold: float
    ranges: tuple[RangeStats, ...] = ()


def range_stats(
    r: SimilarityRange, tables: list[dict[int, list[int]]], overflow: int, documents: int
) -> RangeStats:
    """The :class:`RangeStats` of range ``r`` whose bucket tables (band key → member
    positions, one per band) are ``tables``."""
    sizes = [len(v) for t in tables for v in t.values()]
    table_bytes = sum(
        sys.getsizeof(t) + sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in t.items())
        for t in tables
    )
    return RangeStats(
        name=r.name,
        threshold=r.threshold,
        bands=r.bands,
        rows=r.rows,
        buckets=len(sizes),
        largest_bucket=max(sizes, default=0),
        bucket_overflow=overflow,
        predicted_recall=candidate_probability(r.threshold, r.bands, r.rows),
        predicted_fp_rate=false_positive_mass(r.threshold, r.bands, r.rows) / r.threshold,
        band_key_bytes=8 * r.bands * documents,
        table_bytes=table_bytes,
    )

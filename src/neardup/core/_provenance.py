"""The optional provenance fields of a record (see :class:`neardup.lineage.families.Provenance`).

A module of its own, without NumPy or compiled kernels, so that the command line
can build its options without importing them.
"""

from __future__ import annotations

__all__ = ["PROVENANCE_FIELDS"]

PROVENANCE_FIELDS = (
    "origin_id",
    "revision_id",
    "split",
    "source",
    "language",
    "template",
    "captured_at",
    "label",
)

"""The optional provenance fields of a record (see :class:`neardup.lineage.families.Provenance`).

A module of its own, without NumPy or compiled kernels, so that the command line
can build its options without importing them.
"""

from __future__ import annotations

__all__ = ["PROVENANCE_FIELDS", "STRUCTURED_FIELDS"]

PROVENANCE_FIELDS = (
    "origin_id",
    "revision_id",
    "split",
    "source",
    "language",
    "template",
    "captured_at",
    "label",
    "policy",
    "quote",
)

STRUCTURED_FIELDS = ("policy", "quote")
"""The provenance fields that are not one string: an access policy (a label or a
list of labels) and the quoted-source spans (see :mod:`neardup.lineage.quotes`)."""

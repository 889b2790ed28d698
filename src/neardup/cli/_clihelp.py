"""``--help`` of the commands, with the options in named sections.

click lists options in the order the decorators add them; a command built with
:class:`SectionedCommand` lists them under headings instead, in the order given
(input, what is a duplicate, outputs, performance, engines, vectors), so that
``--text-field`` and ``--threshold`` come before ``--engine`` or ``--ray-cpus``.
Options no section names (``--help``) come last, under "Other options".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

__all__ = [
    "DEDUP_SECTIONS",
    "EVAL_SECTIONS",
    "SIGNATURES_SECTIONS",
    "TUNE_SECTIONS",
    "SectionedCommand",
    "audit_sections",
    "split_sections",
]

Sections = Sequence[tuple[str, Sequence[str]]]
"""(heading, parameter names) in the order they are shown."""

_TEXT_DUPLICATE = (
    "threshold",
    "shingle",
    "tokenizer",
    "normalizer",
    "method",
    "num_perm",
    "bands",
    "rows",
    "signature",
    "verify",
    "seed",
    "max_shingles",
    "max_document_bytes",
)
_PERFORMANCE = ("workers", "memory_limit")

DEDUP_SECTIONS: Sections = (
    (
        "Input",
        (
            "text_field",
            "id_field",
            "row_ids",
            "rename_duplicate_ids",
            "language_field",
            "skip_bad",
            "against",
        ),
    ),
    ("What is a duplicate, and which one is kept", (*_TEXT_DUPLICATE, "keep")),
    ("Outputs", ("output", "overwrite", "save_index", "dry_run", "no_report", "quiet")),
    ("Performance", (*_PERFORMANCE, "spill", "work_dir")),
    ("Engines", ("engine", "ray_address", "ray_cpus", "resume", "cc_threshold")),
    ("Vectors", ("vectors_field", "metric", "hamming_radius", "bits")),
)


def _provenance(fields: Sequence[str]) -> tuple[str, ...]:
    return tuple(f"{name}_field" for name in fields)


_FAMILY_INPUT = ("text_field", "id_field", "skip_bad", "named_splits")
_FAMILY_EDGES = (*_TEXT_DUPLICATE, "ignore_boilerplate", "lineage_veto")


def audit_sections(provenance: Sequence[str]) -> Sections:
    return (
        ("Input", (*_FAMILY_INPUT, *_provenance(provenance), "decisions")),
        ("What is a duplicate", _FAMILY_EDGES),
        ("Outputs", ("output", "overwrite", "large_family", "fail_on_leakage", "quiet")),
        ("Performance", _PERFORMANCE),
    )


def split_sections(provenance: Sequence[str]) -> Sections:
    return (
        ("Input", (*_FAMILY_INPUT, *_provenance(provenance), "decisions")),
        ("What is a duplicate", _FAMILY_EDGES),
        ("Split", ("ratios", "stratify_field")),
        ("Outputs", ("output", "overwrite", "quiet")),
        ("Performance", _PERFORMANCE),
    )


EVAL_SECTIONS: Sections = (
    ("Input", ("text_field", "id_field", "skip_bad")),
    ("What is a duplicate", _TEXT_DUPLICATE),
    ("Outputs", ("as_json", "quiet")),
    ("Performance", _PERFORMANCE),
)


SIGNATURES_SECTIONS: Sections = (
    ("Input", ("text_field", "id_field", "skip_bad")),
    ("Signatures and bands", _TEXT_DUPLICATE),
    ("Outputs", ("output", "overwrite", "quiet")),
    ("Performance", _PERFORMANCE),
)


TUNE_SECTIONS: Sections = (
    ("Input", ("text_field", "id_field", "skip_bad", "labels", "segment_fields")),
    ("Signatures and bands", _TEXT_DUPLICATE),
    (
        "Targets",
        ("far", "recall", "budget", "n", "max_perm", "confidence", "seeds", "ranges"),
    ),
    ("Outputs", ("output", "overwrite", "fail_on_refusal", "quiet")),
    ("Performance", (*_PERFORMANCE, "max_pairs")),
)


class SectionedCommand(click.Command):
    """A command whose ``--help`` shows its options under ``sections``."""

    def __init__(self, *args: Any, sections: Sections = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sections = [(title, tuple(names)) for title, names in sections]

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        records: dict[str, tuple[str, str]] = {}
        for param in self.get_params(ctx):
            rec = param.get_help_record(ctx)
            if rec is not None and param.name is not None and isinstance(param, click.Option):
                records[param.name] = rec
        shown: set[str] = set()
        for title, names in self.sections:
            rows = [records[n] for n in names if n in records and n not in shown]
            shown.update(names)
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
        rest = [rec for name, rec in records.items() if name not in shown]
        if rest:
            with formatter.section("Other options"):
                formatter.write_dl(rest)

"""``neardup audit`` and ``neardup split`` as library calls.

:func:`run_audit` reads records with provenance (fields mapped by name), builds
families (:func:`neardup.lineage.families.build_families`) and writes into ``output``
(write-temp-then-rename, like the dedup job):

* ``families.jsonl`` — one line per family with members, splits, flags and every
  joining edge (kind, score, shared spans as offsets into the original texts);
* ``audit.json`` — counts, cross-split leakage per split pair and per slice
  (source, language, template, capture month), boilerplate suspects, parameters;
* ``report.html`` — the same look as ``report.html`` of ``dedup``.

It returns the audit; ``leaking_records > 0`` is what ``--fail-on-leakage`` turns
into a non-zero exit status.  :func:`run_split` writes one file per split (records
intact, input format) plus ``split.json`` with the achieved ratios, never dividing
a family.
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from neardup.batch.languages import language_labels
from neardup.batch.outputs import commit_output, staged_output, write_json
from neardup.core._errors import InputError, InvalidConfig
from neardup.core.config import DEFAULT_MEMORY_LIMIT, Config
from neardup.core.ids import json_id
from neardup.io.corpus import Corpus, read_corpus, record_fields, write_subset
from neardup.lineage.families import (
    PROVENANCE_FIELDS,
    FamilyResult,
    Provenance,
    build_families,
    read_decisions,
)
from neardup.lineage.quotes import Where
from neardup.lineage.splits import cross_split_leakage, family_split, leaking_mask
from neardup.text.hashing import HashKey
from neardup.text.scripts import label_counts

__all__ = ["AuditReport", "SplitReport", "record_fields", "run_audit", "run_split"]


@dataclass(frozen=True, slots=True)
class AuditReport:
    """What :func:`run_audit` found (frozen); ``audit`` is the mapping written to
    ``audit.json``, ``leakage`` its ``leakage`` entry."""

    records: int
    families: int
    records_in_families: int
    flagged_families: int
    leaking_records: int
    leaking_families: int
    leakage: Mapping[str, Any]
    audit: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class SplitReport:
    """What :func:`run_split` did (frozen); ``report`` is the mapping written to
    ``split.json``, ``achieved`` each split's share of the records."""

    achieved: Mapping[str, float]
    families: int
    largest_family: int
    report: Mapping[str, Any]


def _provenance(
    corpus: Corpus,
    mapping: Mapping[str, str],
    input_splits: Sequence[str | None] | None,
    where: Sequence[Where],
) -> list[Provenance]:
    bad = sorted(set(mapping) - set(PROVENANCE_FIELDS))
    if bad:
        raise InvalidConfig(
            "provenance field", bad, "unknown", f"map only {', '.join(PROVENANCE_FIELDS)}"
        )
    cols = {v: k for k, v in mapping.items()}
    rows = record_fields(corpus, list(cols))
    out = [
        Provenance.from_mapping({cols[c]: v for c, v in r.items()}, at)
        for r, at in zip(rows, where, strict=True)
    ]
    if input_splits is None:
        return out
    return [
        dataclasses.replace(p, split=input_splits[fi])
        for p, (fi, _row) in zip(out, corpus.origins, strict=True)
    ]


def _check_input_splits(
    inputs: Sequence[str], fields: Mapping[str, str], input_splits: Sequence[str | None] | None
) -> None:
    if input_splits is None:
        return
    if len(input_splits) != len(inputs):
        raise InvalidConfig(
            "input_splits", len(input_splits), f"need one per input ({len(inputs)})",
            "give each input its split name (see neardup.io.inputs.split_inputs)",
        )
    if "split" in fields:
        raise InvalidConfig(
            "input_splits", list(input_splits), "given together with a split field",
            "take the split from a field or from the inputs, not both",
        )


def _read_families(
    inputs: Sequence[str],
    fields: Mapping[str, str],
    *,
    text_field: str,
    id_field: str | None,
    skip_bad: bool,
    config: Config | None,
    key: HashKey | None,
    method: str,
    decisions: str | None,
    ignore_boilerplate: bool,
    large_family: int,
    memory_limit: int,
    lineage_veto: bool,
    input_splits: Sequence[str | None] | None,
) -> tuple[Corpus, list[Any], FamilyResult]:
    """What :func:`run_audit` and :func:`run_split` start from: the records of
    ``inputs``, their ids (unique, else InputError) and their families."""
    _check_input_splits(inputs, fields, input_splits)
    corpus = read_corpus(inputs, text_field=text_field, id_field=id_field, skip_bad=skip_bad)
    ids = [json_id(i) for i in corpus.ids]
    if len({str(i) for i in ids}) != len(ids):
        raise InputError(
            inputs[0], None, "record ids are not unique", "pass an --id-field with unique ids"
        )
    where = [(corpus.inputs[fi], row) for fi, row in corpus.origins]
    fam = build_families(
        corpus.texts,
        _provenance(corpus, fields, input_splits, where),
        ids=ids,
        config=config or Config(),
        key=key,
        method=method,  # type: ignore[arg-type]
        decisions=read_decisions(decisions) if decisions else (),
        ignore_boilerplate=ignore_boilerplate,
        large_family=large_family,
        memory_limit=memory_limit,
        lineage_veto=lineage_veto,
        where=where,
    )
    return corpus, ids, fam


def run_audit(
    inputs: Sequence[str],
    output: str | None,
    *,
    fields: Mapping[str, str],
    config: Config | None = None,
    key: HashKey | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    method: str = "lsh",
    decisions: str | None = None,
    ignore_boilerplate: bool = False,
    large_family: int = 50,
    skip_bad: bool = False,
    overwrite: bool = False,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    lineage_veto: bool = False,
    input_splits: Sequence[str | None] | None = None,
) -> AuditReport:
    """Audit ``inputs`` (``fields`` maps provenance names, e.g. ``{"split": "split"}``,
    to columns); write the outputs into ``output`` unless it is None; return the audit.
    ``memory_limit`` as for :func:`neardup.find_duplicates`.

    ``input_splits`` (one name per input, instead of a split field) gives every
    record of ``inputs[i]`` the split ``input_splits[i]`` (see
    :func:`neardup.io.inputs.split_inputs`).  ``lineage_veto`` drops near edges
    between records of different known origins (see
    :func:`~neardup.lineage.families.build_families`); ``audit.json`` then says so
    (``lineage_veto``, ``lineage_vetoed_edges`` with examples).
    """
    with staged_output(output, overwrite, list(inputs)) as tmp:
        corpus, ids, fam = _read_families(
            inputs, fields, text_field=text_field, id_field=id_field, skip_bad=skip_bad,
            config=config, key=key, method=method, decisions=decisions,
            ignore_boilerplate=ignore_boilerplate, large_family=large_family,
            memory_limit=memory_limit, lineage_veto=lineage_veto, input_splits=input_splits,
        )
        leak = cross_split_leakage(fam)
        audit = {
            "inputs": list(inputs),
            "fields": dict(fields),
            "input_splits": _by_split(inputs, input_splits),
            **fam.stats,
            "leakage": leak,
            "boilerplate_suspects": [
                {"shingle_hash": f"{h:016x}", "documents": c} for h, c in fam.boilerplate[:50]
            ],
            "bad_records": len(corpus.bad),
            **_by_language(fam, fields.get("language")),
            "policy_field": fields.get("policy"),
            "policies": _policy_summary(fam, ids),
        }
        if tmp is None or output is None:
            return _audit_report(audit)
        with open(os.path.join(tmp, "families.jsonl"), "w", encoding="utf-8") as fh:
            for f in fam.families:
                fh.write(json.dumps(f.to_dict(ids), ensure_ascii=False, sort_keys=True) + "\n")
        write_json(os.path.join(tmp, "audit.json"), audit)
        with open(os.path.join(tmp, "report.html"), "w", encoding="utf-8") as fh:
            fh.write(_audit_html(fam, ids, corpus.texts, audit))
        commit_output(tmp, output)
        return _audit_report(audit)


def _by_split(
    inputs: Sequence[str], input_splits: Sequence[str | None] | None
) -> dict[str, list[str]]:
    """The inputs of each split taken from the inputs ({} when none is)."""
    out: dict[str, list[str]] = {}
    for path, name in zip(inputs, input_splits or (), strict=False):
        if name is not None:
            out.setdefault(name, []).append(path)
    return out


def _from_splits(fam: FamilyResult, assignment: Sequence[str]) -> dict[str, dict[str, int]]:
    """For each split the records had before: how many went to each new split."""
    moved: dict[str, Counter[str]] = {}
    for p, new in zip(fam.provenance, assignment, strict=True):
        if p.split is not None:
            moved.setdefault(p.split, Counter())[new] += 1
    return {old: dict(sorted(c.items())) for old, c in sorted(moved.items())}


def _by_language(fam: FamilyResult, field: str | None) -> dict[str, Any]:
    """``language_field`` and ``by_language``: records, records in families and
    leaking records per language (the mapped language field where a record has
    one, else its detected script)."""
    scripts = fam.scripts
    if scripts is None:  # pragma: no cover - build_families always detects them
        raise InvalidConfig("scripts", None, "the families have no scripts", "rerun")
    labels = language_labels(scripts, [p.language for p in fam.provenance])
    in_family = np.zeros(fam.n, dtype=np.bool_)
    for f in fam.families:
        in_family[list(f.members)] = True
    return {
        "language_field": field,
        "by_language": label_counts(
            labels,
            {"records_in_families": in_family, "leaking_records": leaking_mask(fam)},
            total="records",
        ),
    }


def _policy_summary(fam: FamilyResult, ids: Sequence[Any]) -> dict[str, Any]:
    """Records per access-policy label, and the families whose members carry
    different policies (up to five as examples, largest first)."""
    labels = Counter(lb for p in fam.provenance for lb in p.policy)
    mixed = [f for f in fam.families if len({fam.provenance[m].policy for m in f.members}) > 1]
    top = sorted(mixed, key=lambda f: (-len(f), f.id))[:5]
    return {
        "records": dict(sorted(labels.items())),
        "records_without_policy": sum(1 for p in fam.provenance if not p.policy),
        "mixed_families": len(mixed),
        "examples": [
            {"family": f.id, "members": [ids[m] for m in f.members[:10]], "policies": f.policies}
            for f in top
        ],
    }


def _audit_report(audit: dict[str, Any]) -> AuditReport:
    leak = audit["leakage"]
    return AuditReport(
        records=int(audit["records"]),
        families=int(audit["families"]),
        records_in_families=int(audit["records_in_families"]),
        flagged_families=int(audit["flagged_families"]),
        leaking_records=int(leak["leaking_records"]),
        leaking_families=int(leak["leaking_families"]),
        leakage=leak,
        audit=audit,
    )


def parse_ratios(text: str) -> dict[str, float]:
    """``train=0.8,valid=0.1,test=0.1`` → a dict (shares are normalized later)."""
    out: dict[str, float] = {}
    for part in text.split(","):
        name, sep, val = part.partition("=")
        try:
            share = float(val)
        except ValueError:
            share = -1.0
        if not sep or not name.strip() or not share > 0 or name.strip() in out:
            raise InvalidConfig(
                "ratios", text, f"cannot read {part!r}", "write e.g. train=0.8,valid=0.1,test=0.1"
            )
        out[name.strip()] = share
    return out


def run_split(
    inputs: Sequence[str],
    output: str,
    *,
    ratios: Mapping[str, float],
    seed: int = 0,
    fields: Mapping[str, str] | None = None,
    stratify_field: str | None = None,
    config: Config | None = None,
    key: HashKey | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    method: str = "lsh",
    decisions: str | None = None,
    ignore_boilerplate: bool = False,
    skip_bad: bool = False,
    overwrite: bool = False,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    lineage_veto: bool = False,
    input_splits: Sequence[str | None] | None = None,
) -> SplitReport:
    """Family-aware split of ``inputs`` into ``output/<split>.*``; returns the report
    (``memory_limit`` as for :func:`neardup.find_duplicates`; ``lineage_veto`` and
    ``input_splits`` as for :func:`run_audit`).  When the records have splits
    already (a split field or ``input_splits``), ``split.json`` says where each
    old split's records went (``from_splits``)."""
    with staged_output(output, overwrite, list(inputs)) as tmp:
        corpus, ids, fam = _read_families(
            inputs, fields or {}, text_field=text_field, id_field=id_field, skip_bad=skip_bad,
            config=config, key=key, method=method, decisions=decisions,
            ignore_boilerplate=ignore_boilerplate, large_family=10**9,
            memory_limit=memory_limit, lineage_veto=lineage_veto, input_splits=input_splits,
        )
        strat = None
        if stratify_field is not None:
            vals = record_fields(corpus, [stratify_field])
            strat = [None if stratify_field not in v else str(v[stratify_field]) for v in vals]
        assignment, report = family_split(fam, ratios, seed=seed, ids=ids, stratify=strat)
        if tmp is None:  # pragma: no cover - set above
            raise InvalidConfig("output", output, "no working folder", "retry")
        for name in ratios:
            rows = [i for i, s in enumerate(assignment) if s == name]
            write_subset(corpus, rows, os.path.join(tmp, name))
        report.update(
            {
                "inputs": list(inputs),
                "stratify_field": stratify_field,
                "families_with_2_or_more": len(fam.families),
                "config_fingerprint": fam.stats["config_fingerprint"],
                "lineage_veto": fam.stats["lineage_veto"],
                "lineage_vetoed_edges": fam.stats["lineage_vetoed_edges"],
                "input_splits": _by_split(inputs, input_splits),
                "from_splits": _from_splits(fam, assignment),
            }
        )
        write_json(os.path.join(tmp, "split.json"), report)
        commit_output(tmp, output)
        return SplitReport(
            achieved=report["achieved"],
            families=int(report["families"]),
            largest_family=int(report["largest_family"]),
            report=report,
        )


def _veto_html(a: dict[str, Any]) -> str:
    """The gate says when --lineage-veto hid text edges from it."""
    if not a["lineage_veto"]:
        return ""
    esc = html.escape
    v = a["lineage_vetoed_edges"]
    rows = "".join(
        f"<tr><td>{esc(str(x['a']))} — {esc(str(x['b']))}</td>"
        f"<td class='n'>{x['score']:.3f}</td></tr>"
        for x in v["examples"]
    )
    return (
        f"<h2>Lineage veto on: {v['count']} near edges across origins dropped</h2>"
        "<p class='muted'>--lineage-veto: these pairs were not seen by the leakage "
        "gate (highest scores first)</p><table>" + rows + "</table>"
    )


def _audit_html(
    fam: FamilyResult, ids: Sequence[Any], texts: Sequence[str], a: dict[str, Any]
) -> str:
    from neardup.batch.report import highlight_spans, language_table, page_top, size_chart

    leak = a["leakage"]
    cards = [
        ("records", a["records"]),
        ("families", a["families"]),
        ("records in families", a["records_in_families"]),
        ("leaking records", leak["leaking_records"]),
        ("flagged families", a["flagged_families"]),
        ("reviewer-confirmed", a["reviewer_confirmed_families"]),
    ]
    rows = [
        ("exact duplicates", a["exact_duplicates"]),
        ("near-duplicate candidates", a["near_duplicate_candidates"]),
        ("verified pairs", a["verified_pairs"]),
        ("near edges kept", a["near_edges"]),
        ("edges by kind", ", ".join(f"{k} {v}" for k, v in a["edges"].items())),
        ("edges that depend on boilerplate", a["edges_depending_on_boilerplate"]),
        ("dropped by --ignore-boilerplate", a["dropped_by_boilerplate"]),
        (
            "text edges vetoed by lineage (--lineage-veto)",
            a["lineage_vetoed_edges"]["count"] if a["lineage_veto"] else "off",
        ),
        ("edges cut by reviewers", a["cut_by_review"]),
        ("boilerplate suspect shingles", a["boilerplate_shingles"]),
        ("threshold", a["threshold"]),
        ("config fingerprint", a["config_fingerprint"]),
    ]
    if a["policy_field"]:
        rows.append(("families mixing access policies", a["policies"]["mixed_families"]))
    esc = html.escape
    leak_rows = "".join(
        f"<tr><td>{esc(k)}</td><td class='n'>{v}</td></tr>" for k, v in leak["pairs"].items()
    ) or "<tr><td colspan='2' class='muted'>no family straddles splits</td></tr>"
    slices = "".join(
        f"<h3>by {esc(name)}</h3><table>"
        + "".join(f"<tr><td>{esc(k)}</td><td class='n'>{v}</td></tr>" for k, v in vals.items())
        + "</table>"
        for name, vals in leak["by"].items()
    )
    shown = sorted(fam.families, key=lambda f: (-bool(f.flags), -len(f), f.id))[:10]
    sections = []
    for f in shown:
        sections.append(
            f"<h3>Family {f.id}: {len(f)} members, splits "
            f"{esc(json.dumps(f.splits))}"
            + (f", policies {esc(json.dumps(f.policies))}" if f.policies else "")
            + "</h3><p class='edge'>"
            + esc("; ".join(f.flags) or "no flags")
            + "</p>"
        )
        for e in f.edges[:3]:
            head = (
                f"<p class='edge'>{esc(str(ids[e.a]))} — {esc(str(ids[e.b]))}: {e.kind}"
                + (f", J = {e.score:.3f}" if e.score is not None else "")
                + (f", {esc(e.reason)}" if e.reason else "")
                + (
                    f", J without boilerplate {e.score_without_boilerplate:.3f}"
                    if e.score_without_boilerplate is not None
                    else ""
                )
                + (f" — <b>{esc('; '.join(e.flags))}</b>" if e.flags else "")
                + "</p>"
            )
            sections.append(
                head
                + "<div class='pair'>"
                + f"<pre>{highlight_spans(texts[e.a], list(e.spans_a))}</pre>"
                f"<pre>{highlight_spans(texts[e.b], list(e.spans_b))}</pre></div>"
            )
    return (
        page_top("neardup audit", "neardup audit", a["inputs"], cards, rows)
        + language_table(
            a.get("by_language", {}),
            ("records", "records"),
            (("records_in_families", "in families"), ("leaking_records", "leaking")),
        )
        + "<h2>Cross-split leakage (records of A with a relative in B)</h2><table>"
        + leak_rows
        + "</table>"
        + slices
        + _veto_html(a)
        + "<h2>Family sizes</h2>"
        + size_chart(fam.families, "family sizes")
        + "<h2>Families to review</h2>"
        + ("".join(sections) or "<p class='muted'>none</p>")
        + "</body></html>\n"
    )

"""Families: who is a relative of whom, with evidence (what that means for splits is
in :mod:`neardup.lineage.splits`).

A **family** is a connected component over three kinds of edges:

* ``exact`` — same normalized content (content hash, then equal shingle sets);
* ``near`` — a verified near duplicate: exact Jaccard of the shingle sets >= the
  threshold (never an estimate);
* ``lineage`` — the records say so: same ``origin_id`` (revisions of one origin,
  chained in ``revision_id`` / ``captured_at`` / input order);
* ``quote`` — one record quotes a span of the other (``Provenance.quote``, see
  :mod:`neardup.lineage.quotes`); the spans are the edge's evidence.

Lineage only **adds** edges: two records with different ``origin_id`` values are
still joined by their text (copies are made across origins all the time, so a
different origin id is no proof that two texts are unrelated).  With
``lineage_veto`` (off by default) a *near* edge between two records whose
``origin_id`` values are both given and differ is not a family edge: it is kept in
``vetoed`` and counted, with examples, in ``stats["lineage_vetoed_edges"]``; an
``exact`` edge (the same normalized content) is never vetoed.
Normalization is only for finding candidates: every near edge carries the shared
spans as character offsets into the *original* texts.

Boilerplate: a shingle found in at least ``boilerplate_min_docs`` documents and in
at least ``boilerplate_fraction`` of them is a boilerplate suspect (footers,
templates, navigation).  Each near edge records the Jaccard it keeps without those
shingles; with ``ignore_boilerplate`` edges that fall below the threshold without
them are dropped (``dropped_by_boilerplate``).  (Pairs that would only *reach* the
threshold once boilerplate is removed — one side has a footer, the other not — are
not searched for; their Jaccard with the footer is below the threshold.)

Review flags: a family larger than ``large_family``; a family whose ``label`` values
differ; a family whose members carry different access policies (``policy``); an
edge whose shared text hides a different number ("47" vs "48") or a negation present
on one side only ("was" vs "was not").  Reviewer decisions
(:class:`Decision`, JSONL) confirm an edge or cut it; cut edges are removed before
components are formed, and a family all of whose text edges are confirmed counts as
reviewer-confirmed.

Example (the seed's three tickets and an empty one):
    >>> texts = ["Gateway west rejected retry for request 47 after timeout",
    ...          "Gateway west rejected retry for request 47 after timeout again",
    ...          "Billing north confirmed refund for invoice 82", ""]
    >>> from neardup import Config, ShingleSpec
    >>> fam = build_families(texts, config=Config(threshold=0.7,
    ...                      shingle=ShingleSpec(kind="word", k=2)))
    >>> [f.members for f in fam.families]
    [(0, 1)]
    >>> fam.family_of.tolist()
    [0, 0, 1, 2]
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from neardup.batch.pipeline import find_duplicates
from neardup.core._errors import InputError, InvalidConfig
from neardup.core._provenance import PROVENANCE_FIELDS, STRUCTURED_FIELDS
from neardup.core.config import DEFAULT_MEMORY_LIMIT, Config
from neardup.kernels._unionfind import component_roots
from neardup.lineage.quotes import Quote, Where, parse_policy, parse_quote, resolve_quotes
from neardup.text.hashing import HashKey
from neardup.verify.explain import spans_for_pairs

__all__ = [
    "PROVENANCE_FIELDS",
    "Decision",
    "Family",
    "FamilyEdge",
    "FamilyResult",
    "Provenance",
    "build_families",
    "read_decisions",
]

EdgeKind = Literal["exact", "near", "lineage", "quote"]

_NUM = re.compile(r"\d+(?:[.,]\d+)*")
_NEG = re.compile(r"\b(?:not|no|never|none|nobody|nothing|neither|nor|without|cannot)\b|n't\b")


@dataclass(frozen=True, slots=True, kw_only=True)
class Provenance:
    """Optional facts about a record; None (or empty) when unknown.  ``policy`` is
    the record's access-policy labels, ``quote`` the spans of other records it
    quotes."""

    origin_id: str | None = None
    revision_id: str | None = None
    split: str | None = None
    source: str | None = None
    language: str | None = None
    template: str | None = None
    captured_at: str | None = None
    label: str | None = None
    policy: tuple[str, ...] = ()
    quote: tuple[Quote, ...] = ()

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any], where: Where = ("record", None)) -> Provenance:
        """From provenance names to values; InputError (located by ``where``) for a
        policy or quote of another shape."""
        return cls(
            **{
                k: None if m.get(k) is None else str(m[k])
                for k in PROVENANCE_FIELDS
                if k not in STRUCTURED_FIELDS
            },
            policy=parse_policy(m.get("policy"), where),
            quote=parse_quote(m.get("quote"), where),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class FamilyEdge:
    """An edge that joined a family (``a < b`` by position)."""

    a: int
    b: int
    kind: EdgeKind
    score: float | None
    reason: str = ""
    spans_a: tuple[tuple[int, int], ...] = ()
    spans_b: tuple[tuple[int, int], ...] = ()
    score_without_boilerplate: float | None = None
    flags: tuple[str, ...] = ()
    confirmed: bool = False

    def to_dict(self, ids: Sequence[Any]) -> dict[str, Any]:
        return {
            "a": ids[self.a],
            "b": ids[self.b],
            "kind": self.kind,
            "score": self.score,
            "reason": self.reason,
            "spans_a": [list(s) for s in self.spans_a],
            "spans_b": [list(s) for s in self.spans_b],
            "score_without_boilerplate": self.score_without_boilerplate,
            "flags": list(self.flags),
            "confirmed": self.confirmed,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Family:
    """A connected component of two or more records, with the edges that joined it."""

    id: int
    members: tuple[int, ...]
    edges: tuple[FamilyEdge, ...]
    splits: dict[str, int]
    flags: tuple[str, ...]
    confirmed: bool
    policies: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.members)

    def to_dict(self, ids: Sequence[Any]) -> dict[str, Any]:
        return {
            "family": self.id,
            "members": [ids[m] for m in self.members],
            "size": len(self.members),
            "splits": self.splits,
            "flags": list(self.flags),
            "reviewer_confirmed": self.confirmed,
            "edges": [e.to_dict(ids) for e in self.edges],
            # only when a member carries an access policy: lines stay as they were
            # for records without one
            **({"policies": self.policies} if self.policies else {}),
        }


@dataclass(frozen=True, slots=True)
class Decision:
    """A reviewer's word on one edge: ``confirm`` it or ``split`` (cut) it."""

    a: str
    b: str
    decision: Literal["confirm", "split"]


@dataclass(frozen=True, eq=False, slots=True)
class FamilyResult:
    """Families of a batch.  ``family_of[i]`` is i's family id; records without
    relatives get ids of their own after the families (so every record has one).
    ``scripts[i]`` is record i's detected script id
    (:data:`neardup.text.scripts.SCRIPTS`), when known."""

    n: int
    families: list[Family]
    family_of: npt.NDArray[np.int64]
    provenance: list[Provenance]
    boilerplate: list[tuple[int, int]]  # (shingle hash, document count), most common first
    vetoed: list[FamilyEdge]
    dropped_by_boilerplate: list[FamilyEdge]
    cut_by_review: int
    stats: dict[str, Any] = field(default_factory=dict)
    scripts: npt.NDArray[np.uint8] | None = field(default=None, repr=False)


def read_decisions(path: str) -> list[Decision]:
    """Reviewer decisions, one JSON object per line: ``{"a": ID, "b": ID,
    "decision": "confirm" | "split"}`` (ids as in the input's id field)."""
    out: list[Decision] = []
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError as exc:
        raise InputError(path, None, f"cannot read ({exc})", "check the path") from exc
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as exc:
            raise InputError(path, n, "not valid JSON", "write one object per line") from exc
        if not isinstance(rec, dict) or rec.get("decision") not in ("confirm", "split"):
            raise InputError(
                path, n, "needs a, b and decision confirm|split", 'e.g. {"a": 1, "b": 2, '
                '"decision": "split"}'
            )
        if "a" not in rec or "b" not in rec:
            raise InputError(path, n, "needs both a and b", "name the edge's two records")
        out.append(Decision(str(rec["a"]), str(rec["b"]), rec["decision"]))
    return out


def _review_flags(ta: str, tb: str, spans_a: Sequence[tuple[int, int]]) -> tuple[str, ...]:
    flags = []
    na, nb = Counter(_NUM.findall(ta)), Counter(_NUM.findall(tb))
    if na != nb:
        only_a = sorted((na - nb).elements())[:3]
        only_b = sorted((nb - na).elements())[:3]
        flags.append(f"number differs: {' '.join(only_a) or '-'} vs {' '.join(only_b) or '-'}")
    ga = len(_NEG.findall(ta.casefold()))
    gb = len(_NEG.findall(tb.casefold()))
    if ga != gb:
        flags.append(f"negation differs: {ga} vs {gb}")
    return tuple(flags)


def _boilerplate(
    data: npt.NDArray[np.uint64], indptr: npt.NDArray[np.int64], min_docs: int, fraction: float
) -> tuple[npt.NDArray[np.uint64], list[tuple[int, int]]]:
    n = indptr.shape[0] - 1
    if data.size == 0 or n == 0:
        return np.zeros(0, dtype=np.uint64), []
    vals, counts = np.unique(data, return_counts=True)  # sets are distinct per document
    need = max(min_docs, math.ceil(fraction * n))
    hot = counts >= need
    order = np.lexsort((vals[hot], -counts[hot]))
    listed = [(int(v), int(c)) for v, c in zip(vals[hot][order], counts[hot][order], strict=True)]
    return np.sort(vals[hot]), listed


def _jaccard_without(
    data: npt.NDArray[np.uint64],
    indptr: npt.NDArray[np.int64],
    a: int,
    b: int,
    hot: npt.NDArray[np.uint64],
) -> float:
    sa = data[indptr[a] : indptr[a + 1]]
    sb = data[indptr[b] : indptr[b + 1]]
    if hot.size:
        sa = sa[~np.isin(sa, hot, assume_unique=True)]
        sb = sb[~np.isin(sb, hot, assume_unique=True)]
    inter = np.intersect1d(sa, sb, assume_unique=True).size
    union = sa.size + sb.size - inter
    return float(inter / union) if union else 0.0


def _natural(value: str | None) -> tuple[tuple[int, int | str], ...]:
    """Sort key reading digit runs as numbers ("r2" before "r10")."""
    if value is None:
        return ()
    return tuple(
        (0, int(part)) if part.isascii() and part.isdigit() else (1, part)
        for part in re.findall(r"\d+|\D+", value)
    )


def _lineage_edges(prov: Sequence[Provenance]) -> list[FamilyEdge]:
    by_origin: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(prov):
        if p.origin_id is not None:
            by_origin[p.origin_id].append(i)
    out = []
    for origin, members in sorted(by_origin.items()):
        chain = sorted(
            members,
            key=lambda i: (_natural(prov[i].revision_id), prov[i].captured_at or "", i),
        )
        for x, y in itertools.pairwise(chain):
            a, b = min(x, y), max(x, y)
            rev = " -> ".join(str(prov[i].revision_id) for i in (x, y) if prov[i].revision_id)
            out.append(
                FamilyEdge(
                    a=a,
                    b=b,
                    kind="lineage",
                    score=None,
                    reason=f"origin_id {origin}" + (f" (revisions {rev})" if rev else ""),
                    confirmed=True,
                )
            )
    return out


def _quote_edges(
    texts: Sequence[str],
    prov: Sequence[Provenance],
    ids: Sequence[Any],
    pos_of: Mapping[str, int],
    where: Sequence[Where] | None,
) -> list[FamilyEdge]:
    """One ``quote`` edge per pair of records linked by quotes (either way), with
    every quoted span as evidence on both sides."""
    spans: dict[tuple[int, int], tuple[list[tuple[int, int]], list[tuple[int, int]]]] = {}
    reasons: dict[tuple[int, int], list[str]] = defaultdict(list)
    links = resolve_quotes(texts, [p.quote for p in prov], pos_of, where)
    for q in links:
        a, b = min(q.quoting, q.source), max(q.quoting, q.source)
        sa, sb = spans.setdefault((a, b), ([], []))
        src_side, own_side = (sa, sb) if q.source == a else (sb, sa)
        src_side.append(q.span)
        if q.at is not None:
            own_side.append(q.at)
        reasons[(a, b)].append(f"{ids[q.quoting]} quotes {ids[q.source]}[{q.span[0]}:{q.span[1]}]")
    return [
        FamilyEdge(
            a=a,
            b=b,
            kind="quote",
            score=None,
            reason="; ".join(reasons[(a, b)]),
            spans_a=tuple(sorted(set(sa))),
            spans_b=tuple(sorted(set(sb))),
            confirmed=True,
        )
        for (a, b), (sa, sb) in sorted(spans.items())
    ]


def _policies(members: Sequence[int], prov: Sequence[Provenance]) -> dict[str, int]:
    """Members per access-policy label (``""``: members without a policy, listed
    only when some member has one)."""
    got = Counter(lb for m in members for lb in prov[m].policy or ("",))
    return {} if set(got) <= {""} else dict(sorted(got.items()))


def build_families(
    texts: Sequence[str],
    provenance: Sequence[Provenance] | None = None,
    *,
    ids: Sequence[Any] | None = None,
    config: Config | None = None,
    key: HashKey | None = None,
    method: Literal["lsh", "exact"] = "lsh",
    lineage_veto: bool = False,
    ignore_boilerplate: bool = False,
    boilerplate_min_docs: int = 20,
    boilerplate_fraction: float = 0.01,
    large_family: int = 50,
    decisions: Iterable[Decision] = (),
    spans: bool = True,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    where: Sequence[Where] | None = None,
) -> FamilyResult:
    """Families of ``texts`` (see the module docs for the edge kinds and flags).

    Guarantees: every ``near`` edge has exact Jaccard >= ``config.threshold``
    (recall is that of :func:`neardup.find_duplicates`: a pair at the threshold is a
    candidate with the predicted probability in ``stats``; ``method="exact"`` finds
    all).  Every exact-duplicate pair is in one family whatever the provenance;
    only ``lineage_veto`` removes text edges (near ones, between records whose known
    origins differ).  Deterministic for the same inputs and config.

    >>> copy = "one text copied from one site to another"
    >>> prov = [Provenance(origin_id="o1"), Provenance(origin_id="o2")]
    >>> [f.members for f in build_families([copy, copy], prov, lineage_veto=True).families]
    [(0, 1)]
    """
    cfg = config or Config()
    n = len(texts)
    prov = list(provenance) if provenance is not None else [Provenance()] * n
    if len(prov) != n:
        raise InvalidConfig("provenance", len(prov), f"need one per text ({n})", "align them")
    if not 0 < boilerplate_fraction <= 1 or boilerplate_min_docs < 2 or large_family < 2:
        raise InvalidConfig(
            "boilerplate/large_family",
            (boilerplate_fraction, boilerplate_min_docs, large_family),
            "out of range",
            "use a fraction in (0, 1], min docs >= 2, large_family >= 2",
        )
    id_list = list(ids) if ids is not None else list(range(n))
    pos_of = {str(x): i for i, x in enumerate(id_list)}
    quote_edges = _quote_edges(texts, prov, id_list, pos_of, where)
    res = find_duplicates(
        texts, config=cfg, key=key, method=method, edges="all", memory_limit=memory_limit
    )
    sets = res.sets
    if sets is None:  # pragma: no cover - find_duplicates always keeps them
        raise InvalidConfig("sets", None, "no shingle sets", "rerun")
    hot, listed = _boilerplate(sets.data, sets.indptr, boilerplate_min_docs, boilerplate_fraction)

    review: dict[tuple[int, int], str] = {}
    for d in decisions:
        if d.a not in pos_of or d.b not in pos_of:
            raise InvalidConfig(
                "decision", (d.a, d.b), "names an unknown record", "use ids of the input"
            )
        x, y = pos_of[d.a], pos_of[d.b]
        review[(min(x, y), max(x, y))] = d.decision

    t = float(cfg.threshold)
    near_pairs = [
        (e.a, e.b)
        for e in res.edges
        if e.method != "identical" and spans and len(texts[e.a]) + len(texts[e.b]) < 400_000
    ]
    span_of = dict(
        zip(
            near_pairs,
            spans_for_pairs(texts, near_pairs, cfg.shingle, normalizer=cfg.normalizer),
            strict=True,
        )
    )
    kept_edges: list[FamilyEdge] = []
    vetoed: list[FamilyEdge] = []
    dropped: list[FamilyEdge] = []
    cut = 0
    for e in res.edges:
        a, b = e.a, e.b
        kind: EdgeKind = "exact" if e.method == "identical" else "near"
        score = 1.0 if kind == "exact" else e.jaccard
        sp_a: tuple[tuple[int, int], ...] = ()
        sp_b: tuple[tuple[int, int], ...] = ()
        flags: tuple[str, ...] = ()
        wob = None
        if kind == "near":
            wob = _jaccard_without(sets.data, sets.indptr, a, b, hot)
            if (a, b) in span_of:
                got_a, got_b = span_of[(a, b)]
                sp_a, sp_b = tuple(got_a), tuple(got_b)
            flags = _review_flags(texts[a], texts[b], sp_a)
        fe = FamilyEdge(
            a=a,
            b=b,
            kind=kind,
            score=score,
            spans_a=sp_a,
            spans_b=sp_b,
            score_without_boilerplate=wob,
            flags=flags,
            confirmed=review.get((a, b)) == "confirm",
        )
        oa, ob = prov[a].origin_id, prov[b].origin_id
        if lineage_veto and kind == "near" and oa is not None and ob is not None and oa != ob:
            vetoed.append(fe)
            continue
        if review.get((a, b)) == "split":
            cut += 1
            continue
        if ignore_boilerplate and wob is not None and wob < t:
            dropped.append(fe)
            continue
        kept_edges.append(fe)
    for le in _lineage_edges(prov) + quote_edges:
        if review.get((le.a, le.b)) == "split":
            cut += 1
            continue
        kept_edges.append(le)

    # One kernel call for all edges (a call per edge from Python took numba's JIT).
    roots = component_roots(
        n,
        np.fromiter((fe.a for fe in kept_edges), dtype=np.int64, count=len(kept_edges)),
        np.fromiter((fe.b for fe in kept_edges), dtype=np.int64, count=len(kept_edges)),
    )
    comp: dict[int, list[int]] = defaultdict(list)
    for i in range(n):
        comp[int(roots[i])].append(i)
    multi = sorted((m for m in comp.values() if len(m) > 1), key=lambda m: m[0])
    edges_of: dict[int, list[FamilyEdge]] = defaultdict(list)
    for fe in sorted(kept_edges, key=lambda x: (x.a, x.b, x.kind)):
        edges_of[int(roots[fe.a])].append(fe)
    family_of = np.empty(n, dtype=np.int64)
    families = []
    for fid, members in enumerate(multi):
        root = int(roots[members[0]])
        family_of[members] = fid
        fedges = edges_of[root]
        splits = Counter(prov[m].split or "" for m in members)
        labels: set[str] = {lb for m in members if (lb := prov[m].label) is not None}
        fflags = []
        if len(members) >= large_family:
            fflags.append(f"large family ({len(members)} members)")
        if len(labels) > 1:
            fflags.append("mixed labels: " + ", ".join(sorted(labels)))
        policies = _policies(members, prov)
        if len({prov[m].policy for m in members}) > 1:
            fflags.append("mixed access policies: " + ", ".join(p or "(none)" for p in policies))
        if any(e.flags for e in fedges):
            fflags.append("edge with a different number or negation")
        text_edges = [e for e in fedges if e.kind in ("exact", "near")]
        confirmed = bool(text_edges) and all(e.confirmed for e in text_edges)
        families.append(
            Family(
                id=fid,
                members=tuple(members),
                edges=tuple(fedges),
                splits={k: v for k, v in sorted(splits.items()) if k},
                flags=tuple(fflags),
                confirmed=confirmed,
                policies=policies,
            )
        )
    nxt = len(families)
    for members in sorted(comp.values(), key=lambda m: m[0]):
        if len(members) == 1:
            family_of[members[0]] = nxt
            nxt += 1
    depended = sum(
        1 for e in kept_edges + dropped if e.score_without_boilerplate is not None
        and e.score_without_boilerplate < t
    )
    kinds = Counter(e.kind for e in kept_edges)
    stats: dict[str, Any] = {
        "records": n,
        "families": len(families),
        "records_in_families": int(sum(len(f) for f in families)),
        "largest_family": max((len(f) for f in families), default=0),
        "edges": {k: kinds[k] for k in sorted(kinds)},
        "exact_duplicates": int(res.stats.get("exact_duplicates", 0)),
        "near_duplicate_candidates": int(res.stats.get("candidate_pairs", 0)),
        "verified_pairs": int(res.stats.get("verified_pairs", 0)),
        "near_edges": sum(1 for e in kept_edges if e.kind == "near"),
        "edges_depending_on_boilerplate": depended,
        "dropped_by_boilerplate": len(dropped),
        "lineage_veto": lineage_veto,
        "lineage_vetoed_edges": _vetoed_summary(vetoed, id_list),
        "cut_by_review": cut,
        "reviewer_confirmed_families": sum(1 for f in families if f.confirmed),
        "flagged_families": sum(1 for f in families if f.flags),
        "boilerplate_shingles": len(listed),
        "predicted_recall_at_threshold": res.stats.get("predicted_recall_at_threshold"),
        "threshold": t,
        "config_fingerprint": res.config_fingerprint,
    }
    return FamilyResult(
        n, families, family_of, prov, listed, vetoed, dropped, cut, stats, res.scripts
    )


def _vetoed_summary(vetoed: Sequence[FamilyEdge], ids: Sequence[Any]) -> dict[str, Any]:
    """How many text edges ``lineage_veto`` removed, with the highest-scoring ones
    as examples (the likeliest copies the veto hid)."""
    top = sorted(vetoed, key=lambda e: (-(e.score or 0.0), e.a, e.b))[:5]
    return {
        "count": len(vetoed),
        "examples": [{"a": ids[e.a], "b": ids[e.b], "score": e.score} for e in top],
    }

"""What families mean for splits: leakage across the splits a dataset already has
(:func:`cross_split_leakage`), and a new split that never divides a family
(:func:`family_split`), over the families of :func:`neardup.lineage.families.build_families`.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.core._errors import InvalidConfig
from neardup.lineage.families import FamilyResult

__all__ = ["cross_split_leakage", "family_split", "leaking_mask"]


def _straddling(result: FamilyResult) -> Iterator[dict[str, list[int]]]:
    """The members of each family that straddles splits, by split (records without
    a split left out)."""
    prov = result.provenance
    for fam in result.families:
        by_split: dict[str, list[int]] = defaultdict(list)
        for m in fam.members:
            s = prov[m].split
            if s is not None:
                by_split[s].append(m)
        if len(by_split) >= 2:
            yield by_split


def leaking_mask(result: FamilyResult) -> npt.NDArray[np.bool_]:
    """Per record: whether it has a relative in another split (the records
    ``leaking_records`` of :func:`cross_split_leakage` counts)."""
    mask = np.zeros(result.n, dtype=np.bool_)
    for by_split in _straddling(result):
        for members in by_split.values():
            mask[members] = True
    return mask


def cross_split_leakage(
    result: FamilyResult, *, slices: Sequence[str] = ("source", "language", "template")
) -> dict[str, Any]:
    """For each ordered pair of splits (A, B): how many A records have a relative in B.

    Also sliced by each provenance field in ``slices`` (and by ``captured_at`` month)
    when the records carry it.  ``leaking_records`` is the number of records with a
    relative in another split; 0 means no family straddles splits.

    >>> from neardup import Config, ShingleSpec
    >>> from neardup.lineage.families import Provenance, build_families
    >>> texts = ["alpha beta gamma delta", "alpha beta gamma delta", "x y z w"]
    >>> prov = [Provenance(split="train"), Provenance(split="test"), Provenance(split="test")]
    >>> fam = build_families(texts, prov, config=Config(shingle=ShingleSpec(kind="word", k=2)))
    >>> cross_split_leakage(fam)["pairs"]["test->train"]
    1
    """
    prov = result.provenance
    pairs: Counter[str] = Counter()
    per_slice: dict[str, Counter[str]] = defaultdict(Counter)
    leaking: set[int] = set()
    for by_split in _straddling(result):
        for sa, ma in by_split.items():
            for sb in by_split:
                if sa == sb:
                    continue
                pairs[f"{sa}->{sb}"] += len(ma)
            leaking.update(ma)
    for m in sorted(leaking):
        p = prov[m]
        for name in slices:
            v = getattr(p, name)
            if v is not None:
                per_slice[name][v] += 1
        if p.captured_at:
            per_slice["captured_month"][p.captured_at[:7]] += 1
    split_sizes = Counter(p.split for p in prov if p.split is not None)
    return {
        "splits": dict(sorted(split_sizes.items())),
        "pairs": dict(sorted(pairs.items())),
        "leaking_records": len(leaking),
        "leaking_families": sum(
            1 for f in result.families if len({prov[m].split for m in f.members} - {None}) > 1
        ),
        "by": {k: dict(sorted(v.items())) for k, v in sorted(per_slice.items())},
    }


def _seeded_rank(seed: int, key: str) -> bytes:
    return hashlib.blake2b(f"{seed}\x00{key}".encode(), digest_size=8).digest()


def family_split(
    result: FamilyResult,
    ratios: Mapping[str, float],
    *,
    seed: int = 0,
    ids: Sequence[Any] | None = None,
    stratify: Sequence[str | None] | None = None,
) -> tuple[list[str], dict[str, Any]]:
    """Assign every record to a split so that no family is divided.

    Families (singletons included) are placed largest first, ties in an order drawn
    from ``seed``; each goes to the split furthest below its target share.  With
    ``stratify`` (one value per record) this runs per stratum (a family's stratum is
    its most common value).  Deterministic for the same families, ratios and seed.
    Returns the split of each record and a report with the achieved ratios.

    >>> from neardup import Config, ShingleSpec
    >>> from neardup.lineage.families import build_families
    >>> fam = build_families(["a b c d", "a b c d", "e f g h", "i j k l"],
    ...                      config=Config(shingle=ShingleSpec(kind="word", k=2)))
    >>> splits, rep = family_split(fam, {"train": 0.5, "test": 0.5}, seed=1)
    >>> splits[0] == splits[1]
    True
    """
    if not ratios or any(not (v > 0) for v in ratios.values()):
        raise InvalidConfig(
            "ratios", dict(ratios), "need positive shares", "e.g. train=0.8,test=0.2"
        )
    total = float(sum(ratios.values()))
    share = {k: v / total for k, v in ratios.items()}
    names = list(share)
    id_list = list(ids) if ids is not None else list(range(result.n))
    groups: dict[int, list[int]] = defaultdict(list)
    for i, f in enumerate(result.family_of.tolist()):
        groups[f].append(i)
    strata: dict[str, list[list[int]]] = defaultdict(list)
    for members in groups.values():
        if stratify is None:
            s = ""
        else:
            vals = Counter(stratify[m] or "" for m in members)
            s = sorted(vals.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        strata[s].append(members)
    out = [""] * result.n
    for s in sorted(strata):
        fams = sorted(
            strata[s], key=lambda m: (-len(m), _seeded_rank(seed, f"{s}\x00{id_list[m[0]]}"))
        )
        count = dict.fromkeys(names, 0)
        size = sum(len(m) for m in fams)
        for members in fams:
            # the split furthest below its target (ties: larger share, then order)
            best = max(
                names, key=lambda k: (share[k] * size - count[k], share[k], -names.index(k))
            )
            count[best] += len(members)
            for m in members:
                out[m] = best
    achieved = Counter(out)
    report = {
        "target": {k: round(v, 6) for k, v in share.items()},
        "achieved": {k: round(achieved.get(k, 0) / max(result.n, 1), 6) for k in names},
        "records": {k: achieved.get(k, 0) for k in names},
        "families": len(groups),
        "largest_family": max((len(m) for m in groups.values()), default=0),
        "seed": seed,
        "stratified": stratify is not None,
    }
    return out, report

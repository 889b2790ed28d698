"""Measurements behind ``neardup tune``: what a (bands, rows) layout does on a
corpus, from its signatures.

For the pairs under test (:class:`Pairs`: the exact join's pairs, or labelled
pairs) :func:`measure_layout` counts those colliding in at least one band, overall
and per segment, with Wilson intervals; it enumerates the colliding pairs of the
whole corpus (bounded by ``max_pairs``, checked before allocation) for the
candidates per query, the far-collision rate and the hot buckets.
:func:`collision_curve` compares the measured collision share by similarity
bucket with the S-curve.  :class:`TuneConfig` holds what is asked for.

Example:
    >>> pairs_needed(0.95, 0.95)
    73
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.core._errors import InvalidConfig, NoFeasibleParameters
from neardup.core.checks import check_float, check_int
from neardup.core.layout import (
    candidate_probability,
    default_layout,
    optimal_params,
    wilson_interval,
)
from neardup.sketch.minhash import SignatureSet
from neardup.text.hashing import SchemeDescriptor, ShingleSets

__all__ = [
    "MISSING",
    "MIXED",
    "Pairs",
    "TuneConfig",
    "band_buckets",
    "band_keys_of",
    "candidate_layouts",
    "collision_curve",
    "hot_buckets",
    "layout_failures",
    "layout_for",
    "measure_layout",
    "n_items",
    "pair_codes",
    "pairs_needed",
    "quantiles",
    "recall_rate",
    "segments_of_pairs",
]

MIXED = "(mixed)"
"""Segment of a pair whose items have different values."""
MISSING = "(missing)"
"""Segment value of an item without the field."""
_I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, kw_only=True, slots=True)
class TuneConfig:
    """What ``neardup tune`` is asked for (frozen, validated on construction).

    threshold: similarity the layout must find; far: similarity of pairs to keep
    out; recall: the candidate recall whose Wilson lower bound must clear it in
    every segment; budget: candidates per query allowed at ``n`` items (both the
    expected far candidates and the measured p99, scaled to ``n``); n: index size
    (None: the corpus size, or 1,000,000 with no corpus); max_perm: the largest
    signature a layout may use; confidence: of the two-sided Wilson interval;
    seeds: permutation seeds of the sensitivity check; ranges: two similarity
    thresholds for the one-versus-two-layouts comparison; bucket_width: of the
    collision curve; max_pairs: colliding pairs a layout may enumerate (layouts
    over it are reported unmeasured).
    """

    threshold: float = 0.8
    far: float = 0.3
    recall: float = 0.95
    budget: float = 20_000.0
    n: int | None = None
    max_perm: int = 256
    confidence: float = 0.95
    seeds: int = 3
    ranges: tuple[float, float] = (0.5, 0.9)
    bucket_width: float = 0.05
    max_pairs: int = 20_000_000

    def __post_init__(self) -> None:
        t = check_float("threshold", self.threshold, "use e.g. --threshold 0.8")
        f = check_float("far", self.far, "use e.g. --far 0.3")
        if not 0.0 < f < t <= 1.0:
            raise InvalidConfig("far", f, f"need 0 < far < threshold={t} <= 1", "e.g. --far 0.3")
        r = check_float("recall", self.recall, "use e.g. --recall 0.95")
        if not 0.0 < r < 1.0:
            raise InvalidConfig("recall", r, "must be in (0, 1)", "use e.g. --recall 0.95")
        if check_float("budget", self.budget, "use e.g. --budget 20000") <= 0:
            raise InvalidConfig("budget", self.budget, "must be > 0", "use e.g. --budget 20000")
        if self.n is not None:
            check_int("n", self.n, 1, 1 << 62, "use e.g. -n 1000000")
        check_int("max_perm", self.max_perm, 1, 4096, "use e.g. --max-perm 256")
        c = check_float("confidence", self.confidence, "use e.g. --confidence 0.95")
        if not 0.5 <= c < 1.0:
            raise InvalidConfig("confidence", c, "must be in [0.5, 1)", "use e.g. 0.95")
        check_int("seeds", self.seeds, 1, 64, "use e.g. --seeds 3")
        lo_hi = tuple(self.ranges)
        if len(lo_hi) != 2 or not all(isinstance(x, int | float) for x in lo_hi):
            raise InvalidConfig("ranges", self.ranges, "need two numbers", "e.g. 0.5 0.9")
        if not 0.05 <= float(lo_hi[0]) < float(lo_hi[1]) <= 1.0:
            raise InvalidConfig("ranges", lo_hi, "need 0.05 <= low < high <= 1", "e.g. 0.5 0.9")
        w = check_float("bucket_width", self.bucket_width, "use e.g. 0.05")
        if not 0.005 <= w <= 0.5:
            raise InvalidConfig("bucket_width", w, "must be in [0.005, 0.5]", "use e.g. 0.05")
        check_int("max_pairs", self.max_pairs, 1, 1 << 40, "use e.g. 20000000")


def candidate_layouts(
    cfg: TuneConfig, num_perm: int = 128, *, n: int | None = None
) -> list[tuple[int, int]]:
    """The layouts a memo measures, by hashes then bands: for each rows r <= 20 the
    fewest bands whose S-curve reaches ``recall`` at the threshold and 1.5, 2 and 3
    times as many (the bounds need margin), with b·r <= max_perm; plus the layout
    :func:`optimal_params` picks and the default layout of ``num_perm``.

    >>> (8, 5) in candidate_layouts(TuneConfig(threshold=0.8, far=0.3, max_perm=128))
    True
    """
    out: set[tuple[int, int]] = set()
    for r in range(1, 21):
        top = cfg.max_perm // r
        if top < 1:
            break
        b0 = next(
            (
                b
                for b in range(1, top + 1)
                if candidate_probability(cfg.threshold, b, r) >= cfg.recall
            ),
            None,
        )
        if b0 is None:
            out.add((top, r))
            continue
        out.update((min(top, math.ceil(b0 * f)), r) for f in (1.0, 1.5, 2.0, 3.0))
    pick = layout_for(cfg, cfg.threshold, cfg.far, n)
    if pick is not None:
        out.add(pick)
    default = default_layout(cfg.threshold, min(num_perm, cfg.max_perm))
    out.add(default)
    return sorted(out, key=lambda br: (br[0] * br[1], br[0]))


def n_items(cfg: TuneConfig, docs: int) -> int:
    return cfg.n if cfg.n is not None else (docs if docs else 1_000_000)


def layout_for(
    cfg: TuneConfig, near: float, far: float, n: int | None = None
) -> tuple[int, int] | None:
    try:
        lay = optimal_params(
            near=near,
            far=far,
            recall=cfg.recall,
            far_budget=cfg.budget,
            n=n if n is not None else n_items(cfg, 0),
            max_perm=cfg.max_perm,
        )
    except NoFeasibleParameters:
        return None
    return lay.bands, lay.rows


# ---------------------------------------------------------------------------
# Measurements on signatures


def band_keys_of(
    matrix: npt.NDArray[np.uint32], scheme: SchemeDescriptor, b: int, r: int
) -> npt.NDArray[np.uint64]:
    """Band keys of layout (b, r) over the first b·r rows (the same prefix of the same
    permutations as a signature of b·r rows)."""
    sig = SignatureSet(
        np.ascontiguousarray(matrix[:, : b * r]), replace(scheme, num_perm=b * r, bands=b, rows=r)
    )
    return sig.band_keys()


def band_buckets(keys: npt.NDArray[np.uint64], members: _I64) -> list[tuple[int, _I64, _I64]]:
    """Per band: (band, members sorted by key, a (2, buckets) array of the start and
    size of each bucket of >= 2 members)."""
    out: list[tuple[int, _I64, _I64]] = []
    for t in range(keys.shape[1]):
        k = keys[members, t]
        order = np.argsort(k, kind="stable")
        ks = k[order]
        starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
        sizes = np.diff(np.r_[starts, len(ks)])
        keep = sizes >= 2
        out.append((t, members[order], np.stack([starts[keep], sizes[keep]])))
    return out


def pair_codes(buckets: list[tuple[int, _I64, _I64]], m: int) -> _I64:
    codes: list[_I64] = []
    for _, sorted_members, ss in buckets:
        starts, sizes = ss
        two = sizes == 2
        s2 = starts[two]
        x, y = sorted_members[s2], sorted_members[s2 + 1]
        codes.append(np.minimum(x, y) * m + np.maximum(x, y))
        for s, z in zip(starts[~two].tolist(), sizes[~two].tolist(), strict=True):
            mem = sorted_members[s : s + z]
            i, j = np.triu_indices(z, 1)
            codes.append(np.minimum(mem[i], mem[j]) * m + np.maximum(mem[i], mem[j]))
    if not codes:
        return np.empty(0, np.int64)
    # A sort and a neighbour test rather than np.unique, whose hashing path is slower here.
    out = np.concatenate(codes)
    out.sort()
    return out[np.r_[True, out[1:] != out[:-1]]] if out.size else out


def quantiles(counts: npt.NDArray[np.int64]) -> dict[str, float]:
    if counts.size == 0:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0, "mean": 0.0, "max": 0.0}
    q = np.quantile(counts, [0.5, 0.95, 0.99], method="inverted_cdf")
    return {
        "p50": float(q[0]),
        "p95": float(q[1]),
        "p99": float(q[2]),
        "mean": float(counts.mean()),
        "max": float(counts.max()),
    }


def recall_rate(found: int, pairs: int, confidence: float) -> dict[str, Any]:
    lo, hi = wilson_interval(found, pairs, confidence)
    return {
        "pairs": pairs,
        "found": found,
        "recall": found / pairs if pairs else None,
        "lower": lo,
        "upper": hi,
    }


@dataclass(frozen=True, slots=True)
class Pairs:
    """What every layout is measured on."""

    sets: ShingleSets
    eligible: _I64  # positions of items with a signature
    pa: _I64  # pairs with J >= the join floor (or labelled pairs), a < b
    pb: _I64
    jac: npt.NDArray[np.float64]
    truth: npt.NDArray[np.bool_]  # J >= threshold, or labelled duplicate
    seg_of: dict[str, npt.NDArray[np.str_]]  # field -> segment of each pair in (pa, pb)
    far_pairs: int  # pairs with J >= far among eligible items
    far_codes: _I64  # their codes a*m+b, sorted


def segments_of_pairs(
    segments: Mapping[str, Sequence[Any]], pa: _I64, pb: _I64
) -> dict[str, npt.NDArray[np.str_]]:
    """Each field's segment of each pair: the value both items have, :data:`MIXED`
    when they differ, :data:`MISSING` for items without the field.

    >>> pairs = segments_of_pairs({"f": ["x", "x", None]}, np.array([0, 0]), np.array([1, 2]))
    >>> pairs["f"].tolist()
    ['x', '(mixed)']
    """
    out: dict[str, npt.NDArray[np.str_]] = {}
    for field, values in segments.items():
        names, code = np.unique(
            np.array([MISSING if x is None else str(x) for x in values], dtype=np.str_),
            return_inverse=True,
        )
        same = code[pa] == code[pb]
        labels = np.append(names, MIXED)
        out[field] = labels[np.where(same, code[pa], len(names))]
    return out


def measure_layout(
    b: int,
    r: int,
    matrix: npt.NDArray[np.uint32],
    scheme: SchemeDescriptor,
    cc: Pairs,
    cfg: TuneConfig,
    n: int,
) -> dict[str, Any]:
    m = len(cc.sets)
    keys = band_keys_of(matrix, scheme, b, r)
    collide = (keys[cc.pa] == keys[cc.pb]).any(axis=1) if len(cc.pa) else np.zeros(0, np.bool_)
    pf = candidate_probability(cfg.far, b, r)
    row: dict[str, Any] = {
        "bands": b,
        "rows": r,
        "hashes": b * r,
        "theory_recall_at_threshold": candidate_probability(cfg.threshold, b, r),
        "theory_far_probability": pf,
        "memory_bytes_per_item": 4 * b * r + 8 * b,
        "expected_far_candidates_theory": pf * n,
    }
    t = cc.truth
    row["recall"] = {"overall": recall_rate(int(collide[t].sum()), int(t.sum()), cfg.confidence)}
    segs: dict[str, dict[str, Any]] = {}
    for field, arr in cc.seg_of.items():
        segs[field] = {
            v: recall_rate(
                int(collide[t & (arr == v)].sum()), int((t & (arr == v)).sum()), cfg.confidence
            )
            for v in sorted(set(arr[t].tolist()))
        }
    row["recall"]["segments"] = segs
    buckets = band_buckets(keys, cc.eligible)
    planned = sum(int((ss[1] * (ss[1] - 1) // 2).sum()) for _, _, ss in buckets)
    row["collision_pairs_upper_bound"] = planned
    if planned > cfg.max_pairs:
        row["measured"] = False
        row["why_not_measured"] = (
            f"up to {planned:,} colliding pairs to enumerate, over max_pairs={cfg.max_pairs:,}"
        )
        return row
    codes = pair_codes(buckets, m)
    ca, cb = codes // m, codes % m
    per_query = (np.bincount(ca, minlength=m) + np.bincount(cb, minlength=m))[cc.eligible]
    q = quantiles(per_query)
    me = len(cc.eligible)
    far_coll = int(len(codes) - np.isin(codes, cc.far_codes, assume_unique=True).sum())
    below = me * (me - 1) // 2 - cc.far_pairs
    rate = far_coll / below if below > 0 else 0.0
    row.update(
        measured=True,
        candidates_per_query=q,
        p99_candidates_at_n=q["p99"] * n / max(me, 1),
        candidate_pairs=len(codes),
        far_collision_rate=rate,
        expected_far_candidates_measured=rate * n,
        collided=collide,
        hot=hot_buckets(buckets),
    )
    return row


def hot_buckets(buckets: list[tuple[int, _I64, _I64]], top: int = 10) -> list[tuple[int, int, int]]:
    """The ``top`` largest buckets of :func:`band_buckets` as (size, band, a member)."""
    found: list[tuple[int, int, int]] = []
    for t, members, ss in buckets:
        starts, sizes = ss
        for k in np.argsort(-sizes, kind="stable")[:top].tolist():
            found.append((int(sizes[k]), t, int(members[int(starts[k])])))
    return sorted(found, key=lambda x: (-x[0], x[1]))[:top]


def layout_failures(row: dict[str, Any], cfg: TuneConfig) -> list[str]:
    """Why a layout fails the gate ([] when it passes)."""
    why = []
    if not row.get("measured", True):
        return [row["why_not_measured"]]
    rec = row["recall"]
    if rec["overall"]["lower"] < cfg.recall:
        why.append(f"overall recall lower bound {rec['overall']['lower']:.4f} < {cfg.recall}")
    for field, vals in rec.get("segments", {}).items():
        for v, s in vals.items():
            if s["lower"] < cfg.recall:
                why.append(
                    f"{field}={v}: recall lower bound {s['lower']:.4f} < {cfg.recall} "
                    f"({s['found']}/{s['pairs']})"
                )
    if row["expected_far_candidates_theory"] > cfg.budget:
        why.append(
            f"expected far candidates {row['expected_far_candidates_theory']:,.0f} > "
            f"budget {cfg.budget:g}"
        )
    if row.get("p99_candidates_at_n", 0.0) > cfg.budget:
        why.append(
            f"p99 candidates per query at n {row['p99_candidates_at_n']:,.0f} > "
            f"budget {cfg.budget:g}"
        )
    return why


def pairs_needed(recall: float, confidence: float) -> int:
    """Fewest pairs, all found, whose Wilson lower bound clears ``recall``."""
    k = 1
    while wilson_interval(k, k, confidence)[0] < recall and k < 1 << 24:
        k *= 2
    lo, hi = k // 2, k
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if wilson_interval(mid, mid, confidence)[0] < recall else (lo, mid)
    return hi


def collision_curve(
    cc: Pairs, collided: npt.NDArray[np.bool_], b: int, r: int, cfg: TuneConfig, lo: float
) -> dict[str, Any]:
    edges = [lo]
    while edges[-1] + cfg.bucket_width < 1.0 - 1e-9:
        edges.append(round(edges[-1] + cfg.bucket_width, 6))
    edges.append(1.0)
    rows = []
    for i in range(len(edges) - 1):
        a, z = edges[i], edges[i + 1]
        mask = (cc.jac >= a) & ((cc.jac < z) if i < len(edges) - 2 else (cc.jac <= 1.0))
        k, n = int(collided[mask].sum()), int(mask.sum())
        if n == 0:
            continue
        expected = float(np.mean([candidate_probability(float(s), b, r) for s in cc.jac[mask]]))
        w_lo, w_hi = wilson_interval(k, n, cfg.confidence)
        rows.append(
            {
                "lo": a,
                "hi": z,
                "pairs": n,
                "collided": k,
                "share": k / n,
                "lower": w_lo,
                "upper": w_hi,
                "theory": expected,
                "fits": w_lo <= expected <= w_hi,
            }
        )
    return {"bands": b, "rows": r, "buckets": rows, "failing": [x for x in rows if not x["fits"]]}

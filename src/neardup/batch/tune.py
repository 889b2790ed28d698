"""``neardup tune``: LSH layouts calibrated on the user's own corpus.

:func:`tune` measures, for a grid of (bands, rows) layouts, what the S-curve only
predicts: the share of true pairs whose signatures collide in at least one band
(candidate recall), overall and per segment, with Wilson lower bounds
(:func:`neardup.core.layout.wilson_interval`); candidates per query; the measured
far-collision rate; memory per item and the candidate pairs to verify.  The truth
is the exact join over the shingle sets the batch pipeline builds
(:func:`neardup.verify.oracle.allpairs_join`), or a file of labelled pairs
(:func:`read_labels`).  It then recommends the layout with the fewest hashes
whose recall lower bound clears the target in **every** segment and whose
candidate volume is within budget — or refuses, saying why and what to change.

A pair belongs to segment ``v`` of a field when both its items have the value
``v``; pairs across values are counted under ``(mixed)``, items without the field
under ``(missing)``.

With no corpus (``texts`` empty) the memo is theory only: recall is
``candidate_probability(threshold, b, r)`` and the choice agrees with
:func:`neardup.core.layout.optimal_params`.

Example:
    >>> memo = tune([], config=TuneConfig(threshold=0.8, far=0.3, recall=0.95,
    ...                                    budget=20_000, n=1_000_000))
    >>> memo["recommendation"]["layout"]["bands"], memo["recommendation"]["layout"]["rows"]
    (8, 5)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.batch.calibrate import (
    MISSING,
    MIXED,
    Pairs,
    TuneConfig,
    band_buckets,
    band_keys_of,
    candidate_layouts,
    collision_curve,
    layout_failures,
    layout_for,
    measure_layout,
    n_items,
    pair_codes,
    pairs_needed,
    quantiles,
    recall_rate,
    segments_of_pairs,
)
from neardup.core._errors import InputError, InvalidConfig
from neardup.core.config import Config
from neardup.core.layout import candidate_probability, default_layout
from neardup.sketch.minhash import MinHasher
from neardup.text.hashing import SchemeDescriptor, ShingleSets, hash_texts
from neardup.text.normalize import get_normalizer
from neardup.verify.oracle import allpairs_join

__all__ = ["MISSING", "MIXED", "TuneConfig", "candidate_layouts", "read_labels", "tune"]

_I64 = npt.NDArray[np.int64]


def read_labels(path: str, ids: Sequence[Any]) -> tuple[_I64, _I64, npt.NDArray[np.bool_]]:
    """Labelled pairs from a JSONL file, one ``{"a": ID, "b": ID, "duplicate": BOOL}``
    a line (ids as the corpus names its records), as item positions and labels.

    Unknown ids, a pair of an item with itself and malformed lines raise
    :class:`~neardup.InputError` naming the line.
    """
    where = {json.dumps(i, sort_keys=True): k for k, i in enumerate(ids)}
    a: list[int] = []
    b: list[int] = []
    dup: list[bool] = []
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(
                    path, line_no, f"not JSON ({exc.msg})", "one object a line"
                ) from None
            if not isinstance(rec, dict) or not isinstance(rec.get("duplicate"), bool):
                raise InputError(
                    path, line_no, 'expected {"a", "b", "duplicate": true|false}', "fix the line"
                )
            pa = where.get(json.dumps(rec.get("a"), sort_keys=True))
            pb = where.get(json.dumps(rec.get("b"), sort_keys=True))
            if pa is None or pb is None or pa == pb:
                raise InputError(
                    path,
                    line_no,
                    f"ids {rec.get('a')!r}, {rec.get('b')!r} do not name two corpus records",
                    "use the ids of --id-field (or row numbers)",
                )
            a.append(min(pa, pb))
            b.append(max(pa, pb))
            dup.append(rec["duplicate"])
    return np.array(a, np.int64), np.array(b, np.int64), np.array(dup, np.bool_)


# ---------------------------------------------------------------------------
# The memo


def _prepare(
    texts: Sequence[str],
    base: Config,
    cfg: TuneConfig,
    segments: Mapping[str, Sequence[Any]],
    labels: tuple[_I64, _I64, npt.NDArray[np.bool_]] | None,
) -> tuple[Pairs, npt.NDArray[np.bool_]]:
    sets, too_large = hash_texts(
        texts, get_normalizer(base.normalizer), base, None, SchemeDescriptor.from_config(base)
    )
    m = len(sets)
    eligible = np.flatnonzero((sets.raw_counts > 0) & ~too_large).astype(np.int64)
    sub = sets.take(eligible)
    floor = min(cfg.far, cfg.ranges[0])
    join = allpairs_join(sub, floor)
    ja, jb = eligible[join.a], eligible[join.b]
    jj = join.intersection / np.maximum(join.union, 1)
    far_mask = jj >= cfg.far
    far_codes = np.sort(ja[far_mask] * m + jb[far_mask])
    if labels is None:
        pa, pb, jac, truth = ja, jb, jj.astype(np.float64), jj >= cfg.threshold
    else:
        pa, pb, truth = labels
        jac = np.array(
            [sets.jaccard(int(x), int(y)) for x, y in zip(pa, pb, strict=True)], np.float64
        )
    cc = Pairs(
        sets,
        eligible,
        pa,
        pb,
        jac,
        truth,
        segments_of_pairs(segments, pa, pb),
        int(far_mask.sum()),
        far_codes,
    )
    return cc, too_large


def _what_to_change(cc: Pairs, rows: list[dict[str, Any]], cfg: TuneConfig, n: int) -> list[str]:
    """Suggestions for a refusal: which segments no layout within budget serves,
    and what would (representation, a second layout, more hashes, more pairs)."""
    budget_words = ("expected far candidates", "p99 candidates", "max_pairs")
    within = [x for x in rows if not any(w in f for f in x["fails"] for w in budget_words)]
    if not within:
        return [
            f"no layout with at most {cfg.max_perm} hashes keeps candidates within the budget "
            f"{cfg.budget:g} at n={n:,}: raise --max-perm (more rows per band), raise "
            "--budget, or lower --far; boilerplate shared by many records (see the hot "
            "buckets) also drives candidates: strip it or use a larger shingle"
        ]
    t = cc.truth
    groups: list[tuple[str, npt.NDArray[np.bool_]]] = [("overall", t)]
    for field, arr in cc.seg_of.items():
        groups += [(f"{field}={v}", t & (arr == v)) for v in sorted(set(arr[t].tolist()))]
    out: list[str] = []
    need = pairs_needed(cfg.recall, cfg.confidence)
    for name, mask in groups:
        prefix = "overall recall" if name == "overall" else f"{name}:"
        if not all(any(f.startswith(prefix) for f in x["fails"]) for x in within):
            continue
        q05 = float(np.quantile(cc.jac[mask], 0.05)) if mask.any() else cfg.threshold
        if int(mask.sum()) < need:
            out.append(
                f"{name}: {int(mask.sum())} pairs cannot clear {cfg.recall} at "
                f"{cfg.confidence:.0%}: even with none missed it takes {need}; label more pairs"
            )
        if q05 < cfg.threshold:
            out.append(
                f"{name}: duplicates go down to Jaccard {q05:.2f} (5th percentile), below the "
                f"threshold {cfg.threshold}: the representation does not make them similar; "
                "try a smaller shingle (e.g. --shingle word:3 or char:5) for these records, "
                "or a second layout for their range"
            )
            second = layout_for(cfg, q05, cfg.far * q05 / cfg.threshold, n)
            if second is not None:
                out.append(
                    f"{name}: a second layout for the range from {q05:.2f}: "
                    f"{second[0]} bands x {second[1]} rows (theory)"
                )
        else:
            out.append(
                f"{name}: its pairs sit near the threshold (5th percentile {q05:.2f}), where the "
                f"layouts within budget miss too many: raise --max-perm (more bands) or "
                "--budget, or serve this segment with a second layout of more bands"
            )
    return out or ["no single check fails in every layout within budget: see the nearest misses"]


def _boilerplate(
    cc: Pairs, texts: Sequence[str], base: Config, ids: Sequence[Any]
) -> list[dict[str, Any]]:
    from neardup.text.hashing import hash_shingle, shingles

    data = cc.sets.data
    if data.size == 0:
        return []
    vals, counts = np.unique(data, return_counts=True)
    top = np.argsort(-counts, kind="stable")[:10]
    out = []
    me = max(len(cc.eligible), 1)
    for i in top.tolist():
        if counts[i] < 2:
            break
        h = vals[i]
        doc = int(
            np.searchsorted(cc.sets.indptr, int(np.flatnonzero(data == h)[0]), side="right") - 1
        )
        text = None
        try:
            for s in shingles(texts[doc], base.shingle, normalizer=base.normalizer)[:20_000]:
                if hash_shingle(s, base) == int(h):
                    text = s
                    break
        except Exception:
            text = None
        out.append(
            {
                "hash": f"{int(h):016x}",
                "documents": int(counts[i]),
                "share": int(counts[i]) / me,
                "shingle": text,
                "example_id": ids[doc],
            }
        )
    return out


def _two_layouts(
    cc: Pairs, matrix: npt.NDArray[np.uint32], scheme: SchemeDescriptor, cfg: TuneConfig, n: int
) -> dict[str, Any]:
    lo_t, hi_t = cfg.ranges
    gap = cfg.threshold - cfg.far

    def layout(t: float) -> tuple[int, int]:
        return layout_for(cfg, t, max(t - gap, 0.0), n) or default_layout(
            t, min(128, cfg.max_perm), recall=cfg.recall
        )

    (b1, r1), (b2, r2) = layout(lo_t), layout(hi_t)
    k = matrix.shape[1]
    b1, r1 = min(b1, k // r1), r1
    b2, r2 = min(b2, k // r2), r2
    me = len(cc.eligible)
    m = len(cc.sets)

    def measure(b: int, r: int, t: float) -> dict[str, Any]:
        keys = band_keys_of(matrix, scheme, b, r)
        mask = cc.jac >= t
        col = (keys[cc.pa[mask]] == keys[cc.pb[mask]]).any(axis=1)
        buckets = band_buckets(keys, cc.eligible)
        planned = sum(int((ss[1] * (ss[1] - 1) // 2).sum()) for _, _, ss in buckets)
        q: dict[str, float] | None = None
        if planned <= cfg.max_pairs:
            codes = pair_codes(buckets, m)
            per = (np.bincount(codes // m, minlength=m) + np.bincount(codes % m, minlength=m))[
                cc.eligible
            ]
            q = quantiles(per)
        return {
            "range": t,
            "bands": b,
            "rows": r,
            **recall_rate(int(col.sum()), int(mask.sum()), cfg.confidence),
            "candidates_per_query": q,
        }

    low_one = measure(b1, r1, lo_t)
    high_one = measure(b1, r1, hi_t)
    high_two = measure(b2, r2, hi_t)
    return {
        "ranges": [lo_t, hi_t],
        "documents": me,
        "one_layout": {
            "layout": [b1, r1],
            "memory_bytes_per_item": 4 * b1 * r1 + 8 * b1,
            "low": low_one,
            "high": high_one,
        },
        "two_layouts": {
            "layouts": [[b1, r1], [b2, r2]],
            # One signature of the longer prefix serves both layouts.
            "memory_bytes_per_item": 4 * max(b1 * r1, b2 * r2) + 8 * (b1 + b2),
            "low": low_one,
            "high": high_two,
        },
    }


def _theory_memo(cfg: TuneConfig, n: int) -> dict[str, Any]:
    rows = []
    for b, r in candidate_layouts(cfg, n=n):
        pn = candidate_probability(cfg.threshold, b, r)
        pf = candidate_probability(cfg.far, b, r)
        row: dict[str, Any] = {
            "bands": b,
            "rows": r,
            "hashes": b * r,
            "theory_recall_at_threshold": pn,
            "theory_far_probability": pf,
            "expected_far_candidates_theory": pf * n,
            "memory_bytes_per_item": 4 * b * r + 8 * b,
            "measured": False,
        }
        why = []
        if pn < cfg.recall:
            why.append(f"theory recall {pn:.4f} < {cfg.recall}")
        if pf * n > cfg.budget:
            why.append(f"expected far candidates {pf * n:,.0f} > budget {cfg.budget:g}")
        row["fails"] = why
        rows.append(row)
    return {"layouts": rows}


def tune(
    texts: Sequence[str],
    *,
    config: TuneConfig,
    base: Config | None = None,
    ids: Sequence[Any] | None = None,
    segments: Mapping[str, Sequence[Any]] | None = None,
    labels: tuple[_I64, _I64, npt.NDArray[np.bool_]] | None = None,
) -> dict[str, Any]:
    """The memo (a JSON-ready dict) for ``texts`` under ``base`` (shingles,
    normalizer, seed; its layout is ignored).  ``segments`` maps a field name to
    each text's value; ``labels`` are :func:`read_labels` pairs (else the exact
    join is the truth).  With no texts the memo is theory only.
    """
    cfg = config
    base = base or Config(threshold=cfg.threshold)
    segments = dict(segments or {})
    ids = list(ids) if ids is not None else list(range(len(texts)))
    n = n_items(cfg, len(texts))
    settings = {
        **asdict(cfg),
        "n": n,
        "ranges": list(cfg.ranges),
        "shingle": str(base.shingle),
        "normalizer": base.normalizer,
        "seed": base.seed,
        "signature": base.signature,
        "segment_fields": sorted(segments),
    }
    memo: dict[str, Any] = {"settings": settings}
    if not len(texts):
        memo.update(mode="theory", **_theory_memo(cfg, n))
        ok = [x for x in memo["layouts"] if not x["fails"]]
        best = (
            min(ok, key=lambda x: (x["hashes"], x["expected_far_candidates_theory"]))
            if ok
            else None
        )
        memo["recommendation"] = _recommend(
            best, cfg, [] if best else ["no layout of the grid meets the targets"], []
        )
        return memo
    for field, values in segments.items():
        if len(values) != len(texts):
            raise InvalidConfig(
                "segments", field, "needs one value per text", "pass a value for every text"
            )
    if base.signature != "minhash":
        raise InvalidConfig(
            "signature",
            base.signature,
            "tune measures layouts on signature prefixes",
            "use --signature minhash",
        )
    cc, too_large = _prepare(texts, base, cfg, segments, labels)
    grid = candidate_layouts(cfg, base.num_perm, n=n)
    k = max([b * r for b, r in grid] + [cfg.max_perm])
    mh = MinHasher(replace(base, num_perm=k, bands=None, rows=None))
    sigs = mh.from_sets(cc.sets)
    matrix, scheme = sigs.matrix, sigs.scheme
    rows = [measure_layout(b, r, matrix, scheme, cc, cfg, n) for b, r in grid]
    opt = layout_for(cfg, cfg.threshold, cfg.far, n)
    dflt = default_layout(cfg.threshold, min(base.num_perm, cfg.max_perm))
    for row in rows:
        row["fails"] = layout_failures(row, cfg)
        row["tags"] = [
            t
            for t, lay in (("optimal_params", opt), ("default", dflt))
            if lay == (row["bands"], row["rows"])
        ]
    ok = [x for x in rows if not x["fails"]]
    best = min(ok, key=lambda x: (x["hashes"], x["expected_far_candidates_theory"])) if ok else None
    ref = (
        best
        or next((x for x in rows if "optimal_params" in x["tags"]), None)
        or next(x for x in rows if "default" in x["tags"])
    )
    floor = min(cfg.far, cfg.ranges[0])
    memo["mode"] = "labels" if labels is not None else "corpus"
    memo["corpus"] = {
        "documents": len(texts),
        "signed": len(cc.eligible),
        "too_large": int(too_large.sum()),
        "truth_pairs": int(cc.truth.sum()),
        "pairs_in_curve": len(cc.pa),
        "join_floor": floor if labels is None else None,
    }
    memo["collision_curve"] = collision_curve(
        cc, ref["collided"], ref["bands"], ref["rows"], cfg, floor if labels is None else 0.0
    )
    memo["hot_buckets"] = [
        {"band": t, "size": z, "example_id": ids[int(i)]} for z, t, i in ref.get("hot", [])
    ]
    memo["boilerplate_shingles"] = _boilerplate(cc, texts, base, ids)
    memo["seed_sensitivity"] = _seeds(texts, base, cfg, cc, ref["bands"], ref["rows"], n)
    memo["layout_comparison"] = _two_layouts(cc, matrix, scheme, cfg, n)
    for row in rows:
        row.pop("collided", None)
        row.pop("hot", None)
    memo["layouts"] = rows
    reasons = [] if best else _refusal(rows)
    memo["recommendation"] = _recommend(
        best, cfg, reasons, _what_to_change(cc, rows, cfg, n) if best is None else []
    )
    return memo


def _rehash(texts: Sequence[str], base: Config) -> ShingleSets:
    return hash_texts(
        texts, get_normalizer(base.normalizer), base, None, SchemeDescriptor.from_config(base)
    )[0]


def _seeds(
    texts: Sequence[str], base: Config, cfg: TuneConfig, cc: Pairs, b: int, r: int, n: int
) -> dict[str, Any]:
    out = []
    for s in range(cfg.seeds):
        seed = (base.seed + s) % (1 << 64)
        c = replace(base, seed=seed, num_perm=b * r, bands=b, rows=r)
        sigs = MinHasher(c).from_sets(_rehash(texts, c))
        row = measure_layout(b, r, sigs.matrix, sigs.scheme, cc, cfg, n)
        segs = [s_ for vals in row["recall"]["segments"].values() for s_ in vals.values()]
        out.append(
            {
                "seed": seed,
                "recall": row["recall"]["overall"]["recall"],
                "lower": row["recall"]["overall"]["lower"],
                "min_segment_lower": min((x["lower"] for x in segs), default=None),
                "p99_candidates_per_query": row.get("candidates_per_query", {}).get("p99"),
                "candidate_pairs": row.get("candidate_pairs"),
            }
        )
    rec = [x["recall"] for x in out if x["recall"] is not None]
    return {
        "bands": b,
        "rows": r,
        "runs": out,
        "recall_range": [min(rec), max(rec)] if rec else None,
    }


def _refusal(rows: list[dict[str, Any]]) -> list[str]:
    # The nearest misses: the layouts failing the fewest checks, fewest hashes first.
    near = sorted(rows, key=lambda x: (len(x["fails"]), x["hashes"]))[:3]
    return [f"{x['bands']}x{x['rows']}: " + "; ".join(x["fails"]) for x in near]


def _recommend(
    best: dict[str, Any] | None, cfg: TuneConfig, reasons: list[str], change: list[str]
) -> dict[str, Any]:
    rollback = [
        {"metric": "recall lower bound on newly labelled pairs (any segment)", "below": cfg.recall},
        {"metric": "p99 candidates per query at n items", "above": cfg.budget},
    ]
    if best is None:
        return {
            "status": "refused",
            "layout": None,
            "reasons": reasons,
            "what_to_change": change,
            "rollback": rollback,
        }
    lay = {
        k: best[k]
        for k in (
            "bands",
            "rows",
            "hashes",
            "memory_bytes_per_item",
            "theory_recall_at_threshold",
            "expected_far_candidates_theory",
        )
    }
    return {
        "status": "recommended",
        "layout": lay,
        "reasons": [],
        "what_to_change": [],
        "rollback": rollback,
    }

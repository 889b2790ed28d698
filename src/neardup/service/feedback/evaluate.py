"""The robustness rule of :mod:`neardup.service.feedback`: labels weighed, reviewers
flagged, the regression set admitted, thresholds evaluated and one suggested."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Sequence
from fractions import Fraction
from statistics import NormalDist
from typing import Any, Literal

from neardup.core._errors import InvalidConfig
from neardup.service.feedback.model import (
    LABELS,
    FeedbackPolicy,
    Label,
    PairOutcome,
    RegressionPair,
    ReviewerStats,
    ThresholdReport,
    ThresholdRow,
)

_DUP = "duplicate"
_NOT = "not_duplicate"


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion; ``(0.0, 1.0)`` when ``n == 0``.

    Always inside [0, 1] and always contains ``successes / n``.

    >>> lo, hi = wilson_interval(5, 10)
    >>> round(lo, 4), round(hi, 4)
    (0.2366, 0.7634)
    """
    if n < 0 or not 0 <= successes <= n:
        raise InvalidConfig("successes", successes, f"must be in [0, n={n}]", "count correctly")
    if not 0.0 < confidence < 1.0:
        raise InvalidConfig("confidence", confidence, "must be in (0, 1)", "e.g. 0.95")
    if n == 0:
        return (0.0, 1.0)
    z = NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1.0 - p) / n + z2 / (4 * n * n))
    # rounding can push the ends past the point estimate at p in {0, 1}
    return (max(0.0, min(center - half, p)), min(1.0, max(center + half, p)))


Pair = tuple[str, str]


def _latest(labels: Sequence[Label]) -> tuple[dict[tuple[str, Pair], Label], int]:
    """One label per (reviewer, pair): highest seq; the full tuple breaks ties."""
    best: dict[tuple[str, Pair], Label] = {}

    def key(x: Label) -> tuple[Any, ...]:
        return (x.seq, x.policy_version, x.scheme_version, x.label, x.score, x.rationale)

    for lab in labels:
        if not isinstance(lab, Label):
            raise InvalidConfig("labels", lab, "must be Label objects", "build Label(...) values")
        k = (lab.reviewer, (lab.left, lab.right))
        old = best.get(k)
        if old is None or key(lab) > key(old):
            best[k] = lab
    return best, len(labels) - len(best)


def _cap_weights(counts: dict[str, int], share: float) -> tuple[dict[str, float], bool]:
    """Per-label weight per reviewer so no reviewer's mass exceeds ``share`` of the total.

    Mass of reviewer r is ``min(n_r, c)`` with the largest feasible ``c`` (g(c) =
    c - share * sum(min(n, c)) is convex with g(0) = 0, so the feasible set is [0, c*]).
    """
    pos = sorted(n for n in counts.values() if n > 0)
    if not pos:
        return {r: 0.0 for r in counts}, True
    if share * len(pos) < 1.0:
        # the cap cannot hold; equal total mass per reviewer is the closest we can get
        c = float(pos[0])
        return {r: (c / n if n > 0 else 0.0) for r, n in counts.items()}, False
    total = float(sum(pos))
    c_star = float(pos[-1])
    if pos[-1] > share * total:
        low = 0.0
        prev = 0.0
        c_star = prev
        for j, n in enumerate(pos):
            k = len(pos) - j
            slope = 1.0 - share * k
            if slope > 0.0:
                root = share * low / slope
                if root < n:
                    c_star = max(root, prev)
                    break
            low += n
            prev = float(n)
            c_star = prev
    return {r: (min(1.0, c_star / n) if n > 0 else 0.0) for r, n in counts.items()}, True


def _tally(
    votes: dict[Pair, dict[str, str]], weights: dict[str, float], active: set[str]
) -> dict[Pair, tuple[float, float]]:
    out: dict[Pair, tuple[float, float]] = {}
    for p in sorted(votes):
        d = n = 0.0
        for r in sorted(votes[p]):
            if r not in active:
                continue
            v = votes[p][r]
            if v == _DUP:
                d += weights[r]
            elif v == _NOT:
                n += weights[r]
        out[p] = (d, n)
    return out


def _loo_stats(
    votes: dict[Pair, dict[str, str]],
    by_reviewer: dict[str, list[Pair]],
    active: set[str],
    share: float,
) -> tuple[dict[str, tuple[int, int, int]], dict[str, float], bool]:
    """(judged, agreed, disagreed) per active reviewer against the others' majority."""
    counts = {r: sum(1 for p in by_reviewer[r] if votes[p][r] != "unsure") for r in sorted(active)}
    weights, cap_met = _cap_weights(counts, share)
    totals = _tally(votes, weights, active)
    stats: dict[str, tuple[int, int, int]] = {}
    for r in sorted(active):
        judged = agreed = disagreed = 0
        for p in by_reviewer[r]:
            v = votes[p][r]
            d, n = totals[p]
            if v == _DUP:
                d -= weights[r]
            elif v == _NOT:
                n -= weights[r]
            # subtracting one's own weight can leave float dust; a tie must stay a tie
            if math.isclose(d, n, rel_tol=1e-9, abs_tol=1e-12):
                continue
            judged += 1
            if v == "unsure":
                continue
            if (v == _DUP) == (d > n):
                agreed += 1
            else:
                disagreed += 1
        stats[r] = (judged, agreed, disagreed)
    return stats, weights, cap_met


def _agreement(
    votes: dict[Pair, dict[str, str]], active: set[str]
) -> dict[str, float | int | None]:
    per_item: list[float] = []
    cat_totals = dict.fromkeys(LABELS, 0)
    for p in sorted(votes):
        labs = [votes[p][r] for r in sorted(votes[p]) if r in active]
        m = len(labs)
        if m < 2:
            continue
        cnt = {c: labs.count(c) for c in LABELS}
        for c in LABELS:
            cat_totals[c] += cnt[c]
        per_item.append(sum(x * (x - 1) for x in cnt.values()) / (m * (m - 1)))
    if not per_item:
        return {"pairs": 0, "mean_pairwise_agreement": None, "fleiss_kappa": None}
    p_bar = sum(per_item) / len(per_item)
    tot = sum(cat_totals.values())
    p_e = sum((x / tot) ** 2 for x in cat_totals.values())
    kappa = None if p_e >= 1.0 else (p_bar - p_e) / (1.0 - p_e)
    return {"pairs": len(per_item), "mean_pairwise_agreement": p_bar, "fleiss_kappa": kappa}


def _harmonic(a: float, b: float) -> float:
    return 0.0 if a + b <= 0.0 else 2.0 * a * b / (a + b)


def _row(t: float, dup_scores: list[float], not_scores: list[float], conf: float) -> ThresholdRow:
    # dup_scores / not_scores are sorted; predicted duplicate iff score >= t
    fn = bisect_left(dup_scores, t)
    tp = len(dup_scores) - fn
    tn = bisect_left(not_scores, t)
    fp = len(not_scores) - tn
    conf2 = 1.0 - (1.0 - conf) / 2.0
    prec = tp / (tp + fp) if tp + fp else None
    rec = tp / (tp + fn) if tp + fn else None
    f1 = 2 * tp / (2 * tp + fp + fn) if 2 * tp + fp + fn else None
    p2 = wilson_interval(tp, tp + fp, conf2)
    r2 = wilson_interval(tp, tp + fn, conf2)
    f1_ci = (0.0, 1.0) if f1 is None else (_harmonic(p2[0], r2[0]), _harmonic(p2[1], r2[1]))
    if f1 is not None:
        f1_ci = (min(f1_ci[0], f1), max(f1_ci[1], f1))
    return ThresholdRow(
        threshold=t,
        tp=tp,
        fp=fp,
        fn=fn,
        tn=tn,
        precision=prec,
        precision_ci=wilson_interval(tp, tp + fp, conf),
        recall=rec,
        recall_ci=wilson_interval(tp, tp + fn, conf),
        f1=f1,
        f1_ci=f1_ci,
    )


def _suggest(
    rows: Sequence[ThresholdRow], n_dup: int, n_not: int, policy: FeedbackPolicy
) -> tuple[float | None, str, tuple[float, float] | None]:
    if n_dup + n_not < policy.min_pairs:
        return None, f"only {n_dup + n_not} admitted pairs (< min_pairs {policy.min_pairs})", None
    if n_dup == 0 or n_not == 0:
        missing = "duplicate" if n_dup == 0 else "not_duplicate"
        return None, f"no admitted {missing} pair: precision/recall cannot be traded off", None
    # exact fractions: float F1 values that are mathematically equal must tie
    f1s = [Fraction(2 * r.tp, 2 * r.tp + r.fp + r.fn) for r in rows]
    best = max(f1s)
    top = max(i for i, f in enumerate(f1s) if f == best)
    lo = top
    while lo > 0 and f1s[lo - 1] == best:
        lo -= 1
    a, b = rows[lo].threshold, rows[top].threshold
    mid = (a + b) / 2.0
    # rounding turns float-noise near-ties into ties, which go to the higher threshold
    pick = min(range(lo, top + 1), key=lambda i: (round(abs(rows[i].threshold - mid), 12), -i))
    t = rows[pick].threshold
    lo_s, hi_s = policy.safe_range
    clamped = min(max(t, lo_s), hi_s)
    why = (
        f"F1 {float(best):.3f} is maximal on [{a:g}, {b:g}]; "
        f"{t:g} is nearest its middle (max-margin)"
    )
    if clamped != t:
        why += f"; clamped to safe_range [{lo_s:g}, {hi_s:g}]"
    return clamped, why, (a, b)


def evaluate_feedback(
    labels: Sequence[Label],
    *,
    current_threshold: float,
    thresholds: Sequence[float] | None = None,
    policy: FeedbackPolicy | None = None,
) -> ThresholdReport:
    """Weigh reviewer labels, flag outliers, build the regression set, evaluate thresholds.

    ``thresholds`` defaults to 0.50, 0.51, ..., 0.99; ``current_threshold`` is always
    added.  The result depends only on the set of labels (not on their order).  It
    only suggests: nothing here changes a policy.  See :mod:`neardup.service.feedback` for
    the robustness rule and the bound it guarantees.

    One reviewer inverting every label is flagged and has no say:

    >>> labels = [Label(reviewer=r, left=f"p{i}", right=f"q{i}", score=s,
    ...                 label=("duplicate" if (s >= 0.8) != (r == "eve") else "not_duplicate"))
    ...           for r in ("ann", "bob", "cy", "dee", "eve")
    ...           for i, s in enumerate((0.55, 0.6, 0.7, 0.86, 0.9, 0.95))]
    >>> rep = evaluate_feedback(labels, current_threshold=0.9, policy=FeedbackPolicy(min_pairs=6))
    >>> rep.flagged, rep.plateau, rep.suggested_threshold, rep.direction
    (('eve',), (0.71, 0.86), 0.79, 'lower')
    >>> rep.current.precision, rep.current.recall, rep.current.tp
    (1.0, 0.666..., 2)
    """
    pol = FeedbackPolicy() if policy is None else policy
    ct = current_threshold
    if isinstance(ct, bool) or not isinstance(ct, int | float) or not 0.0 <= ct <= 1.0:
        raise InvalidConfig("current_threshold", ct, "must be in [0, 1]", "pass the policy's")
    grid_in = [i / 100 for i in range(50, 100)] if thresholds is None else list(thresholds)
    for t in grid_in:
        if isinstance(t, bool) or not isinstance(t, int | float) or not 0.0 <= t <= 1.0:
            raise InvalidConfig("thresholds", t, "every threshold must be in [0, 1]", "fix it")
    grid = sorted({float(t) for t in grid_in} | {float(ct)})

    latest, superseded = _latest(labels)
    votes: dict[Pair, dict[str, str]] = defaultdict(dict)
    scores: dict[Pair, dict[str, float]] = defaultdict(dict)
    by_reviewer: dict[str, list[Pair]] = defaultdict(list)
    for (r, p), lab in sorted(latest.items()):
        votes[p][r] = lab.label
        scores[p][r] = lab.score
        by_reviewer[r].append(p)
    reviewers = sorted(by_reviewer)

    active = set(reviewers)
    flag_reason: dict[str, str] = {}
    flag_stats: dict[str, tuple[int, int, int]] = {}
    while True:
        stats, weights, cap_met = _loo_stats(votes, by_reviewer, active, pol.max_reviewer_share)
        worst: tuple[float, str] | None = None
        for r in sorted(active):
            judged, _, dis = stats[r]
            eligible = judged >= pol.min_labels_to_flag
            # highest rate first; iteration is sorted, so the smaller id wins a tie
            if (
                eligible
                and dis / judged > pol.disagreement_bound
                and (worst is None or dis / judged > worst[0])
            ):
                worst = (dis / judged, r)
        if worst is None:
            break
        rate, r = worst
        flag_reason[r] = (
            f"disagreed with the leave-one-out consensus on {rate:.0%} of "
            f"{stats[r][0]} judged labels (> {pol.disagreement_bound:g})"
        )
        flag_stats[r] = stats[r]
        active.discard(r)

    totals = _tally(votes, weights, active)
    total_mass = sum(
        weights[r] * sum(1 for p in by_reviewer[r] if votes[p][r] != "unsure") for r in active
    )
    rev_out = []
    for r in reviewers:
        n_dec = sum(1 for p in by_reviewer[r] if votes[p][r] != "unsure")
        if r in active:
            judged, agreed, dis = stats[r]
            w = weights[r]
            share = w * n_dec / total_mass if total_mass > 0 else 0.0
            reason = "" if judged >= pol.min_labels_to_flag else "too few judged labels to flag"
        else:
            judged, agreed, dis = flag_stats[r]
            w, share, reason = 0.0, 0.0, flag_reason[r]
        rev_out.append(
            ReviewerStats(
                reviewer=r,
                labels=len(by_reviewer[r]),
                decisive=n_dec,
                judged=judged,
                agreed=agreed,
                disagreed=dis,
                agreement_rate=agreed / judged if judged else None,
                disagreement_rate=dis / judged if judged else None,
                weight=w,
                weight_share=share,
                flagged=r not in active,
                reason=reason,
            )
        )

    pairs_out: list[PairOutcome] = []
    regression: list[RegressionPair] = []
    for p in sorted(votes):
        # a flagged reviewer's labels must not decide the score either
        kept = [v for r, v in scores[p].items() if r in active]
        sc = sorted(kept or scores[p].values())
        score = sc[(len(sc) - 1) // 2]
        cnt = dict.fromkeys(LABELS, 0)
        excluded = 0
        for r, v in votes[p].items():
            if r in active:
                cnt[v] += 1
            else:
                excluded += 1
        d, n = totals[p]
        share_p: float | None = None
        consensus: Literal["duplicate", "not_duplicate", "tie", "none"]
        if d + n <= 0.0:
            consensus, reason = "none", "no decisive vote from an unflagged reviewer"
        elif math.isclose(d, n, rel_tol=1e-9, abs_tol=1e-12):
            consensus, share_p, reason = "tie", 0.5, "tied vote"
        else:
            consensus = "duplicate" if d > n else "not_duplicate"
            share_p = max(d, n) / (d + n)
            reason = ""
            if share_p < pol.min_agreement:
                reason = f"consensus share {share_p:.2f} < min_agreement {pol.min_agreement:g}"
            elif cnt[_DUP] + cnt[_NOT] < pol.min_votes:
                reason = f"{cnt[_DUP] + cnt[_NOT]} decisive reviewers < min_votes {pol.min_votes}"
        admitted = consensus in (_DUP, _NOT) and not reason
        pairs_out.append(
            PairOutcome(
                left=p[0],
                right=p[1],
                score=score,
                score_spread=sc[-1] - sc[0],
                votes=cnt,
                excluded_votes=excluded,
                consensus=consensus,
                share=share_p,
                admitted=admitted,
                reason=reason,
            )
        )
        if admitted and (consensus == "duplicate" or consensus == "not_duplicate"):
            regression.append(RegressionPair(left=p[0], right=p[1], score=score, label=consensus))

    dup_scores = sorted(x.score for x in regression if x.label == _DUP)
    not_scores = sorted(x.score for x in regression if x.label == _NOT)
    rows = tuple(_row(t, dup_scores, not_scores, pol.confidence) for t in grid)
    current = rows[grid.index(float(ct))]
    suggested, why, plateau = _suggest(rows, len(dup_scores), len(not_scores), pol)
    direction: Literal["raise", "lower", "keep", "none"] = "none"
    if suggested is not None:
        direction = "keep" if suggested == ct else ("raise" if suggested > ct else "lower")
    flagged = tuple(r for r in reviewers if r not in active)
    return ThresholdReport(
        policy=pol,
        current_threshold=float(ct),
        reviewers=tuple(rev_out),
        cap_met=cap_met,
        agreement={
            "all": _agreement(votes, set(reviewers)),
            "unflagged": _agreement(votes, active),
        },
        pairs=tuple(pairs_out),
        rows=rows,
        current=current,
        suggested_threshold=suggested,
        suggestion_reason=why,
        plateau=plateau,
        direction=direction,
        regression_set=tuple(regression),
        superseded_labels=superseded,
        flagged=flagged,
    )

"""Reviewer feedback: label quality checks, a labelled regression set and threshold evaluation.

Reviewers label pairs of items ``duplicate`` / ``not_duplicate`` / ``unsure``.  The
labels are *evidence*: :func:`evaluate_feedback` weighs them, flags reviewers who
disagree with their peers, admits only well-agreed pairs to a regression set, and
reports precision / recall / F1 (with Wilson intervals) of a grid of thresholds on
those pairs.  It only *suggests* a threshold; it never changes a policy.

Robustness rule, in order (everything is deterministic: sorted iteration, no RNG):

1. **Weight cap.**  A reviewer's decisive labels (``unsure`` carries no weight) share a
   total mass ``min(n_r, c)``; ``c`` is the largest level at which no reviewer holds
   more than ``max_reviewer_share`` of the total (water-filling), so only the heaviest
   reviewers are scaled down and a reviewer's per-label weight is at most 1.  With
   fewer than ``ceil(1 / max_reviewer_share)`` reviewers the cap cannot be met; every
   reviewer then gets the same total mass (the most even split possible) and the
   report says ``cap_met=False``.
2. **Leave-one-out flagging, peeled one at a time.**  A reviewer's label is compared
   with the weighted majority of the *other* remaining reviewers on that pair (ties and
   pairs nobody else decided are not judged).  ``unsure`` is judged but is neither an
   agreement nor a disagreement.  Among reviewers with at least ``min_labels_to_flag``
   judged labels, the one with the highest disagreement rate above
   ``disagreement_bound`` is flagged and removed, weights and consensus are recomputed,
   and this repeats until nobody exceeds the bound.  Peeling the worst first keeps a
   block of colluding reviewers from dragging honest ones over the bound.
3. **Consensus without the flagged.**  Per pair: weighted majority label, its share,
   and admission to the regression set iff the share is ``>= min_agreement`` and at
   least ``min_votes`` distinct reviewers gave a decisive label.
4. **Threshold grid.**  On admitted pairs (predicted duplicate iff ``score >= t``):
   TP/FP/FN/TN, precision, recall and F1 with intervals.  The suggestion is the grid
   point nearest the middle of the highest run of grid points with maximal F1 (the
   max-margin choice; ties go to the higher, conservative, threshold), clamped to
   ``safe_range``; ``None`` when fewer than ``min_pairs`` pairs are admitted or one
   class is missing.

Guarantee (tested in ``tests/service/test_feedback.py``).  Let ``k`` adversarial reviewers, with
arbitrary labels on arbitrary pairs, join a set of honest reviewers such that (a) ``k <
min_votes``; (b) each honest reviewer holds at most ``max_reviewer_share`` of the honest
decisive labels; (c) every pair an adversary labels has either no decisive honest label
or an honest margin (duplicate minus not_duplicate votes, in absolute value) of at least
``k + 2``; (d) no honest reviewer is flagged without the adversaries.  Then no honest
reviewer is flagged with them, every admitted pair carries its honest-majority label,
and pairs with at least ``min_votes`` decisive honest labels whose honest share stays
``>= min_agreement`` even with ``k`` opposing votes ("sure" pairs) are always admitted:
adversaries can only change *which* of the other ("swing") pairs are admitted.  If
moreover (e) the honest-majority labels are consistent with a threshold ``tau`` of the
grid (duplicate iff ``score >= tau``), (f) the sure pairs include a not_duplicate with
score in ``[tau - w, tau)`` and a duplicate in ``[tau, tau + w)`` (and at least
``min_pairs`` sure pairs), and the grid spacing near ``tau`` is at most ``g``, then
every suggestion (with or without the adversaries) lies in ``(tau - w/2 - g/2, tau + w/2
+ g/2)`` before clamping to ``safe_range`` (which only brings two suggestions closer),
so the adversaries move it by less than ``w + g``: 0.03 in the property test (``w =
0.02``, ``g = 0.01``).  Outside these conditions no bound is claimed: colluders who lie
only on pairs near the boundary stay under ``disagreement_bound`` and are not flagged,
and where the honest labels on a pair are few or split they veto its admission or
outvote it (three such colluders, each labelling every pair, moved the suggestion by up
to 0.05 against nine honest reviewers in ``test_stealthy_colluders_are_a_known_limit``).
The midpoint rule halves what a one-sided veto can do, and the reported ``plateau``
shows how wide the evidence gap is.

Labels are expected to carry the service's exact Jaccard for the pair under one
scheme; if a pair's labels disagree on the score, the lower median over unflagged
reviewers' labels is used and the spread is reported.

Example:
    >>> labels = [Label(reviewer=r, left=f"a{i}", right=f"b{i}", score=s,
    ...                 label="duplicate" if s >= 0.8 else "not_duplicate")
    ...           for r in ("ann", "bob", "cy") for i, s in enumerate((0.6, 0.7, 0.85, 0.9))]
    >>> rep = evaluate_feedback(labels, current_threshold=0.9,
    ...                         policy=FeedbackPolicy(min_pairs=4, max_reviewer_share=0.34))
    >>> rep.suggested_threshold, rep.current.recall
    (0.78, 0.5)
    >>> [p.left for p in rep.regression_set]
    ['a0', 'a1', 'a2', 'a3']
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from statistics import NormalDist
from typing import Any, Literal

from neardup.core._errors import InvalidConfig

__all__ = [
    "FeedbackPolicy",
    "Label",
    "PairOutcome",
    "RegressionPair",
    "ReviewerStats",
    "ThresholdReport",
    "ThresholdRow",
    "evaluate_feedback",
    "wilson_interval",
]

LabelValue = Literal["duplicate", "not_duplicate", "unsure"]
_LABELS = ("duplicate", "not_duplicate", "unsure")
_DUP = "duplicate"
_NOT = "not_duplicate"


@dataclass(frozen=True, slots=True, kw_only=True)
class Label:
    """One reviewer's label on one pair of items.

    ``left``/``right`` are normalized so that ``left < right`` (a pair is unordered).
    ``score`` is the pair's exact Jaccard when it was labelled.  When a reviewer labels
    the same pair several times, the label with the highest ``seq`` wins.

    >>> Label(reviewer="ann", left="b", right="a", score=0.9, label="duplicate").left
    'a'
    """

    reviewer: str
    left: str
    right: str
    score: float
    label: LabelValue
    rationale: str = ""
    policy_version: int = 1
    scheme_version: int = 1
    seq: int = 0

    def __post_init__(self) -> None:
        for name in ("reviewer", "left", "right"):
            v = getattr(self, name)
            if not isinstance(v, str) or not v:
                raise InvalidConfig(f"Label.{name}", v, "must be a non-empty string", "send an id")
        if self.left == self.right:
            raise InvalidConfig(
                "Label.right", self.right, "a pair needs two different items", "label two items"
            )
        s = self.score
        if isinstance(s, bool) or not isinstance(s, int | float) or not 0.0 <= s <= 1.0:
            raise InvalidConfig(
                "Label.score", s, "must be a Jaccard in [0, 1]", "send the pair's exact score"
            )
        if self.label not in _LABELS:
            raise InvalidConfig(
                "Label.label", self.label, "unknown label", "use " + ", ".join(_LABELS)
            )
        for name in ("policy_version", "scheme_version", "seq"):
            v = getattr(self, name)
            lo = 0 if name == "seq" else 1
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise InvalidConfig(f"Label.{name}", v, f"must be an integer >= {lo}", "fix it")
        if not isinstance(self.rationale, str):
            raise InvalidConfig("Label.rationale", self.rationale, "must be text", "send a string")
        if self.left > self.right:
            # frozen: normalizing the pair order needs the object-level setter
            left, right = self.left, self.right
            object.__setattr__(self, "left", right)
            object.__setattr__(self, "right", left)
        object.__setattr__(self, "score", float(s))


@dataclass(frozen=True, kw_only=True)
class FeedbackPolicy:
    """How labels are weighed, who is flagged, which pairs are admitted.

    ``max_reviewer_share``: no reviewer carries more than this share of the total
    vote weight (when at least ``ceil(1/share)`` reviewers voted).
    ``disagreement_bound``: reviewers disagreeing with the leave-one-out consensus on
    more than this fraction of judged labels are flagged and excluded.
    ``min_labels_to_flag``: nobody is judged on fewer judged labels.
    ``min_agreement``: a pair is admitted only if its weighted consensus share is at
    least this.  ``min_votes``: ... and at least this many distinct reviewers decided
    it (so fewer than ``min_votes`` colluders cannot invent a pair on their own).
    ``min_pairs``: no suggestion below this many admitted pairs.  ``safe_range``:
    suggestions are clamped into it.  ``confidence``: level of the Wilson intervals.

    >>> FeedbackPolicy(min_agreement=0.4)
    Traceback (most recent call last):
    ...
    neardup.core._errors.InvalidConfig: invalid min_agreement=0.4: must be in (0.5, 1.0]; fix: ...
    """

    max_reviewer_share: float = 0.2
    disagreement_bound: float = 0.3
    min_labels_to_flag: int = 5
    min_agreement: float = 0.66
    min_votes: int = 3
    min_pairs: int = 20
    safe_range: tuple[float, float] = (0.5, 0.99)
    confidence: float = 0.95

    def __post_init__(self) -> None:
        for name, lo, hi, lo_open in (
            ("max_reviewer_share", 0.0, 1.0, True),
            ("disagreement_bound", 0.0, 1.0, False),
            ("min_agreement", 0.5, 1.0, True),
            ("confidence", 0.0, 1.0, True),
        ):
            v = getattr(self, name)
            ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            ok = ok and (lo < v if lo_open else lo <= v) and v <= hi
            if name == "confidence" and ok:
                ok = v < 1.0
            if not ok:
                left = "(" if lo_open else "["
                right = ")" if name == "confidence" else "]"
                raise InvalidConfig(
                    name, v, f"must be in {left}{lo}, {hi}{right}", "use a value in that range"
                )
        for name, lo in (("min_labels_to_flag", 1), ("min_votes", 1), ("min_pairs", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise InvalidConfig(name, v, f"must be an integer >= {lo}", "use a small count")
        r = self.safe_range
        ok = isinstance(r, tuple) and len(r) == 2
        ok = ok and all(isinstance(x, int | float) and not isinstance(x, bool) for x in r)
        if not (ok and 0.0 <= r[0] <= r[1] <= 1.0):
            raise InvalidConfig(
                "safe_range", r, "must be (lo, hi) with 0 <= lo <= hi <= 1", "e.g. (0.5, 0.99)"
            )


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


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewerStats:
    """One reviewer: label counts, leave-one-out agreement, weight, flag."""

    reviewer: str
    labels: int
    decisive: int
    judged: int
    agreed: int
    disagreed: int
    agreement_rate: float | None
    disagreement_rate: float | None
    weight: float
    weight_share: float
    flagged: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data."""
        return {
            "reviewer": self.reviewer,
            "labels": self.labels,
            "decisive": self.decisive,
            "judged": self.judged,
            "agreed": self.agreed,
            "disagreed": self.disagreed,
            "agreement_rate": self.agreement_rate,
            "disagreement_rate": self.disagreement_rate,
            "weight": self.weight,
            "weight_share": self.weight_share,
            "flagged": self.flagged,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class PairOutcome:
    """One pair: its votes (unflagged reviewers), consensus and admission."""

    left: str
    right: str
    score: float
    score_spread: float
    votes: dict[str, int]
    excluded_votes: int
    consensus: Literal["duplicate", "not_duplicate", "tie", "none"]
    share: float | None
    admitted: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data."""
        return {
            "left": self.left,
            "right": self.right,
            "score": self.score,
            "score_spread": self.score_spread,
            "votes": {k: self.votes[k] for k in _LABELS},
            "excluded_votes": self.excluded_votes,
            "consensus": self.consensus,
            "share": self.share,
            "admitted": self.admitted,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RegressionPair:
    """An admitted pair with its consensus label."""

    left: str
    right: str
    score: float
    label: Literal["duplicate", "not_duplicate"]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data."""
        return {"left": self.left, "right": self.right, "score": self.score, "label": self.label}


@dataclass(frozen=True, slots=True, kw_only=True)
class ThresholdRow:
    """Confusion counts and metrics of one threshold on the admitted pairs.

    ``precision``/``recall``/``f1`` are ``None`` when undefined (empty denominator);
    their intervals are then ``(0.0, 1.0)``.  The F1 interval maps the precision and
    recall Wilson intervals, each taken at ``1 - (1 - confidence) / 2`` (Bonferroni),
    through F1 (increasing in both), so it covers at least ``confidence``.
    """

    threshold: float
    tp: int
    fp: int
    fn: int
    tn: int
    precision: float | None
    precision_ci: tuple[float, float]
    recall: float | None
    recall_ci: tuple[float, float]
    f1: float | None
    f1_ci: tuple[float, float]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data."""
        return {
            "threshold": self.threshold,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "tn": self.tn,
            "precision": self.precision,
            "precision_ci": list(self.precision_ci),
            "recall": self.recall,
            "recall_ci": list(self.recall_ci),
            "f1": self.f1,
            "f1_ci": list(self.f1_ci),
        }


@dataclass(frozen=True, kw_only=True)
class ThresholdReport:
    """Everything :func:`evaluate_feedback` found; ``to_dict()`` is JSON-able and stable.

    ``agreement`` holds, for all reviewers and for the unflagged ones, the mean
    pairwise agreement (observed agreement of Fleiss, over pairs with >= 2 labels,
    three categories incl. ``unsure``, unweighted) and Fleiss' kappa (generalized to
    a varying number of raters per pair; ``None`` when undefined).
    """

    policy: FeedbackPolicy
    current_threshold: float
    reviewers: tuple[ReviewerStats, ...]
    cap_met: bool
    agreement: dict[str, dict[str, float | int | None]]
    pairs: tuple[PairOutcome, ...]
    rows: tuple[ThresholdRow, ...]
    current: ThresholdRow
    suggested_threshold: float | None
    suggestion_reason: str
    plateau: tuple[float, float] | None
    direction: Literal["raise", "lower", "keep", "none"]
    regression_set: tuple[RegressionPair, ...]
    superseded_labels: int = 0
    flagged: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data with deterministic ordering."""
        p = self.policy
        return {
            "policy": {
                "max_reviewer_share": p.max_reviewer_share,
                "disagreement_bound": p.disagreement_bound,
                "min_labels_to_flag": p.min_labels_to_flag,
                "min_agreement": p.min_agreement,
                "min_votes": p.min_votes,
                "min_pairs": p.min_pairs,
                "safe_range": list(p.safe_range),
                "confidence": p.confidence,
            },
            "current_threshold": self.current_threshold,
            "reviewers": [r.to_dict() for r in self.reviewers],
            "flagged": list(self.flagged),
            "cap_met": self.cap_met,
            "agreement": {k: dict(sorted(v.items())) for k, v in sorted(self.agreement.items())},
            "pairs": [x.to_dict() for x in self.pairs],
            "thresholds": [r.to_dict() for r in self.rows],
            "current": self.current.to_dict(),
            "suggested_threshold": self.suggested_threshold,
            "suggestion_reason": self.suggestion_reason,
            "plateau": None if self.plateau is None else list(self.plateau),
            "direction": self.direction,
            "regression_set": [x.to_dict() for x in self.regression_set],
            "superseded_labels": self.superseded_labels,
        }


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
    cat_totals = dict.fromkeys(_LABELS, 0)
    for p in sorted(votes):
        labs = [votes[p][r] for r in sorted(votes[p]) if r in active]
        m = len(labs)
        if m < 2:
            continue
        cnt = {c: labs.count(c) for c in _LABELS}
        for c in _LABELS:
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
    only suggests: nothing here changes a policy.  See the module docstring for the
    robustness rule and the bound it guarantees.

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
        cnt = dict.fromkeys(_LABELS, 0)
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

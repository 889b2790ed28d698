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

The parts: ``model`` (:class:`Label`, :class:`FeedbackPolicy` and the records of
a :class:`ThresholdReport`) and ``evaluate`` (:func:`evaluate_feedback`, the rule
above; :func:`wilson_interval`).

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

from neardup.service.feedback.evaluate import evaluate_feedback, wilson_interval
from neardup.service.feedback.model import (
    FeedbackPolicy,
    Label,
    PairOutcome,
    RegressionPair,
    ReviewerStats,
    ThresholdReport,
    ThresholdRow,
)
from neardup.service.feedback.model import LabelValue as LabelValue

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

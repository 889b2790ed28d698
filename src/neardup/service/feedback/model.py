"""Reviewer labels, the feedback policy, and the records of a threshold report."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from neardup.core._errors import InvalidConfig

LabelValue = Literal["duplicate", "not_duplicate", "unsure"]
LABELS = ("duplicate", "not_duplicate", "unsure")


def _plain(record: Any) -> dict[str, Any]:
    """A dataclass's fields by name, in the order they are declared, with tuples as
    lists (as JSON reads them back)."""
    return {
        f.name: list(v) if isinstance(v := getattr(record, f.name), tuple) else v
        for f in fields(record)
    }


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
        if self.label not in LABELS:
            raise InvalidConfig(
                "Label.label", self.label, "unknown label", "use " + ", ".join(LABELS)
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
        return _plain(self)


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
        """Plain JSON-able data (``votes`` has every label, in the order of ``LABELS``)."""
        return {**_plain(self), "votes": {k: self.votes[k] for k in LABELS}}


@dataclass(frozen=True, slots=True, kw_only=True)
class RegressionPair:
    """An admitted pair with its consensus label."""

    left: str
    right: str
    score: float
    label: Literal["duplicate", "not_duplicate"]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data."""
        return _plain(self)


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
        return _plain(self)


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
        return {
            "policy": _plain(self.policy),
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

"""Policies and decisions: from exact scores to a recorded, explainable outcome.

A score is not a decision.  A :class:`Policy` (per tenant, versioned, immutable
once created) says what the scores mean:

* ``duplicate`` — the best candidate's **exact** Jaccard is at least
  ``threshold + review_above``: the item is linked to that candidate's cluster
  (its canonical item).  Never reached on an estimate.
* ``review`` — quarantined for a person: the best exact score lies in the review
  band ``[threshold - review_below, threshold + review_above)``; or the candidate
  cap was hit and nothing reached the band (a better candidate may have been cut);
  or exact verification is impossible (features unavailable: exact-hash-only mode).
* ``unique`` — keep: no candidate reached the review band.  When *no candidate at
  all* was found, the reason says so and gives the layout's predicted candidate
  recall at the threshold: "not found" is never proof of uniqueness.
* ``rejected`` — the item is invalid or over quota / budget (nothing is stored).

Every decision carries the policy version and fingerprint, the scheme version,
the candidate method, the exact score(s) and an explanation (shared and total
shingles, the shared spans, the bands that collided, and why this outcome).

Decisions, unlinks, releases, reviewer labels, policy changes and shadow-index
events form the tenant's **decision log**: each record holds the SHA-256 of the
previous one (``prev``), so the chain proves nothing was removed or edited
(:func:`verify_chain`).

Example:
    >>> p = Policy(version=1, threshold=0.8, review_below=0.05)
    >>> outcome(p, best_score=0.82, identical=False, capped=False, found=3).state
    'duplicate'
    >>> outcome(p, best_score=0.77, identical=False, capped=False, found=3).state
    'review'
    >>> print(outcome(p, best_score=None, identical=False, capped=False, found=0,
    ...               predicted_recall=0.995).reason)
    no candidate found; a pair at the threshold is found with probability 0.9950,
    so this is not proof of uniqueness
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from neardup.core._errors import CorruptFile, InvalidConfig
from neardup.core._fingerprint import canonical_json, fingerprint
from neardup.sketch.lsh import candidate_probability, default_layout

__all__ = ["Outcome", "Policy", "PolicyGuard", "chain_hash", "outcome", "verify_chain"]

State = Literal["unique", "duplicate", "review", "rejected"]
GENESIS = "0" * 64


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """A tenant's decision policy (frozen, keyword-only, validated, fingerprinted).

    ``threshold`` is the exact Jaccard at which a pair is a duplicate; scores in
    ``[threshold - review_below, threshold + review_above)`` go to review.
    ``exact_duplicates`` says what an identical normalized content does
    (``duplicate`` or ``review``).  ``max_candidates`` caps verification per query.
    ``estimates``: ``never`` (default) — no outcome rests on an estimated score;
    ``non_destructive`` — when exact verification is impossible, an item whose
    *estimated* similarity is far below the review band may be kept as ``unique``
    (never linked: an estimate never yields ``duplicate``).
    """

    version: int = 1
    metric: Literal["jaccard"] = "jaccard"
    threshold: float = 0.8
    review_below: float = 0.0
    review_above: float = 0.0
    exact_duplicates: Literal["duplicate", "review"] = "duplicate"
    max_candidates: int = 100
    estimates: Literal["never", "non_destructive"] = "never"

    def __post_init__(self) -> None:
        v = self.version
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1 << 30:
            raise InvalidConfig("version", v, "must be an integer >= 1", "use the next version")
        if self.metric != "jaccard":
            raise InvalidConfig("metric", self.metric, "unknown metric", "use 'jaccard'")
        t = self.threshold
        if isinstance(t, bool) or not isinstance(t, int | float) or not 0 < t <= 1:
            raise InvalidConfig("threshold", t, "must be in (0, 1]", "use e.g. 0.8")
        for name in ("review_below", "review_above"):
            w = getattr(self, name)
            if isinstance(w, bool) or not isinstance(w, int | float) or not 0 <= w <= 0.5:
                raise InvalidConfig(name, w, "must be in [0, 0.5]", "use e.g. 0.05")
        if self.threshold - self.review_below <= 0:
            raise InvalidConfig(
                "review_below", self.review_below, "reaches below 0", "use a narrower band"
            )
        if self.exact_duplicates not in ("duplicate", "review"):
            raise InvalidConfig(
                "exact_duplicates", self.exact_duplicates, "unknown action", "duplicate or review"
            )
        m = self.max_candidates
        if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= 10_000:
            raise InvalidConfig("max_candidates", m, "must be in [1, 10000]", "use e.g. 100")
        if self.estimates not in ("never", "non_destructive"):
            raise InvalidConfig(
                "estimates", self.estimates, "unknown setting", "use never or non_destructive"
            )

    @property
    def review_low(self) -> float:
        return self.threshold - self.review_below

    @property
    def review_high(self) -> float:
        return self.threshold + self.review_above

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Policy:
        if not isinstance(d, dict):
            raise InvalidConfig("policy", d, "must be a JSON object", "send an object")
        known = set(cls.__dataclass_fields__)
        extra = sorted(set(d) - known)
        if extra:
            raise InvalidConfig("policy", extra, "unknown fields", f"use only {sorted(known)}")
        return cls(**d)

    @property
    def fingerprint(self) -> str:
        # Every decision reports it: computed once per policy, not per decision.  The
        # key carries each field's type: 1 and 1.0 are equal but print differently.
        key = tuple((type(v), v) for v in (getattr(self, f) for f in self.__dataclass_fields__))
        fp = _FINGERPRINTS.get(key)
        if fp is None:
            fp = fingerprint(self.to_dict())
            if len(_FINGERPRINTS) < 1024:
                _FINGERPRINTS[key] = fp
        return fp


_FINGERPRINTS: dict[tuple[tuple[type, Any], ...], str] = {}


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyGuard:
    """The one rule for every change of a live threshold or layout.

    Applied to a new tenant, ``PUT /policy``, a shadow index's start and again at its
    promotion, the promotion of a previous version back, and a restore.  A policy
    under a layout (``bands`` x ``rows``) is refused when its threshold is outside
    ``threshold_range``, or when the layout finds a pair at the start of the review
    band with probability (``1 - (1 - s**rows)**bands``) below ``min_recall``; below
    ``recall_target`` at the threshold it passes with a warning naming a layout
    that reaches the target.

    Example:
        >>> g = PolicyGuard()
        >>> g.check(Policy(threshold=0.8), bands=21, rows=6, num_perm=128)
        []
        >>> try:
        ...     g.check(Policy(threshold=0.2), bands=16, rows=8, num_perm=128)
        ... except InvalidConfig as exc:
        ...     print(exc.reason)
        is outside the safe range [0.5, 0.99]
    """

    threshold_range: tuple[float, float] = (0.5, 0.99)
    min_recall: float = 0.9
    recall_target: float = 0.995

    def check(self, policy: Policy, *, bands: int, rows: int, num_perm: int) -> list[str]:
        """Raise :class:`~neardup.InvalidConfig` if ``policy`` may not be live under this
        layout; otherwise return the warnings (empty at or above the target)."""
        lo, hi = self.threshold_range
        t = policy.threshold
        if not lo <= t <= hi:
            raise InvalidConfig(
                "threshold",
                t,
                f"is outside the safe range [{lo}, {hi}]",
                "ask for a threshold inside the range",
            )
        layout = f"bands={bands}, rows={rows}"
        at = policy.review_low
        rec = candidate_probability(at, bands, rows)
        if rec < self.min_recall:
            where = "the threshold" if at == t else "the start of the review band"
            raise InvalidConfig(
                "threshold",
                t,
                f"would lower candidate recall: at {at:.4f} ({where}) this layout ({layout}) "
                f"finds a pair with probability {rec:.4f}, below the service minimum "
                f"{self.min_recall}",
                self._better(at, num_perm)
                + "; for a new tenant leave bands and rows unset, for a live one build a "
                "shadow index with it and promote it, or keep the threshold",
            )
        rec_t = candidate_probability(t, bands, rows)
        if rec_t >= self.recall_target:
            return []
        return [
            f"predicted recall at threshold {t} with {layout} is {rec_t:.4f}, below the "
            f"recall target {self.recall_target}: about {1 - rec_t:.1%} of the pairs at the "
            f"threshold will not be found; {self._better(t, num_perm)}, or leave bands and "
            "rows unset to get that layout"
        ]

    def _better(self, s: float, num_perm: int) -> str:
        target = self.recall_target
        b, r = default_layout(s, num_perm, recall=target)
        rec = candidate_probability(s, b, r)
        if rec >= target:
            return f"use bands={b}, rows={r} (predicted recall {rec:.4f} at {s:.4f})"
        return f"use more permutations (num_perm={num_perm} cannot reach {target} at {s:.4f})"


@dataclass(frozen=True, slots=True)
class Outcome:
    """The state a policy gives and the reason, in words."""

    state: State
    reason: str


def outcome(
    policy: Policy,
    *,
    best_score: float | None,
    identical: bool,
    capped: bool,
    found: int,
    predicted_recall: float | None = None,
    verifiable: bool = True,
    best_estimate: float | None = None,
) -> Outcome:
    """Apply ``policy`` to the best exactly verified candidate (see the module doc).

    ``verifiable`` is False in exact-hash-only mode (features unavailable): then
    any candidate means ``review`` unless the policy allows non-destructive
    estimates and ``best_estimate`` lies below the review band.
    """
    lo, hi, t = policy.review_low, policy.review_high, policy.threshold
    if not verifiable:
        if found == 0:
            return Outcome(
                "unique",
                "no candidate found (exact-hash-only mode: the feature store is unavailable)"
                + _recall_note(predicted_recall),
            )
        if (
            policy.estimates == "non_destructive"
            and best_estimate is not None
            and best_estimate < lo
        ):
            return Outcome(
                "unique",
                f"estimated similarity {best_estimate:.4f} < review band start {lo:.4f}; "
                "exact verification impossible (feature store unavailable), policy allows "
                "non-destructive estimates",
            )
        return Outcome(
            "review",
            f"{found} candidate(s) need exact verification, impossible while the feature "
            "store is unavailable (exact-hash-only mode); never decided duplicate on a guess",
        )
    if best_score is not None and identical:
        if policy.exact_duplicates == "review":
            return Outcome(
                "review", "identical normalized content; policy sends exact copies to review"
            )
        return Outcome("duplicate", "identical normalized content (exact Jaccard 1.0)")
    if best_score is not None and best_score >= hi:
        band = f" + review_above {policy.review_above}" if policy.review_above else ""
        return Outcome("duplicate", f"exact Jaccard {best_score:.4f} >= threshold {t}{band}")
    if best_score is not None and best_score >= lo:
        return Outcome(
            "review",
            f"exact Jaccard {best_score:.4f} in the review band [{lo:.4f}, {hi:.4f}) "
            f"around threshold {t}",
        )
    if capped:
        return Outcome(
            "review",
            "candidate cap hit: a better candidate may have been cut, so uniqueness is not "
            f"established (best exact Jaccard {best_score if best_score is not None else 'none'})",
        )
    if best_score is None:
        return Outcome("unique", "no candidate found" + _recall_note(predicted_recall))
    return Outcome("unique", f"best exact Jaccard {best_score:.4f} < review band start {lo:.4f}")


def _recall_note(predicted_recall: float | None) -> str:
    if predicted_recall is None:
        return "; this is not proof of uniqueness"
    return (
        f"; a pair at the threshold is found with probability {predicted_recall:.4f}, "
        "so this is not proof of uniqueness"
    )


def chain_hash(record: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``record`` (which holds ``prev``)."""
    return hashlib.sha256(canonical_json(record).encode("ascii")).hexdigest()


def verify_chain(records: Iterable[dict[str, Any]], *, what: str = "decision log") -> int:
    """Check that each record's ``prev`` is the hash of the one before; return the count.

    Raises :class:`~neardup.CorruptFile` naming the first record that breaks the chain.
    """
    prev = GENESIS
    n = 0
    for rec in records:
        if rec.get("prev") != prev:
            raise CorruptFile(
                what, f"record {n} (seq {rec.get('seq')}) does not follow the previous one"
            )
        prev = chain_hash(rec)
        n += 1
    return n


def band_estimate(bands_hit: int, bands: int, rows: int) -> float:
    """A rough similarity estimate from the share of colliding bands (labelled as such).

    Inverts the per-band collision probability s**rows at the observed share.
    """
    share = min(max(bands_hit / bands, 0.0), 1.0)
    return float(share ** (1.0 / rows)) if share > 0 else 0.0


def colliding_bands(query: Sequence[int], stored: Sequence[int]) -> list[int]:
    """The band numbers whose keys are equal."""
    return [i for i, (a, b) in enumerate(zip(query, stored, strict=True)) if a == b]

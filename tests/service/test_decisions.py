"""Policies, outcomes and the decision-log chain (unit and property tests)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core._errors import CorruptFile, InvalidConfig
from neardup.service.decisions import (
    GENESIS,
    Policy,
    band_estimate,
    chain_hash,
    colliding_bands,
    outcome,
    verify_chain,
)


def test_policy_is_validated_and_fingerprinted() -> None:
    p = Policy(version=2, threshold=0.8, review_below=0.05)
    assert p.review_low == pytest.approx(0.75) and p.review_high == 0.8
    assert Policy.from_dict(p.to_dict()) == p and Policy.from_dict(p.to_dict()).fingerprint == (
        p.fingerprint
    )
    assert Policy(version=2, threshold=0.81).fingerprint != Policy(version=2).fingerprint
    for bad in (
        {"threshold": 0},
        {"threshold": 1.2},
        {"review_below": 0.6},
        {"threshold": 0.1, "review_below": 0.2},
        {"version": 0},
        {"max_candidates": 0},
        {"estimates": "always"},
        {"exact_duplicates": "drop"},
    ):
        with pytest.raises(InvalidConfig):
            Policy(**bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidConfig, match="unknown fields"):
        Policy.from_dict({"threshold": 0.8, "lower_it_quietly": True})
    with pytest.raises(TypeError):
        Policy(1, 0.8)  # type: ignore[misc]  # keyword-only


def test_outcomes_follow_the_policy() -> None:
    p = Policy(threshold=0.8, review_below=0.1, review_above=0.05)
    kw = {"identical": False, "capped": False, "found": 2}
    assert outcome(p, best_score=0.9, **kw).state == "duplicate"
    assert outcome(p, best_score=0.84, **kw).state == "review"  # above t, inside the band
    assert outcome(p, best_score=0.71, **kw).state == "review"
    assert outcome(p, best_score=0.69, **kw).state == "unique"
    assert outcome(p, best_score=0.5, identical=False, capped=True, found=200).state == "review"
    assert outcome(p, best_score=1.0, identical=True, capped=False, found=1).state == "duplicate"
    strict = Policy(threshold=0.8, exact_duplicates="review")
    assert outcome(strict, best_score=1.0, identical=True, capped=False, found=1).state == "review"
    none = outcome(
        p, best_score=None, identical=False, capped=False, found=0, predicted_recall=0.97
    )
    assert (
        none.state == "unique"
        and "not proof of uniqueness" in none.reason
        and "0.97" in (none.reason)
    )


@given(
    score=st.floats(0, 1),
    est=st.floats(0, 1),
    found=st.integers(0, 50),
    estimates=st.sampled_from(["never", "non_destructive"]),
)
def test_without_exact_verification_never_duplicate(
    score: float, est: float, found: int, estimates: str
) -> None:
    p = Policy(threshold=0.8, review_below=0.05, estimates=estimates)  # type: ignore[arg-type]
    o = outcome(
        p,
        best_score=score,
        identical=True,
        capped=False,
        found=found,
        verifiable=False,
        best_estimate=est,
    )
    assert o.state != "duplicate"
    if found and estimates == "never":
        assert o.state == "review"


def test_chain_detects_edits_and_removals() -> None:
    recs = []
    prev = GENESIS
    for i in range(5):
        r = {"seq": i + 1, "kind": "decision", "item_id": f"x{i}", "prev": prev}
        recs.append(r)
        prev = chain_hash(r)
    assert verify_chain(recs) == 5
    with pytest.raises(CorruptFile, match="record 2"):
        verify_chain(recs[:2] + recs[3:])
    edited = [dict(r) for r in recs]
    edited[1]["item_id"] = "forged"
    with pytest.raises(CorruptFile, match="record 2"):
        verify_chain(edited)


def test_band_helpers() -> None:
    assert colliding_bands([1, 2, 3, 4], [1, 0, 3, 0]) == [0, 2]
    assert band_estimate(32, 32, 4) == 1.0 and band_estimate(0, 32, 4) == 0.0
    assert 0.5 < band_estimate(8, 32, 4) < 0.75  # (1/4) ** (1/4) ~ 0.707

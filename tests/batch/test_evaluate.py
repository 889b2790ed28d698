"""neardup.batch.evaluate: pair recall and precision of the LSH pipeline against the
exact join, on a hand-made set whose similar pairs are known."""

from __future__ import annotations

from neardup import Config
from neardup.batch.evaluate import evaluate


def _words(prefix: str, n: int = 100) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def _labelled() -> tuple[list[str], set[tuple[int, int]]]:
    """Word 5-gram Jaccard by construction (100 distinct words, 96 shingles):
    one word changed in the middle costs 5 shingles, the last word 1."""
    a = _words("a")
    a1 = [*a[:50], "x", *a[51:]]  # J(a, a1) = 91/101 = 0.90
    a2 = [*a[:99], "y"]  # J(a, a2) = 95/97 = 0.98, J(a1, a2) = 90/102 = 0.88
    b = _words("b")
    b3 = list(b)
    for i in (20, 50, 80):
        b3[i] = f"z{i}"  # J(b, b3) = 81/111 = 0.73: not a pair at t = 0.8
    c = _words("c")
    texts = [" ".join(t) for t in (a, a1, a2, b, b3, c, c)]  # 5 and 6: exact copies
    return texts, {(0, 1), (0, 2), (1, 2), (5, 6)}


def test_recall_and_precision_on_a_labelled_set() -> None:
    texts, labelled = _labelled()
    rep = evaluate(texts, config=Config(threshold=0.8))
    assert rep["documents"] == 7 and rep["threshold"] == 0.8
    assert rep["truth_pairs"] == len(labelled)
    assert rep["found_pairs"] == len(labelled)
    assert rep["recall"] == 1.0 and rep["precision"] == 1.0 and rep["false_edges"] == 0
    buckets = rep["buckets"]
    assert len(buckets) == 4 and sum(b["pairs"] for b in buckets) == len(labelled)
    assert buckets[0]["bucket"] == "[0.800,0.850)" and buckets[-1]["bucket"].endswith("1.000]")
    # 0.88 and 0.90 in [0.85, 0.90) / [0.90, 0.95); 0.98 and the copies (1.0) in the last.
    assert [b["pairs"] for b in buckets] == [0, 1, 1, 2]
    assert all(b["recall"] == 1.0 and 0.99 <= b["predicted"] <= 1.0 for b in buckets[1:])
    assert rep["config_fingerprint"] == Config(threshold=0.8).fingerprint


def test_a_higher_threshold_shrinks_the_truth() -> None:
    texts, _ = _labelled()
    rep = evaluate(texts, config=Config(threshold=0.95))
    assert rep["truth_pairs"] == 2  # (a, a2) at 0.98 and the exact copies
    assert rep["recall"] == 1.0 and rep["precision"] == 1.0


def test_a_weak_layout_loses_recall_but_never_precision() -> None:
    texts, labelled = _labelled()
    # One band of 32 rows: P(candidate) at J = 0.9 is 0.9**32 = 0.03.
    rep = evaluate(texts, config=Config(threshold=0.8, num_perm=32, bands=1, rows=32))
    assert rep["truth_pairs"] == len(labelled)
    assert rep["recall"] < 1.0 and rep["found_pairs"] < len(labelled)
    assert rep["found_pairs"] >= 1  # the exact copies are always joined
    assert rep["precision"] == 1.0  # every edge is verified exactly
    assert all(b["predicted"] < 0.5 for b in rep["buckets"][:3])


def test_no_similar_pairs_means_nothing_to_miss() -> None:
    rep = evaluate([" ".join(_words(p)) for p in "pqr"])
    assert rep["truth_pairs"] == 0 and rep["recall"] == 1.0 and rep["precision"] == 1.0

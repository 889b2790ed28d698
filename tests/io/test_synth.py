"""neardup.io.synth: corpora are pure functions of their arguments (one seed, one
corpus), and planted copies have the parents and edit rates they claim."""

from __future__ import annotations

import random

from neardup.io.synth import plant_near_duplicates, stdlib_paragraphs, synthetic_documents


def test_synthetic_documents_are_deterministic_per_seed() -> None:
    a = synthetic_documents(20, seed=7, words=30, vocabulary=500)
    random.seed(123)  # the shared RNG plays no part
    random.random()
    b = synthetic_documents(20, seed=7, words=30, vocabulary=500)
    assert a == b
    assert synthetic_documents(20, seed=8, words=30, vocabulary=500) != a
    assert len(a) == 20 and all(len(d.split(" ")) == 30 for d in a)
    words = {w for d in a for w in d.split(" ")}
    assert all(w.startswith("w") and 0 <= int(w[1:]) < 500 for w in words)
    # A prefix of a larger corpus with the same seed.
    assert synthetic_documents(5, seed=7, words=30, vocabulary=500) == a[:5]


def test_the_vocabulary_is_zipf_like() -> None:
    docs = synthetic_documents(50, seed=1, words=200, vocabulary=2000)
    counts: dict[str, int] = {}
    for d in docs:
        for w in d.split(" "):
            counts[w] = counts.get(w, 0) + 1
    head = sum(counts.get(f"w{i}", 0) for i in range(20))
    tail = sum(counts.get(f"w{i}", 0) for i in range(1000, 1020))
    assert head > 5 * tail


def test_planted_copies_are_deterministic_and_know_their_parents() -> None:
    base = synthetic_documents(10, seed=2, words=50)
    texts, parents = plant_near_duplicates(base, copies=15, edit_rate=0.1, seed=3)
    again = plant_near_duplicates(base, copies=15, edit_rate=0.1, seed=3)
    assert (texts, parents) == again
    assert plant_near_duplicates(base, copies=15, edit_rate=0.1, seed=4) != again
    assert texts[:10] == base and parents[:10] == [-1] * 10
    assert len(texts) == len(parents) == 25
    assert all(0 <= p < 10 for p in parents[10:])
    for t, p in zip(texts[10:], parents[10:], strict=True):
        # An edited copy still shares most of its parent's words.
        pw, tw = set(base[p].split(" ")), set(t.split(" "))
        assert len(pw & tw) >= 0.6 * len(pw)


def test_edit_rate_zero_copies_exactly_and_rates_cycle() -> None:
    base = synthetic_documents(4, seed=5, words=60)
    texts, parents = plant_near_duplicates(base, copies=6, edit_rate=0.0, seed=6)
    assert all(texts[i] == base[parents[i]] for i in range(4, 10))
    texts, parents = plant_near_duplicates(base, copies=6, edit_rate=[0.0, 0.5], seed=6)
    assert all(texts[i] == base[parents[i]] for i in (4, 6, 8))  # rate 0.0
    assert all(texts[i] != base[parents[i]] for i in (5, 7, 9))  # rate 0.5


def test_an_empty_base_plants_nothing() -> None:
    assert plant_near_duplicates([], copies=3, edit_rate=0.1, seed=1) == ([], [])


def test_stdlib_paragraphs_are_distinct_long_and_stable() -> None:
    a = stdlib_paragraphs(limit=40, min_chars=300, max_files=30)
    assert a == stdlib_paragraphs(limit=40, min_chars=300, max_files=30)
    assert 0 < len(a) <= 40 and len(set(a)) == len(a)
    assert all(len(p) >= 300 and p == p.strip() for p in a)
    assert stdlib_paragraphs(limit=10, min_chars=300, max_files=30) == a[:10]

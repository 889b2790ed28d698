"""neardup.batch.online: the Deduplicator, texts added one at a time."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batch.corpora import LIMITED, MIXED_DOCS
from neardup import (
    Config,
    Deduplicator,
    DocumentTooLarge,
    EmptyDocument,
    HashKey,
    InvalidConfig,
    ShingleSpec,
    find_duplicates,
)

CFG = Config(threshold=0.6, shingle=ShingleSpec(kind="word", k=1))


def test_exact_duplicates_empties_and_limits_are_reported() -> None:
    docs = list(MIXED_DOCS)
    cfg = LIMITED
    d = Deduplicator(cfg)
    with pytest.raises(EmptyDocument):
        d.add("e", "  ")
    with pytest.raises(DocumentTooLarge):
        d.add("big", "x" * 50)
    d.add("a", docs[0])
    assert d.seen_exact(docs[1]) and not d.seen_exact("some other text")
    (m,) = d.add("b", docs[1])
    assert (m.key, m.method, m.jaccard, m.duplicate) == ("a", "identical", 1.0, True)
    assert len(d) == 2


_DOC = st.lists(
    st.sampled_from(["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]),
    min_size=1,
    max_size=6,
).map(" ".join)


@settings(max_examples=30, deadline=None)  # a batch run and an add per text
@given(texts=st.lists(_DOC, max_size=12))
def test_online_agrees_with_the_batch_run(texts: list[str]) -> None:
    # The same texts added one by one: the verified duplicates each add reports
    # among the earlier items are the pairs a batch run finds (exact copies
    # expanded), with the same exact scores, at thresholds met exactly too.
    batch = find_duplicates(texts, config=CFG, edges="all")
    assert batch.sets is not None
    d = Deduplicator(CFG)
    online: dict[tuple[int, int], float] = {}
    for i, text in enumerate(texts):
        for m in d.add(i, text):
            assert isinstance(m.key, int) and m.key < i
            assert m.jaccard == batch.sets.jaccard(m.key, i)
            assert m.duplicate == (m.jaccard is not None and m.jaccard >= CFG.threshold)
            if m.duplicate:
                online[(m.key, i)] = m.jaccard
    assert set(online) == batch.pairs()
    assert len(d) == len(texts)


def test_matches_are_verified_and_ordered() -> None:
    d = Deduplicator(CFG)
    d.add("far", "alpha beta epsilon eta theta")  # J = 2/8 with the query
    d.add("near", "alpha beta gamma delta")  # J = 4/5
    d.add("same", "alpha beta gamma delta zeta")  # J = 1
    d.add("other", "theta iota kappa")
    got = d.query("Alpha  BETA gamma delta zeta")
    assert [(m.key, m.jaccard, m.method, m.duplicate) for m in got[:2]] == [
        ("same", 1.0, "identical", True),
        ("near", 0.8, "exact", True),
    ]
    # Candidates below the threshold are reported, not counted as duplicates.
    assert all(not m.duplicate for m in got[2:]) and "other" not in [m.key for m in got]
    assert all(0.0 <= m.estimate <= 1.0 for m in got)
    assert [m.jaccard for m in got] == sorted((m.jaccard for m in got), reverse=True)
    assert len(d) == 4  # a query stores nothing
    assert len(d.query("alpha beta gamma delta zeta", limit=1)) <= 2  # limit + exact copies


def test_equal_scores_are_ordered_by_key() -> None:
    d = Deduplicator(CFG)
    for key in ("b", "c", "a"):
        d.add(key, "alpha beta gamma")
    assert [m.key for m in d.query("alpha beta gamma")] == ["a", "b", "c"]
    assert [m.key for m in d.add("d", "alpha beta gamma")] == ["a", "b", "c"]


def test_seen_exact_compares_normalized_content() -> None:
    d = Deduplicator(CFG)
    assert not d.seen_exact("Red Fox")
    d.add(1, "Red   FOX")
    assert d.seen_exact("red fox") and d.seen_exact(" RED fox ")
    assert not d.seen_exact("red fox jumps")
    raw = Deduplicator(Config(normalizer="raw", shingle=CFG.shingle, threshold=0.6))
    raw.add(1, "Red Fox")
    assert raw.seen_exact("Red Fox") and not raw.seen_exact("red fox")


def test_refused_documents_are_not_stored() -> None:
    d = Deduplicator(Config(max_document_bytes=10, shingle=CFG.shingle, threshold=0.6))
    with pytest.raises(EmptyDocument, match=r"^document is empty after normalization; fix: "):
        d.add("e", " \t\n")
    with pytest.raises(DocumentTooLarge, match=r"^document has 11 bytes, over the limit of 10"):
        d.add("big", "\u00e9" * 5 + "x")  # UTF-8 bytes are counted
    with pytest.raises(EmptyDocument):
        d.query("")
    with pytest.raises(DocumentTooLarge):
        d.seen_exact("y" * 11)
    assert len(d) == 0 and d.add("ok", "x" * 10) == []


def test_a_keyed_catalogue() -> None:
    cfg = Config(hash_algorithm="siphash24", shingle=CFG.shingle, threshold=0.6)
    with pytest.raises(InvalidConfig):
        Deduplicator(cfg)  # siphash24 needs a key
    key = HashKey.derive(b"s" * 32, "tenant-1")
    d = Deduplicator(cfg, key=key)
    d.add("a", "alpha beta gamma delta")
    (m,) = d.query("alpha beta gamma delta epsilon")
    assert (m.key, m.jaccard, m.duplicate) == ("a", 0.8, True)
    assert d.hasher.scheme.key_id == "tenant-1/v1" and d.hasher.scheme.seed is None

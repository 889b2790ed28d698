"""Decontamination matching: items pasted into long documents are found with exact
containment and Jaccard and spans in both texts; shared boilerplate is not."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import InvalidConfig
from neardup.lineage.decontam import DecontamConfig, EvalIndex
from neardup.testing import synthetic_documents

CFG = DecontamConfig()  # the defaults: 13-grams, containment 0.5
ITEMS = synthetic_documents(12, seed=101, words=45)
FILLER = synthetic_documents(60, seed=202, words=1500)


def ref_grams(text: str, n: int) -> set[str]:
    """An independent reference: lowercase ASCII words, joined n at a time."""
    toks = re.findall(r"[a-z0-9_]+", text.lower())
    return {" ".join(toks[i : i + n]) for i in range(len(toks) - n + 1)}


def ref_scores(item: str, doc: str, n: int) -> tuple[float, float]:
    e, t = ref_grams(item, n), ref_grams(doc, n)
    return len(e & t) / len(e), len(e & t) / len(e | t)


def edit(item: str, kind: str) -> str:
    w = item.split(" ")
    if kind == "case":
        return " ".join(x.upper() if i % 3 == 0 else x for i, x in enumerate(w))
    if kind == "punctuation":
        return ", ".join(w[:20]) + "?  \n" + " ".join(w[20:]) + "."
    if kind == "word":
        w[len(w) - 4] = "substituted"
        return " ".join(w)
    if kind == "middle_word":
        w[len(w) // 2] = "substituted"
        return " ".join(w)
    return item


def paste(filler: str, item: str, where: str) -> str:
    words = filler.split(" ")
    cut = {"start": 0, "middle": len(words) // 2, "end": len(words)}[where]
    return " ".join(words[:cut]) + (" " if cut else "") + item + " " + " ".join(words[cut:])


@pytest.fixture(scope="module")
def index() -> EvalIndex:
    return EvalIndex.build([("bench", f"q{i}", t) for i, t in enumerate(ITEMS)], CFG)


@pytest.mark.parametrize("where", ["start", "middle", "end"])
@pytest.mark.parametrize("kind", ["none", "case", "punctuation", "word", "middle_word"])
def test_pasted_items_are_found_with_exact_scores_and_spans(
    index: EvalIndex, where: str, kind: str
) -> None:
    docs, pasted = [], []
    for i, item in enumerate(ITEMS):
        piece = edit(item, kind)
        docs.append(paste(FILLER[i], piece, where))
        pasted.append(piece)
    found = index.matches(docs)
    for i, ms in enumerate(found):
        assert [m.item.item_id for m in ms] == [f"q{i}"]
        m = ms[0]
        c, j = ref_scores(ITEMS[i], docs[i], CFG.ngram)
        assert m.containment == pytest.approx(c) and m.containment >= CFG.min_containment
        assert m.jaccard == pytest.approx(j) and m.jaccard < 0.1  # a long page: tiny Jaccard
        doc_text = " ".join(docs[i][a:b] for a, b in m.doc_spans)
        # The matched spans of the document are text of the pasted item, and the
        # item's spans are text of the item.
        for a, b in m.doc_spans:
            assert docs[i][a:b].lower() in pasted[i].lower()
        for a, b in m.item_spans:
            assert ITEMS[i][a:b] in ITEMS[i]
            assert re.sub(r"\W+", " ", ITEMS[i][a:b]) in re.sub(r"\W+", " ", doc_text.lower())
        if kind in ("none", "case", "punctuation"):
            assert m.containment == 1.0 and m.item_coverage == 1.0
            assert m.item_spans == ((0, len(ITEMS[i])),)
            a, b = m.doc_spans[0]
            assert docs[i][a:b] == pasted[i].rstrip(".")


def test_boilerplate_alone_is_not_contamination() -> None:
    boiler = (
        "Answer the following multiple choice question with the letter of the single "
        "best option and explain nothing else"
    )
    items = [boiler + " " + t for t in synthetic_documents(10, seed=5, words=40)]
    idx = EvalIndex.build([("mcq", i, t) for i, t in enumerate(items)], CFG)
    unrelated = [boiler + " " + t for t in synthetic_documents(30, seed=6, words=300)]
    unrelated += [t + " " + boiler for t in synthetic_documents(30, seed=7, words=300)]
    assert all(ms == [] for ms in idx.matches(unrelated))
    # The same boilerplate with a real item pasted after it is still found.
    real = unrelated[0] + " " + items[3]
    assert [m.item.item_id for m in idx.matches([real])[0]] == [3]


def test_several_items_in_one_document_and_per_item_threshold(index: EvalIndex) -> None:
    doc = ITEMS[1] + " " + FILLER[0] + " " + ITEMS[7] + " " + " ".join(ITEMS[9].split()[:20])
    ms = index.matches([doc])[0]
    assert sorted(m.item.item_id for m in ms) == ["q1", "q7"]  # q9: 8/33 of its n-grams
    c9, _ = ref_scores(ITEMS[9], doc, 13)
    assert 0 < c9 < 0.5


def test_long_documents_are_hashed_in_overlapping_windows() -> None:
    cfg = DecontamConfig(window_chars=1200, overlap_chars=500, batch_bytes=1 << 20)
    idx = EvalIndex.build([("s", i, t) for i, t in enumerate(ITEMS)], cfg)
    whole = EvalIndex.build([("s", i, t) for i, t in enumerate(ITEMS)], CFG)
    docs = [paste(FILLER[i], ITEMS[i], w) for i, w in enumerate(["start", "middle", "end"] * 4)]
    assert max(map(len, docs)) > 5 * cfg.window_chars
    got = [[(m.item.item_id, m.containment, m.doc_spans) for m in ms] for ms in idx.matches(docs)]
    want = [
        [(m.item.item_id, m.containment, m.doc_spans) for m in ms] for ms in whole.matches(docs)
    ]
    assert got == want and all(len(g) == 1 for g in got)


def test_results_do_not_depend_on_the_hash() -> None:
    docs = [paste(FILLER[i], edit(ITEMS[i], "word"), "middle") for i in range(len(ITEMS))]
    runs = []
    for algo in ("siphash24", "xxh64"):
        cfg = DecontamConfig(hash_algorithm=algo)
        idx = EvalIndex.build([("s", i, t) for i, t in enumerate(ITEMS)], cfg)
        runs.append([[m.to_dict() for m in ms] for ms in idx.matches(docs)])
    assert runs[0] == runs[1] and all(runs[0])


def test_short_items_are_reported_not_indexed() -> None:
    idx = EvalIndex.build([("s", "short", "two plus two"), ("s", "ok", ITEMS[0])], CFG)
    assert [it.item_id for it in idx.too_short] == ["short"] and len(idx) == 1
    assert idx.matches(["what is two plus two"]) == [[]]


def test_non_ascii_spans_point_into_the_original_text() -> None:
    item = " ".join(f"Ｗort{i} café" for i in range(10))
    doc = "Préambule très long. " * 20 + item.upper() + " — fin."
    idx = EvalIndex.build([("s", 0, item)], DecontamConfig(ngram=5))
    (m,) = idx.matches([doc])[0]
    assert m.containment == 1.0
    ((a, b),) = m.doc_spans
    assert doc[a:b] == item.upper()
    assert m.item_spans == ((0, len(item)),)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"ngram": 0},
        {"min_containment": 0.0},
        {"min_containment": 1.5},
        {"normalizer": "nope"},
        {"hash_algorithm": "md5"},
        {"batch_bytes": 0},
        {"window_chars": 100, "overlap_chars": 80},
    ],
)
def test_invalid_parameters_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidConfig) as info:
        DecontamConfig(**kwargs)  # type: ignore[arg-type]
    assert "fix:" in str(info.value)


words = st.lists(st.sampled_from([f"v{i}" for i in range(30)]), min_size=0, max_size=60)


@pytest.mark.slow
@settings(max_examples=40)
@given(
    item=st.lists(st.sampled_from([f"v{i}" for i in range(30)]), min_size=6, max_size=40),
    before=words,
    after=words,
    n=st.integers(2, 6),
)
def test_containment_and_jaccard_equal_the_reference(
    item: list[str], before: list[str], after: list[str], n: int
) -> None:
    text = " ".join(item)
    doc = " ".join([*before, *item, *after])
    idx = EvalIndex.build([("s", 0, text)], DecontamConfig(ngram=n, min_containment=1.0))
    (m,) = idx.matches([doc])[0]
    c, j = ref_scores(text, doc, n)
    assert m.containment == c == 1.0 and m.jaccard == pytest.approx(j)
    assert m.item_coverage == 1.0

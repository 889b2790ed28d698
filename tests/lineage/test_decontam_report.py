"""report.html of decontaminate: every value escaped, one row per evaluation set."""

from __future__ import annotations

from neardup.lineage.decontam_report import render_html


def test_values_are_escaped_and_sets_listed() -> None:
    s = {
        "items": 3,
        "checked_items": 2,
        "too_short_items": 1,
        "contaminated_items": 1,
        "contaminated_share": 0.5,
        "training_documents": 4,
        "pairs": 4,
        "top_items": [{"id": "<q1>", "documents": 4}],
        "top_sources": [{"source": "a&b.example", "documents": 4}],
    }
    ex = {
        "input": "t.jsonl",
        "row": 0,
        "id": None,
        "matches": [
            {
                "eval_set": "s<1>",
                "eval_id": "<q1>",
                "containment": 1.0,
                "jaccard": 0.01,
                "doc_spans": [[3, 9]],
            }
        ],
    }
    page = render_html(
        {
            "parameters": {"ngram": 13},
            "training": {"documents": 9},
            "sets": {"s<1>": s},
            "examples": [ex],
        }
    )
    assert "<q1>" not in page and "&lt;q1&gt;" in page and "a&amp;b.example" in page
    assert page.count("<h3>") == 1 and "50.00 %" in page

"""``report.html`` of ``neardup decontaminate``: the per-evaluation-set table, the
most often found items and sources, and example matches (from ``report.json``).

Example:
    >>> html = render_html({"parameters": {"ngram": 13}, "training": {"documents": 2},
    ...     "sets": {}, "examples": []})
    >>> html.startswith("<!doctype html>")
    True
"""

from __future__ import annotations

import html
from typing import Any

__all__ = ["render_html"]


def _e(v: Any) -> str:
    return html.escape(str(v))


def _table(head: list[str], rows: list[list[Any]]) -> str:
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{th}</tr>{body}</table>"


def render_html(report: dict[str, Any]) -> str:
    """A self-contained page (no script, no external resource); every value escaped."""
    p, t = report.get("parameters", {}), report.get("training", {})
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>neardup decontaminate</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;"
        "margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}</style>",
        "</head><body><h1>Decontamination report</h1>",
        "<p>" + ", ".join(f"{_e(k)}: {_e(v)}" for k, v in p.items()) + "</p>",
        "<p>" + ", ".join(f"{_e(k)}: {_e(v)}" for k, v in t.items() if k != "inputs") + "</p>",
    ]
    sets = report.get("sets", {})
    parts.append("<h2>Evaluation sets</h2>")
    parts.append(
        _table(
            [
                "set",
                "items",
                "checked",
                "too short",
                "contaminated",
                "share",
                "training documents",
                "pairs",
            ],
            [
                [
                    name,
                    s["items"],
                    s["checked_items"],
                    s["too_short_items"],
                    s["contaminated_items"],
                    f"{100 * s['contaminated_share']:.2f} %",
                    s["training_documents"],
                    s["pairs"],
                ]
                for name, s in sets.items()
            ],
        )
    )
    for name, s in sets.items():
        parts.append(f"<h3>{_e(name)}</h3>")
        if s["top_items"]:
            parts.append(
                _table(
                    ["item", "training documents"],
                    [[i["id"], i["documents"]] for i in s["top_items"]],
                )
            )
        if s["top_sources"]:
            parts.append(
                _table(
                    ["source", "documents"],
                    [[x["source"], x["documents"]] for x in s["top_sources"]],
                )
            )
    examples = report.get("examples", [])
    if examples:
        parts.append("<h2>Examples</h2>")
        rows = [
            [
                ex["input"],
                ex["row"],
                ex["id"],
                m["eval_set"],
                m["eval_id"],
                f"{m['containment']:.3f}",
                f"{m['jaccard']:.4f}",
                m["doc_spans"][:3],
            ]
            for ex in examples
            for m in ex["matches"]
        ]
        parts.append(
            _table(
                [
                    "input",
                    "row",
                    "id",
                    "set",
                    "item",
                    "containment",
                    "jaccard",
                    "spans in the document",
                ],
                rows,
            )
        )
    parts.append("</body></html>\n")
    return "".join(parts)

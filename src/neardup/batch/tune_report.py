"""The one-page memo of ``neardup tune``: ``memo.json`` (:func:`neardup.batch.tune.tune`'s
dict) and ``memo.html``, self-contained like ``report.html`` (inline CSS and SVG,
no scripts, no network; :mod:`neardup.batch.report`'s page head and charts).

The page leads with the verdict (the recommended layout and its rollback trigger,
or the refusal with its reasons and what to change), then the collision curve
measured over the S-curve, the layouts table with Wilson bounds per segment, hot
buckets and boilerplate shingles, seed sensitivity and the one-versus-two-layouts
comparison.

Example:
    >>> from neardup.batch.tune import TuneConfig, tune
    >>> page = render_memo(tune([], config=TuneConfig(n=1_000_000)))
    >>> "8 bands" in page and "</html>" in page
    True
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Sequence
from typing import Any

from neardup.batch.outputs import commit_output, staged_output, writing
from neardup.batch.report import bar_chart, page_top
from neardup.core.layout import candidate_probability

__all__ = ["collision_svg", "render_memo", "write_memo"]


def _e(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    return html.escape("" if v is None else str(v))


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td class='n'>{_e(c)}</td>" if isinstance(c, int | float) else f"<td>{_e(c)}</td>"
            for c in row
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{th}</tr>{body}</table>"


def collision_svg(curve: dict[str, Any], threshold: float) -> str:
    """The S-curve ``1 - (1 - s^r)^b`` of ``curve``'s layout with the measured share
    of each similarity bucket (a dot at the bucket's middle, its Wilson interval as
    a bar; red when the S-curve's expectation falls outside)."""
    b, r = curve["bands"], curve["rows"]
    w, h, pad = 640, 280, 40

    def sx(s: float) -> float:
        return pad + s * (w - 2 * pad)

    def sy(p: float) -> float:
        return h - pad - p * (h - 2 * pad)

    pts = " ".join(
        f"{sx(i / 100):.1f},{sy(candidate_probability(i / 100, b, r)):.1f}" for i in range(101)
    )
    marks = []
    for x in curve["buckets"]:
        mid = (x["lo"] + x["hi"]) / 2
        color = "#147D84" if x["fits"] else "#C6284D"
        marks.append(
            f"<line x1='{sx(mid):.1f}' x2='{sx(mid):.1f}' y1='{sy(x['lower']):.1f}' "
            f"y2='{sy(x['upper']):.1f}' stroke='{color}' stroke-width='2'/>"
            f"<circle cx='{sx(mid):.1f}' cy='{sy(x['share']):.1f}' r='3.5' fill='{color}'>"
            f"<title>[{x['lo']:.2f}, {x['hi']:.2f}]: {x['collided']}/{x['pairs']} collide "
            f"(theory {x['theory']:.3f})</title></circle>"
        )
    xt = sx(threshold)
    return (
        f"<svg width='{w}' height='{h}' role='img' aria-label='collision curve'>"
        f"<rect x='{pad}' y='{pad}' width='{w - 2 * pad}' height='{h - 2 * pad}' fill='none' "
        f"stroke='#dde'/><polyline fill='none' stroke='#17365D' stroke-width='2' points='{pts}'/>"
        f"<line x1='{xt:.1f}' y1='{pad}' x2='{xt:.1f}' y2='{h - pad}' stroke='#C6284D' "
        f"stroke-dasharray='4 3'/>{''.join(marks)}"
        f"<text x='{pad}' y='{h - pad + 16}'>0</text><text x='{w - pad - 8}' y='{h - pad + 16}'>1"
        f"</text><text x='{w / 2 - 60:.0f}' y='{h - 6}'>Jaccard similarity s</text>"
        f"<text x='4' y='{pad - 8}'>measured share colliding (dots, Wilson bars) over "
        f"1-(1-s^{r})^{b}</text></svg>"
    )


def _verdict(memo: dict[str, Any]) -> str:
    rec = memo["recommendation"]
    s = memo["settings"]
    roll = "; ".join(
        f"{x['metric']} {'below' if 'below' in x else 'above'} {_e(x.get('below', x.get('above')))}"
        for x in rec["rollback"]
    )
    if rec["status"] == "recommended":
        lay = rec["layout"]
        return (
            f"<h2>Recommendation</h2><p><b>{lay['bands']} bands × {lay['rows']} rows</b> "
            f"({lay['hashes']} hashes, {lay['memory_bytes_per_item']} bytes per item): the "
            f"fewest hashes whose recall lower bound ({s['confidence']:.0%} Wilson) clears "
            f"{s['recall']} in every segment with candidates within {s['budget']:g} per query "
            f"at {s['n']:,} items.</p><p>Roll back when: {html.escape(roll)}.</p>"
        )
    items = "".join(f"<li>{html.escape(x)}</li>" for x in rec["reasons"])
    change = "".join(f"<li>{html.escape(x)}</li>" for x in rec["what_to_change"])
    return (
        "<h2>Recommendation refused</h2><p>No layout of the grid meets every segment's "
        f"lower bound and the budget. The nearest misses:</p><ul>{items}</ul>"
        f"<p>What to change:</p><ul>{change}</ul>"
    )


def _layouts_table(memo: dict[str, Any]) -> str:
    fields = memo["settings"]["segment_fields"]
    head = ["layout", "hashes", "P(t) theory", "recall", "lower"]
    segs: list[tuple[str, str]] = []
    for row in memo["layouts"][:1]:
        for f in fields:
            segs += [(f, v) for v in row.get("recall", {}).get("segments", {}).get(f, {})]
    head += [f"{f}={v} lower" for f, v in segs]
    head += ["p99 cand./query", "far cand. at n (theory)", "bytes/item", "verdict"]
    rows = []
    for x in memo["layouts"]:
        rec = x.get("recall", {})
        ov = rec.get("overall", {})
        seg_cells = [rec.get("segments", {}).get(f, {}).get(v, {}).get("lower") for f, v in segs]
        q = x.get("candidates_per_query") or {}
        rows.append(
            [
                f"{x['bands']}×{x['rows']}"
                + (f" ({', '.join(x['tags'])})" if x.get("tags") else ""),
                x["hashes"],
                x["theory_recall_at_threshold"],
                ov.get("recall"),
                ov.get("lower"),
                *seg_cells,
                q.get("p99"),
                x["expected_far_candidates_theory"],
                x["memory_bytes_per_item"],
                "ok" if not x["fails"] else "; ".join(x["fails"]),
            ]
        )
    return _table(head, rows)


def render_memo(memo: dict[str, Any]) -> str:
    """``memo.html`` of a :func:`~neardup.batch.tune.tune` memo (reproducible: no
    timings, the same memo gives the same bytes)."""
    s = memo["settings"]
    corpus = memo.get("corpus", {})
    cards = [
        ("mode", memo["mode"]),
        ("threshold", s["threshold"]),
        ("recall target", s["recall"]),
        ("budget", f"{s['budget']:g}"),
        ("n", f"{s['n']:,}"),
    ]
    if corpus:
        cards += [("documents", corpus["documents"]), ("true pairs", corpus["truth_pairs"])]
    runrows = [(k, s[k]) for k in sorted(s) if k not in ("segment_fields",)]
    parts = [
        page_top("neardup tune", "LSH layout memo", [], cards, runrows),
        _verdict(memo),
    ]
    if "collision_curve" in memo:
        cur = memo["collision_curve"]
        fail = cur["failing"]
        parts.append(
            f"<h2>Collision curve ({cur['bands']}×{cur['rows']})</h2>"
            + collision_svg(cur, s["threshold"])
            + (
                "<p>Buckets where the S-curve's expectation is outside the Wilson interval: "
                + ", ".join(f"[{x['lo']:.2f}, {x['hi']:.2f})" for x in fail)
                + "</p>"
                if fail
                else "<p class='muted'>Every bucket's Wilson interval holds the S-curve's "
                "expectation.</p>"
            )
        )
    parts.append("<h2>Layouts</h2>" + _layouts_table(memo))
    if memo.get("hot_buckets"):
        parts.append(
            "<h2>Hot buckets and boilerplate</h2>"
            + bar_chart(
                [(f"b{x['band']}", x["size"]) for x in memo["hot_buckets"]],
                "largest band buckets",
            )
            + _table(
                ["shingle", "documents", "share", "example id"],
                [
                    [x["shingle"] or x["hash"], x["documents"], x["share"], x["example_id"]]
                    for x in memo.get("boilerplate_shingles", [])
                ],
            )
        )
    if "seed_sensitivity" in memo:
        sd = memo["seed_sensitivity"]
        parts.append(
            f"<h2>Seed sensitivity ({sd['bands']}×{sd['rows']})</h2>"
            + _table(
                ["seed", "recall", "lower", "min segment lower", "p99 cand./query", "pairs"],
                [
                    [
                        str(x["seed"]),
                        x["recall"],
                        x["lower"],
                        x["min_segment_lower"],
                        x["p99_candidates_per_query"],
                        x["candidate_pairs"],
                    ]
                    for x in sd["runs"]
                ],
            )
        )
    if "layout_comparison" in memo:
        c = memo["layout_comparison"]
        lo, hi = c["ranges"]

        def line(name: str, d: dict[str, Any]) -> list[Any]:
            q_lo = d["low"]["candidates_per_query"] or {}
            q_hi = d["high"]["candidates_per_query"] or {}
            lays = d.get("layouts", [d.get("layout")])
            return [
                name,
                ", ".join(f"{b}×{r}" for b, r in lays),
                d["memory_bytes_per_item"],
                d["low"]["recall"],
                d["high"]["recall"],
                q_lo.get("p99"),
                q_hi.get("p99"),
            ]

        parts.append(
            "<h2>One layout or two</h2>"
            + _table(
                [
                    "",
                    "layouts",
                    "bytes/item",
                    f"recall ≥ {lo}",
                    f"recall ≥ {hi}",
                    f"p99 cand. ({lo} queries)",
                    f"p99 cand. ({hi} queries)",
                ],
                [line("one", c["one_layout"]), line("two", c["two_layouts"])],
            )
        )
    parts.append("</body></html>")
    return "".join(parts)


def memo_files(memo: dict[str, Any], folder: str) -> list[str]:
    """Write ``memo.json`` and ``memo.html`` into the existing folder ``folder``
    (a staged output folder; see :func:`write_memo`)."""
    texts = [json.dumps(memo, sort_keys=True, indent=1) + "\n", render_memo(memo)]
    paths = [os.path.join(folder, "memo.json"), os.path.join(folder, "memo.html")]
    with writing(folder):
        for path, text in zip(paths, texts, strict=True):
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
    return paths


def write_memo(
    memo: dict[str, Any],
    folder: str,
    *,
    overwrite: bool = False,
    protect: Sequence[str] = (),
) -> list[str]:
    """Write ``memo.json`` and ``memo.html`` as the folder ``folder``, staged and
    committed whole like every command's output: an existing folder is refused
    unless ``overwrite``, and so is one that is or holds a path of ``protect``
    (the inputs)."""
    with staged_output(folder, overwrite, protect) as tmp:
        memo_files(memo, str(tmp))
        commit_output(str(tmp), folder)
    return [os.path.join(folder, n) for n in ("memo.json", "memo.html")]

"""``report.html``: a self-contained page (inline CSS and SVG, no scripts, no
network) that a person would rather read than JSON: counts, cluster sizes, the
similarity histogram of verified edges, the S-curve of the chosen layout with the
threshold marked, the largest clusters with side-by-side texts whose shared spans
are highlighted, and the shingles most often shared by verified edges — the
boilerplate suspects.  The page depends only on the inputs and config (no
timings), so it is reproducible byte for byte.
"""

from __future__ import annotations

import heapq
import html
import struct
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence, Sized
from typing import Any

from neardup.batch.pipeline import DedupResult
from neardup.core.config import Config
from neardup.graph.cluster import Cluster, Edge
from neardup.sketch.lsh import candidate_probability
from neardup.verify.explain import shared_shingles_of_pairs, shared_spans, spans_for_pairs

__all__ = [
    "cluster_heading",
    "language_table",
    "largest_clusters",
    "near_edges",
    "page_top",
    "render_report",
    "render_vector_report",
    "shown_edges",
    "size_chart",
    "write_scurve_png",
]

SHOWN_CLUSTERS = 8
"""Clusters a report shows (the largest)."""
SHOWN_EDGES = 3
"""Edges shown under each of them."""
SHINGLE_EDGES = 300
"""Near-duplicate edges whose shared shingles a text report counts."""
SHOWN_LANGUAGES = 30
"""Languages (or scripts) the per-language table lists; the rest are summed."""

PAGE_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;
max-width:1100px;color:#1d2733;padding:0 1rem}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.2rem;margin-top:2rem;
border-bottom:2px solid #17365D;padding-bottom:.2rem;color:#17365D}
.muted{color:#667}table{border-collapse:collapse}td,th{padding:.25rem .7rem;
border-bottom:1px solid #dde;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.cards{display:flex;flex-wrap:wrap;gap:.8rem}.card{background:#f3f6fa;border-radius:8px;
padding:.6rem 1rem;min-width:9rem}.card b{display:block;font-size:1.4rem;color:#147D84}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:.8rem;margin:.5rem 0 1.2rem}
.pair pre{white-space:pre-wrap;word-break:break-word;background:#fafbfc;border:1px solid #e3e6ea;
border-radius:6px;padding:.6rem;margin:0;max-height:22rem;overflow:auto;font-size:12.5px}
mark{background:#ffe08a;padding:0}.edge{font-size:12.5px;color:#445}
svg text{font-size:11px;fill:#445}
"""


def bar_chart(values: Sequence[tuple[str, int]], title: str, color: str = "#147D84") -> str:
    if not values:
        return f"<p class='muted'>No data for {html.escape(title)}.</p>"
    w, h, pad = 640, 220, 40
    top = max(v for _, v in values) or 1
    bw = (w - 2 * pad) / len(values)
    parts = [f"<svg width='{w}' height='{h}' role='img' aria-label='{html.escape(title)}'>"]
    for i, (label, v) in enumerate(values):
        bh = (h - 2 * pad) * v / top
        x = pad + i * bw
        parts.append(
            f"<rect x='{x + 1:.1f}' y='{h - pad - bh:.1f}' width='{max(bw - 2, 1):.1f}' "
            f"height='{bh:.1f}' fill='{color}'><title>{html.escape(label)}: {v}</title></rect>"
        )
        if len(values) <= 25 or i % max(1, len(values) // 10) == 0:
            parts.append(
                f"<text x='{x + bw / 2:.1f}' y='{h - pad + 14}' text-anchor='middle'>"
                f"{html.escape(label)}</text>"
            )
    parts.append(f"<text x='{pad}' y='{pad - 10}'>max {top}</text>")
    parts.append(f"<line x1='{pad}' y1='{h - pad}' x2='{w - pad}' y2='{h - pad}' stroke='#889'/>")
    parts.append("</svg>")
    return "".join(parts)


def _s_curve(bands: int, rows: int, threshold: float) -> str:
    w, h, pad = 640, 260, 40
    pts = []
    for i in range(101):
        s = i / 100
        p = candidate_probability(s, bands, rows)
        pts.append(f"{pad + s * (w - 2 * pad):.1f},{h - pad - p * (h - 2 * pad):.1f}")
    xt = pad + threshold * (w - 2 * pad)
    pt = candidate_probability(threshold, bands, rows)
    return (
        f"<svg width='{w}' height='{h}' role='img' aria-label='S-curve'>"
        f"<rect x='{pad}' y='{pad}' width='{w - 2 * pad}' height='{h - 2 * pad}' fill='none' "
        f"stroke='#dde'/><polyline fill='none' stroke='#17365D' stroke-width='2' "
        f"points='{' '.join(pts)}'/><line x1='{xt:.1f}' y1='{pad}' x2='{xt:.1f}' "
        f"y2='{h - pad}' stroke='#C6284D' stroke-dasharray='4 3'/>"
        f"<text x='{xt + 4:.1f}' y='{pad + 14}'>threshold {threshold:g}: "
        f"P = {pt:.4f}</text>"
        f"<text x='{pad}' y='{h - pad + 16}'>0</text><text x='{w - pad - 8}' y='{h - pad + 16}'>"
        f"1</text><text x='{w / 2 - 60:.0f}' y='{h - 6}'>Jaccard similarity s</text>"
        f"<text x='4' y='{pad - 8}'>P(candidate) = 1-(1-s^{rows})^{bands}</text></svg>"
    )


def _curve(
    points: Sequence[tuple[float, float]],
    x_range: tuple[float, float],
    threshold: float,
    x_label: str,
    formula: str,
) -> str:
    """A candidate-probability curve over ``x_range`` with the threshold marked."""
    w, h, pad = 640, 260, 40
    lo, hi = x_range
    span = (hi - lo) or 1.0

    def sx(x: float) -> float:
        return pad + (x - lo) / span * (w - 2 * pad)

    pts = " ".join(f"{sx(x):.1f},{h - pad - p * (h - 2 * pad):.1f}" for x, p in points)
    pt = min(points, key=lambda q: abs(q[0] - threshold))[1]
    xt = sx(threshold)
    return (
        f"<svg width='{w}' height='{h}' role='img' aria-label='candidate probability'>"
        f"<rect x='{pad}' y='{pad}' width='{w - 2 * pad}' height='{h - 2 * pad}' fill='none' "
        f"stroke='#dde'/><polyline fill='none' stroke='#17365D' stroke-width='2' "
        f"points='{pts}'/><line x1='{xt:.1f}' y1='{pad}' x2='{xt:.1f}' "
        f"y2='{h - pad}' stroke='#C6284D' stroke-dasharray='4 3'/>"
        f"<text x='{xt + 4:.1f}' y='{pad + 14}'>threshold {threshold:g}: P = {pt:.4f}</text>"
        f"<text x='{pad}' y='{h - pad + 16}'>{lo:g}</text><text x='{w - pad - 16}' "
        f"y='{h - pad + 16}'>{hi:g}</text><text x='{w / 2 - 60:.0f}' y='{h - 6}'>"
        f"{html.escape(x_label)}</text><text x='4' y='{pad - 8}'>{html.escape(formula)}</text>"
        "</svg>"
    )


def page_top(
    title: str,
    heading: str,
    inputs: Sequence[Any],
    cards: Sequence[tuple[str, Any]],
    rows: Sequence[tuple[str, Any]],
) -> str:
    """The start of a report page, through its "Run" table: head, heading, the
    inputs, the ``cards`` (label, value) and the ``rows`` (label, value)."""
    card_html = "".join(
        f"<div class='card'><b>{html.escape(str(v))}</b>{html.escape(k)}</div>" for k, v in cards
    )
    table_html = "".join(
        f"<tr><td>{html.escape(k)}</td><td class='n'>{html.escape(str(v))}</td></tr>"
        for k, v in rows
    )
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{title}</title><style>" + PAGE_CSS + "</style></head><body>"
        f"<h1>{heading}</h1><p class='muted'>"
        + html.escape(", ".join(map(str, inputs))[:300])
        + "</p><div class='cards'>"
        + card_html
        + "</div><h2>Run</h2><table>"
        + table_html
        + "</table>"
    )


def cluster_heading(c: Any, ids: Sequence[Any]) -> str:
    """A cluster's heading in a report: its size, representative and first members."""
    return (
        f"<h3>Cluster {c.id}: {len(c)} members, representative "
        f"{html.escape(str(ids[c.representative]))}</h3><p class='edge'>members: "
        + html.escape(", ".join(str(ids[m]) for m in c.members[:40]))
        + (" …" if len(c) > 40 else "")
        + "</p>"
    )


_SHOWN = 4000


def highlight_spans(text: str, spans: list[tuple[int, int]], limit: int = _SHOWN) -> str:
    out = []
    pos = 0
    for s, e in spans:
        if s >= limit:
            break
        out.append(html.escape(text[pos:s]))
        out.append("<mark>" + html.escape(text[s : min(e, limit)]) + "</mark>")
        pos = min(e, limit)
    out.append(html.escape(text[pos:limit]))
    if len(text) > limit:
        out.append(f"<span class='muted'> … ({len(text) - limit} more characters)</span>")
    return "".join(out)


def largest_clusters(clusters: Sequence[Cluster]) -> list[Cluster]:
    """The clusters a report shows: the largest, ties by cluster id."""
    sizes = [len(c.members) for c in clusters]
    if len(sizes) > SHOWN_CLUSTERS:
        # Only clusters as large as the SHOWN_CLUSTERS-th largest can be shown:
        # ranked by a key built for those alone, not for every cluster.
        cut = heapq.nlargest(SHOWN_CLUSTERS, sizes)[-1]
        clusters = [c for c, n in zip(clusters, sizes, strict=True) if n >= cut]
    return heapq.nsmallest(SHOWN_CLUSTERS, clusters, key=lambda c: (-len(c), c.id))


def shown_edges(cluster: Cluster) -> list[Edge]:
    """The near-duplicate (not identical) edges a text report shows under ``cluster``."""
    return [e for e in cluster.edges if e.method != "identical"][:SHOWN_EDGES]


def _shown_spans(
    edges: Sequence[Edge], texts: dict[int, str], config: Config
) -> dict[tuple[int, int], tuple[list[tuple[int, int]], list[tuple[int, int]]]]:
    """The shared spans of each shown edge whose texts are at hand, by ``(a, b)``.

    Only the first ``_SHOWN`` characters are displayed, so spans are computed on
    them (long documents made this the report's main cost), and each document is
    normalized and shingled once however many shown edges it is in.
    """
    pairs = [(e.a, e.b) for e in edges if e.a in texts and e.b in texts]
    docs = sorted({p for pair in pairs for p in pair})
    at = {p: i for i, p in enumerate(docs)}
    got = spans_for_pairs(
        [texts[p][:_SHOWN] for p in docs],
        [(at[a], at[b]) for a, b in pairs],
        config.shingle,
        normalizer=config.normalizer,
    )
    return dict(zip(pairs, got, strict=True))


def _run_cards(stats: dict[str, Any], items_in: str, exact: str) -> list[tuple[str, Any]]:
    """The cards atop a run's report, from its ``stats.json``; ``items_in`` and
    ``exact`` name what was read and its exact copies (documents or vectors)."""
    return [
        (items_in, stats["documents_in"]),
        ("kept", stats["documents_out"]),
        (exact, stats["exact_duplicates"]),
        ("near duplicates", stats["near_duplicates"]),
        ("clusters", stats["clusters"]),
        ("predicted recall at t", f"{stats['predicted_recall_at_threshold']:.4f}"),
    ]


def size_chart(groups: Sequence[Sized], title: str) -> str:
    """A bar chart of how many of ``groups`` (clusters, families) have each size."""
    sizes = Counter(len(g) for g in groups)
    return bar_chart([(str(k), v) for k, v in sorted(sizes.items())], title)


def near_edges(clusters: Sequence[Cluster]) -> list[Edge]:
    """The exactly scored near-duplicate edges of ``clusters``: a text report's
    similarity histogram, and its shared shingles over the first
    :data:`SHINGLE_EDGES`."""
    return [
        e for c in clusters for e in c.edges if e.method != "identical" and e.jaccard is not None
    ]


def language_table(
    by_language: Mapping[str, Mapping[str, Any]],
    total: tuple[str, str] = ("documents", "documents"),
    counts: Sequence[tuple[str, str]] = (("duplicates", "duplicates"), ("kept", "kept")),
) -> str:
    """The per-language section of a report: ``by_language`` (as in ``stats.json``)
    as a table of the ``total`` column and the ``counts`` columns (key, heading),
    then the first count's share of the total; the most frequent language first
    (ties by name), past :data:`SHOWN_LANGUAGES` summed in one row.  One
    ``<section class='languages'>`` element; empty when there is nothing to count.

    >>> language_table({"Latin": {"documents": 4, "duplicates": 1, "kept": 3}})[:60]
    "<section class='languages'><h2>Per language (detected script"
    """
    if not by_language:
        return ""
    keys = [total[0], *(k for k, _ in counts)]
    items = sorted(by_language.items(), key=lambda kv: (-int(kv[1][total[0]]), kv[0]))
    shown, rest = items[:SHOWN_LANGUAGES], items[SHOWN_LANGUAGES:]
    rows = [(html.escape(name), [int(c[k]) for k in keys]) for name, c in shown]
    if rest:
        rows.append((f"{len(rest)} more", [sum(int(c[k]) for _, c in rest) for k in keys]))
    head = "".join(f"<th>{html.escape(h)}</th>" for h in (total[1], *(h for _, h in counts)))
    body = "".join(
        f"<tr><td>{name}</td>"
        + "".join(f"<td class='n'>{v}</td>" for v in values)
        + (f"<td class='n'>{100 * values[1] / values[0]:.1f}%</td>" if counts else "")
        + "</tr>"
        for name, values in rows
    )
    rate = f"<th>{html.escape(counts[0][1])} %</th>" if counts else ""
    return (
        "<section class='languages'><h2>Per language (detected script, or the language "
        f"field)</h2><table><tr><th>language</th>{head}{rate}</tr>{body}</table></section>"
    )


def render_report(
    result: DedupResult,
    clusters: Sequence[Cluster],
    ids: Sequence[Any],
    texts: dict[int, str],
    config: Config,
    stats: dict[str, Any],
) -> str:
    """The HTML page for one run (``texts`` maps positions to original texts)."""
    bands, rows = config.layout
    cards = _run_cards(stats, "documents in", "exact duplicates")
    rows_tbl = [
        ("empty documents", stats["empty"]),
        ("too large (not compared)", stats["too_large"]),
        ("truncated at max_shingles", stats["truncated"]),
        ("bad records skipped", stats.get("bad_records", 0)),
        ("candidate pairs", stats["candidate_pairs"]),
        ("verified pairs", stats["verified_pairs"]),
        ("pairs skipped (already joined)", stats["skipped_connected"]),
        ("candidate overflow (cut by cap)", stats["candidate_overflow"]),
        ("method / verification", f"{stats['method']} / {stats['verify']}"),
        ("threshold", config.threshold),
        ("shingles", str(config.shingle)),
        ("normalizer", config.normalizer),
        ("signature", f"{config.signature}, k={config.num_perm}"),
        ("LSH layout", f"{bands} bands × {rows} rows"),
        ("scheme fingerprint", stats["scheme_fingerprint"]),
        ("config fingerprint", stats["config_fingerprint"]),
    ]
    near = near_edges(clusters)
    lo = config.threshold
    nb = 20
    width = (1.0 - lo) / nb if lo < 1 else 1.0
    sim_counts = [0] * nb
    for e in near:
        j = e.jaccard if e.jaccard is not None else 0.0
        sim_counts[min(nb - 1, int((j - lo) / width)) if width else 0] += 1
    sim_bars = [(f"{lo + i * width:.2f}", c) for i, c in enumerate(sim_counts)]

    shingle_counts: Counter[str] = Counter()
    sections = []
    shown_by_cluster = [(c, shown_edges(c)) for c in largest_clusters(clusters)]
    spans = _shown_spans([e for _, shown in shown_by_cluster for e in shown], texts, config)
    for c, shown in shown_by_cluster:
        sections.append(cluster_heading(c, ids))
        for e in shown:
            got = spans.get((e.a, e.b))
            if got is None:
                continue
            ta, tb = texts[e.a], texts[e.b]
            spans_a, spans_b = got
            if e.intersection is not None and e.union is not None:
                shared, total = e.intersection, e.union  # from the exact verification
            else:
                ex = shared_spans(
                    ta[:_SHOWN], tb[:_SHOWN], config.shingle, normalizer=config.normalizer
                )
                shared, total = ex.shared, ex.total
            sections.append(
                f"<p class='edge'>{html.escape(str(ids[e.a]))} — {html.escape(str(ids[e.b]))}: "
                f"exact J = {e.jaccard:.3f} ({shared} of {total} shingles), estimate "
                f"{(e.estimate or 0):.3f}, band {e.band}</p><div class='pair'><pre>"
                f"{highlight_spans(ta, spans_a)}</pre>"
                f"<pre>{highlight_spans(tb, spans_b)}</pre></div>"
            )
        if not shown:
            sections.append("<p class='edge'>all members are identical after normalization</p>")
    pairs = [
        (e.a, e.b)
        for e in near[:SHINGLE_EDGES]
        if e.a in texts and e.b in texts and len(texts[e.a]) + len(texts[e.b]) < 200_000
    ]
    for in_both in shared_shingles_of_pairs(
        texts, pairs, config.shingle, normalizer=config.normalizer
    ):
        shingle_counts.update(in_both)
    top = shingle_counts.most_common(20)
    top_rows = "".join(
        f"<tr><td class='n'>{n}</td><td><code>{html.escape(s[:120])}</code></td></tr>"
        for s, n in top
    )
    return (
        page_top("neardup report", "neardup report", stats.get("inputs", []), cards, rows_tbl)
        + language_table(stats.get("by_language", {}))
        + "<h2>Cluster sizes</h2>"
        + size_chart(clusters, "cluster sizes")
        + "<h2>Similarity of verified near-duplicate edges</h2>"
        + bar_chart(sim_bars, "exact Jaccard of verified edges", "#6C3BAA")
        + "<h2>Candidate probability (S-curve)</h2>"
        + _s_curve(bands, rows, config.threshold)
        + "<p class='muted'>A pair at similarity s becomes a candidate with this probability; "
        "every candidate is then verified exactly.</p>"
        "<h2>Largest clusters</h2>"
        + ("".join(sections) or "<p class='muted'>none</p>")
        + "<h2>Most shared shingles among verified edges (boilerplate suspects)</h2>"
        + (
            f"<table><tr><th>edges</th><th>shingle</th></tr>{top_rows}</table>"
            if top
            else "<p class='muted'>none</p>"
        )
        + "</body></html>\n"
    )


def _vector_curve(cfg: Any) -> str:
    import math

    from neardup.vectors.sketches import hyperplane_collision, pstable_collision

    t = float(cfg.threshold)
    if cfg.metric == "cosine":
        xs = [-1 + i / 100 for i in range(201)]
        if cfg.hamming_radius is not None:
            k, bits = cfg.hamming_radius, cfg.bits

            def prob(c: float) -> float:
                q = 1 - hyperplane_collision(c)
                return float(
                    sum(math.comb(bits, j) * q**j * (1 - q) ** (bits - j) for j in range(k + 1))
                )

            formula = f"P(candidate) = P(Hamming <= {k} of {bits} bits)"
        else:

            def prob(c: float) -> float:
                return candidate_probability(hyperplane_collision(c), cfg.bands, cfg.rows)

            formula = f"P = 1-(1-p^{cfg.rows})^{cfg.bands}, p = 1 - arccos(c)/pi"
        return _curve([(x, prob(x)) for x in xs], (-1.0, 1.0), t, "exact cosine c", formula)
    if cfg.metric == "weighted_jaccard":
        pts = [(i / 200, candidate_probability(i / 200, cfg.bands, cfg.rows)) for i in range(201)]
        formula = f"P = 1-(1-J^{cfg.rows})^{cfg.bands} (ICWS codes collide with prob. J)"
        return _curve(pts, (0.0, 1.0), t, "exact weighted Jaccard J", formula)
    p = 2 if cfg.metric == "l2" else 1
    hi = 3 * t
    xs = [hi * i / 200 for i in range(201)]
    pts = [
        (x, candidate_probability(pstable_collision(x, cfg.width, p=p), cfg.bands, cfg.rows))
        for x in xs
    ]
    formula = f"P = 1-(1-p^{cfg.rows})^{cfg.bands}, p = p-stable collision (w={cfg.width:.3g})"
    return _curve(pts, (0.0, hi), t, f"exact {cfg.metric} distance", formula)


def render_vector_report(
    result: Any,
    ids: Sequence[Any],
    text_of: Any,
    stats: dict[str, Any],
) -> str:
    """The HTML page for a vector run (``text_of(position)`` gives a text to show, or
    None).  Depends only on the inputs and config, like :func:`render_report`."""
    cfg = result.config
    metric = cfg.metric
    cards = _run_cards(stats, "vectors in", "identical vectors")
    layout = (
        f"permuted blocks: all pairs within {cfg.hamming_radius} of {cfg.bits} bits"
        if cfg.hamming_radius is not None
        else f"{cfg.bands} bands × {cfg.rows} rows"
    )
    rows_tbl = [
        ("kind", stats["kind"]),
        ("metric", metric),
        ("threshold", cfg.threshold),
        ("dimension", stats.get("dimension")),
        ("signature", cfg.scheme + (f", width {cfg.width:.4g}" if cfg.width else "")),
        ("LSH layout", layout),
        ("bad records skipped", stats.get("bad_records", 0)),
        ("candidate checks", stats["candidate_checks"]),
        ("verified edges", stats["verified_edges"]),
        ("pairs skipped (already joined)", stats["skipped_connected"]),
        ("candidate cap cut", stats["candidate_cap_cut"]),
        ("bucket overflow", stats["bucket_overflow"]),
        ("config fingerprint", stats["config_fingerprint"]),
    ]
    clusters = result.clusters
    scores = [e.score for c in clusters for e in c.edges]
    nb = 20
    if metric in ("cosine", "weighted_jaccard"):
        lo, hi = float(cfg.threshold), 1.0
    else:
        lo, hi = 0.0, float(cfg.threshold)
    step = (hi - lo) / nb or 1.0
    counts = [0] * nb
    for v in scores:
        counts[max(0, min(nb - 1, int((v - lo) / step)))] += 1
    sim_bars = [(f"{lo + i * step:.3g}", c) for i, c in enumerate(counts)]
    sections = []
    for c in largest_clusters(clusters):
        sections.append(cluster_heading(c, ids))
        for e in c.edges[:SHOWN_EDGES]:
            head = (
                f"<p class='edge'>{html.escape(str(ids[e.a]))} — {html.escape(str(ids[e.b]))}: "
                f"exact {metric} = {e.score:.4f}, estimate {e.estimate:.4f}, band {e.band}</p>"
            )
            ta, tb = text_of(e.a), text_of(e.b)
            if ta is not None and tb is not None:
                head += (
                    f"<div class='pair'><pre>{highlight_spans(ta, [])}</pre>"
                    f"<pre>{highlight_spans(tb, [])}</pre></div>"
                )
            sections.append(head)
    return (
        page_top(
            "neardup vector report",
            "neardup report (vectors)",
            stats.get("inputs", []),
            cards,
            rows_tbl,
        )
        + "<h2>Cluster sizes</h2>"
        + size_chart(clusters, "cluster sizes")
        + f"<h2>Exact {metric} of verified edges</h2>"
        + bar_chart(sim_bars, f"exact {metric} of verified edges", "#6C3BAA")
        + "<h2>Candidate probability</h2>"
        + _vector_curve(cfg)
        + "<p class='muted'>A pair at this exact score becomes a candidate with this "
        "probability; every candidate is then re-scored exactly.</p><h2>Largest clusters</h2>"
        + ("".join(sections) or "<p class='muted'>none</p>")
        + "</body></html>\n"
    )


def write_scurve_png(path: str, bands: int, rows: int, threshold: float) -> None:
    """Write a small PNG (480 x 300, grey) of the S-curve of ``bands`` x ``rows``
    with the threshold marked, drawn without any plotting library: the picture of
    ``neardup params --png``."""
    w, h, pad = 480, 300, 30
    img = [[255] * w for _ in range(h)]

    def dot(x: int, y: int, v: int = 0) -> None:
        if 0 <= x < w and 0 <= y < h:
            img[y][x] = v

    for x in range(pad, w - pad):
        dot(x, h - pad, 120)
    for y in range(pad, h - pad):
        dot(pad, y, 120)
    xt = pad + round(threshold * (w - 2 * pad))
    for y in range(pad, h - pad, 3):
        dot(xt, y, 160)
    prev = None
    for x in range(pad, w - pad + 1):
        s = (x - pad) / (w - 2 * pad)
        y = h - pad - round(candidate_probability(min(s, 1.0), bands, rows) * (h - 2 * pad))
        if prev is not None:
            for yy in range(min(prev, y), max(prev, y) + 1):
                dot(x, yy)
                dot(x, yy + 1)
        prev = y
    raw = b"".join(b"\x00" + bytes(row) for row in img)

    def chunk(tag: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + tag
            + data
            + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
        )

    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )
    with open(path, "wb") as fh:
        fh.write(png)

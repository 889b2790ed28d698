"""``neardup params``: the (bands, rows) calculator and its candidate-probability
table, for documents and for vectors.
"""

from __future__ import annotations

import json
import math

import click

from neardup.cli.common import errors
from neardup.core._errors import InvalidConfig

__all__ = ["params"]


@click.command()
@click.option(
    "--threshold",
    type=float,
    default=0.8,
    show_default=True,
    help="Similarity the layout must find (default layout: recall at it).",
)
@click.option(
    "--num-perm",
    type=int,
    default=128,
    show_default=True,
    help="Signature length for the default layout.",
)
@click.option("--far", type=float, default=None, help="Similarity of pairs to keep out.")
@click.option(
    "--recall",
    type=float,
    default=0.95,
    show_default=True,
    help="Required candidate probability at --threshold (with --far).",
)
@click.option(
    "--budget",
    type=float,
    default=20_000,
    show_default=True,
    help="Allowed far candidates per query (with --far).",
)
@click.option(
    "-n",
    "n",
    type=int,
    default=1_000_000,
    show_default=True,
    help="Items in the index (with --far).",
)
@click.option(
    "--max-perm",
    type=int,
    default=512,
    show_default=True,
    help="Largest signature the search may propose.",
)
@click.option("--png", default=None, help="Also write the S-curve as a PNG to this path.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option(
    "--metric",
    type=click.Choice(["jaccard", "cosine", "l2", "l1", "weighted_jaccard"]),
    default="jaccard",
    show_default=True,
    help="jaccard (MinHash) or a vector family: cosine (hyperplanes; --threshold is the "
    "cosine) or l2/l1 (p-stable; --threshold is the radius, the width is picked).",
)
def params(
    threshold: float,
    num_perm: int,
    far: float | None,
    recall: float,
    budget: float,
    n: int,
    max_perm: int,
    png: str | None,
    as_json: bool,
    metric: str,
) -> None:
    """The (bands, rows) calculator and its candidate-probability table.

    Example: neardup params --threshold 0.8 --far 0.3 --recall 0.95 --budget 20000 -n 1000000

    Vectors: neardup params --metric cosine --threshold 0.9 --far 0.0 --budget 10
    """
    if metric != "jaccard":
        _vector_params(metric, threshold, far, recall, budget, n, as_json)
        return
    from neardup.sketch.lsh import candidate_probability, default_layout, optimal_params

    with errors():
        if not 0 < threshold <= 1:
            raise InvalidConfig("threshold", threshold, "must be in (0, 1]", "use e.g. 0.8")
        if far is None:
            b, r = default_layout(threshold, num_perm)
            how = f"default layout for threshold {threshold} with num_perm={num_perm}"
        else:
            lay = optimal_params(
                near=threshold, far=far, recall=recall, far_budget=budget, n=n, max_perm=max_perm
            )
            b, r = lay.bands, lay.rows
            how = (
                f"smallest layout with P({threshold}) >= {recall} and at most {budget:g} "
                f"expected candidates at {far} among {n:,}"
            )
        table = [(s / 20, candidate_probability(s / 20, b, r)) for s in range(1, 21)]
        if png:
            from neardup.batch.report import write_scurve_png

            write_scurve_png(png, b, r, threshold)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "bands": b,
                    "rows": r,
                    "num_perm_used": b * r,
                    "table": [{"s": s, "p": p} for s, p in table],
                },
                sort_keys=True,
            )
        )
        return
    click.echo(f"{how}: bands={b} rows={r} (uses {b * r} rows)")
    click.echo(f"{'s':>6}  {'P(candidate)':>12}")
    for s, p in table:
        mark = "  <- threshold" if math.isclose(s, threshold) else ""
        click.echo(f"{s:6.2f}  {p:12.6f}{mark}")
    if far is not None:
        click.echo(
            f"expected far candidates per query: {candidate_probability(far, b, r) * n:,.1f}"
        )
    if png:
        click.echo(f"wrote {png}")


def _vector_params(
    metric: str,
    threshold: float,
    far: float | None,
    recall: float,
    budget: float,
    n: int,
    as_json: bool,
) -> None:
    from neardup.sketch.lsh import candidate_probability
    from neardup.vectors.sketches import (
        VectorConfig,
        hyperplane_collision,
        pstable_collision,
        vector_layout,
    )

    with errors():
        cfg = VectorConfig(
            metric=metric,  # type: ignore[arg-type]
            threshold=threshold,
            far=far,
            far_budget=budget,
            planned_items=n,
            recall_target=recall,
        ).resolve()
        lay = vector_layout(
            metric,
            threshold,
            far=cfg.far_point,
            n=n,
            recall=recall,
            far_budget=budget,
            width=cfg.width,
            strict=False,
        )
        if metric == "cosine":
            xs = sorted({round(-1 + i / 10, 2) for i in range(21)} | {threshold})
            base = [hyperplane_collision(x) for x in xs]
        elif metric == "weighted_jaccard":
            xs = sorted({round(i / 20, 2) for i in range(21)} | {threshold})
            base = list(xs)
        else:
            xs = sorted({round(threshold * i / 4, 6) for i in range(13)} | {threshold})
            w = float(cfg.width or 1.0)
            base = [pstable_collision(x, w, p=2 if metric == "l2" else 1) for x in xs]
        table = [
            (x, p1, candidate_probability(p1, lay.bands, lay.rows))
            for x, p1 in zip(xs, base, strict=True)
        ]
    data = {
        "metric": metric,
        "bands": lay.bands,
        "rows": lay.rows,
        "hashes": lay.bands * lay.rows,
        "width": cfg.width,
        "far": cfg.far_point,
        "expected_far_candidates": lay.expected_far_candidates,
        "within_budget": lay.expected_far_candidates <= budget,
        "table": [{"x": x, "p_hash": p1, "p": p} for x, p1, p in table],
    }
    if as_json:
        click.echo(json.dumps(data, sort_keys=True))
        return
    unit = metric if metric in ("cosine", "weighted_jaccard") else f"{metric} distance"
    extra = f", width {cfg.width:.4g}" if cfg.width else ""
    click.echo(
        f"{metric}: bands={lay.bands} rows={lay.rows} ({lay.bands * lay.rows} hashes{extra}); "
        f"P({threshold}) = {lay.p_near:.4f}, expected far candidates per item at "
        f"{cfg.far_point:g} among {n:,}: {lay.expected_far_candidates:,.1f}"
        + ("" if data["within_budget"] else f" (over the budget {budget:g}: the least bad)")
    )
    click.echo(f"{unit:>14}  {'P(one hash)':>11}  {'P(candidate)':>12}")
    for x, p1, p in table:
        mark = "  <- threshold" if math.isclose(x, threshold) else ""
        click.echo(f"{x:14.4g}  {p1:11.6f}  {p:12.6f}{mark}")

"""Stage 5 of the Ray engine, ``components``: connected components of the
identical and verified edges.

Up to ``cc_threshold`` edges one union-find on the driver labels them
(:func:`neardup.graph.components.union_find_labels`); above it, large-star /
small-star rounds run over Ray Data, each a map and a per-partition reduce of the
functions of :mod:`neardup.graph.components`, until the edge set stops changing.
Either way every node's label is the smallest node of its component.
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING, Any

import numpy as np

from neardup.core._errors import InvalidConfig
from neardup.engines.ray.common import I64, column, part_key
from neardup.engines.ray.runner import Run, expr_col
from neardup.graph.components import (
    edge_digest,
    labels_from_star_edges,
    large_star_emit,
    large_star_reduce,
    small_star_emit,
    small_star_reduce,
    union_find_labels,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["label_map", "label_reduce", "run_components", "star_map", "star_reduce"]

_M64 = (1 << 64) - 1


def _edge_table(u: I64, v: I64) -> pa.Table:
    import pyarrow as pa

    return pa.table({"key": pa.array(u), "other": pa.array(v), "_part": pa.array(part_key(u))})


def star_map(step: str, t: pa.Table) -> pa.Table:
    """The map of a large- or small-star step: edges re-keyed by one of their ends."""
    u, v = column(t, "u"), column(t, "v")
    keep = u >= 0
    emit = large_star_emit if step == "large" else small_star_emit
    key, other = emit(u[keep], v[keep])
    return _edge_table(key, other)


def star_reduce(step: str, t: pa.Table) -> pa.Table:
    """A large- or small-star reduce over one partition.  The small-star reduce also
    returns (as a row with u = -1) the digest of its distinct input edges: every copy
    of an edge is keyed by its larger end, so these partial digests add up to the
    digest of the whole edge set."""
    import pyarrow as pa

    key, other = column(t, "key"), column(t, "other")
    if step == "large":
        u, v = large_star_reduce(key, other)
        return pa.table(
            {"u": pa.array(u), "v": pa.array(v), "h": pa.array(np.zeros(u.size, np.uint64))}
        )
    lo, hi = np.minimum(key, other), np.maximum(key, other)
    keep = lo != hi
    order = np.lexsort((lo[keep], hi[keep]))
    h_, l_ = hi[keep][order], lo[keep][order]
    first = np.r_[True, (h_[1:] != h_[:-1]) | (l_[1:] != l_[:-1])] if h_.size else h_.astype(bool)
    count, total = edge_digest(h_[first], l_[first])
    u, v = small_star_reduce(key, other)
    return pa.table(
        {
            "u": pa.array(np.r_[u, -1]),
            "v": pa.array(np.r_[v, count]),
            "h": pa.array(np.r_[np.zeros(u.size, np.uint64), np.uint64(total)].astype(np.uint64)),
        }
    )


def label_map(t: pa.Table) -> pa.Table:
    """Converged star edges in both directions, keyed by their first end."""
    u, v = column(t, "u"), column(t, "v")
    keep = u >= 0
    u, v = u[keep], v[keep]
    return _edge_table(np.concatenate([u, v]), np.concatenate([v, u]))


def label_reduce(t: pa.Table) -> pa.Table:
    """(node, root) of the nodes of one partition."""
    import pyarrow as pa

    nodes, labels = labels_from_star_edges(column(t, "key"), column(t, "other"))
    return pa.table({"node": pa.array(nodes), "root": pa.array(labels)})


def _uv(t: pa.Table) -> pa.Table:
    import pyarrow as pa

    return pa.table({"u": t.column("a"), "v": t.column("b")})


def run_components(
    r: Run, exact_info: dict[str, Any], ver_info: dict[str, Any], cc_threshold: int
) -> dict[str, Any]:
    """Stage 5: (node, root) labels in ``components``; returns how they were found."""
    job = r.job

    def edges_uv() -> Any:
        parts: list[Any] = []
        for stage in ("exact", "verify"):
            ds = r.read(stage, ["a", "b"])
            if ds is not None:
                parts.append(ds)
        if not parts:
            return None
        out = parts[0] if len(parts) == 1 else parts[0].union(*parts[1:])
        return out.map_batches(lambda t: _uv(t), batch_format="pyarrow")

    def do_components() -> tuple[list[str], dict[str, Any]]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        ne = int(exact_info["identical_edges"]) + int(ver_info["verified_pairs"])
        folder = os.path.join(job.work, "components")
        if os.path.isdir(folder):
            shutil.rmtree(folder)
        uv = edges_uv()
        if uv is None or ne == 0:
            return [], {"edges": 0, "path": "none", "rounds": 0}
        if ne <= cc_threshold:
            us, vs = [], []
            for b in uv.iter_batches(batch_format="numpy", batch_size=1 << 20):
                us.append(b["u"])
                vs.append(b["v"])
            nodes, labels = union_find_labels(np.concatenate(us), np.concatenate(vs))
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, "labels.parquet")
            pq.write_table(pa.table({"node": nodes, "root": labels}), path)
            return [path], {"edges": ne, "path": "driver-union-find", "rounds": 0}
        cur = uv.materialize()
        prev: tuple[int, int] | None = None
        rounds_done = 0
        while True:
            rounds_done += 1
            big = r.shuffle(
                "cc_large",
                cur.map_batches(lambda t: star_map("large", t), batch_format="pyarrow"),
                lambda t: star_reduce("large", t),
            )
            small = r.shuffle(
                "cc_small",
                big.map_batches(lambda t: star_map("small", t), batch_format="pyarrow"),
                lambda t: star_reduce("small", t),
            ).materialize()
            dig = [0, 0]
            for b in small.filter(expr=expr_col("u") < 0).iter_rows():
                dig[0] += int(b["v"])
                dig[1] = (dig[1] + int(b["h"])) & _M64
            cur = small
            if prev is not None and (dig[0], dig[1]) == prev:
                break
            prev = (dig[0], dig[1])
            if rounds_done > 200:  # pragma: no cover - O(log n) rounds in theory
                raise InvalidConfig(
                    "cc-threshold", cc_threshold, "components did not converge", "report a bug"
                )
        labels = r.shuffle(
            "cc_labels",
            cur.map_batches(label_map, batch_format="pyarrow"),
            label_reduce,
        )
        files = r.write("components", labels)
        return files, {"edges": ne, "path": "large-star/small-star", "rounds": rounds_done}

    return r.stage("components", do_components)

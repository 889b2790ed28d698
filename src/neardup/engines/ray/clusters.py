"""Stage 6 of the Ray engine, ``clusters``: each component's members, representative
and edges, as the local engine writes them.

Two shuffles bring each component's members (ids, lengths) and edges together
(by node, to learn each row's component root; then by root).  Per component the
representative is chosen by the keep rule and the edges are the local engine's:
the local band join visits candidate pairs in the order (band, bucket key, b, -a)
and keeps a verified pair unless its ends are already connected — Kruskal's
algorithm over the verified candidates ordered by the (band, key, b, -a) of
their first collision — so :func:`component_line` runs that Kruskal per
component (:func:`neardup.graph.components.spanning_forest`).  The keep rule
(:func:`neardup.graph.cluster.choose_representative`) and the ``clusters.jsonl``
line (:class:`neardup.batch.outputs.ClusterLines`) are the local engine's own.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from neardup.batch.outputs import ClusterLines
from neardup.engines.ray.common import I64, Job, column, part_key, positions, schema
from neardup.engines.ray.runner import Run
from neardup.graph.cluster import Cluster, Edge, choose_representative, join_edges
from neardup.graph.components import spanning_forest

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "cluster_reduce",
    "component_line",
    "doc_rows",
    "edge_rows",
    "label_rows",
    "root_reduce",
    "run_clusters",
]

# The edge ``method`` column holds an index into this tuple.
_METHODS = ("identical", "exact", "estimate")


def _cluster_schema() -> pa.Schema:
    # kind: 0 label, 1 document, 2 edge.
    return schema(
        "node:int64 kind:int8 root:int64 id:string nbytes:int64 a:int64 b:int64 band:int64"
        " key:uint64 inter:int64 union:int64 matches:int64 method:int8 _part:int64"
    )


def _cluster_rows(cols: dict[str, Any], n: int) -> pa.Table:
    import pyarrow as pa

    schema = _cluster_schema()
    full: dict[str, Any] = {}
    for f in schema:
        if f.name in cols:
            val = cols[f.name]
            if isinstance(val, pa.ChunkedArray):
                val = val.combine_chunks()
            full[f.name] = (
                val.cast(f.type) if isinstance(val, pa.Array) else pa.array(val, type=f.type)
            )
        elif f.name == "id":
            full[f.name] = pa.nulls(n, type=pa.string())
        else:
            full[f.name] = pa.array(np.full(n, -1 if f.name != "key" else 0), type=f.type)
    full["_part"] = pa.array(part_key(np.asarray(cols["node"], dtype=np.int64)))
    return pa.table(full, schema=schema)


def label_rows(t: pa.Table) -> pa.Table:
    """Component labels (node, root) as cluster rows keyed by node."""
    node = column(t, "node")
    return _cluster_rows(
        {"node": node, "kind": np.zeros(node.size, np.int8), "root": column(t, "root")},
        node.size,
    )


def doc_rows(job: Job, t: pa.Table) -> pa.Table:
    """Documents (position, id, length) as cluster rows keyed by position."""
    pos = positions(job, t)
    cols = {
        "node": pos,
        "a": pos,
        "b": pos,
        "kind": np.ones(pos.size, np.int8),
        "nbytes": column(t, "nbytes"),
        "id": t.column("id"),
    }
    return _cluster_rows(cols, pos.size)


def edge_rows(job: Job, method: int, t: pa.Table) -> pa.Table:
    """Edges as cluster rows keyed by their a end (``method`` indexes ``_METHODS``)."""
    a = column(t, "a")
    keep = a >= 0
    cols: dict[str, Any] = {"node": a[keep], "kind": np.full(int(keep.sum()), 2, np.int8)}
    for c in ("a", "b", "band", "key", "inter", "union", "matches"):
        if c in t.column_names:
            cols[c] = column(t, c)[keep]
    cols["method"] = np.full(int(keep.sum()), method, np.int8)
    return _cluster_rows(cols, int(keep.sum()))


def root_reduce(t: pa.Table) -> pa.Table:
    """Rows keyed by node: label documents and edges with their component root."""
    kind = column(t, "kind")
    node, root = column(t, "node"), column(t, "root")
    lab = kind == 0
    ln, lr = node[lab], root[lab]
    lo = np.argsort(ln, kind="stable")
    ln, lr = ln[lo], lr[lo]

    def lookup(x: I64) -> tuple[I64, npt.NDArray[np.bool_]]:
        at = np.searchsorted(ln, x)
        at = np.minimum(at, max(ln.size - 1, 0))
        found = (ln[at] == x) if ln.size else np.zeros(x.size, dtype=bool)
        return (lr[at] if ln.size else np.zeros(x.size, np.int64)), found

    r_all, found = lookup(node)
    keep = (kind != 0) & found
    out = t.filter(keep)
    new_root = r_all[keep]
    out = out.set_column(out.schema.get_field_index("root"), "root", _arr(new_root))
    out = out.set_column(out.schema.get_field_index("node"), "node", _arr(new_root))
    out = out.set_column(out.schema.get_field_index("_part"), "_part", _arr(part_key(new_root)))
    return out


def _arr(x: npt.NDArray[Any]) -> Any:
    import pyarrow as pa

    return pa.array(x)


# ClusterLines numbers each line; the number is known only once the driver has
# sorted every component (stage 7), so lines are stored without it.
_NUMBERED = '{"cluster": 0, '


def component_line(
    lines: ClusterLines,
    keep_rule: str,
    k: int,
    first: int,
    members: I64,
    nbytes: I64,
    edges: dict[str, npt.NDArray[Any]],
) -> tuple[int, str]:
    """(representative, clusters.jsonl line without "cluster") of one component.

    ``members`` ascending with their ``nbytes``; their ids are ``first``,
    ``first + 1``, ... of the ids of ``lines``.  ``edges`` has a, b, band, key,
    inter, union, matches, method (index into ``_METHODS``).  The representative is
    returned as an index into the ids of ``lines``.
    """
    # Members are ascending, so their indices order them as their positions do and
    # the local keep rule applies to the indices.
    rep_i = choose_representative(range(members.size), keep_rule, nbytes)
    a, b, method = edges["a"], edges["b"], edges["method"]
    ident = np.flatnonzero(method == 0)
    ident = ident[np.lexsort((b[ident], a[ident]))]
    near = np.flatnonzero(method != 0)
    order = np.lexsort((-a[near], b[near], edges["key"][near], edges["band"][near]))
    kept = spanning_forest(a[near], b[near], order.astype(np.int64))
    near_sorted = near[order][kept[order]]
    # Members are ascending: an end's index among them names it in ``lines``.
    at_a, at_b = np.searchsorted(members, a) + first, np.searchsorted(members, b) + first
    ia, ib = at_a[ident].tolist(), at_b[ident].tolist()
    out = Edge.identical_many(ia, ib)
    s = near_sorted
    band, inter, union, matches = (edges[c][s] for c in ("band", "inter", "union", "matches"))
    out += join_edges(at_a[s], at_b[s], band, inter, union, matches, k)
    cluster = Cluster(
        id=0,
        representative=first + rep_i,
        members=tuple(range(first, first + members.size)),
        edges=tuple(out),
    )
    return first + rep_i, "{" + lines.line(0, cluster)[len(_NUMBERED) :]


def cluster_reduce(job: Job, t: pa.Table) -> pa.Table:
    """Rows keyed by root: one record per component, and one assignment row
    (duplicate position, representative id) per removed member."""
    import pyarrow as pa

    kind, root = column(t, "kind"), column(t, "root")
    docs = np.flatnonzero(kind == 1)
    eds = np.flatnonzero(kind == 2)
    d_root, d_len = root[docs], column(t, "nbytes")[docs]
    d_ids = t.column("id").take(pa.array(docs)).to_pylist()
    # A document row's own position is kept in "b" (node was replaced by the root).
    d_pos = column(t, "b")[docs]
    do = np.lexsort((d_pos, d_root))
    d_root, d_pos, d_len = d_root[do], d_pos[do], d_len[do]
    # Without an id field a document is named by its position.
    ids = [
        json.loads(d_ids[i]) if d_ids[i] is not None else p
        for i, p in zip(do.tolist(), d_pos.tolist(), strict=True)
    ]
    lines = ClusterLines(ids)
    e_root = root[eds]
    eo = np.argsort(e_root, kind="stable")
    ecols = {
        c: column(t, c)[eds][eo]
        for c in ("a", "b", "band", "key", "inter", "union", "matches", "method")
    }
    e_root = e_root[eo]
    # d_root is sorted: group starts where it changes.
    starts = np.flatnonzero(np.r_[True, d_root[1:] != d_root[:-1]]) if d_root.size else d_root
    roots = d_root[starts]
    ends = np.r_[starts[1:], d_root.size]
    e_lo = np.searchsorted(e_root, roots, side="left")
    e_hi = np.searchsorted(e_root, roots, side="right")
    out_kind: list[int] = []
    out_root: list[int] = []
    out_pos: list[int] = []
    out_text: list[str] = []
    out_size: list[int] = []
    k = job.config.num_perm
    for r, s, e, el, eh in zip(
        roots.tolist(), starts.tolist(), ends.tolist(), e_lo.tolist(), e_hi.tolist(), strict=True
    ):
        members = d_pos[s:e]
        rep_i, line = component_line(
            lines, job.keep, k, s, members, d_len[s:e], {c: v[el:eh] for c, v in ecols.items()}
        )
        rep = int(d_pos[rep_i])
        out_kind.append(0)
        out_root.append(r)
        out_pos.append(rep)
        out_text.append(line)
        out_size.append(int(members.size))
        rep_id = json.dumps(ids[rep_i], ensure_ascii=False)
        for m in members.tolist():
            if m != rep:
                out_kind.append(1)
                out_root.append(r)
                out_pos.append(m)
                out_text.append(rep_id)
                out_size.append(0)
    return pa.table(
        {
            "kind": pa.array(out_kind, type=pa.int8()),
            "root": pa.array(out_root, type=pa.int64()),
            "pos": pa.array(out_pos, type=pa.int64()),
            "text": pa.array(out_text, type=pa.string()),
            "size": pa.array(out_size, type=pa.int64()),
        }
    )


def run_clusters(r: Run) -> None:
    """Stage 6: one record per component and the assignments of removed members,
    in ``clusters``."""
    job = r.job

    def do_clusters() -> tuple[list[str], dict[str, Any]]:
        lab = r.read("components")
        if lab is None:
            return [], {"clusters": 0}
        rows = [lab.map_batches(label_rows, batch_format="pyarrow")]
        rows.append(
            r.features(["shard", "row", "id", "nbytes"]).map_batches(
                lambda t: doc_rows(job, t), batch_format="pyarrow"
            )
        )
        ex = r.read("exact")
        if ex is not None:
            rows.append(ex.map_batches(lambda t: edge_rows(job, 0, t), batch_format="pyarrow"))
        ve = r.read("verify")
        if ve is not None:
            meth = 2 if job.config.verify == "estimate" else 1
            rows.append(ve.map_batches(lambda t: edge_rows(job, meth, t), batch_format="pyarrow"))
        allrows = rows[0].union(*rows[1:])
        rooted = r.shuffle("clusters_node", allrows, root_reduce)
        out = r.shuffle("clusters_root", rooted, lambda t: cluster_reduce(job, t))
        files = r.write("clusters", out)
        return files, {}

    r.stage("clusters", do_clusters)

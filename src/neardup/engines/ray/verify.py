"""Stage 4 of the Ray engine, ``verify``: each candidate pair joined with the
shingle sets and signatures of both ends, then scored exactly.

Two shuffles bring the features to the pairs (keyed by b, then by a; pairs are
de-duplicated to their first band on the way), then exact Jaccard (the local
``jaccard_pairs`` kernel) keeps pairs at or above the threshold.  Only documents
that occur in a candidate pair ship their features: a semi-join through a Bloom
filter of the pair ends that the driver builds while streaming the pairs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from neardup.engines.ray.common import (
    BASE_COLUMNS,
    I64,
    Job,
    column,
    eligible,
    mix,
    one_thread,
    part_key,
    positions,
    schema,
)
from neardup.engines.ray.runner import Run, pq_rows
from neardup.kernels import _exact as KX
from neardup.sketch.screen import BloomFilter

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "attach_b_reduce",
    "bloom_add",
    "bloom_contains",
    "ends_filter",
    "feature_rows",
    "pair_rows",
    "run_verify",
    "verify_reduce",
]


def _join_schema(k: int) -> pa.Schema:
    import pyarrow as pa

    return schema(
        "node:int64 kind:int8 a:int64 b:int64 band:int64 key:uint64 sig:sig set:set _part:int64",
        sig=pa.list_(pa.uint32(), k),
        set=pa.large_list(pa.uint64()),
    )


def ends_filter(ends: int) -> BloomFilter:
    """An empty semi-join filter for ``ends`` candidate-pair ends (about 1 % false
    positives, about 1.2 bytes an end): the library's Bloom filter."""
    return BloomFilter(capacity=max(1, int(ends)), fp_rate=0.01)


def bloom_add(bloom: BloomFilter, x: npt.NDArray[Any]) -> None:
    """Add the positions ``x`` to ``bloom``."""
    # Positions are dense small integers; the filter wants uniform 64-bit keys.
    bloom.add(mix(x))


def bloom_contains(bloom: BloomFilter, x: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
    """True where position ``x`` may be in ``bloom`` (never False for an added one)."""
    return bloom.contains(mix(x))


def feature_rows(job: Job, t: pa.Table, wanted: Any = None) -> pa.Table:
    """Eligible documents' (set, signature) as join rows keyed by position; with
    ``wanted`` (an object ref of a Bloom filter of candidate-pair ends) only the
    documents that may occur in a pair — the join's semi-join filter."""
    import pyarrow as pa

    keep = np.flatnonzero(eligible(t))
    pos = positions(job, t)[keep]
    if wanted is not None:
        import ray

        inside = bloom_contains(ray.get(wanted), pos)
        keep, pos = keep[inside], pos[inside]
    n = pos.size
    idx = pa.array(keep)
    return pa.table(
        {
            "node": pa.array(pos),
            "kind": pa.array(np.zeros(n, dtype=np.int8)),
            "a": pa.array(pos),
            "b": pa.array(pos),
            "band": pa.array(np.full(n, -1, dtype=np.int64)),
            "key": pa.array(np.zeros(n, dtype=np.uint64)),
            "sig": t.column("sig").combine_chunks().take(idx),
            "set": t.column("set").combine_chunks().take(idx),
            "_part": pa.array(part_key(pos)),
        },
        schema=_join_schema(job.config.num_perm),
    )


def pair_rows(job: Job, by: str, t: pa.Table) -> pa.Table:
    """Candidate pairs as join rows keyed by their ``by`` end (bookkeeping rows dropped)."""
    import pyarrow as pa

    a = column(t, "a")
    keep = a >= 0
    a, b = a[keep], column(t, "b")[keep]
    node = b if by == "b" else a
    n = a.size
    k = job.config.num_perm
    sig = pa.nulls(n, type=pa.list_(pa.uint32(), k))
    sets = pa.nulls(n, type=pa.large_list(pa.uint64()))
    return pa.table(
        {
            "node": pa.array(node),
            "kind": pa.array(np.ones(n, dtype=np.int8)),
            "a": pa.array(a),
            "b": pa.array(b),
            "band": pa.array(column(t, "band")[keep]),
            "key": pa.array(column(t, "key")[keep]),
            "sig": sig,
            "set": sets,
            "_part": pa.array(part_key(node)),
        },
        schema=_join_schema(k),
    )


def _split_kinds(t: pa.Table) -> tuple[pa.Table, pa.Table]:
    import pyarrow.compute as pc

    kind = t.column("kind")
    return t.filter(pc.equal(kind, 0)), t.filter(pc.equal(kind, 1))


def attach_b_reduce(job: Job, t: pa.Table) -> pa.Table:
    """Rows keyed by b: de-duplicate each pair to its first (band, key) and attach
    b's set and signature; re-key by a."""
    import pyarrow as pa

    docs, pairs = _split_kinds(t)
    a, b, band, key = (column(pairs, c) for c in ("a", "b", "band", "key"))
    order = np.lexsort((key, band, b, a))
    a, b, band, key = a[order], b[order], band[order], key[order]
    first = np.r_[True, (a[1:] != a[:-1]) | (b[1:] != b[:-1])] if a.size else a.astype(bool)
    a, b, band, key = a[first], b[first], band[first], key[first]
    dnode = column(docs, "node")
    dorder = np.argsort(dnode, kind="stable")
    at = dorder[np.searchsorted(dnode[dorder], b)] if b.size else np.empty(0, dtype=np.int64)
    take = pa.array(at)
    return pa.table(
        {
            "node": pa.array(a),
            "kind": pa.array(np.ones(a.size, dtype=np.int8)),
            "a": pa.array(a),
            "b": pa.array(b),
            "band": pa.array(band),
            "key": pa.array(key),
            "sig": docs.column("sig").combine_chunks().take(take),
            "set": docs.column("set").combine_chunks().take(take),
            "_part": pa.array(part_key(a)),
        },
        schema=_join_schema(job.config.num_perm),
    )


def _flat(arr: Any) -> tuple[npt.NDArray[Any], I64]:
    """(values, offsets) of a list array."""
    arr = arr.combine_chunks() if hasattr(arr, "combine_chunks") else arr
    offsets = np.asarray(arr.offsets, dtype=np.int64)
    values = np.asarray(arr.values)
    return values[offsets[0] : offsets[-1]], offsets - offsets[0]


def verify_reduce(job: Job, t: pa.Table) -> pa.Table:
    """Rows keyed by a: attach a's set and signature, verify every pair exactly."""
    import pyarrow as pa

    one_thread()
    docs, pairs = _split_kinds(t)
    a, b, band, key = (column(pairs, c) for c in ("a", "b", "band", "key"))
    dnode = column(docs, "node")
    dorder = np.argsort(dnode, kind="stable")
    at = dorder[np.searchsorted(dnode[dorder], a)] if a.size else np.empty(0, dtype=np.int64)
    take = pa.array(at)
    cfg = job.config
    k = cfg.num_perm
    n = a.size
    sig_a = np.asarray(docs.column("sig").combine_chunks().take(take).flatten()).reshape(n, k)
    sig_b = np.asarray(pairs.column("sig").combine_chunks().flatten()).reshape(n, k)
    matches = (sig_a == sig_b).sum(axis=1).astype(np.int64)
    inter = np.full(n, -1, dtype=np.int64)
    union = np.full(n, -1, dtype=np.int64)
    if cfg.verify == "estimate":
        ok = matches >= cfg.threshold * k
    else:
        va, oa = _flat(docs.column("set").combine_chunks().take(take))
        vb, ob = _flat(pairs.column("set"))
        data = np.ascontiguousarray(np.concatenate([va, vb]).astype(np.uint64))
        indptr = np.concatenate([oa, ob[1:] + oa[-1]]).astype(np.int64)
        ia = np.arange(n, dtype=np.int64)
        if n:
            KX.jaccard_pairs(data, indptr, ia, ia + n, inter, union)
        with np.errstate(divide="ignore", invalid="ignore"):
            ok = (union > 0) & (inter / np.where(union > 0, union, 1) >= cfg.threshold)
    return pa.table(
        {
            "a": pa.array(a[ok]),
            "b": pa.array(b[ok]),
            "band": pa.array(band[ok]),
            "key": pa.array(key[ok]),
            "inter": pa.array(inter[ok]),
            "union": pa.array(union[ok]),
            "matches": pa.array(matches[ok]),
        }
    )


def run_verify(r: Run, band_files: list[str]) -> dict[str, Any]:
    """Stage 4: the verified pairs of the candidates in ``band_files``, in ``verify``;
    returns the counts of candidate and verified pairs."""
    job = r.job

    def do_verify() -> tuple[list[str], dict[str, Any]]:
        fcols = [*BASE_COLUMNS, "sig", "set"]
        if not band_files:
            return [], {"candidate_pairs": 0, "verified_pairs": 0}
        # Semi-join: only documents that occur in some candidate pair ship their
        # shingle sets.  The driver streams the pair ends into a Bloom filter
        # (~1.2 bytes per end); false positives only ship a few extra sets.
        ends = sum(
            int(v["info"]["pair_rows"])
            for k, v in r.manifest.stages.items()
            if k.startswith("bands/")
        )
        bloom = ends_filter(2 * ends)
        for b in r.read_files(band_files, ["a", "b"]).iter_batches(batch_format="numpy"):
            real = b["a"] >= 0
            bloom_add(bloom, b["a"][real])
            bloom_add(bloom, b["b"][real])
        wanted = r.ray.put(bloom)
        del bloom
        pairs = r.read_files(band_files).map_batches(
            lambda t: pair_rows(job, "b", t), batch_format="pyarrow"
        )
        docs = r.features(fcols).map_batches(
            lambda t: feature_rows(job, t, wanted), batch_format="pyarrow"
        )
        step1 = r.shuffle("verify_b", pairs.union(docs), lambda t: attach_b_reduce(job, t))
        step1 = step1.materialize()
        cand = int(step1.count())
        docs2 = r.features(fcols).map_batches(
            lambda t: feature_rows(job, t, wanted), batch_format="pyarrow"
        )
        step2 = r.shuffle("verify_a", step1.union(docs2), lambda t: verify_reduce(job, t))
        files = r.write("verify", step2)
        verified = sum(pq_rows(f) for f in files)
        return files, {"verified_pairs": verified, "candidate_pairs": cand}

    return r.stage("verify", do_verify)

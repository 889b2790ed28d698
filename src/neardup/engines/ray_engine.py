"""``neardup dedup --engine ray``: the batch job on Ray Data, same answer as the local engine.

Ray is imported only when :func:`run_dedup_ray` runs (the ``ray`` extra); the local
engine never needs it.  Every stage is a Ray Data operation over Arrow batches
and calls the local kernels unchanged (shingle hashing, signatures, band keys,
Jaccard counting).  Every shuffle is "add a partition column (a hash of the key
modulo P), ``groupby`` it, ``map_groups`` a vectorized reduce over the whole
partition", so a reduce sees every row of its keys and one Python call handles
thousands of keys.

Stages (each writes Parquet into the work folder and is recorded, with file
checksums, in ``manifest.json``; ``resume=True`` skips recorded stages):

1. ``features/NNNNN`` — per input shard: read it (:func:`neardup.read_corpus`,
   so bad-record rules and ids are the local engine's), normalize, hash shingles,
   sign; one Parquet file per shard with each document's shingle-hash set,
   signature, content hash, a 128-bit digest of its set, length and flags.
2. ``exact`` — shuffle (content hash, set digest) by content hash: each document
   with the same content as an earlier one gets an ``identical`` edge from the
   first such document (the local rule; like the local out-of-core path, equal
   content is confirmed by equal shingle-hash sets, here via their digest).
3. ``bands/R`` — in rounds of bands (bounded memory): band keys of each eligible
   document (``map_batches``), shuffle by (band, key); inside each bucket the
   exact copies are dropped (they share every bucket with their first copy) and
   each member is paired with at most ``max_candidates`` preceding members —
   exactly the local band join's candidates.
4. ``verify`` — two shuffles join each candidate with the shingle sets and
   signatures of both ends (by b, then by a; pairs are de-duplicated to their
   first band on the way), then exact Jaccard (the local ``jaccard_pairs``
   kernel) keeps pairs at or above the threshold.  Only documents that occur in
   a candidate pair ship their features (a semi-join through a Bloom filter of
   the pair ends that the driver builds while streaming the pairs).
5. ``components`` — connected components of identical + verified edges: a
   driver union-find when there are at most ``cc_threshold`` edges, else
   large-star/small-star rounds over Ray Data (:mod:`neardup.graph.components`).
6. ``clusters`` — two shuffles bring each component's members (ids, lengths) and
   edges together; per component the representative is chosen and the spanning
   forest is the local engine's (see below).
7. ``cluster_ids`` — the driver streams clusters sorted by smallest member into
   ``clusters.jsonl`` (numbering them as the local engine does).
8. write — per input shard, ``kept/part-NNNNN.*`` and ``duplicates/part-NNNNN.*``.

Equality with the local engine.  The local band join visits candidate pairs in
the order (band, bucket key, b, -a) and keeps a verified pair unless its ends are
already connected — which is Kruskal's algorithm over the verified candidates
ordered by the (band, key, b, -a) of their first collision.  This engine
computes every verified candidate with its first band and key and runs that
Kruskal per component (:func:`neardup.graph.components.spanning_forest`), so clusters,
representatives, edges (and their order) and the kept set are the same; the
local engine is unchanged.  Only ``stats.json`` counters that describe the work
done differ (``verified_pairs`` counts every candidate here, because connected
pairs cannot be skipped without a global order).

The work folder must be visible to every node (a local disk for a one-machine
cluster, a shared mount otherwise).
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from neardup.core._errors import CorruptFile, InputError, InvalidConfig, NeardupIOError
from neardup.core._fingerprint import fingerprint
from neardup.core.config import Config
from neardup.core.ids import json_id
from neardup.graph.components import (
    edge_digest,
    labels_from_star_edges,
    large_star_emit,
    large_star_reduce,
    small_star_emit,
    small_star_reduce,
    spanning_forest,
    union_find_labels,
)
from neardup.kernels import _exact as KX
from neardup.kernels import _signatures as KS
from neardup.sketch.lsh import candidate_probability
from neardup.text.hashing import HashKey, SchemeDescriptor

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["DEFAULT_CC_THRESHOLD", "run_dedup_ray"]

DEFAULT_CC_THRESHOLD = 20_000_000
"""Edges up to which components are labelled by one union-find on the driver."""

MANIFEST = "manifest.json"
_MANIFEST_KIND = "neardup-ray-manifest"
_MANIFEST_VERSION = 1
_M64 = (1 << 64) - 1

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]


# --------------------------------------------------------------------------- helpers


def _mix(x: npt.NDArray[Any]) -> U64:
    """fmix64 of each value (partitioning must not follow the key's low bits)."""
    with np.errstate(over="ignore"):
        h = x.astype(np.uint64)
        h ^= h >> np.uint64(33)
        h *= np.uint64(0xFF51AFD7ED558CCD)
        h ^= h >> np.uint64(33)
        h *= np.uint64(0xC4CEB9FE1A85EC53)
        h ^= h >> np.uint64(33)
    return h


def _part(x: npt.NDArray[Any]) -> I64:
    """The shuffle key column: a non-negative 63-bit hash (taken modulo the
    partition count when the shuffle's size is known, see ``_Run.shuffle``)."""
    return (_mix(x) >> np.uint64(1)).astype(np.int64)


def _np(table: pa.Table, name: str) -> npt.NDArray[Any]:
    return np.asarray(table.column(name).to_numpy())


def _one_thread() -> None:
    """Inside a Ray task: one numba thread (Ray schedules one task per CPU)."""
    import numba

    numba.set_num_threads(1)


def _file_digest(path: str) -> str:
    h = hashlib.blake2b(digest_size=32)
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --------------------------------------------------------------------------- inputs


def expand_inputs(inputs: Sequence[str]) -> list[str]:
    """Input shards: paths, globs (sorted) and fsspec URLs, in the order given."""
    out: list[str] = []
    for p in inputs:
        if "://" in p:
            import fsspec

            fs, _, paths = fsspec.get_fs_token_paths(p)
            proto = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
            found = sorted(paths)
            if not found:
                raise InputError(p, None, "matches no file", "check the URL or pattern")
            out.extend(f"{proto}://{x}" if "://" not in x else x for x in found)
        elif any(c in p for c in "*?["):
            found = sorted(glob.glob(p))
            if not found:
                raise InputError(p, None, "the pattern matches no file", "check the glob")
            out.extend(found)
        else:
            if not os.path.exists(p):
                raise InputError(p, None, "no such file", "check the path")
            out.append(p)
    if not out:
        raise InputError("<none>", None, "no input given", "name at least one input file")
    return out


def _local_copy(path: str, scratch: str) -> str:
    """A local path for ``path``: itself, or a copy of an fsspec URL in ``scratch``."""
    if "://" not in path:
        return path
    import fsspec

    dest = os.path.join(scratch, os.path.basename(path.rstrip("/")))
    with fsspec.open(path, "rb") as src, open(dest, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return dest


def _shard_format(path: str) -> str:
    from neardup.io.corpus import detect_format

    return detect_format(os.path.basename(path.rstrip("/")) if "://" in path else path)


# --------------------------------------------------------------------------- manifest


class _Manifest:
    """Finished stages of a run, with their files' checksums, in ``manifest.json``.

    The manifest is JSON with a BLAKE2b checksum of its own content and is written
    atomically (temporary file, fsync, rename, fsync of the folder).  A stage
    counts as done only if recorded *and* its files still match; the first stage
    that is not done invalidates every later one.
    """

    def __init__(self, work: str, run: dict[str, Any], resume: bool) -> None:
        self.work = work
        self.path = os.path.join(work, MANIFEST)
        self.run = run
        self.run_fp = fingerprint(run)
        self.stages: dict[str, dict[str, Any]] = {}
        self.broken = False
        self.reused: list[str] = []
        if resume and os.path.exists(self.path):
            self._load()
        else:
            if os.path.isdir(work) and os.listdir(work):
                if not os.path.exists(self.path):
                    raise InvalidConfig(
                        "work-dir",
                        work,
                        "exists, is not empty and is not a neardup ray work folder",
                        "choose a new or empty folder for --work-dir",
                    )
                shutil.rmtree(work)  # an earlier run's working files: start over
            os.makedirs(work, exist_ok=True)
            self.save()

    def _load(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as fh:
                doc = json.load(fh)
        except (OSError, ValueError) as exc:
            raise CorruptFile(self.path, f"unreadable manifest ({exc})") from exc
        body = {k: v for k, v in doc.items() if k != "checksum"}
        if doc.get("kind") != _MANIFEST_KIND or doc.get("version") != _MANIFEST_VERSION:
            raise CorruptFile(self.path, "not a neardup ray manifest of this version")
        if doc.get("checksum") != _checksum(body):
            raise CorruptFile(self.path, "checksum mismatch (damaged or edited)")
        if body["run_fingerprint"] != self.run_fp:
            raise InvalidConfig(
                "resume",
                self.work,
                f"the work folder belongs to another run (fingerprint {body['run_fingerprint']},"
                f" this run {self.run_fp}: inputs or options differ)",
                "rerun with the same inputs and options, or drop --resume to start over",
            )
        self.stages = body["stages"]

    def save(self) -> None:
        from neardup.core.persist import atomic_write

        body = {
            "kind": _MANIFEST_KIND,
            "version": _MANIFEST_VERSION,
            "run_fingerprint": self.run_fp,
            "run": self.run,
            "stages": self.stages,
        }
        doc = dict(body, checksum=_checksum(body))
        atomic_write(self.path, json.dumps(doc, indent=1, sort_keys=True).encode())

    def done(self, name: str, *, chain: bool = True) -> dict[str, Any] | None:
        """The recorded info of stage ``name`` if it can be reused, else None.

        With ``chain`` (stages in order) a stage that is not reusable invalidates
        every later one; per-shard feature stages are independent of each other
        (``chain=False``) and the caller calls :meth:`invalidate` if any is redone.
        """
        if self.broken:
            return None
        rec = self.stages.get(name)
        ok = rec is not None and all(
            os.path.isfile(os.path.join(self.work, f["path"]))
            and _file_digest(os.path.join(self.work, f["path"])) == f["blake2b"]
            for f in rec["files"]
        )
        if not ok or rec is None:
            if chain:
                self.invalidate()
            return None
        self.reused.append(name)
        info: dict[str, Any] = rec["info"]
        return info

    def invalidate(self) -> None:
        """Forget every stage not reused so far (they will be redone)."""
        self.broken = True
        self.stages = {k: v for k, v in self.stages.items() if k in self.reused}

    def record(self, name: str, files: Sequence[str], info: dict[str, Any], seconds: float) -> None:
        self.stages[name] = {
            "files": [
                {"path": os.path.relpath(f, self.work), "blake2b": _file_digest(f)}
                for f in sorted(files)
            ],
            "info": info,
            "seconds": round(seconds, 6),
            "finished_at": time.time(),
        }
        self.save()


def _checksum(body: dict[str, Any]) -> str:
    return hashlib.blake2b(json.dumps(body, sort_keys=True).encode(), digest_size=16).hexdigest()


# --------------------------------------------------------------------------- stage kernels
# Pure functions over Arrow tables, run inside Ray tasks (and testable without Ray).


@dataclass(frozen=True, slots=True)
class _Job:
    """What every task needs to know (shipped to the workers by Ray)."""

    config: Config
    key: HashKey | None
    text_field: str
    id_field: str | None
    skip_bad: bool
    keep: str
    work: str
    parts: int
    offsets: tuple[int, ...] = ()
    shards: tuple[str, ...] = ()
    formats: tuple[str, ...] = ()
    cap: int = 64


def _featurize_shard(job: _Job, shard: int, path: str) -> dict[str, Any]:
    """Read one shard, hash and sign it, write its feature file; return its summary."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from neardup.batch.pipeline import normalize_and_hash
    from neardup.io.corpus import read_corpus
    from neardup.sketch.minhash import MinHasher

    _one_thread()
    cfg = job.config
    scheme = SchemeDescriptor.from_config(cfg, job.key)
    with tempfile.TemporaryDirectory(prefix="neardup-shard-") as scratch:
        corpus = read_corpus(
            [_local_copy(path, scratch)],
            text_field=job.text_field,
            id_field=job.id_field,
            skip_bad=job.skip_bad,
        )
    n = len(corpus.texts)
    hashed = normalize_and_hash(corpus.texts, cfg, job.key, scheme, None)
    sets = hashed.sets
    sig = MinHasher(cfg, key=job.key).from_sets(sets).matrix
    data, indptr = np.asarray(sets.data), np.asarray(sets.indptr)
    dig = np.empty((n, 2), dtype=np.uint64)
    for i in range(n):
        d = hashlib.blake2b(data[indptr[i] : indptr[i + 1]].tobytes(), digest_size=16).digest()
        dig[i] = np.frombuffer(d, dtype=np.uint64)
    ids = (
        [json.dumps(json_id(x), ensure_ascii=False) for x in corpus.ids]
        if job.id_field is not None
        else [None] * n
    )
    k = cfg.num_perm
    table = pa.table(
        {
            "shard": pa.array(np.full(n, shard, dtype=np.int64)),
            "row": pa.array(np.arange(n, dtype=np.int64)),
            "id": pa.array(ids, type=pa.string()),
            "chash": pa.array(sets.content_hash),
            "dhi": pa.array(dig[:, 0]),
            "dlo": pa.array(dig[:, 1]),
            "nbytes": pa.array(sets.byte_lengths),
            "raw": pa.array(sets.raw_counts),
            "trunc": pa.array(sets.truncated),
            "big": pa.array(hashed.too_large),
            "sig": pa.FixedSizeListArray.from_arrays(pa.array(sig.reshape(-1)), k),
            "set": pa.LargeListArray.from_arrays(pa.array(indptr), pa.array(data)),
        }
    )
    folder = os.path.join(job.work, "features")
    os.makedirs(folder, exist_ok=True)
    final = os.path.join(folder, f"shard-{shard:05d}.parquet")
    tmp = final + ".tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, final)
    empty = (sets.raw_counts == 0) & ~hashed.too_large
    return {
        "shard": shard,
        "rows": n,
        "file": final,
        "bytes_in": int(sets.byte_lengths.sum()),
        "empty": int(empty.sum()),
        "too_large": int(hashed.too_large.sum()),
        "eligible": int(((sets.raw_counts > 0) & ~hashed.too_large).sum()),
        "truncated": int(sets.truncated.sum()),
        "bad": [{"path": b.path, "line": b.line, "reason": b.reason} for b in corpus.bad],
    }


def _positions(job: _Job, t: pa.Table) -> I64:
    off = np.asarray(job.offsets, dtype=np.int64)
    out: I64 = off[_np(t, "shard")] + _np(t, "row")
    return out


def _eligible(t: pa.Table) -> npt.NDArray[np.bool_]:
    out: npt.NDArray[np.bool_] = (_np(t, "raw") > 0) & ~_np(t, "big")
    return out


def exact_map(job: _Job, t: pa.Table) -> pa.Table:
    """(pos, content hash, set digest, partition) of eligible documents."""
    import pyarrow as pa

    keep = _eligible(t)
    ch = _np(t, "chash")[keep]
    return pa.table(
        {
            "pos": pa.array(_positions(job, t)[keep]),
            "chash": pa.array(ch),
            "dhi": pa.array(_np(t, "dhi")[keep]),
            "dlo": pa.array(_np(t, "dlo")[keep]),
            "_part": pa.array(_part(ch)),
        }
    )


def exact_reduce(t: pa.Table) -> pa.Table:
    """Identical edges (first, other) among documents of equal content hash and set."""
    import pyarrow as pa

    pos, ch, hi, lo = (_np(t, c) for c in ("pos", "chash", "dhi", "dlo"))
    order = np.lexsort((pos, lo, hi, ch))
    pos, ch, hi, lo = pos[order], ch[order], hi[order], lo[order]
    new = np.r_[True, (ch[1:] != ch[:-1]) | (hi[1:] != hi[:-1]) | (lo[1:] != lo[:-1])]
    first = np.maximum.accumulate(np.where(new, np.arange(pos.size), 0)) if pos.size else pos
    dup = ~new
    return pa.table({"a": pa.array(pos[first][dup]), "b": pa.array(pos[dup])})


def band_map(job: _Job, lo: int, hi: int, t: pa.Table) -> pa.Table:
    """One row per eligible document and band of [lo, hi): (band, key, pos, content)."""
    import pyarrow as pa

    keep = _eligible(t)
    k = job.config.num_perm
    sig = np.asarray(t.column("sig").combine_chunks().flatten()).reshape(-1, k)[keep]
    keys = np.empty((sig.shape[0], hi - lo), dtype=np.uint64)
    _, rows = job.config.layout
    KS.band_keys(np.ascontiguousarray(sig), lo, hi, rows, np.uint64(0), keys)
    nb = hi - lo
    pos = _positions(job, t)[keep]
    band = np.tile(np.arange(lo, hi, dtype=np.int64), pos.size)
    key = keys.reshape(-1)
    with np.errstate(over="ignore"):
        pkey = key ^ _mix(band)
    return pa.table(
        {
            "band": pa.array(band),
            "key": pa.array(key),
            "pos": pa.array(np.repeat(pos, nb)),
            "chash": pa.array(np.repeat(_np(t, "chash")[keep], nb)),
            "dhi": pa.array(np.repeat(_np(t, "dhi")[keep], nb)),
            "dlo": pa.array(np.repeat(_np(t, "dlo")[keep], nb)),
            "_part": pa.array(_part(pkey)),
        }
    )


def bucket_pairs(
    band: I64, key: U64, pos: I64, chash: U64, dhi: U64, dlo: U64, cap: int
) -> tuple[I64, I64, I64, U64, int]:
    """Candidate pairs (a, b, band, key) of whole buckets, as the local band join
    makes them: exact copies of an earlier bucket member are left out, then each
    member is paired with its ``cap`` nearest preceding members.  Also returns the
    number of pairs the cap cut (``candidate_overflow``)."""
    # Within a bucket, an exact copy shares every bucket with its first copy, so
    # "not a leader" is decided here, without a join.
    order = np.lexsort((pos, dlo, dhi, chash, key, band))
    b_, k_, c_, h_, l_ = band[order], key[order], chash[order], dhi[order], dlo[order]
    same = np.r_[
        False,
        (b_[1:] == b_[:-1])
        & (k_[1:] == k_[:-1])
        & (c_[1:] == c_[:-1])
        & (h_[1:] == h_[:-1])
        & (l_[1:] == l_[:-1]),
    ]
    lead = order[~same]
    band, key, pos = band[lead], key[lead], pos[lead]
    order = np.lexsort((pos, key, band))
    band, key, pos = band[order], key[order], pos[order]
    m = pos.size
    if m == 0:
        e = np.empty(0, dtype=np.int64)
        return e, e, e, np.empty(0, dtype=np.uint64), 0
    start = np.r_[True, (band[1:] != band[:-1]) | (key[1:] != key[:-1])]
    sidx = np.maximum.accumulate(np.where(start, np.arange(m), 0))
    rank = np.arange(m) - sidx
    overflow = int(np.maximum(rank - cap, 0).sum())
    deepest = int(min(cap, rank.max())) if m else 0
    pa_: list[I64] = []
    pb_: list[I64] = []
    pband: list[I64] = []
    pkey: list[U64] = []
    for d in range(1, deepest + 1):
        j = np.flatnonzero(rank >= d)
        pa_.append(pos[j - d])
        pb_.append(pos[j])
        pband.append(band[j])
        pkey.append(key[j])
    if not pa_:
        e = np.empty(0, dtype=np.int64)
        return e, e, e, np.empty(0, dtype=np.uint64), overflow
    return (
        np.concatenate(pa_),
        np.concatenate(pb_),
        np.concatenate(pband),
        np.concatenate(pkey),
        overflow,
    )


def band_reduce(cap: int, t: pa.Table) -> pa.Table:
    import pyarrow as pa

    a, b, band, key, overflow = bucket_pairs(
        _np(t, "band"),
        _np(t, "key"),
        _np(t, "pos"),
        _np(t, "chash"),
        _np(t, "dhi"),
        _np(t, "dlo"),
        cap,
    )
    # One bookkeeping row (a = -1) carries the partition's overflow count.
    return pa.table(
        {
            "a": pa.array(np.r_[a, -1]),
            "b": pa.array(np.r_[b, overflow]),
            "band": pa.array(np.r_[band, -1]),
            "key": pa.array(np.r_[key, np.uint64(0)].astype(np.uint64)),
        }
    )


def _join_schema(k: int) -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("node", pa.int64()),
            ("kind", pa.int8()),
            ("a", pa.int64()),
            ("b", pa.int64()),
            ("band", pa.int64()),
            ("key", pa.uint64()),
            ("sig", pa.list_(pa.uint32(), k)),
            ("set", pa.large_list(pa.uint64())),
            ("_part", pa.int64()),
        ]
    )


_BLOOM_K = 7
_BLOOM_BITS_PER_KEY = 10  # with k = 7: about 1 % false positives


def _bloom_slots(x: npt.NDArray[Any], m_bits: int) -> npt.NDArray[np.uint64]:
    """(k, len(x)) bit positions of ``x`` (double hashing)."""
    with np.errstate(over="ignore"):
        h1 = _mix(x)
        h2 = _mix(x.astype(np.uint64) ^ np.uint64(0x9E3779B97F4A7C15)) | np.uint64(1)
        steps = np.arange(_BLOOM_K, dtype=np.uint64)[:, None]
        out: npt.NDArray[np.uint64] = (h1[None, :] + steps * h2[None, :]) % np.uint64(m_bits)
    return out


def bloom_add(flags: npt.NDArray[np.bool_], x: npt.NDArray[Any]) -> None:
    """Set the slots of keys ``x`` in ``flags`` (one bool per bit; pack with
    ``np.packbits(flags, bitorder="little")`` for :func:`bloom_contains`)."""
    flags[_bloom_slots(x, flags.size).reshape(-1).astype(np.int64)] = True


def bloom_contains(bits: npt.NDArray[np.uint8], x: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
    """True where key ``x`` may be in the filter (never False for an added key)."""
    if x.size == 0:
        return np.zeros(0, dtype=np.bool_)
    slots = _bloom_slots(x, bits.size * 8)
    hit = bits[(slots >> np.uint64(3)).astype(np.int64)] & _BIT[slots & np.uint64(7)]
    out: npt.NDArray[np.bool_] = (hit != 0).all(axis=0)
    return out


_BIT = np.array([1 << i for i in range(8)], dtype=np.uint8)


def feature_rows(job: _Job, t: pa.Table, wanted: Any = None) -> pa.Table:
    """Eligible documents' (set, signature) as join rows keyed by position; with
    ``wanted`` (an object ref of a Bloom filter of candidate-pair ends) only the
    documents that may occur in a pair — the join's semi-join filter."""
    import pyarrow as pa

    keep = np.flatnonzero(_eligible(t))
    pos = _positions(job, t)[keep]
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
            "_part": pa.array(_part(pos)),
        },
        schema=_join_schema(job.config.num_perm),
    )


def pair_rows(job: _Job, by: str, t: pa.Table) -> pa.Table:
    """Candidate pairs as join rows keyed by their ``by`` end (bookkeeping rows dropped)."""
    import pyarrow as pa

    a = _np(t, "a")
    keep = a >= 0
    a, b = a[keep], _np(t, "b")[keep]
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
            "band": pa.array(_np(t, "band")[keep]),
            "key": pa.array(_np(t, "key")[keep]),
            "sig": sig,
            "set": sets,
            "_part": pa.array(_part(node)),
        },
        schema=_join_schema(k),
    )


def _split_kinds(t: pa.Table) -> tuple[pa.Table, pa.Table]:
    import pyarrow.compute as pc

    kind = t.column("kind")
    return t.filter(pc.equal(kind, 0)), t.filter(pc.equal(kind, 1))


def attach_b_reduce(job: _Job, t: pa.Table) -> pa.Table:
    """Rows keyed by b: de-duplicate each pair to its first (band, key) and attach
    b's set and signature; re-key by a."""
    import pyarrow as pa

    docs, pairs = _split_kinds(t)
    a, b, band, key = (_np(pairs, c) for c in ("a", "b", "band", "key"))
    order = np.lexsort((key, band, b, a))
    a, b, band, key = a[order], b[order], band[order], key[order]
    first = np.r_[True, (a[1:] != a[:-1]) | (b[1:] != b[:-1])] if a.size else a.astype(bool)
    a, b, band, key = a[first], b[first], band[first], key[first]
    dnode = _np(docs, "node")
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
            "_part": pa.array(_part(a)),
        },
        schema=_join_schema(job.config.num_perm),
    )


def _flat(arr: Any) -> tuple[npt.NDArray[Any], I64]:
    """(values, offsets) of a list array."""
    arr = arr.combine_chunks() if hasattr(arr, "combine_chunks") else arr
    offsets = np.asarray(arr.offsets, dtype=np.int64)
    values = np.asarray(arr.values)
    return values[offsets[0] : offsets[-1]], offsets - offsets[0]


def verify_reduce(job: _Job, t: pa.Table) -> pa.Table:
    """Rows keyed by a: attach a's set and signature, verify every pair exactly."""
    import pyarrow as pa

    _one_thread()
    docs, pairs = _split_kinds(t)
    a, b, band, key = (_np(pairs, c) for c in ("a", "b", "band", "key"))
    dnode = _np(docs, "node")
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


# --- connected components over Ray Data --------------------------------------------


def _edge_table(u: I64, v: I64) -> pa.Table:
    import pyarrow as pa

    return pa.table({"key": pa.array(u), "other": pa.array(v), "_part": pa.array(_part(u))})


def star_map(step: str, t: pa.Table) -> pa.Table:
    u, v = _np(t, "u"), _np(t, "v")
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

    key, other = _np(t, "key"), _np(t, "other")
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
    u, v = _np(t, "u"), _np(t, "v")
    keep = u >= 0
    u, v = u[keep], v[keep]
    return _edge_table(np.concatenate([u, v]), np.concatenate([v, u]))


def label_reduce(t: pa.Table) -> pa.Table:
    import pyarrow as pa

    nodes, labels = labels_from_star_edges(_np(t, "key"), _np(t, "other"))
    return pa.table({"node": pa.array(nodes), "root": pa.array(labels)})


# --- clusters ------------------------------------------------------------------------

_METHODS = ("identical", "exact", "estimate")


def _cluster_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("node", pa.int64()),
            ("kind", pa.int8()),  # 0 label, 1 document, 2 edge
            ("root", pa.int64()),
            ("id", pa.string()),
            ("nbytes", pa.int64()),
            ("a", pa.int64()),
            ("b", pa.int64()),
            ("band", pa.int64()),
            ("key", pa.uint64()),
            ("inter", pa.int64()),
            ("union", pa.int64()),
            ("matches", pa.int64()),
            ("method", pa.int8()),
            ("_part", pa.int64()),
        ]
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
    full["_part"] = pa.array(_part(np.asarray(cols["node"], dtype=np.int64)))
    return pa.table(full, schema=schema)


def label_rows(t: pa.Table) -> pa.Table:
    node = _np(t, "node")
    return _cluster_rows(
        {"node": node, "kind": np.zeros(node.size, np.int8), "root": _np(t, "root")},
        node.size,
    )


def doc_rows(job: _Job, t: pa.Table) -> pa.Table:
    pos = _positions(job, t)
    cols = {
        "node": pos,
        "a": pos,
        "b": pos,
        "kind": np.ones(pos.size, np.int8),
        "nbytes": _np(t, "nbytes"),
        "id": t.column("id"),
    }
    return _cluster_rows(cols, pos.size)


def edge_rows(job: _Job, method: int, t: pa.Table) -> pa.Table:
    a = _np(t, "a")
    keep = a >= 0
    cols: dict[str, Any] = {"node": a[keep], "kind": np.full(int(keep.sum()), 2, np.int8)}
    for c in ("a", "b", "band", "key", "inter", "union", "matches"):
        if c in t.column_names:
            cols[c] = _np(t, c)[keep]
    cols["method"] = np.full(int(keep.sum()), method, np.int8)
    return _cluster_rows(cols, int(keep.sum()))


def root_reduce(t: pa.Table) -> pa.Table:
    """Rows keyed by node: label documents and edges with their component root."""
    kind = _np(t, "kind")
    node, root = _np(t, "node"), _np(t, "root")
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
    out = out.set_column(out.schema.get_field_index("_part"), "_part", _arr(_part(new_root)))
    return out


def _arr(x: npt.NDArray[Any]) -> Any:
    import pyarrow as pa

    return pa.array(x)


def component_records(
    keep_rule: str,
    k: int,
    members: I64,
    ids: list[Any],
    nbytes: I64,
    edges: dict[str, npt.NDArray[Any]],
) -> tuple[int, str]:
    """(representative, clusters.jsonl line without "cluster") of one component.

    ``members`` ascending with their ``ids`` and ``nbytes``; ``edges`` has a, b, band,
    key, inter, union, matches, method (index into ("identical", "exact", "estimate")).
    """
    if keep_rule == "first":
        rep_i = 0
    elif keep_rule == "longest":
        rep_i = int(np.lexsort((members, -nbytes))[0])
    else:
        rep_i = int(np.lexsort((members, nbytes))[0])
    a, b, method = edges["a"], edges["b"], edges["method"]
    ident = np.flatnonzero(method == 0)
    ident = ident[np.lexsort((b[ident], a[ident]))]
    near = np.flatnonzero(method != 0)
    order = np.lexsort((-a[near], b[near], edges["key"][near], edges["band"][near]))
    kept = spanning_forest(a[near], b[near], order.astype(np.int64))
    near_sorted = near[order][kept[order]]
    index = {int(m): i for i, m in enumerate(members.tolist())}
    recs: list[dict[str, Any]] = []
    for e in ident.tolist():
        recs.append(
            {
                "a": ids[index[int(a[e])]],
                "b": ids[index[int(b[e])]],
                "jaccard": 1.0,
                "estimate": 1.0,
                "band": None,
                "method": "identical",
            }
        )
    inter, union, match, band = edges["inter"], edges["union"], edges["matches"], edges["band"]
    for e in near_sorted.tolist():
        exact = int(inter[e]) >= 0
        recs.append(
            {
                "a": ids[index[int(a[e])]],
                "b": ids[index[int(b[e])]],
                "jaccard": int(inter[e]) / int(union[e]) if exact else None,
                "estimate": int(match[e]) / k,
                "band": int(band[e]),
                "method": "exact" if exact else "estimate",
            }
        )
    rec = {"representative": ids[rep_i], "members": ids, "edges": recs}
    return int(members[rep_i]), json.dumps(rec, ensure_ascii=False, sort_keys=True)


def cluster_reduce(job: _Job, t: pa.Table) -> pa.Table:
    """Rows keyed by root: one record per component, and one assignment row
    (duplicate position, representative id) per removed member."""
    import pyarrow as pa

    kind, root = _np(t, "kind"), _np(t, "root")
    docs = np.flatnonzero(kind == 1)
    eds = np.flatnonzero(kind == 2)
    d_root, d_len = root[docs], _np(t, "nbytes")[docs]
    d_ids = t.column("id").take(pa.array(docs)).to_pylist()
    # A document row's own position is kept in "b" (node was replaced by the root).
    d_pos = _np(t, "b")[docs]
    do = np.lexsort((d_pos, d_root))
    d_root, d_pos, d_len = d_root[do], d_pos[do], d_len[do]
    d_ids = [d_ids[i] for i in do.tolist()]
    e_root = root[eds]
    eo = np.argsort(e_root, kind="stable")
    ecols = {
        c: _np(t, c)[eds][eo]
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
        ids = [
            json.loads(x) if x is not None else int(p)
            for x, p in zip(d_ids[s:e], members.tolist(), strict=True)
        ]
        rep, line = component_records(
            job.keep, k, members, ids, d_len[s:e], {c: v[el:eh] for c, v in ecols.items()}
        )
        out_kind.append(0)
        out_root.append(r)
        out_pos.append(rep)
        out_text.append(line)
        out_size.append(int(members.size))
        rep_id = json.dumps(ids[int(np.searchsorted(members, rep))], ensure_ascii=False)
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


def assign_rows(job: _Job, t: pa.Table) -> pa.Table:
    """Assignments (kind 1) and cluster numbers (kind 2) keyed by root."""
    import pyarrow as pa

    root = _np(t, "root")
    return pa.table(
        {
            "kind": t.column("kind"),
            "root": pa.array(root),
            "pos": t.column("pos"),
            "text": t.column("text"),
            "_part": pa.array(_part(root)),
        }
    )


def assign_reduce(job: _Job, t: pa.Table) -> pa.Table:
    """Attach the cluster number to each assignment; re-key by input shard."""
    import pyarrow as pa

    kind, root, pos = _np(t, "kind"), _np(t, "root"), _np(t, "pos")
    num = kind == 2
    cr, cn = root[num], pos[num]
    o = np.argsort(cr, kind="stable")
    cr, cn = cr[o], cn[o]
    asg = np.flatnonzero(kind == 1)
    cid = cn[np.searchsorted(cr, root[asg])] if asg.size else np.empty(0, np.int64)
    p = pos[asg]
    shard = np.searchsorted(np.asarray(job.offsets, dtype=np.int64), p, side="right") - 1
    return pa.table(
        {
            "shard": pa.array(shard.astype(np.int64)),
            "pos": pa.array(p),
            "cluster": pa.array(cid),
            "rep": t.column("text").take(pa.array(asg)),
            "_part": pa.array(shard.astype(np.int64)),
        }
    )


def write_shard(job: _Job, out: str, t: pa.Table) -> pa.Table:
    """Write kept/ and duplicates/ of one input shard (rows: its assignments + a marker)."""
    import pyarrow as pa

    from neardup.io.corpus import read_corpus, write_subset

    shard = int(_np(t, "_part")[0])
    pos = _np(t, "pos")
    real = pos >= 0
    order = np.argsort(pos[real], kind="stable")
    rows = pos[real][order] - job.offsets[shard]
    cluster = _np(t, "cluster")[real][order]
    reps = [
        json.loads(x) for x in np.asarray(t.column("rep").to_pylist(), dtype=object)[real][order]
    ]
    with tempfile.TemporaryDirectory(prefix="neardup-shard-") as scratch:
        corpus = read_corpus(
            [_local_copy(job.shards[shard], scratch)],
            text_field=job.text_field,
            id_field=job.id_field,
            skip_bad=job.skip_bad,
        )
    dup = np.zeros(len(corpus.texts), dtype=bool)
    dup[rows] = True
    os.makedirs(os.path.join(out, "kept"), exist_ok=True)
    os.makedirs(os.path.join(out, "duplicates"), exist_ok=True)
    write_subset(
        corpus, np.flatnonzero(~dup).tolist(), os.path.join(out, "kept", f"part-{shard:05d}")
    )
    write_subset(
        corpus,
        rows.tolist(),
        os.path.join(out, "duplicates", f"part-{shard:05d}"),
        extra={"cluster": cluster.tolist(), "representative": reps},
    )
    return pa.table({"shard": [shard], "kept": [int((~dup).sum())], "dups": [int(dup.sum())]})


# --------------------------------------------------------------------------- driver


@dataclass
class _Run:
    """Driver state of one run: the Ray module, the job, the manifest, measurements."""

    ray: Any
    job: _Job
    manifest: _Manifest
    timings: dict[str, float] = field(default_factory=dict)
    shuffles: dict[str, dict[str, int]] = field(default_factory=dict)
    progress: Callable[[str, int, int], None] | None = None
    partition_bytes: int = 128 << 20

    @property
    def rd(self) -> Any:
        return self.ray.data

    def shuffle(
        self,
        name: str,
        ds: Any,
        reduce: Callable[[pa.Table], pa.Table],
        *,
        exact: bool = False,
    ) -> Any:
        """Hash shuffle ``ds`` on its ``_part`` column and run ``reduce`` per partition.

        The partition count is the larger of ``job.parts`` and the input's size over
        ``partition_bytes``, so that one reduce holds about that much whatever the
        corpus size; reduces do not depend on it.  With ``exact`` the ``_part``
        values are the partitions themselves (one input shard each).
        """
        ds = ds.materialize()
        rows, size = int(ds.count()), int(ds.size_bytes())
        rec = self.shuffles.setdefault(name, {"rows": 0, "bytes": 0, "partitions": 0})
        rec["rows"] += rows
        rec["bytes"] += size
        if not exact:
            parts = max(self.job.parts, -(-size // self.partition_bytes))
            rec["partitions"] = max(rec["partitions"], parts)
            ds = ds.map_batches(lambda t: _modulo(t, parts), batch_format="pyarrow")
        return ds.groupby("_part").map_groups(reduce, batch_format="pyarrow")

    def files(self, stage: str) -> list[str]:
        folder = os.path.join(self.job.work, stage)
        if not os.path.isdir(folder):
            return []
        return sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".parquet"))

    def write(self, stage: str, ds: Any) -> list[str]:
        folder = os.path.join(self.job.work, stage)
        if os.path.isdir(folder):
            shutil.rmtree(folder)
        ds.write_parquet(folder)
        return self.files(stage)

    def read(self, stage: str, columns: list[str] | None = None) -> Any:
        files = self.files(stage)
        if not files:
            return None
        return self.read_files(files, columns)

    def read_files(self, files: Sequence[str], columns: list[str] | None = None) -> Any:
        """A dataset of Parquet files, one read task per file."""
        items = [{"path": f} for f in files]
        ds = self.rd.from_items(items, override_num_blocks=max(1, len(items)))
        return ds.map_batches(lambda b: _read_parquet(b, columns), batch_size=1)

    def stage(
        self, name: str, run: Callable[[], tuple[list[str], dict[str, Any]]]
    ) -> dict[str, Any]:
        info = self.manifest.done(name)
        if info is not None:
            return info
        t0 = time.perf_counter()
        files, info = run()
        secs = time.perf_counter() - t0
        self.timings[name.split("/")[0]] = self.timings.get(name.split("/")[0], 0.0) + secs
        self.manifest.record(name, files, info, secs)
        if self.progress is not None:
            self.progress(name, 1, 1)
        return info


def _start_ray(address: str | None, num_cpus: int | None) -> tuple[Any, bool]:
    try:
        import ray
    except ImportError as exc:
        raise InvalidConfig(
            "engine", "ray", "Ray is not installed", "pip install 'neardup[ray]'"
        ) from exc
    if ray.is_initialized():
        return ray, False

    if address is not None:
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    else:
        ray.init(
            num_cpus=num_cpus,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
    return ray, True


def _data_context(ray: Any) -> dict[str, Any]:
    """Set the Ray Data context for the run; returns the previous values.

    The sort-based pull shuffle runs as plain tasks; the default hash shuffle
    starts aggregator actors for every ``groupby``, which dominates small
    shuffles.
    """
    from ray.data.context import ShuffleStrategy

    ctx = ray.data.DataContext.get_current()
    old = {
        "enable_progress_bars": ctx.enable_progress_bars,
        "shuffle_strategy": ctx.shuffle_strategy,
    }
    ctx.enable_progress_bars = False
    ctx.shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED
    # Ray Data logs every execution at INFO on stderr; keep its warnings only.
    old["log_level"] = logging.getLogger("ray.data").level
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    return old


def run_dedup_ray(
    inputs: Sequence[str],
    output: str,
    *,
    config: Config | None = None,
    key: HashKey | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    keep: str = "first",
    skip_bad: bool = False,
    overwrite: bool = False,
    dry_run: bool = False,
    ray_address: str | None = None,
    num_cpus: int | None = None,
    work_dir: str | None = None,
    resume: bool = False,
    cc_threshold: int = DEFAULT_CC_THRESHOLD,
    partitions: int | None = None,
    round_bytes: int = 256 << 20,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Deduplicate ``inputs`` on Ray Data into the folder ``output``; returns the stats.

    Same clusters, representatives, edges and kept set as :func:`neardup.run_dedup`
    (``clusters.jsonl`` is byte-identical), with ``kept/`` and ``duplicates/``
    written per input shard (``part-NNNNN`` in input order; concatenated they equal
    the local ``kept.*`` / ``duplicates.*``).  ``inputs`` are JSONL or Parquet paths,
    globs or fsspec URLs.  ``ray_address`` joins a running cluster; without it a
    local Ray with ``num_cpus`` CPUs is started (and stopped) for the run — or an
    already initialized Ray is used as is.  Working files go to ``work_dir``
    (default ``<output>.neardup-work`` beside the output; every node must see it);
    with ``resume`` the stages a crashed run recorded there are reused, after
    checking that inputs and options are the same.  Components are labelled on
    the driver up to ``cc_threshold`` edges, by distributed large-star/small-star
    rounds above it.  Bands are shuffled a few at a time so that one round moves
    about ``round_bytes`` (42 bytes per document and band).
    """
    from neardup.batch.job import check_writable, prepare_output
    from neardup.batch.outputs import commit_output, write_json
    from neardup.core.leftovers import release
    from neardup.graph.cluster import check_keep

    cfg = config or Config()
    check_keep(keep)
    if cc_threshold < 0:
        raise InvalidConfig("cc-threshold", cc_threshold, "must be >= 0", "use e.g. 20000000")
    if num_cpus is not None and num_cpus < 1:
        raise InvalidConfig("ray-cpus", num_cpus, "must be >= 1", "use e.g. 2")
    shards = expand_inputs(inputs)
    formats = [_shard_format(p) for p in shards]
    if any(f not in ("jsonl", "parquet") for f in formats) or len(set(formats)) > 1:
        raise InputError(
            ", ".join(shards[:5]),
            None,
            f"the ray engine reads JSONL or Parquet shards of one format, got "
            f"{sorted(set(formats))}",
            "convert the inputs to JSONL or Parquet, or use --engine local",
        )
    t_start = time.perf_counter()
    work = work_dir or os.path.abspath(output).rstrip("/") + ".neardup-work"
    if "://" not in work:
        check_writable(work)
    scheme = SchemeDescriptor.from_config(cfg, key)
    run_desc = {
        "inputs": [os.path.abspath(p) if "://" not in p else p for p in shards],
        "input_sizes": [os.path.getsize(p) if os.path.isfile(p) else -1 for p in shards],
        "input_mtimes": [int(os.path.getmtime(p)) if os.path.isfile(p) else -1 for p in shards],
        "config_fingerprint": cfg.fingerprint,
        "scheme_fingerprint": scheme.fingerprint,
        "text_field": text_field,
        "id_field": id_field,
        "skip_bad": skip_bad,
        "keep": keep,
    }
    tmp = None if dry_run else prepare_output(output, overwrite, list(inputs))
    ray, started = _start_ray(ray_address, num_cpus)
    saved = _data_context(ray)
    try:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        parts = partitions or max(2, 2 * cpus)
        manifest = _Manifest(work, run_desc, resume)
        job = _Job(
            config=cfg,
            key=key,
            text_field=text_field,
            id_field=id_field,
            skip_bad=skip_bad,
            keep=keep,
            work=work,
            parts=parts,
            shards=tuple(shards),
            formats=tuple(formats),
            cap=cfg.max_candidates,
        )
        r = _Run(ray=ray, job=job, manifest=manifest, progress=progress)
        stats = _pipeline(r, cc_threshold, cpus, round_bytes)
        stats["engine"]["reused_stages"] = list(manifest.reused)
        stats["inputs"] = list(inputs)
        stats["format"] = formats[0]
        if tmp is None:
            _count_clusters(r, stats)
            stats["timings_s"]["total"] = round(time.perf_counter() - t_start, 6)
            shutil.rmtree(work, ignore_errors=True)
            return stats
        t1 = time.perf_counter()
        _write_outputs(r, tmp, stats)
        stats["timings_s"]["write"] = round(time.perf_counter() - t1, 6)
        stats["timings_s"]["total"] = round(time.perf_counter() - t_start, 6)
        write_json(os.path.join(tmp, "stats.json"), stats)
        commit_output(tmp, output)
        tmp = None
        shutil.rmtree(work, ignore_errors=True)
        return stats
    finally:
        if tmp is not None:
            release(tmp)
        ctx = ray.data.DataContext.get_current()
        logging.getLogger("ray.data").setLevel(saved.pop("log_level"))
        for name, value in saved.items():
            setattr(ctx, name, value)
        if started:
            ray.shutdown()


def _pipeline(r: _Run, cc_threshold: int, cpus: int, round_bytes: int) -> dict[str, Any]:
    job = r.job
    cfg = job.config
    rd = r.rd

    # 1. features, shard by shard.
    feats: dict[int, dict[str, Any]] = {}
    todo: list[int] = []
    for i in range(len(job.shards)):
        info = r.manifest.done(f"features/{i:05d}", chain=False)
        if info is None:
            todo.append(i)
        else:
            feats[i] = info
    if todo:
        r.manifest.invalidate()
        t0 = time.perf_counter()
        items = [{"shard": i, "path": job.shards[i]} for i in todo]
        ds = rd.from_items(items, override_num_blocks=len(items))

        def featurize(batch: dict[str, Any]) -> dict[str, Any]:
            out = [
                _featurize_shard(job, int(s), str(p))
                for s, p in zip(batch["shard"], batch["path"], strict=True)
            ]
            return {"summary": [json.dumps(o) for o in out]}

        for row in ds.map_batches(featurize, batch_size=1).iter_rows():
            info = json.loads(row["summary"])
            i = int(info["shard"])
            secs = time.perf_counter() - t0
            r.manifest.record(f"features/{i:05d}", [info.pop("file")], info, secs)
            feats[i] = info
            if r.progress is not None:
                r.progress("features", len(feats), len(job.shards))
        r.timings["features"] = time.perf_counter() - t0
    counts = [int(feats[i]["rows"]) for i in range(len(job.shards))]
    offsets = tuple(int(x) for x in np.r_[0, np.cumsum(counts)[:-1]]) if counts else ()
    job = dataclasses.replace(job, offsets=offsets)
    r.job = job
    n = int(sum(counts))
    eligible = sum(int(feats[i]["eligible"]) for i in feats)
    feature_files = [
        os.path.join(job.work, "features", f"shard-{i:05d}.parquet") for i in range(len(job.shards))
    ]

    def features(cols: list[str]) -> Any:
        return r.read_files(feature_files, cols)

    base = ["shard", "row", "raw", "big"]

    # 2. exact-content groups.
    def do_exact() -> tuple[list[str], dict[str, Any]]:
        ds = features([*base, "chash", "dhi", "dlo"]).map_batches(
            lambda t: exact_map(job, t), batch_format="pyarrow"
        )
        out = r.shuffle("exact", ds, exact_reduce)
        files = r.write("exact", out)
        ne = sum(pq_rows(f) for f in files)
        return files, {"identical_edges": ne}

    exact_info = r.stage("exact", do_exact)

    # 3. band rounds.
    bands, _rows = cfg.layout
    per_round = max(1, min(bands, round_bytes // max(42 * max(eligible, 1), 1)))
    rounds = [(lo, min(bands, lo + per_round)) for lo in range(0, bands, per_round)]
    overflow = 0
    for ri, (lo, hi) in enumerate(rounds):

        def do_band(lo: int = lo, hi: int = hi, ri: int = ri) -> tuple[list[str], dict[str, Any]]:
            ds = features([*base, "chash", "dhi", "dlo", "sig"]).map_batches(
                lambda t: band_map(job, lo, hi, t), batch_format="pyarrow"
            )
            out = r.shuffle("bands", ds, lambda t: band_reduce(job.cap, t))
            files = r.write(f"bands/{ri:03d}", out)
            ovf = 0
            cand = 0
            for f in files:
                import pyarrow.parquet as pq

                tb = pq.read_table(f, columns=["a", "b"])
                a = tb.column("a").to_numpy()
                ovf += int(tb.column("b").to_numpy()[a < 0].sum())
                cand += int((a >= 0).sum())
            return files, {"overflow": ovf, "pair_rows": cand}

        overflow += int(r.stage(f"bands/{ri:03d}", do_band)["overflow"])
    band_files = [f for ri in range(len(rounds)) for f in r.files(f"bands/{ri:03d}")]

    # 4. verification: join candidates with both ends' features.
    def do_verify() -> tuple[list[str], dict[str, Any]]:
        fcols = [*base, "sig", "set"]
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
        flags = np.zeros(8 * max(64, -(-2 * ends * _BLOOM_BITS_PER_KEY // 8)), dtype=np.bool_)
        for b in r.read_files(band_files, ["a", "b"]).iter_batches(batch_format="numpy"):
            real = b["a"] >= 0
            bloom_add(flags, b["a"][real])
            bloom_add(flags, b["b"][real])
        wanted = r.ray.put(np.packbits(flags, bitorder="little"))
        del flags
        pairs = r.read_files(band_files).map_batches(
            lambda t: pair_rows(job, "b", t), batch_format="pyarrow"
        )
        docs = features(fcols).map_batches(
            lambda t: feature_rows(job, t, wanted), batch_format="pyarrow"
        )
        step1 = r.shuffle("verify_b", pairs.union(docs), lambda t: attach_b_reduce(job, t))
        step1 = step1.materialize()
        cand = int(step1.count())
        docs2 = features(fcols).map_batches(
            lambda t: feature_rows(job, t, wanted), batch_format="pyarrow"
        )
        step2 = r.shuffle("verify_a", step1.union(docs2), lambda t: verify_reduce(job, t))
        files = r.write("verify", step2)
        verified = sum(pq_rows(f) for f in files)
        return files, {"verified_pairs": verified, "candidate_pairs": cand}

    ver_info = r.stage("verify", do_verify)

    # 5. connected components.
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
            for b in small.filter(expr=_col("u") < 0).iter_rows():
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

    cc_info = r.stage("components", do_components)

    # 6. clusters.
    def do_clusters() -> tuple[list[str], dict[str, Any]]:
        lab = r.read("components")
        if lab is None:
            return [], {"clusters": 0}
        rows = [lab.map_batches(label_rows, batch_format="pyarrow")]
        rows.append(
            features(["shard", "row", "id", "nbytes"]).map_batches(
                lambda t: doc_rows(job, t), batch_format="pyarrow"
            )
        )
        ex = r.read("exact")
        if ex is not None:
            rows.append(ex.map_batches(lambda t: edge_rows(job, 0, t), batch_format="pyarrow"))
        ve = r.read("verify")
        if ve is not None:
            meth = 2 if cfg.verify == "estimate" else 1
            rows.append(ve.map_batches(lambda t: edge_rows(job, meth, t), batch_format="pyarrow"))
        allrows = rows[0].union(*rows[1:])
        rooted = r.shuffle("clusters_node", allrows, root_reduce)
        out = r.shuffle("clusters_root", rooted, lambda t: cluster_reduce(job, t))
        files = r.write("clusters", out)
        return files, {}

    r.stage("clusters", do_clusters)

    stats: dict[str, Any] = {
        "documents_in": n,
        "indexed_documents": 0,
        "bytes_in": sum(int(feats[i]["bytes_in"]) for i in feats),
        "exact_duplicates": int(exact_info["identical_edges"]),
        "empty": sum(int(feats[i]["empty"]) for i in feats),
        "too_large": sum(int(feats[i]["too_large"]) for i in feats),
        "truncated": sum(int(feats[i]["truncated"]) for i in feats),
        "method": "lsh",
        "verify": cfg.verify,
        "threshold": cfg.threshold,
        "bands": bands,
        "rows": _rows,
        "num_perm": cfg.num_perm,
        "predicted_recall_at_threshold": candidate_probability(cfg.threshold, bands, _rows),
        "candidate_pairs": int(ver_info["candidate_pairs"]),
        "verified_pairs": int(ver_info["candidate_pairs"]),
        "candidate_overflow": overflow,
        "skipped_connected": 0,
        "scheme": SchemeDescriptor.from_config(cfg, job.key).to_dict(),
        "scheme_fingerprint": SchemeDescriptor.from_config(cfg, job.key).fingerprint,
        "config_fingerprint": cfg.fingerprint,
        "bad_records": sum(len(feats[i]["bad"]) for i in feats),
        "bad_record_examples": [b for i in sorted(feats) for b in feats[i]["bad"]][:20],
        "engine": {
            "name": "ray",
            "cpus": cpus,
            "partitions": job.parts,
            "band_rounds": len(rounds),
            "components": cc_info,
            "cc_threshold": cc_threshold,
            "shuffles": r.shuffles,
        },
        "timings_s": {k: round(v, 6) for k, v in r.timings.items()},
    }
    return stats


def _read_parquet(batch: dict[str, Any], columns: list[str] | None) -> pa.Table:
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pa.concat_tables([pq.read_table(str(p), columns=columns) for p in batch["path"]])


def _modulo(t: pa.Table, parts: int) -> pa.Table:
    import pyarrow as pa

    i = t.schema.get_field_index("_part")
    return t.set_column(i, "_part", pa.array(_np(t, "_part") % parts))


def _col(name: str) -> Any:
    from ray.data.expressions import col

    return col(name)


def _uv(t: pa.Table) -> pa.Table:
    import pyarrow as pa

    return pa.table({"u": t.column("a"), "v": t.column("b")})


def pq_rows(path: str) -> int:
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(path).metadata.num_rows)


def _cluster_counts(stats: dict[str, Any], ncl: int, dups: int, hist: dict[str, int]) -> None:
    stats["clusters"] = ncl
    stats["cluster_size_histogram"] = dict(sorted(hist.items(), key=lambda kv: int(kv[0])))
    stats["documents_out"] = stats["documents_in"] - dups
    stats["near_duplicates"] = dups - stats["exact_duplicates"]


def _count_clusters(r: _Run, stats: dict[str, Any]) -> None:
    """The cluster counts of a dry run (nothing is written)."""
    cl = r.read("clusters", ["kind", "size"])
    hist: dict[str, int] = {}
    ncl = dups = 0
    if cl is not None:
        for b in cl.iter_batches(batch_format="numpy", batch_size=65536):
            sizes = b["size"][b["kind"] == 0]
            for v, c in zip(*np.unique(sizes, return_counts=True), strict=True):
                hist[str(int(v))] = hist.get(str(int(v)), 0) + int(c)
            ncl += int(sizes.size)
            dups += int(sizes.sum()) - int(sizes.size)
    _cluster_counts(stats, ncl, dups, hist)


def _write_outputs(r: _Run, tmp: str, stats: dict[str, Any]) -> None:
    """clusters.jsonl (driver stream, sorted by smallest member), then per shard
    kept/ and duplicates/."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    job = r.job
    rd = r.rd
    cl = r.read("clusters")
    numbers_dir = os.path.join(job.work, "cluster_ids")
    if os.path.isdir(numbers_dir):
        shutil.rmtree(numbers_dir)
    os.makedirs(numbers_dir)
    hist: dict[str, int] = {}
    ncl = 0
    dups = 0
    with open(os.path.join(tmp, "clusters.jsonl"), "w", encoding="utf-8") as fh:
        if cl is not None:
            ordered = cl.filter(expr=_col("kind") == 0).sort("root")
            batches = ordered.iter_batches(batch_format="pyarrow", batch_size=65536)
            for chunk, b in enumerate(batches):
                roots = b.column("root").to_numpy()
                sizes = b.column("size").to_numpy()
                cids = np.arange(ncl, ncl + roots.size, dtype=np.int64)
                for cid, line in zip(cids.tolist(), b.column("text").to_pylist(), strict=True):
                    fh.write('{"cluster": ' + str(cid) + ", " + line[1:] + "\n")
                for s in sizes.tolist():
                    hist[str(s)] = hist.get(str(s), 0) + 1
                dups += int(sizes.sum()) - roots.size
                ncl += roots.size
                pq.write_table(
                    pa.table(
                        {
                            "kind": pa.array(np.full(roots.size, 2, np.int8)),
                            "root": pa.array(roots),
                            "pos": pa.array(cids),
                            "text": pa.nulls(roots.size, pa.string()),
                        }
                    ),
                    os.path.join(numbers_dir, f"ids-{chunk:05d}.parquet"),
                )
    _cluster_counts(stats, ncl, dups, hist)
    # Every shard gets a marker row so that shards without duplicates are written too.
    markers = pa.table(
        {
            "shard": pa.array(np.arange(len(job.shards), dtype=np.int64)),
            "pos": pa.array(np.full(len(job.shards), -1, dtype=np.int64)),
            "cluster": pa.array(np.full(len(job.shards), -1, dtype=np.int64)),
            "rep": pa.array(["null"] * len(job.shards), type=pa.string()),
            "_part": pa.array(np.arange(len(job.shards), dtype=np.int64)),
        }
    )
    parts = [rd.from_arrow(markers)]
    if cl is not None and ncl:
        asg = cl.filter(expr=_col("kind") == 1).select_columns(["kind", "root", "pos", "text"])
        nums = r.read_files(sorted(os.path.join(numbers_dir, f) for f in os.listdir(numbers_dir)))
        joined = r.shuffle(
            "assign",
            asg.union(nums).map_batches(lambda t: assign_rows(job, t), batch_format="pyarrow"),
            lambda t: assign_reduce(job, t),
        )
        parts.append(joined)
    allrows = parts[0].union(*parts[1:]) if len(parts) > 1 else parts[0]
    res = r.shuffle("write", allrows, lambda t: write_shard(job, tmp, t), exact=True).take_all()
    if len(res) != len(job.shards):  # pragma: no cover - every shard has a marker row
        raise NeardupIOError(tmp, OSError("not every shard was written"))

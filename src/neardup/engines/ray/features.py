"""Stage 1 of the Ray engine, ``features/NNNNN``: the input shards, and per shard
its documents read, normalized, shingle-hashed and signed into one Parquet file.

Shards are read with :func:`neardup.read_corpus`, so bad-record rules and ids are
the local engine's; each document's row holds its shingle-hash set, signature,
content hash, a 128-bit digest of its set, length and flags.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from neardup.core._errors import InputError
from neardup.core.ids import json_id
from neardup.engines.ray.common import Job, feature_path, one_thread
from neardup.engines.ray.runner import Run
from neardup.text.hashing import SchemeDescriptor
from neardup.text.scripts import SCRIPTS

__all__ = ["expand_inputs", "featurize_shard", "local_copy", "run_features", "shard_format"]


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


def local_copy(path: str, scratch: str) -> str:
    """A local path for ``path``: itself, or a copy of an fsspec URL in ``scratch``."""
    if "://" not in path:
        return path
    import fsspec

    dest = os.path.join(scratch, os.path.basename(path.rstrip("/")))
    with fsspec.open(path, "rb") as src, open(dest, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return dest


def shard_format(path: str) -> str:
    """The format family of one input shard (path or URL)."""
    from neardup.io.corpus import detect_format

    return detect_format(os.path.basename(path.rstrip("/")) if "://" in path else path)


def featurize_shard(job: Job, shard: int, path: str) -> dict[str, Any]:
    """Read one shard, hash and sign it, write its feature file; return its summary."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from neardup.batch.pipeline import normalize_and_hash
    from neardup.io.corpus import read_corpus
    from neardup.sketch.minhash import MinHasher

    one_thread()
    cfg = job.config
    scheme = SchemeDescriptor.from_config(cfg, job.key)
    with tempfile.TemporaryDirectory(prefix="neardup-shard-") as scratch:
        corpus = read_corpus(
            [local_copy(path, scratch)],
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
            "script": pa.array(hashed.scripts),
            "sig": pa.FixedSizeListArray.from_arrays(pa.array(sig.reshape(-1)), k),
            "set": pa.LargeListArray.from_arrays(pa.array(indptr), pa.array(data)),
        }
    )
    final = feature_path(job.work, shard)
    os.makedirs(os.path.dirname(final), exist_ok=True)
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
        "scripts": {
            name: int(c)
            for name, c in zip(SCRIPTS, np.bincount(hashed.scripts, minlength=len(SCRIPTS)),
                               strict=True)
            if c
        },
        "bad": [{"path": b.path, "line": b.line, "reason": b.reason} for b in corpus.bad],
    }


def run_features(r: Run) -> dict[int, dict[str, Any]]:
    """Stage 1, shard by shard (a shard recorded by an earlier run is reused);
    returns each shard's summary and sets the job's shard offsets."""
    job = r.job
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
        ds = r.rd.from_items(items, override_num_blocks=len(items))

        def featurize(batch: dict[str, Any]) -> dict[str, Any]:
            out = [
                featurize_shard(job, int(s), str(p))
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
    r.job = dataclasses.replace(job, offsets=offsets)
    return feats

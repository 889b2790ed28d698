"""Stages 2 and 3 of the Ray engine: exact-content groups and the band rounds that
make candidate pairs.

2. ``exact`` — shuffle (content hash, set digest) by content hash: each document
   with the same content as an earlier one gets an ``identical`` edge from the
   first such document (the local rule; like the local out-of-core path, equal
   content is confirmed by equal shingle-hash sets, here via their digest).
3. ``bands/R`` — in rounds of bands (bounded memory): band keys of each eligible
   document (``map_batches``), shuffle by (band, key); inside each bucket the
   exact copies are dropped (they share every bucket with their first copy) and
   each member is paired with at most ``max_candidates`` preceding members —
   exactly the local band join's candidates (:func:`bucket_pairs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from neardup.engines.ray.common import (
    BASE_COLUMNS,
    I64,
    U64,
    Job,
    column,
    eligible,
    mix,
    part_key,
    positions,
)
from neardup.engines.ray.runner import Run, pq_rows
from neardup.kernels import _signatures as KS

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "BandRounds",
    "band_map",
    "band_reduce",
    "bucket_pairs",
    "exact_map",
    "exact_reduce",
    "run_bands",
    "run_exact",
]


def exact_map(job: Job, t: pa.Table) -> pa.Table:
    """(pos, content hash, set digest, partition) of eligible documents."""
    import pyarrow as pa

    keep = eligible(t)
    ch = column(t, "chash")[keep]
    return pa.table(
        {
            "pos": pa.array(positions(job, t)[keep]),
            "chash": pa.array(ch),
            "dhi": pa.array(column(t, "dhi")[keep]),
            "dlo": pa.array(column(t, "dlo")[keep]),
            "_part": pa.array(part_key(ch)),
        }
    )


def exact_reduce(t: pa.Table) -> pa.Table:
    """Identical edges (first, other) among documents of equal content hash and set."""
    import pyarrow as pa

    pos, ch, hi, lo = (column(t, c) for c in ("pos", "chash", "dhi", "dlo"))
    order = np.lexsort((pos, lo, hi, ch))
    pos, ch, hi, lo = pos[order], ch[order], hi[order], lo[order]
    new = np.r_[True, (ch[1:] != ch[:-1]) | (hi[1:] != hi[:-1]) | (lo[1:] != lo[:-1])]
    first = np.maximum.accumulate(np.where(new, np.arange(pos.size), 0)) if pos.size else pos
    dup = ~new
    return pa.table({"a": pa.array(pos[first][dup]), "b": pa.array(pos[dup])})


def band_map(job: Job, lo: int, hi: int, t: pa.Table) -> pa.Table:
    """One row per eligible document and band of [lo, hi): (band, key, pos, content)."""
    import pyarrow as pa

    keep = eligible(t)
    k = job.config.num_perm
    sig = np.asarray(t.column("sig").combine_chunks().flatten()).reshape(-1, k)[keep]
    keys = np.empty((sig.shape[0], hi - lo), dtype=np.uint64)
    _, rows = job.config.layout
    KS.band_keys(np.ascontiguousarray(sig), lo, hi, rows, np.uint64(0), keys)
    nb = hi - lo
    pos = positions(job, t)[keep]
    band = np.tile(np.arange(lo, hi, dtype=np.int64), pos.size)
    key = keys.reshape(-1)
    with np.errstate(over="ignore"):
        pkey = key ^ mix(band)
    return pa.table(
        {
            "band": pa.array(band),
            "key": pa.array(key),
            "pos": pa.array(np.repeat(pos, nb)),
            "chash": pa.array(np.repeat(column(t, "chash")[keep], nb)),
            "dhi": pa.array(np.repeat(column(t, "dhi")[keep], nb)),
            "dlo": pa.array(np.repeat(column(t, "dlo")[keep], nb)),
            "_part": pa.array(part_key(pkey)),
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
    """The candidate pairs of the buckets in one partition (:func:`bucket_pairs`)."""
    import pyarrow as pa

    a, b, band, key, overflow = bucket_pairs(
        column(t, "band"),
        column(t, "key"),
        column(t, "pos"),
        column(t, "chash"),
        column(t, "dhi"),
        column(t, "dlo"),
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


def run_exact(r: Run) -> dict[str, Any]:
    """Stage 2: the identical edges, in ``exact``; returns {"identical_edges": count}."""
    job = r.job

    def do_exact() -> tuple[list[str], dict[str, Any]]:
        ds = r.features([*BASE_COLUMNS, "chash", "dhi", "dlo"]).map_batches(
            lambda t: exact_map(job, t), batch_format="pyarrow"
        )
        out = r.shuffle("exact", ds, exact_reduce)
        files = r.write("exact", out)
        ne = sum(pq_rows(f) for f in files)
        return files, {"identical_edges": ne}

    return r.stage("exact", do_exact)


@dataclass(frozen=True, slots=True)
class BandRounds:
    """What the band rounds made: how many rounds, the pairs the cap cut, the files."""

    rounds: int
    overflow: int
    files: list[str]


def run_bands(r: Run, eligible_docs: int, round_bytes: int) -> BandRounds:
    """Stage 3: candidate pairs, a few bands per round so that one round's shuffle
    moves about ``round_bytes`` (42 bytes per eligible document and band)."""
    job = r.job
    bands, _rows = job.config.layout
    per_round = max(1, min(bands, round_bytes // max(42 * max(eligible_docs, 1), 1)))
    rounds = [(lo, min(bands, lo + per_round)) for lo in range(0, bands, per_round)]
    overflow = 0
    for ri, (lo, hi) in enumerate(rounds):

        def do_band(lo: int = lo, hi: int = hi, ri: int = ri) -> tuple[list[str], dict[str, Any]]:
            ds = r.features([*BASE_COLUMNS, "chash", "dhi", "dlo", "sig"]).map_batches(
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
    files = [f for ri in range(len(rounds)) for f in r.files(f"bands/{ri:03d}")]
    return BandRounds(rounds=len(rounds), overflow=overflow, files=files)

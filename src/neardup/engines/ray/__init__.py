"""``neardup dedup --engine ray``: the batch job on Ray Data, same answer as the local engine.

Ray is imported only when :func:`run_dedup_ray` runs (the ``ray`` extra); the local
engine never needs it.  Every stage is a Ray Data operation over Arrow batches
and calls the local kernels unchanged (shingle hashing, signatures, band keys,
Jaccard counting).  Every shuffle is "add a partition column (a hash of the key
modulo P), ``groupby`` it, ``map_groups`` a vectorized reduce over the whole
partition", so a reduce sees every row of its keys and one Python call handles
thousands of keys.

Stages (each writes Parquet into the work folder and is recorded, with file
checksums, in ``manifest.json`` (:mod:`.manifest`); ``resume=True`` skips
recorded stages), one module each:

1. ``features/NNNNN`` (:mod:`.features`) — per input shard: read, normalize,
   hash shingles, sign.
2. ``exact`` (:mod:`.candidates`) — ``identical`` edges among documents of equal
   content.
3. ``bands/R`` (:mod:`.candidates`) — in rounds of bands, candidate pairs per
   bucket, exactly the local band join's candidates.
4. ``verify`` (:mod:`.verify`) — candidates joined with both ends' shingle sets
   and signatures, kept at or above the threshold by exact Jaccard.
5. ``components`` (:mod:`.components`) — connected components of identical +
   verified edges: a driver union-find when there are at most ``cc_threshold``
   edges, else large-star/small-star rounds over Ray Data.
6. ``clusters`` (:mod:`.clusters`) — per component the representative and the
   spanning forest the local engine keeps.
7. ``cluster_ids`` (:mod:`.outputs`) — ``clusters.jsonl``, numbered as the local
   engine numbers clusters.
8. write (:mod:`.outputs`) — per input shard, ``kept/part-NNNNN.*`` and
   ``duplicates/part-NNNNN.*``.

:mod:`.driver` runs them in order (:func:`run_dedup_ray`); :mod:`.runner` holds
the driver's state (the shuffle, stage files, Ray start-up); :mod:`.common` what
every task shares.

Equality with the local engine.  Clusters, representatives, edges (and their
order) and the kept set are the local engine's (see :mod:`.clusters` for the
spanning forest); the local engine is unchanged.  Only ``stats.json`` counters
that describe the work done differ (``verified_pairs`` counts every candidate
here, because connected pairs cannot be skipped without a global order).

The work folder must be visible to every node (a local disk for a one-machine
cluster, a shared mount otherwise).
"""

from __future__ import annotations

from neardup.engines.ray.driver import DEFAULT_CC_THRESHOLD, run_dedup_ray

__all__ = ["DEFAULT_CC_THRESHOLD", "run_dedup_ray"]

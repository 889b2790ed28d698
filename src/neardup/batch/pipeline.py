"""The whole pipeline as library calls: batch (:func:`find_duplicates`) and online
(:class:`Deduplicator`, from :mod:`neardup.batch.online`).

This module drives a batch run: hashing (:mod:`neardup.batch.feeder`), exact-content
groups (:mod:`neardup.batch.identical`), then the band join and the clusters
(:func:`dedup_sets`); the result types live in :mod:`neardup.batch.results` and the
saved index in :mod:`neardup.batch.index`.  Names callers import from here are
re-exported.

Batch order of work: normalize → exact-content duplicates (hash, then byte
comparison) → shingle hashing → signatures of one representative per exact group
→ LSH bands → exact verification of every candidate → connected components →
representatives.

Guarantees:

* **Precision**: an edge is reported only after its exact Jaccard was computed and
  found >= threshold (or, with ``Config(verify="estimate")``, labelled
  ``method="estimate"``).  Exact-content duplicates are confirmed byte for byte.
* **Recall**: a pair with J >= threshold is found when it collides in some band —
  probability ``candidate_probability(J, b, r)``, reported as
  ``stats["predicted_recall_at_threshold"]`` — unless a bucket cap cut it, which is
  counted in ``stats["candidate_overflow"]``.  ``method="exact"`` uses the
  AllPairs join instead of LSH and has recall 1.
* **Determinism**: the same texts, config and key give the same result, including
  edge order, in every process.

Example:
    >>> from neardup import Config, ShingleSpec, find_duplicates
    >>> docs = ["red fox runs very fast", "red fox runs very fast today",
    ...         "database backup completed nightly"]
    >>> r = find_duplicates(docs, config=Config(threshold=0.75, shingle=ShingleSpec(k=2)))
    >>> [(c.representative, c.members) for c in r.clusters]
    [(0, (0, 1))]
    >>> r.clusters[0].edges[0].jaccard
    0.8
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, Literal, TypeVar, cast

import numpy as np
import numpy.typing as npt

from neardup.batch.feeder import Hashed
from neardup.batch.feeder import HashFeeder as HashFeeder
from neardup.batch.feeder import normalize_and_hash as normalize_and_hash
from neardup.batch.identical import RawEqual, exact_groups
from neardup.batch.index import DedupIndex
from neardup.batch.online import Deduplicator
from neardup.batch.results import DedupResult, Match, search_stats, size_histogram
from neardup.core._errors import InvalidConfig, MemoryLimitExceeded
from neardup.core.checks import check_texts
from neardup.core.config import DEFAULT_MEMORY_LIMIT, Config, scratch_bytes
from neardup.graph.cluster import KEEP_RULES, Edge, build_clusters, join_edges
from neardup.kernels import _bandjoin as KB
from neardup.kernels import _unionfind as UF
from neardup.kernels.threads import get_threads, set_threads
from neardup.sketch.minhash import MinHasher, SignatureSet
from neardup.text.hashing import HashKey, SchemeDescriptor, ShingleSets
from neardup.text.normalize import encode_text, get_normalizer
from neardup.verify.oracle import allpairs_join

_BAND_ROUND_BYTES = 256 << 20
"""Budget of one band round's keys (8 bytes per document and band)."""

__all__ = [
    "DedupIndex",
    "DedupResult",
    "Deduplicator",
    "Match",
    "dedup_sets",
    "find_duplicates",
]


_R = TypeVar("_R")


class _Background(Generic[_R]):
    """``fn(*args)`` run on a thread (for kernels that release the GIL);
    :meth:`result` waits for it and returns its value or raises its error."""

    def __init__(self, fn: Callable[..., _R], *args: Any) -> None:
        self._value: _R | None = None
        self._error: BaseException | None = None
        self.seconds = 0.0
        threads = get_threads()  # the count is per calling thread

        def run() -> None:
            set_threads(threads)
            t0 = time.perf_counter()
            try:
                self._value = fn(*args)
            except BaseException as exc:  # re-raised by result()
                self._error = exc
            self.seconds = time.perf_counter() - t0

        self._thread = threading.Thread(target=run, name="neardup-background", daemon=True)
        self._thread.start()

    def result(self) -> _R:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return cast(_R, self._value)


def _equal_texts(texts: Sequence[str]) -> RawEqual:
    """:data:`~neardup.batch.identical.RawEqual` over a plain sequence of texts."""

    def equal(a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        pairs = zip(a.tolist(), b.tolist(), strict=True)
        return np.array([texts[x] == texts[y] for x, y in pairs], dtype=np.bool_)

    return equal


def _normalized_text(texts: Sequence[str], cfg: Config) -> Callable[[int], bytes]:
    norm = get_normalizer(cfg.normalizer)
    return lambda i: encode_text(norm(texts[i]))


def find_duplicates(
    texts: Sequence[str],
    *,
    config: Config | None = None,
    key: HashKey | None = None,
    keep: str = "first",
    method: Literal["lsh", "exact"] = "lsh",
    edges: Literal["forest", "all"] = "forest",
    prior: DedupIndex | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    hashed: Hashed | None = None,
) -> DedupResult:
    """Find exact and near duplicates in a batch of texts.

    Parameters (all but ``texts`` by keyword, all optional but ``texts``):
        texts: the documents, in input order (their positions are the ids).
        config: parameters (default :class:`Config()`: word 5-grams, t = 0.8).
        key: a :class:`HashKey` when ``config.hash_algorithm == "siphash24"``.
        keep: representative rule, ``first`` (default) | ``longest`` | ``shortest``.
        method: ``lsh`` (default: MinHash + banding) or ``exact`` (AllPairs join,
            recall 1).
        edges: ``forest`` (default) records the edges that joined each cluster (a
            spanning forest; pairs already connected are not re-verified), ``all``
            records every verified pair >= threshold.  Clusters are the same either
            way.
        prior: documents of earlier runs (:class:`DedupIndex`).  They take positions
            ``0 .. len(prior) - 1`` and ``texts`` follow, so the result equals one run
            over the union; ``stats`` counts only the new documents.
        progress: called as ``progress(stage, done, total)`` during long stages.
        memory_limit: bytes the run may plan to use; checked before anything is
            allocated (:class:`~neardup.MemoryLimitExceeded`).
        hashed: the shingle hashes of exactly ``texts`` when they were hashed while
            being read (a :class:`HashFeeder`'s result); computed here if ``None``.
    """
    texts = check_texts("texts", texts)
    cfg = config or Config()
    if keep not in KEEP_RULES:
        raise InvalidConfig("keep", keep, "unknown representative rule", f"use one of {KEEP_RULES}")
    if method not in ("lsh", "exact"):
        raise InvalidConfig("method", method, "unknown method", "use lsh or exact")
    if edges not in ("forest", "all"):
        raise InvalidConfig("edges", edges, "unknown edge mode", "use forest or all")
    scheme = SchemeDescriptor.from_config(cfg, key)
    if prior is not None:
        if prior.config is not None:
            differ = cfg.differences(prior.config)
            if differ:
                raise InvalidConfig(
                    "against",
                    prior.config_fingerprint,
                    f"the index was built with other options ({differ})",
                    "rerun with the index's options, or rebuild the index with these",
                )
        else:
            old_words = prior.sets.scheme.tokenizer
            if old_words != scheme.tokenizer and prior.sets.scheme.shingle == scheme.shingle:
                # An index saved before options were recorded: its descriptor
                # still tells the one default that changed.
                raise InvalidConfig(
                    "against",
                    prior.config_fingerprint,
                    f"the index was built with other options (--tokenizer: {old_words} in "
                    f"the index, {scheme.tokenizer} now)",
                    f"pass --tokenizer {old_words} to keep using the index, or rebuild it "
                    f"with --tokenizer {scheme.tokenizer}",
                )
        prior.sets.scheme.require_same(scheme, "a saved index and this run")
        if prior.config_fingerprint != cfg.fingerprint:
            raise InvalidConfig(
                "against",
                prior.config_fingerprint,
                f"the index was built with config {prior.config_fingerprint}, this run uses "
                f"{cfg.fingerprint}",
                "rerun with the same parameters as the indexed run",
            )
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    n_new = len(texts)
    n_prior = len(prior) if prior is not None else 0
    # Checked before anything is allocated: characters approximate UTF-8 bytes.
    count = getattr(texts, "char_count", None)
    chars = int(count()) if callable(count) else sum(len(t) for t in texts)
    avg = chars // n_new if n_new else 0
    planned = scratch_bytes(chars) + (n_new + n_prior) * cfg.estimated_memory_per_document(
        avg_bytes=max(avg, 1)
    )
    if planned > memory_limit:
        raise MemoryLimitExceeded(
            planned, memory_limit, f"deduplicating {n_new + n_prior:,} documents"
        )
    if hashed is None:
        hashed = normalize_and_hash(texts, cfg, key, scheme, progress)
    elif progress is not None:
        progress("shingle_hash", n_new, n_new)
    new_sets, too_large_new = hashed.sets, hashed.too_large
    timings["normalize"] = hashed.normalize_s
    timings["shingle_hash"] = hashed.hash_s
    pending = _Background(MinHasher(cfg, key=key).from_sets, new_sets) if method == "lsh" else None

    def new_sigs() -> SignatureSet | None:
        if pending is None:
            return None
        sigs = pending.result()
        timings["signatures"] = pending.seconds
        return sigs

    return dedup_sets(
        new_sets,
        new_sigs,
        _normalized_text(texts, cfg),
        too_large_new,
        config=cfg,
        key=key,
        keep=keep,
        method=method,
        edges=edges,
        prior=prior,
        progress=progress,
        timings=timings,
        t0=t0,
        raw_equal=getattr(texts, "equal_encoded", None) or _equal_texts(texts),
        scripts=hashed.scripts,
    )


def dedup_sets(
    new_sets: ShingleSets,
    new_sigs: SignatureSet | Callable[[], SignatureSet | None] | None,
    text_of: Callable[[int], bytes] | None,
    too_large_new: npt.NDArray[np.bool_],
    *,
    config: Config,
    key: HashKey | None = None,
    keep: str = "first",
    method: Literal["lsh", "exact"] = "lsh",
    edges: Literal["forest", "all"] = "forest",
    prior: DedupIndex | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    timings: dict[str, float] | None = None,
    t0: float | None = None,
    raw_equal: RawEqual | None = None,
    scripts: npt.NDArray[np.uint8] | None = None,
) -> DedupResult:
    """The stages after hashing, on shingle sets and signatures already computed.

    This is what :func:`find_duplicates` runs after hashing, and what an
    out-of-core run calls with memory-mapped ``new_sets`` and ``new_sigs``.
    ``new_sigs`` may also be a function returning them, called once the exact
    duplicates are found (a batch run computes them meanwhile, in a thread).
    ``text_of(i)`` (the normalized UTF-8 text of new document ``i``) confirms exact
    duplicates byte for byte; without it equal content hashes are confirmed by
    equal shingle-hash sets.  ``raw_equal(a, b)`` (whether new documents' original
    texts are equal, many pairs at once), when given, confirms equal originals
    without normalizing them.
    ``scripts`` (the script id of each new document) is passed on to the result.
    """
    cfg = config
    timings = {} if timings is None else timings
    t0 = time.perf_counter() if t0 is None else t0
    scheme = new_sets.scheme
    n_new = len(new_sets)
    n_prior = len(prior) if prior is not None else 0
    sets = prior.sets.concat(new_sets) if prior is not None else new_sets
    n = n_prior + n_new
    too_large = np.r_[np.zeros(n_prior, dtype=np.bool_), too_large_new]
    empty = (sets.raw_counts == 0) & ~too_large
    total_bytes = int(new_sets.byte_lengths.sum())

    t2 = time.perf_counter()
    eligible = ~empty & ~too_large
    exact_edges, leaders = exact_groups(text_of, n_prior, sets, eligible, raw_equal)
    if prior is not None:
        # Identical edges among indexed documents were found by the earlier run.
        exact_edges = [e for e in exact_edges if e.b >= n_prior]
    timings["exact_duplicates"] = time.perf_counter() - t2

    t3 = time.perf_counter()
    bands = cfg.layout[0]
    near_edges: list[Edge] = []
    counters = {
        "candidate_pairs": 0,
        "verified_pairs": 0,
        "candidate_overflow": 0,
        "skipped_connected": 0,
    }
    prior_edges = list(prior.edges) if prior is not None else []
    parent = np.arange(n, dtype=np.int64)
    # Seed the union-find with the earlier run's clusters so that pairs already
    # joined are not verified again.
    if prior_edges:
        UF.union_edges(
            parent,
            np.array([e.a for e in prior_edges], dtype=np.int64),
            np.array([e.b for e in prior_edges], dtype=np.int64),
        )
    sigs: SignatureSet | None = None
    if callable(new_sigs):
        new_sigs = new_sigs()
    if method == "lsh":
        if new_sigs is None:
            raise InvalidConfig(
                "new_sigs",
                None,
                "method='lsh' needs signatures",
                "pass MinHasher(config).from_sets(new_sets)",
            )
        sigs = new_sigs
        if prior is not None:
            sigs = MinHasher(cfg, key=key).from_sets(prior.sets).concat(new_sigs)
        mode = KB.MODE_FOREST if edges == "forest" else KB.MODE_ALL_EDGES
        seen = KB.new_seen()
        # Bands are keyed and joined a few at a time so that key memory stays at
        # 8 bytes per document and band in the round, not for all bands at once.
        per_round = max(1, min(bands, _BAND_ROUND_BYTES // max(8 * n, 1)))
        parts: list[tuple[npt.NDArray[np.int64], ...]] = []
        ncand = nver = overflow = skipped = 0
        band_s = 0.0
        t5 = time.perf_counter()
        for lo in range(0, bands, per_round):
            hi = min(bands, lo + per_round)
            tk = time.perf_counter()
            keys = sigs.band_keys(lo=lo, hi=hi, order="F")
            band_s += time.perf_counter() - tk
            ra, rb, rband, rinter, runion, rmatch, c1, c2, c3, c4 = KB.band_join(
                keys,
                lo,
                leaders,
                sigs.matrix,
                sets.data,
                sets.indptr,
                float(cfg.threshold),
                cfg.max_candidates,
                mode,
                cfg.verify == "estimate",
                parent,
                seen,
            )
            parts.append((ra, rb, rband, rinter, runion, rmatch))
            ncand, nver, overflow, skipped = ncand + c1, nver + c2, overflow + c3, skipped + c4
            if progress is not None:
                progress("candidates_verify", hi, bands)
        timings["band_keys"] = band_s
        cat = [
            np.concatenate([p[i] for p in parts]) if parts else np.empty(0, np.int64)
            for i in range(6)
        ]
        counters.update(
            candidate_pairs=int(ncand),
            verified_pairs=int(nver),
            candidate_overflow=int(overflow),
            skipped_connected=int(skipped),
        )
        ca, cb, cband, cinter, cunion, cmatch = cat
        near_edges.extend(join_edges(ca, cb, cband, cinter, cunion, cmatch, cfg.num_perm))
        timings["candidates_verify"] = time.perf_counter() - t5 - band_s
    else:
        active = np.flatnonzero(leaders).astype(np.int64)
        sub = sets.take(active)
        pairs = allpairs_join(sub, cfg.threshold)
        counters.update(candidate_pairs=len(pairs), verified_pairs=len(pairs))
        pa, pb = active[pairs.a], active[pairs.b]
        kept = np.ones(len(pairs), dtype=np.bool_)
        if edges == "forest" and len(pairs):
            # Pairs in their given order, each kept iff it joins two components.
            UF.kruskal(parent, pa, pb, np.arange(len(pairs), dtype=np.int64), kept)
        for ga, gb, inter, union, keep_it in zip(
            pa.tolist(),
            pb.tolist(),
            pairs.intersection.tolist(),
            pairs.union.tolist(),
            kept.tolist(),
            strict=True,
        ):
            if not keep_it:
                continue
            near_edges.append(
                Edge(
                    a=ga,
                    b=gb,
                    score=inter / union,
                    estimate=None,
                    band=None,
                    method="exact",
                    intersection=inter,
                    union=union,
                )
            )
        timings["exact_join"] = time.perf_counter() - t3
    if prior is not None:
        near_edges = [e for e in near_edges if e.b >= n_prior]

    t6 = time.perf_counter()
    lengths = sets.byte_lengths
    clusters = build_clusters(n, prior_edges + exact_edges + near_edges, keep=keep, lengths=lengths)
    duplicate_of = np.full(n, -1, dtype=np.int64)
    for c in clusters:
        for m in c.members:
            if m != c.representative:
                duplicate_of[m] = c.representative
    timings["clusters"] = time.perf_counter() - t6
    timings["total"] = time.perf_counter() - t0

    new_dups = duplicate_of[n_prior:] >= 0
    new_exact = sum(1 for e in exact_edges if e.b >= n_prior)
    touching = [c for c in clusters if c.members[-1] >= n_prior]
    stats: dict[str, Any] = {
        "documents_in": n_new,
        "documents_out": int(np.count_nonzero(~new_dups)),
        "indexed_documents": n_prior,
        "bytes_in": int(total_bytes),
        "exact_duplicates": new_exact,
        "near_duplicates": int(np.count_nonzero(new_dups)) - new_exact,
        "clusters": len(touching),
        "cluster_size_histogram": size_histogram(len(c) for c in touching),
        "empty": int(np.count_nonzero(empty[n_prior:])),
        "too_large": int(np.count_nonzero(too_large_new)),
        "truncated": int(np.count_nonzero(new_sets.truncated)),
        **search_stats(cfg, scheme, method, counters),
        "timings_s": {k: round(v, 6) for k, v in timings.items()},
    }
    return DedupResult(
        clusters=clusters,
        duplicate_of=duplicate_of,
        empty=np.flatnonzero(empty).astype(np.int64),
        too_large=np.flatnonzero(too_large).astype(np.int64),
        truncated=np.flatnonzero(sets.truncated).astype(np.int64),
        stats=stats,
        scheme=scheme,
        config_fingerprint=cfg.fingerprint,
        sets=sets,
        signatures=sigs,
        n_prior=n_prior,
        config=cfg.result_fields(),
        scripts=scripts,
    )

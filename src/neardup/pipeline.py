"""The whole pipeline as library calls: batch (:func:`find_duplicates`) and online
(:class:`Deduplicator`).

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

import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from . import _kernels as K
from ._errors import DocumentTooLarge, EmptyDocument, InvalidConfig, MemoryLimitExceeded
from .cluster import KEEP_RULES, Cluster, Edge, build_clusters
from .config import Config
from .hashing import HashKey, SchemeDescriptor, ShingleSets, _encode, _hash_encoded
from .lsh import LSHIndex, candidate_probability
from .minhash import MinHasher, Signature, SignatureSet
from .normalize import get_normalizer
from .oracle import allpairs_join
from .screen import BloomFilter

__all__ = [
    "DedupResult",
    "Deduplicator",
    "Match",
    "find_duplicates",
]


@dataclass(frozen=True, eq=False, slots=True)
class DedupResult:
    """What :func:`find_duplicates` found.

    ``duplicate_of[i]`` is the representative of document i's cluster, or -1 when i
    is kept (unique or a representative).  ``kept`` lists kept positions ascending;
    ``empty``, ``too_large`` and ``truncated`` list the documents that were not (or
    not fully) compared; ``stats`` has counts, parameters and timings.
    """

    clusters: list[Cluster]
    duplicate_of: npt.NDArray[np.int64]
    empty: npt.NDArray[np.int64]
    too_large: npt.NDArray[np.int64]
    truncated: npt.NDArray[np.int64]
    stats: dict[str, Any]
    scheme: SchemeDescriptor
    config_fingerprint: str
    sets: ShingleSets | None = field(default=None, repr=False)
    signatures: SignatureSet | None = field(default=None, repr=False)

    @property
    def kept(self) -> npt.NDArray[np.int64]:
        return np.flatnonzero(self.duplicate_of < 0).astype(np.int64)

    @property
    def duplicates(self) -> npt.NDArray[np.int64]:
        return np.flatnonzero(self.duplicate_of >= 0).astype(np.int64)

    @property
    def edges(self) -> list[Edge]:
        return [e for c in self.clusters for e in c.edges]

    def near_pairs(self) -> set[tuple[int, int]]:
        """Pairs joined by a verified near-duplicate edge (not exact-content edges)."""
        return {(e.a, e.b) for e in self.edges if e.method != "identical"}


def _exact_groups(
    encoded: Sequence[bytes], content: npt.NDArray[np.uint64], eligible: npt.NDArray[np.bool_]
) -> tuple[list[Edge], npt.NDArray[np.bool_]]:
    """Exact-content duplicate edges (confirmed byte for byte) and the leaders mask."""
    idx = np.flatnonzero(eligible)
    leaders = eligible.copy()
    edges: list[Edge] = []
    if idx.size < 2:
        return edges, leaders
    h = content[idx]
    order = np.argsort(h, kind="stable")
    hs = h[order]
    starts = np.flatnonzero(np.r_[True, hs[1:] != hs[:-1]])
    ends = np.r_[starts[1:], hs.shape[0]]
    for s, e in zip(starts, ends, strict=True):
        if e - s < 2:
            continue
        members = sorted(int(idx[order[t]]) for t in range(s, e))
        firsts: dict[bytes, int] = {}
        for m in members:
            first = firsts.setdefault(encoded[m], m)
            if first != m:
                leaders[m] = False
                edges.append(
                    Edge(a=first, b=m, jaccard=1.0, estimate=1.0, band=None, method="identical")
                )
    edges.sort(key=lambda x: (x.a, x.b))
    return edges, leaders


def find_duplicates(
    texts: Sequence[str],
    *,
    config: Config | None = None,
    key: HashKey | None = None,
    keep: str = "first",
    method: Literal["lsh", "exact"] = "lsh",
    edges: Literal["forest", "all"] = "forest",
) -> DedupResult:
    """Find exact and near duplicates in a batch of texts.

    Parameters:
        texts: the documents, in input order (their positions are the ids).
        config: parameters (default :class:`Config()`: word 5-grams, t = 0.8).
        key: a :class:`HashKey` when ``config.hash_algorithm == "siphash24"``.
        keep: representative rule, ``first`` | ``longest`` | ``shortest``.
        method: ``lsh`` (MinHash + banding) or ``exact`` (AllPairs join, recall 1).
        edges: ``forest`` records the edges that joined each cluster (a spanning
            forest; pairs already connected are not re-verified), ``all`` records
            every verified pair >= threshold.  Clusters are the same either way.
    """
    cfg = config or Config()
    if keep not in KEEP_RULES:
        raise InvalidConfig("keep", keep, "unknown representative rule", f"use one of {KEEP_RULES}")
    if method not in ("lsh", "exact"):
        raise InvalidConfig("method", method, "unknown method", "use lsh or exact")
    if edges not in ("forest", "all"):
        raise InvalidConfig("edges", edges, "unknown edge mode", "use forest or all")
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    norm = get_normalizer(cfg.normalizer)
    encoded = [_encode(norm(t)) for t in texts]
    n = len(encoded)
    total_bytes = sum(len(e) for e in encoded)
    avg = total_bytes // n if n else 0
    planned = n * cfg.estimated_memory_per_document(avg_bytes=max(avg, 1))
    if planned > cfg.memory_limit:
        raise MemoryLimitExceeded(planned, cfg.memory_limit, f"deduplicating {n:,} documents")
    timings["normalize"] = time.perf_counter() - t0

    t1 = time.perf_counter()
    lengths = np.fromiter((len(e) for e in encoded), dtype=np.int64, count=n)
    too_large = lengths > cfg.max_document_bytes
    hashed_input = [b"" if big else e for e, big in zip(encoded, too_large, strict=True)]
    scheme = SchemeDescriptor.from_config(cfg, key)
    sets = _hash_encoded(hashed_input, cfg, key, scheme)
    empty = (sets.raw_counts == 0) & ~too_large
    timings["shingle_hash"] = time.perf_counter() - t1

    t2 = time.perf_counter()
    eligible = ~empty & ~too_large
    exact_edges, leaders = _exact_groups(encoded, sets.content_hash, eligible)
    timings["exact_duplicates"] = time.perf_counter() - t2

    t3 = time.perf_counter()
    active = np.flatnonzero(leaders).astype(np.int64)
    sub = sets.take(active)
    bands, rows = cfg.layout
    near_edges: list[Edge] = []
    counters = {
        "candidate_pairs": 0,
        "verified_pairs": 0,
        "candidate_overflow": 0,
        "skipped_connected": 0,
    }
    sigs: SignatureSet | None = None
    if method == "lsh":
        sigs = MinHasher(cfg, key=key).from_sets(sub)
        timings["signatures"] = time.perf_counter() - t3
        t4 = time.perf_counter()
        keys = sigs.band_keys()
        timings["band_keys"] = time.perf_counter() - t4
        t5 = time.perf_counter()
        mode = K.MODE_FOREST if edges == "forest" else K.MODE_ALL_EDGES
        parent = np.arange(active.shape[0], dtype=np.int64)
        ea, eb, eband, einter, eunion, ematch, ncand, nver, overflow, skipped = K.band_join(
            keys,
            np.ones(active.shape[0], dtype=np.bool_),
            sigs.matrix,
            sub.data,
            sub.indptr,
            float(cfg.threshold),
            cfg.max_candidates,
            mode,
            cfg.verify == "estimate",
            parent,
        )
        counters.update(
            candidate_pairs=int(ncand),
            verified_pairs=int(nver),
            candidate_overflow=int(overflow),
            skipped_connected=int(skipped),
        )
        k = cfg.num_perm
        for a, b, band, inter, union, match in zip(
            ea.tolist(),
            eb.tolist(),
            eband.tolist(),
            einter.tolist(),
            eunion.tolist(),
            ematch.tolist(),
            strict=True,
        ):
            exact = inter >= 0
            near_edges.append(
                Edge(
                    a=int(active[a]),
                    b=int(active[b]),
                    jaccard=inter / union if exact else None,
                    estimate=match / k,
                    band=band,
                    method="exact" if exact else "estimate",
                    intersection=inter if exact else None,
                    union=union if exact else None,
                )
            )
        timings["candidates_verify"] = time.perf_counter() - t5
    else:
        pairs = allpairs_join(sub, cfg.threshold)
        counters.update(candidate_pairs=len(pairs), verified_pairs=len(pairs))
        for a, b, inter, union in zip(
            pairs.a.tolist(),
            pairs.b.tolist(),
            pairs.intersection.tolist(),
            pairs.union.tolist(),
            strict=True,
        ):
            near_edges.append(
                Edge(
                    a=int(active[a]),
                    b=int(active[b]),
                    jaccard=inter / union,
                    estimate=None,
                    band=None,
                    method="exact",
                    intersection=inter,
                    union=union,
                )
            )
        timings["exact_join"] = time.perf_counter() - t3

    t6 = time.perf_counter()
    clusters = build_clusters(n, exact_edges + near_edges, keep=keep, lengths=lengths)
    duplicate_of = np.full(n, -1, dtype=np.int64)
    for c in clusters:
        for m in c.members:
            if m != c.representative:
                duplicate_of[m] = c.representative
    timings["clusters"] = time.perf_counter() - t6
    timings["total"] = time.perf_counter() - t0

    sizes = [len(c) for c in clusters]
    hist: dict[str, int] = {}
    for s in sizes:
        hist[str(s)] = hist.get(str(s), 0) + 1
    stats: dict[str, Any] = {
        "documents_in": n,
        "documents_out": int(np.count_nonzero(duplicate_of < 0)),
        "bytes_in": int(total_bytes),
        "exact_duplicates": len(exact_edges),
        "near_duplicates": int(np.count_nonzero(duplicate_of >= 0)) - len(exact_edges),
        "clusters": len(clusters),
        "cluster_size_histogram": dict(sorted(hist.items(), key=lambda kv: int(kv[0]))),
        "empty": int(np.count_nonzero(empty)),
        "too_large": int(np.count_nonzero(too_large)),
        "truncated": int(np.count_nonzero(sets.truncated)),
        "method": method,
        "verify": cfg.verify,
        "threshold": cfg.threshold,
        "bands": bands,
        "rows": rows,
        "num_perm": cfg.num_perm,
        "predicted_recall_at_threshold": candidate_probability(cfg.threshold, bands, rows)
        if method == "lsh"
        else 1.0,
        **counters,
        "scheme": scheme.to_dict(),
        "scheme_fingerprint": scheme.fingerprint,
        "config_fingerprint": cfg.fingerprint,
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
    )


@dataclass(frozen=True, slots=True)
class Match:
    """A stored item that matched a query, with its verified score."""

    key: Hashable
    jaccard: float | None
    estimate: float
    method: str
    duplicate: bool


class Deduplicator:
    """An online catalogue: add texts one at a time, ask whether a text was seen.

    Each added text is screened by a Bloom filter over content hashes (cheap
    "definitely unseen"), looked up by exact content, then by LSH; every candidate
    is verified exactly against its retained shingle-hash set.  ``duplicate`` is
    True only for a verified score >= threshold.

    Example:
        >>> from neardup import Config, ShingleSpec
        >>> d = Deduplicator(Config(threshold=0.75, shingle=ShingleSpec(k=2)))
        >>> d.add("A", "red fox runs very fast")
        []
        >>> [(m.key, m.jaccard, m.duplicate) for m in d.add("B", "red fox runs very fast today")]
        [('A', 0.8, True)]
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        key: HashKey | None = None,
        expected_items: int = 100_000,
    ) -> None:
        self.config = config or Config()
        self.key = key
        self.hasher = MinHasher(self.config, key=key)
        self.index = LSHIndex(
            self.hasher.scheme,
            threshold=self.config.threshold,
            max_bucket_size=self.config.max_bucket_size,
            max_candidates=max(self.config.max_candidates, 1),
        )
        self.screen = BloomFilter(capacity=max(expected_items, 1), fp_rate=0.001)
        self._by_content: dict[int, list[Hashable]] = {}
        self._normalizer = get_normalizer(self.config.normalizer)

    def _prepare(self, text: str) -> tuple[ShingleSets, Signature]:
        enc = _encode(self._normalizer(text))
        if len(enc) > self.config.max_document_bytes:
            raise DocumentTooLarge(None, len(enc), self.config.max_document_bytes)
        sets = _hash_encoded([enc], self.config, self.key, self.hasher.scheme)
        if sets.raw_counts[0] == 0:
            raise EmptyDocument(None)
        return sets, self.hasher.from_sets(sets)[0]

    def _matches(self, sets: ShingleSets, sig: Signature, limit: int | None) -> list[Match]:
        h = int(sets.content_hash[0])
        # The Bloom screen answers "definitely unseen" for most new content, so the
        # exact-content table is consulted only for possible repeats.
        same = self._by_content.get(h, []) if h in self.screen else []
        scored = self.index.query_verified(sig, sets.get(0), limit=limit, extra=same)
        out: list[Match] = []
        for key, e in scored:
            score = e.jaccard if e.jaccard is not None else e.estimate
            method = "identical" if key in same and e.jaccard == 1.0 else e.method
            out.append(
                Match(
                    key,
                    e.jaccard,
                    e.estimate or 0.0,
                    method,
                    score is not None and score >= self.config.threshold,
                )
            )
        out.sort(key=lambda m: (-(m.jaccard or 0.0), str(m.key)))
        return out

    def query(self, text: str, *, limit: int | None = None) -> list[Match]:
        """Verified matches of ``text`` among stored items (nothing is stored)."""
        sets, sig = self._prepare(text)
        return self._matches(sets, sig, limit)

    def seen_exact(self, text: str) -> bool:
        """True if exactly this normalized content was added (Bloom screen first)."""
        sets, _ = self._prepare(text)
        h = int(sets.content_hash[0])
        return h in self.screen and h in self._by_content

    def add(self, key: Hashable, text: str) -> list[Match]:
        """Store ``text`` under ``key`` and return its verified matches among earlier items."""
        sets, sig = self._prepare(text)
        matches = self._matches(sets, sig, None)
        h = int(sets.content_hash[0])
        self.index.insert(key, sig, sets.get(0).copy())
        self.screen.add([h])
        self._by_content.setdefault(h, []).append(key)
        return matches

    def __len__(self) -> int:
        return len(self.index)

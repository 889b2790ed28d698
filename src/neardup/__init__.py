"""neardup — find near duplicates without comparing everything, and prove them exactly.

The public API is what ``__all__`` lists; everything in an underscored module is
private.  See the README for a tour and each stage module for its guarantees.
"""

from __future__ import annotations

from ._errors import (
    CorruptFile,
    DocumentTooLarge,
    EmptyDocument,
    InputError,
    InvalidConfig,
    MemoryLimitExceeded,
    NeardupError,
    NeardupIOError,
    NoFeasibleParameters,
    SchemeMismatch,
)
from .cluster import Cluster, Edge, build_clusters
from .config import Config, ShingleSpec
from .evaluate import evaluate
from .explain import Explanation, shared_spans
from .hashing import HashKey, SchemeDescriptor, ShingleSets, hash_documents, shingles
from .job import run_dedup
from .lsh import (
    CandidatePairs,
    Layout,
    LSHIndex,
    LSHStats,
    candidate_pairs,
    candidate_probability,
    default_layout,
    optimal_params,
)
from .minhash import BBitSignatures, MinHasher, Signature, SignatureSet
from .normalize import NormalizedText, Normalizer, get_normalizer
from .oracle import allpairs_join, brute_force_pairs
from .pipeline import (
    DedupIndex,
    Deduplicator,
    DedupResult,
    Match,
    find_duplicates,
)
from .screen import BloomFilter
from .stream import dedup_records, filter_dataset, unique_records
from .synth import plant_near_duplicates, stdlib_paragraphs, synthetic_documents
from .verify import PairScores, jaccard, verify_pairs

__version__ = "0.1.0"

__all__ = [
    "BBitSignatures",
    "BloomFilter",
    "CandidatePairs",
    "Cluster",
    "Config",
    "CorruptFile",
    "DedupIndex",
    "DedupResult",
    "Deduplicator",
    "DocumentTooLarge",
    "Edge",
    "EmptyDocument",
    "Explanation",
    "HashKey",
    "InputError",
    "InvalidConfig",
    "LSHIndex",
    "LSHStats",
    "Layout",
    "Match",
    "MemoryLimitExceeded",
    "MinHasher",
    "NeardupError",
    "NeardupIOError",
    "NoFeasibleParameters",
    "NormalizedText",
    "Normalizer",
    "PairScores",
    "SchemeDescriptor",
    "SchemeMismatch",
    "ShingleSets",
    "ShingleSpec",
    "Signature",
    "SignatureSet",
    "__version__",
    "allpairs_join",
    "brute_force_pairs",
    "build_clusters",
    "candidate_pairs",
    "candidate_probability",
    "dedup_records",
    "default_layout",
    "evaluate",
    "filter_dataset",
    "find_duplicates",
    "get_normalizer",
    "hash_documents",
    "jaccard",
    "optimal_params",
    "plant_near_duplicates",
    "run_dedup",
    "shared_spans",
    "shingles",
    "stdlib_paragraphs",
    "synthetic_documents",
    "unique_records",
    "verify_pairs",
]

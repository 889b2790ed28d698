"""neardup — find near duplicates without comparing everything, and prove them exactly.

The public API is what ``__all__`` lists; everything in an underscored module is
private.  See the README for a tour and each stage module for its guarantees.
"""

from __future__ import annotations

from ._errors import (
    Conflict,
    CorruptFile,
    Degraded,
    DocumentTooLarge,
    EmptyDocument,
    Forbidden,
    InputError,
    InvalidConfig,
    LimitExceeded,
    MemoryLimitExceeded,
    NeardupError,
    NeardupIOError,
    NoFeasibleParameters,
    NotFound,
    SchemeMismatch,
    ServiceError,
    Unauthorized,
    ZeroVector,
)
from .audit import run_audit, run_split
from .auth import Keyring, Principal
from .cluster import Cluster, Edge, build_clusters
from .cmdlog import CommandLog
from .config import Config, ShingleSpec
from .evaluate import evaluate
from .explain import Explanation, shared_spans
from .families import (
    Decision,
    Family,
    FamilyEdge,
    FamilyResult,
    Provenance,
    build_families,
    cross_split_leakage,
    family_split,
)
from .feedback import FeedbackPolicy, Label, ThresholdReport, evaluate_feedback
from .hamming import BitBands, HammingIndex
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
from .online import BandIndex
from .oracle import allpairs_join, brute_force_pairs
from .pipeline import (
    DedupIndex,
    Deduplicator,
    DedupResult,
    Match,
    find_duplicates,
)
from .ray_engine import run_dedup_ray
from .screen import BloomFilter
from .service import Service, ServiceConfig
from .stream import dedup_records, filter_dataset, unique_records
from .synth import plant_near_duplicates, stdlib_paragraphs, synthetic_documents
from .tenant import Tenant, TenantConfig
from .vectors import (
    HyperplaneHasher,
    ICWSHasher,
    PStableHasher,
    VectorConfig,
    VectorSignatures,
    cosine_from_hamming,
    hamming_distance,
    hyperplane_collision,
    normalize_vector,
    pick_width,
    pstable_collision,
    vector_layout,
)
from .verify import PairScores, jaccard, verify_pairs
from .vpipeline import (
    SparseBags,
    VectorCluster,
    VectorDedupResult,
    VectorEdge,
    VectorIndex,
    VectorMatch,
    find_vector_duplicates,
    vector_scores,
    weighted_bags,
    weighted_jaccard,
)

__version__ = "0.1.0"

__all__ = [
    "BBitSignatures",
    "BandIndex",
    "BitBands",
    "BloomFilter",
    "CandidatePairs",
    "Cluster",
    "CommandLog",
    "Config",
    "Conflict",
    "CorruptFile",
    "Decision",
    "DedupIndex",
    "DedupResult",
    "Deduplicator",
    "Degraded",
    "DocumentTooLarge",
    "Edge",
    "EmptyDocument",
    "Explanation",
    "Family",
    "FamilyEdge",
    "FamilyResult",
    "FeedbackPolicy",
    "Forbidden",
    "HammingIndex",
    "HashKey",
    "HyperplaneHasher",
    "ICWSHasher",
    "InputError",
    "InvalidConfig",
    "Keyring",
    "LSHIndex",
    "LSHStats",
    "Label",
    "Layout",
    "LimitExceeded",
    "Match",
    "MemoryLimitExceeded",
    "MinHasher",
    "NeardupError",
    "NeardupIOError",
    "NoFeasibleParameters",
    "NormalizedText",
    "Normalizer",
    "NotFound",
    "PStableHasher",
    "PairScores",
    "Principal",
    "Provenance",
    "SchemeDescriptor",
    "SchemeMismatch",
    "Service",
    "ServiceConfig",
    "ServiceError",
    "ShingleSets",
    "ShingleSpec",
    "Signature",
    "SignatureSet",
    "SparseBags",
    "Tenant",
    "TenantConfig",
    "ThresholdReport",
    "Unauthorized",
    "VectorCluster",
    "VectorConfig",
    "VectorDedupResult",
    "VectorEdge",
    "VectorIndex",
    "VectorMatch",
    "VectorSignatures",
    "ZeroVector",
    "__version__",
    "allpairs_join",
    "brute_force_pairs",
    "build_clusters",
    "build_families",
    "candidate_pairs",
    "candidate_probability",
    "cosine_from_hamming",
    "cross_split_leakage",
    "dedup_records",
    "default_layout",
    "evaluate",
    "evaluate_feedback",
    "family_split",
    "filter_dataset",
    "find_duplicates",
    "find_vector_duplicates",
    "get_normalizer",
    "hamming_distance",
    "hash_documents",
    "hyperplane_collision",
    "jaccard",
    "normalize_vector",
    "optimal_params",
    "pick_width",
    "plant_near_duplicates",
    "pstable_collision",
    "run_audit",
    "run_dedup",
    "run_dedup_ray",
    "run_split",
    "shared_spans",
    "shingles",
    "stdlib_paragraphs",
    "synthetic_documents",
    "unique_records",
    "vector_layout",
    "vector_scores",
    "verify_pairs",
    "weighted_bags",
    "weighted_jaccard",
]

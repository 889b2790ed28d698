"""neardup — find near duplicates without comparing everything, and prove them exactly.

The public API is what ``__all__`` lists; everything in an underscored module is
private.  See the README for a tour and each stage module for its guarantees.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._errors import (
    Busy,
    Conflict,
    CorruptFile,
    DeadlineExceeded,
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

if TYPE_CHECKING:
    from ._warm import compile_kernels
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

# Public names and the submodule that defines each: imported on first use, so that
# ``import neardup`` (and the CLI's start) does not load the service, the Ray
# engine and every other stage that a given program never touches.
_LAZY: dict[str, str] = {
    "BBitSignatures": "minhash",
    "BandIndex": "online",
    "BitBands": "hamming",
    "BloomFilter": "screen",
    "CandidatePairs": "lsh",
    "Cluster": "cluster",
    "CommandLog": "cmdlog",
    "Config": "config",
    "Decision": "families",
    "DedupIndex": "pipeline",
    "DedupResult": "pipeline",
    "Deduplicator": "pipeline",
    "Edge": "cluster",
    "Explanation": "explain",
    "Family": "families",
    "FamilyEdge": "families",
    "FamilyResult": "families",
    "FeedbackPolicy": "feedback",
    "HammingIndex": "hamming",
    "HashKey": "hashing",
    "HyperplaneHasher": "vectors",
    "ICWSHasher": "vectors",
    "Keyring": "auth",
    "LSHIndex": "lsh",
    "LSHStats": "lsh",
    "Label": "feedback",
    "Layout": "lsh",
    "Match": "pipeline",
    "MinHasher": "minhash",
    "NormalizedText": "normalize",
    "Normalizer": "normalize",
    "PStableHasher": "vectors",
    "PairScores": "verify",
    "Principal": "auth",
    "Provenance": "families",
    "SchemeDescriptor": "hashing",
    "Service": "service",
    "ServiceConfig": "service",
    "ShingleSets": "hashing",
    "ShingleSpec": "config",
    "Signature": "minhash",
    "SignatureSet": "minhash",
    "SparseBags": "vpipeline",
    "Tenant": "tenant",
    "TenantConfig": "tenant",
    "ThresholdReport": "feedback",
    "VectorCluster": "vpipeline",
    "VectorConfig": "vectors",
    "VectorDedupResult": "vpipeline",
    "VectorEdge": "vpipeline",
    "VectorIndex": "vpipeline",
    "VectorMatch": "vpipeline",
    "VectorSignatures": "vectors",
    "allpairs_join": "oracle",
    "brute_force_pairs": "oracle",
    "build_clusters": "cluster",
    "build_families": "families",
    "candidate_pairs": "lsh",
    "candidate_probability": "lsh",
    "cosine_from_hamming": "vectors",
    "cross_split_leakage": "families",
    "dedup_records": "stream",
    "default_layout": "lsh",
    "evaluate": "evaluate",
    "evaluate_feedback": "feedback",
    "family_split": "families",
    "filter_dataset": "stream",
    "compile_kernels": "_warm",
    "find_duplicates": "pipeline",
    "find_vector_duplicates": "vpipeline",
    "get_normalizer": "normalize",
    "hamming_distance": "vectors",
    "hash_documents": "hashing",
    "hyperplane_collision": "vectors",
    "jaccard": "verify",
    "normalize_vector": "vectors",
    "optimal_params": "lsh",
    "pick_width": "vectors",
    "plant_near_duplicates": "synth",
    "pstable_collision": "vectors",
    "run_audit": "audit",
    "run_dedup": "job",
    "run_dedup_ray": "ray_engine",
    "run_split": "audit",
    "shared_spans": "explain",
    "shingles": "hashing",
    "stdlib_paragraphs": "synth",
    "synthetic_documents": "synth",
    "unique_records": "stream",
    "vector_layout": "vectors",
    "vector_scores": "vpipeline",
    "verify_pairs": "verify",
    "weighted_bags": "vpipeline",
    "weighted_jaccard": "vpipeline",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'neardup' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__version__ = "0.1.0"

__all__ = [
    "BBitSignatures",
    "BandIndex",
    "BitBands",
    "BloomFilter",
    "Busy",
    "CandidatePairs",
    "Cluster",
    "CommandLog",
    "Config",
    "Conflict",
    "CorruptFile",
    "DeadlineExceeded",
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
    "compile_kernels",
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

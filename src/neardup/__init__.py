"""neardup — find near duplicates without comparing everything, and prove them exactly.

The public API is what ``__all__`` lists; everything in an underscored module is
private.  See the README for a tour and each stage module for its guarantees.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from neardup.core._errors import (
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
    from neardup.batch.evaluate import evaluate
    from neardup.batch.job import run_dedup
    from neardup.batch.pipeline import (
        DedupIndex,
        Deduplicator,
        DedupResult,
        Match,
        find_duplicates,
    )
    from neardup.batch.stream import dedup_records, filter_dataset, unique_records
    from neardup.core.config import Config, ShingleSpec
    from neardup.engines.ray_engine import run_dedup_ray
    from neardup.graph.cluster import Cluster, Edge, build_clusters
    from neardup.io.synth import plant_near_duplicates, stdlib_paragraphs, synthetic_documents
    from neardup.kernels._warm import compile_kernels
    from neardup.lineage.audit import run_audit, run_split
    from neardup.lineage.families import (
        Decision,
        Family,
        FamilyEdge,
        FamilyResult,
        Provenance,
        build_families,
        cross_split_leakage,
        family_split,
    )
    from neardup.service.auth import Keyring, Principal
    from neardup.service.cmdlog import CommandLog
    from neardup.service.feedback import FeedbackPolicy, Label, ThresholdReport, evaluate_feedback
    from neardup.service.manager import Service, ServiceConfig
    from neardup.service.online import BandIndex
    from neardup.service.tenant import Tenant, TenantConfig
    from neardup.sketch.lsh import (
        CandidatePairs,
        Layout,
        LSHIndex,
        LSHStats,
        candidate_pairs,
        candidate_probability,
        default_layout,
        optimal_params,
    )
    from neardup.sketch.minhash import BBitSignatures, MinHasher, Signature, SignatureSet
    from neardup.sketch.screen import BloomFilter
    from neardup.text.hashing import (
        HashKey,
        SchemeDescriptor,
        ShingleSets,
        hash_documents,
        shingles,
    )
    from neardup.text.normalize import NormalizedText, Normalizer, get_normalizer
    from neardup.vectors.hamming import BitBands, HammingIndex
    from neardup.vectors.sketches import (
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
    from neardup.vectors.vpipeline import (
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
    from neardup.verify.exact import PairScores, jaccard, verify_pairs
    from neardup.verify.explain import Explanation, shared_spans
    from neardup.verify.oracle import allpairs_join, brute_force_pairs

# Public names and the submodule that defines each: imported on first use, so that
# ``import neardup`` (and the CLI's start) does not load the service, the Ray
# engine and every other stage that a given program never touches.
_LAZY: dict[str, str] = {
    "BBitSignatures": "sketch.minhash",
    "BandIndex": "service.online",
    "BitBands": "vectors.hamming",
    "BloomFilter": "sketch.screen",
    "CandidatePairs": "sketch.lsh",
    "Cluster": "graph.cluster",
    "CommandLog": "service.cmdlog",
    "Config": "core.config",
    "Decision": "lineage.families",
    "DedupIndex": "batch.pipeline",
    "DedupResult": "batch.pipeline",
    "Deduplicator": "batch.pipeline",
    "Edge": "graph.cluster",
    "Explanation": "verify.explain",
    "Family": "lineage.families",
    "FamilyEdge": "lineage.families",
    "FamilyResult": "lineage.families",
    "FeedbackPolicy": "service.feedback",
    "HammingIndex": "vectors.hamming",
    "HashKey": "text.hashing",
    "HyperplaneHasher": "vectors.sketches",
    "ICWSHasher": "vectors.sketches",
    "Keyring": "service.auth",
    "LSHIndex": "sketch.lsh",
    "LSHStats": "sketch.lsh",
    "Label": "service.feedback",
    "Layout": "core.layout",
    "Match": "batch.pipeline",
    "MinHasher": "sketch.minhash",
    "NormalizedText": "text.normalize",
    "Normalizer": "text.normalize",
    "PStableHasher": "vectors.sketches",
    "PairScores": "verify.exact",
    "Principal": "service.auth",
    "Provenance": "lineage.families",
    "SchemeDescriptor": "text.hashing",
    "Service": "service.manager",
    "ServiceConfig": "service.manager",
    "ShingleSets": "text.hashing",
    "ShingleSpec": "core.config",
    "Signature": "sketch.minhash",
    "SignatureSet": "sketch.minhash",
    "SparseBags": "vectors.vpipeline",
    "Tenant": "service.tenant",
    "TenantConfig": "service.tenant",
    "ThresholdReport": "service.feedback",
    "VectorCluster": "vectors.vpipeline",
    "VectorConfig": "vectors.sketches",
    "VectorDedupResult": "vectors.vpipeline",
    "VectorEdge": "vectors.vpipeline",
    "VectorIndex": "vectors.vpipeline",
    "VectorMatch": "vectors.vpipeline",
    "VectorSignatures": "vectors.sketches",
    "allpairs_join": "verify.oracle",
    "brute_force_pairs": "verify.oracle",
    "build_clusters": "graph.cluster",
    "build_families": "lineage.families",
    "candidate_pairs": "sketch.lsh",
    "candidate_probability": "core.layout",
    "cosine_from_hamming": "vectors.sketches",
    "cross_split_leakage": "lineage.families",
    "dedup_records": "batch.stream",
    "default_layout": "core.layout",
    "evaluate": "batch.evaluate",
    "evaluate_feedback": "service.feedback",
    "family_split": "lineage.families",
    "filter_dataset": "batch.stream",
    "compile_kernels": "kernels._warm",
    "find_duplicates": "batch.pipeline",
    "find_vector_duplicates": "vectors.vpipeline",
    "get_normalizer": "text.normalize",
    "hamming_distance": "vectors.sketches",
    "hash_documents": "text.hashing",
    "hyperplane_collision": "vectors.sketches",
    "jaccard": "verify.exact",
    "normalize_vector": "vectors.sketches",
    "optimal_params": "core.layout",
    "pick_width": "vectors.sketches",
    "plant_near_duplicates": "io.synth",
    "pstable_collision": "vectors.sketches",
    "run_audit": "lineage.audit",
    "run_dedup": "batch.job",
    "run_dedup_ray": "engines.ray_engine",
    "run_split": "lineage.audit",
    "shared_spans": "verify.explain",
    "shingles": "text.hashing",
    "stdlib_paragraphs": "io.synth",
    "synthetic_documents": "io.synth",
    "unique_records": "batch.stream",
    "vector_layout": "vectors.sketches",
    "vector_scores": "vectors.vpipeline",
    "verify_pairs": "verify.exact",
    "weighted_bags": "vectors.vpipeline",
    "weighted_jaccard": "vectors.vpipeline",
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

"""neardup — find near duplicates without comparing everything, and prove them exactly.

The public API is what ``__all__`` lists; everything in an underscored module is
private.  See the README for a tour and each stage module for its guarantees."""

from __future__ import annotations

from typing import TYPE_CHECKING

from neardup.core._errors import (
    CorruptFile,
    DocumentTooLarge,
    EmptyDocument,
    InputError,
    InvalidConfig,
    InvalidType,
    MemoryLimitExceeded,
    NeardupError,
    NeardupIOError,
    NoFeasibleParameters,
    SchemeMismatch,
    ZeroVector,
)
from neardup.core.lazy import lazy_exports

if TYPE_CHECKING:
    from neardup.batch.evaluate import evaluate
    from neardup.batch.index import DedupIndex
    from neardup.batch.job import run_dedup
    from neardup.batch.online import Deduplicator
    from neardup.batch.pipeline import find_duplicates
    from neardup.batch.results import DedupResult, Match
    from neardup.batch.stream import (
        dedup_records,
        filter_dataset,
        unique_records,
    )
    from neardup.core.config import (
        Config,
        RunOptions,
        ShingleSpec,
    )
    from neardup.core.layout import (
        Layout,
        candidate_probability,
        default_layout,
        optimal_params,
    )
    from neardup.graph.cluster import (
        Cluster,
        Edge,
    )
    from neardup.kernels._warm import compile_kernels
    from neardup.lineage.audit import (
        run_audit,
        run_split,
    )
    from neardup.sketch.lsh import LSHIndex
    from neardup.sketch.minhash import (
        MinHasher,
        Signature,
        SignatureSet,
    )
    from neardup.text.hashing import (
        HashKey,
        hash_documents,
        shingles,
    )
    from neardup.text.normalize import get_normalizer
    from neardup.vectors.sketches import VectorConfig
    from neardup.vectors.vpipeline import (
        VectorDedupResult,
        VectorIndex,
        find_vector_duplicates,
    )
    from neardup.verify.exact import (
        jaccard,
        verify_pairs,
    )

_LAZY: dict[str, str] = {
    "Cluster": "neardup.graph.cluster",
    "Config": "neardup.core.config",
    "DedupIndex": "neardup.batch.index",
    "DedupResult": "neardup.batch.results",
    "Deduplicator": "neardup.batch.online",
    "Edge": "neardup.graph.cluster",
    "HashKey": "neardup.text.hashing",
    "LSHIndex": "neardup.sketch.lsh",
    "Layout": "neardup.core.layout",
    "Match": "neardup.batch.results",
    "MinHasher": "neardup.sketch.minhash",
    "RunOptions": "neardup.core.config",
    "ShingleSpec": "neardup.core.config",
    "Signature": "neardup.sketch.minhash",
    "SignatureSet": "neardup.sketch.minhash",
    "VectorConfig": "neardup.vectors.sketches",
    "VectorDedupResult": "neardup.vectors.vpipeline",
    "VectorIndex": "neardup.vectors.vpipeline",
    "candidate_probability": "neardup.core.layout",
    "compile_kernels": "neardup.kernels._warm",
    "dedup_records": "neardup.batch.stream",
    "default_layout": "neardup.core.layout",
    "evaluate": "neardup.batch.evaluate",
    "filter_dataset": "neardup.batch.stream",
    "find_duplicates": "neardup.batch.pipeline",
    "find_vector_duplicates": "neardup.vectors.vpipeline",
    "get_normalizer": "neardup.text.normalize",
    "hash_documents": "neardup.text.hashing",
    "jaccard": "neardup.verify.exact",
    "optimal_params": "neardup.core.layout",
    "run_audit": "neardup.lineage.audit",
    "run_dedup": "neardup.batch.job",
    "run_split": "neardup.lineage.audit",
    "shingles": "neardup.text.hashing",
    "unique_records": "neardup.batch.stream",
    "verify_pairs": "neardup.verify.exact",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

__version__ = "0.1.0"

__all__ = [
    "Cluster",
    "Config",
    "CorruptFile",
    "DedupIndex",
    "DedupResult",
    "Deduplicator",
    "DocumentTooLarge",
    "Edge",
    "EmptyDocument",
    "HashKey",
    "InputError",
    "InvalidConfig",
    "InvalidType",
    "LSHIndex",
    "Layout",
    "Match",
    "MemoryLimitExceeded",
    "MinHasher",
    "NeardupError",
    "NeardupIOError",
    "NoFeasibleParameters",
    "RunOptions",
    "SchemeMismatch",
    "ShingleSpec",
    "Signature",
    "SignatureSet",
    "VectorConfig",
    "VectorDedupResult",
    "VectorIndex",
    "ZeroVector",
    "__version__",
    "candidate_probability",
    "compile_kernels",
    "dedup_records",
    "default_layout",
    "evaluate",
    "filter_dataset",
    "find_duplicates",
    "find_vector_duplicates",
    "get_normalizer",
    "hash_documents",
    "jaccard",
    "optimal_params",
    "run_audit",
    "run_dedup",
    "run_split",
    "shingles",
    "unique_records",
    "verify_pairs",
]

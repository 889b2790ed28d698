"""Vectors: SimHash/hyperplanes, p-stable and ICWS sketches, Hamming bands, exact
vector verification.

The vector API is importable from here::

    from neardup.vectors import HyperplaneHasher, VectorConfig, find_vector_duplicates
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from neardup.core.lazy import lazy_exports

if TYPE_CHECKING:
    from neardup.vectors.hamming import (
        BitBands,
        HammingIndex,
    )
    from neardup.vectors.sketches import (
        HyperplaneHasher,
        ICWSHasher,
        PStableHasher,
        VectorConfig,
        VectorSignatures,
        angular_distance,
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

_LAZY: dict[str, str] = {
    "BitBands": "neardup.vectors.hamming",
    "HammingIndex": "neardup.vectors.hamming",
    "HyperplaneHasher": "neardup.vectors.sketches",
    "ICWSHasher": "neardup.vectors.sketches",
    "PStableHasher": "neardup.vectors.sketches",
    "SparseBags": "neardup.vectors.vpipeline",
    "VectorCluster": "neardup.vectors.vpipeline",
    "VectorConfig": "neardup.vectors.sketches",
    "VectorDedupResult": "neardup.vectors.vpipeline",
    "VectorEdge": "neardup.vectors.vpipeline",
    "VectorIndex": "neardup.vectors.vpipeline",
    "VectorMatch": "neardup.vectors.vpipeline",
    "VectorSignatures": "neardup.vectors.sketches",
    "angular_distance": "neardup.vectors.sketches",
    "cosine_from_hamming": "neardup.vectors.sketches",
    "find_vector_duplicates": "neardup.vectors.vpipeline",
    "hamming_distance": "neardup.vectors.sketches",
    "hyperplane_collision": "neardup.vectors.sketches",
    "normalize_vector": "neardup.vectors.sketches",
    "pick_width": "neardup.vectors.sketches",
    "pstable_collision": "neardup.vectors.sketches",
    "vector_layout": "neardup.vectors.sketches",
    "vector_scores": "neardup.vectors.vpipeline",
    "weighted_bags": "neardup.vectors.vpipeline",
    "weighted_jaccard": "neardup.vectors.vpipeline",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "BitBands",
    "HammingIndex",
    "HyperplaneHasher",
    "ICWSHasher",
    "PStableHasher",
    "SparseBags",
    "VectorCluster",
    "VectorConfig",
    "VectorDedupResult",
    "VectorEdge",
    "VectorIndex",
    "VectorMatch",
    "VectorSignatures",
    "angular_distance",
    "cosine_from_hamming",
    "find_vector_duplicates",
    "hamming_distance",
    "hyperplane_collision",
    "normalize_vector",
    "pick_width",
    "pstable_collision",
    "vector_layout",
    "vector_scores",
    "weighted_bags",
    "weighted_jaccard",
]

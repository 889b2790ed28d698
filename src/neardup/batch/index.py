"""The index a batch run saves (``--save-index``) and a later run deduplicates
against (``--against``): :class:`DedupIndex`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.graph.cluster import Edge
from neardup.text.hashing import SchemeDescriptor, ShingleSets

__all__ = ["DedupIndex"]


# Fields a scheme descriptor shares with the config it came from.
_SCHEME_AND_CONFIG = (
    "max_shingles",
    "hash_algorithm",
    "seed",
    "signature",
    "num_perm",
    "bands",
    "rows",
    "format_version",
)


@dataclass(eq=False, slots=True)
class DedupIndex:
    """What a batch run leaves for the next one (``--save-index`` / ``--against``).

    Holds every document's shingle-hash set (not its text), its id, the cluster
    edges found so far and the config fingerprint.  A run against it treats the
    indexed documents as coming first, so its result equals one run over the union.
    """

    sets: ShingleSets
    ids: list[Any]
    edges: list[Edge]
    config_fingerprint: str
    # The options behind config_fingerprint (Config.result_fields), so that a run
    # with other options can be told which ones differ.  None in older indexes.
    config: dict[str, Any] | None = None

    def __len__(self) -> int:
        return len(self.sets)

    def save(self, path: str) -> None:
        from neardup.core.persist import write_container

        e = self.edges
        arrays = {
            "data": self.sets.data,
            "indptr": self.sets.indptr,
            "raw_counts": self.sets.raw_counts,
            "truncated": self.sets.truncated,
            "content_hash": self.sets.content_hash,
            "byte_lengths": self.sets.byte_lengths,
            "edge_a": np.array([x.a for x in e], dtype=np.int64),
            "edge_b": np.array([x.b for x in e], dtype=np.int64),
            "edge_band": np.array([-1 if x.band is None else x.band for x in e], dtype=np.int64),
            "edge_inter": np.array(
                [-1 if x.intersection is None else x.intersection for x in e], dtype=np.int64
            ),
            "edge_union": np.array([-1 if x.union is None else x.union for x in e], dtype=np.int64),
        }
        meta = {
            "scheme": self.sets.scheme.to_dict(),
            "ids": self.ids,
            "config_fingerprint": self.config_fingerprint,
            **({} if self.config is None else {"config": self.config}),
            "edge_method": [x.method for x in e],
            "edge_estimate": [x.estimate for x in e],
        }
        write_container(path, "dedup-index", meta, arrays)

    @classmethod
    def load(cls, path: str) -> DedupIndex:
        """Read an index saved by :meth:`save`; :class:`~neardup.CorruptFile` unless
        its checksum, structure and recorded options all hold together (the
        checksum alone does not stop a deliberate edit)."""
        from neardup.core._errors import CorruptFile
        from neardup.core.persist import read_container

        meta, a = read_container(path, "dedup-index")
        try:
            index = cls._from_parts(path, meta, a)
        except CorruptFile:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise CorruptFile(
                path, f"its content is not a consistent index ({type(exc).__name__}: {exc})"
            ) from exc
        return index

    @classmethod
    def _from_parts(
        cls, path: str, meta: dict[str, Any], a: dict[str, npt.NDArray[Any]]
    ) -> DedupIndex:
        from neardup.core._errors import CorruptFile
        from neardup.core._fingerprint import fingerprint

        scheme = SchemeDescriptor.from_dict(meta["scheme"])
        n = len(meta["ids"])
        indptr = a["indptr"]
        per_doc = ("raw_counts", "truncated", "content_hash", "byte_lengths")
        if (
            indptr.ndim != 1
            or indptr.shape[0] != n + 1
            or any(a[k].shape != (n,) for k in per_doc)
            or (n and (indptr[0] != 0 or np.any(np.diff(indptr) < 0)))
            or int(indptr[-1]) != a["data"].shape[0]
        ):
            raise CorruptFile(path, "array lengths disagree with the id list")
        n_edges = a["edge_a"].shape[0]
        edge_arrays = ("edge_a", "edge_b", "edge_band", "edge_inter", "edge_union")
        if (
            any(a[k].shape != (n_edges,) for k in edge_arrays)
            or len(meta["edge_method"]) != n_edges
            or len(meta["edge_estimate"]) != n_edges
            or np.any(
                (a["edge_a"] < 0) | (a["edge_a"] >= n) | (a["edge_b"] < 0) | (a["edge_b"] >= n)
            )
            or not set(meta["edge_method"]) <= {"identical", "exact", "estimate"}
        ):
            raise CorruptFile(path, "its edges do not fit its documents")
        config = meta.get("config")
        if config is not None and fingerprint(config) != meta["config_fingerprint"]:
            raise CorruptFile(path, "its recorded options do not match its config fingerprint")
        if config is not None:
            recorded = {**config, **config["shingle"]}  # max_shingles lives in the shingle
            sd = scheme.to_dict()
            if any(sd[k] != recorded[k] for k in _SCHEME_AND_CONFIG):
                raise CorruptFile(path, "its scheme disagrees with its recorded options")
        sets = ShingleSets(
            a["data"],
            indptr,
            a["raw_counts"],
            a["truncated"],
            a["content_hash"],
            a["byte_lengths"],
            scheme,
        )
        edges = []
        for i in range(a["edge_a"].shape[0]):
            inter, union = int(a["edge_inter"][i]), int(a["edge_union"][i])
            method = meta["edge_method"][i]
            edges.append(
                Edge(
                    a=int(a["edge_a"][i]),
                    b=int(a["edge_b"][i]),
                    score=1.0
                    if method == "identical"
                    else (inter / union if union > 0 else None),
                    estimate=meta["edge_estimate"][i],
                    band=None if a["edge_band"][i] < 0 else int(a["edge_band"][i]),
                    method=method,
                    intersection=inter if inter >= 0 else None,
                    union=union if union >= 0 else None,
                )
            )
        return cls(sets, list(meta["ids"]), edges, meta["config_fingerprint"], config)

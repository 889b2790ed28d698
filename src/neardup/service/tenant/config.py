"""A tenant's configuration, its id rule, and the prepared-content and candidate types."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from neardup.core._errors import InvalidConfig
from neardup.core._fingerprint import fingerprint
from neardup.core.config import Config, ShingleSpec
from neardup.service.decisions import Policy

#: A service's guard for a policy that is to be live under a configuration's layout
#: (``Service._recall_guard``): raises to refuse, returns warnings.
Guard = Callable[["TenantConfig", Policy], list[str]]

_TENANT_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}\Z")  # \Z: "$" allows a final "\n"
#: Snapshot format written: 2 seals the store with AES-256-SIV; 1 (read, never
#: written) sealed it with the first construction (AES-256-GCM, synthetic nonce).
SNAPSHOT_FORMAT = 2
SNAPSHOT_READS = (1, 2)


def valid_tenant_id(tenant: str) -> str:
    if not isinstance(tenant, str) or not _TENANT_RE.match(tenant):
        raise InvalidConfig(
            "tenant_id",
            tenant,
            "must be 1-63 of a-z, 0-9, '-', '_' (starting alphanumeric)",
            "rename the tenant, e.g. 'acme-prod'",
        )
    return tenant


@dataclass(frozen=True, kw_only=True, slots=True)
class TenantConfig:
    """A tenant's scheme and limits (frozen, keyword-only, validated, fingerprinted).

    ``threshold`` is the exact Jaccard at which the policy calls a pair a
    duplicate; ``retain`` is ``hashes`` (default: only sorted shingle-hash sets
    are kept) or ``text`` (the normalized text too: needed for span explanations
    and for rebuilds under a new shingle spec).  ``scheme_version`` is part of the
    key derivation: bump it to rotate the key (a new scheme, never mixed).
    """

    threshold: float = 0.8
    shingle: str = "word:5"
    normalizer: str = "nfkc-casefold"
    num_perm: int = 128
    bands: int | None = None
    rows: int | None = None
    retain: Literal["hashes", "text"] = "hashes"
    scheme_version: int = 1
    policy_version: int = 1
    max_items: int = 10_000_000
    max_shingles: int = 100_000
    max_candidates: int = 100
    max_bucket_size: int = 1_000
    rate_per_s: float = 5_000.0
    burst: int = 10_000

    def __post_init__(self) -> None:
        if self.retain not in ("hashes", "text"):
            raise InvalidConfig("retain", self.retain, "unknown retention", "use hashes or text")
        for name, lo, hi in (
            ("scheme_version", 1, 1 << 30),
            ("policy_version", 1, 1 << 30),
            ("max_items", 1, 1 << 40),
            ("max_candidates", 1, 10_000),
            ("max_bucket_size", 2, 1 << 30),
            ("burst", 1, 1 << 30),
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise InvalidConfig(name, v, f"must be an integer in [{lo}, {hi}]", "fix the value")
        r = self.rate_per_s
        if isinstance(r, bool) or not isinstance(r, int | float) or not 0 < r <= 1e7:
            raise InvalidConfig("rate_per_s", r, "must be in (0, 1e7]", "use e.g. 5000")
        self.dedup_config()  # validates threshold, shingle spec, layout

    def dedup_config(self) -> Config:
        return Config(
            threshold=self.threshold,
            normalizer=self.normalizer,
            shingle=ShingleSpec.parse(self.shingle, max_shingles=self.max_shingles),
            hash_algorithm="siphash24",
            num_perm=self.num_perm,
            bands=self.bands,
            rows=self.rows,
            max_bucket_size=self.max_bucket_size,
            max_candidates=self.max_candidates,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def initial_policy(self) -> Policy:
        """The policy a tenant of this configuration starts with."""
        return Policy(
            version=self.policy_version,
            threshold=self.threshold,
            max_candidates=self.max_candidates,
        )

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TenantConfig:
        if not isinstance(d, dict):
            raise InvalidConfig(
                "config", d, "must be a JSON object", 'send e.g. {"threshold": 0.8}'
            )
        known = set(cls.__dataclass_fields__)
        extra = sorted(set(d) - known)
        if extra:
            raise InvalidConfig(
                "config", extra[0], "unknown field", f"use only {', '.join(sorted(known))}"
            )
        try:
            return cls(**d)
        except TypeError as exc:
            raise InvalidConfig("config", d, str(exc), "check the field types") from exc

    @property
    def scheme_fields(self) -> dict[str, Any]:
        """The fields that change signatures or features (a change needs a new scheme)."""
        d = self.to_dict()
        return {
            k: d[k]
            for k in (
                "shingle",
                "normalizer",
                "num_perm",
                "bands",
                "rows",
                "scheme_version",
                "max_shingles",
            )
        }

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.to_dict())


@dataclass(frozen=True, slots=True)
class Prepared:
    """An item's canonical features, ready to query or store."""

    features: npt.NDArray[np.uint64]
    content_hash: int
    bandkeys: npt.NDArray[np.uint32]
    normalized: str


@dataclass(frozen=True, slots=True)
class Candidate:
    """A stored item that shares a band (or the exact content) with the query,
    with its exact Jaccard score."""

    item_id: str
    score: float
    shared: int
    union: int
    bands: int
    first_band: int | None
    method: str
    pos: int = -1

    def to_dict(self) -> dict[str, Any]:
        return {
            "item_id": self.item_id,
            "score": self.score,
            "shared": self.shared,
            "union": self.union,
            "bands": self.bands,
            "first_band": self.first_band,
            "method": self.method,
        }

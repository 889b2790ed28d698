"""A tenant's configuration, its id rule, and the prepared-content and candidate types."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from neardup.core._errors import InvalidConfig
from neardup.core._fingerprint import fingerprint
from neardup.core.config import LEGACY_TOKENIZER, Config, ShingleSpec
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


SERVICE_SCHEME = Config(
    hash_algorithm="siphash24",
    shingle=ShingleSpec(max_shingles=100_000),
    max_candidates=100,
    max_bucket_size=1_000,
)
"""The scheme a tenant gets for every setting its configuration leaves out.

Tenants hash with keyed SipHash (their input is untrusted) and have smaller
per-item budgets than a batch run: 100,000 shingles per item, 100 candidates per
item and band, buckets of 1,000.  Only the fields of :data:`FLAT_FIELDS` can
differ between tenants; the others (seed, signature, recall target, verify mode,
document size limit) are always this preset's."""

FLAT_FIELDS = (
    *("threshold", "shingle", "tokenizer", "normalizer", "num_perm", "bands", "rows"),
    "retain",
    *("scheme_version", "policy_version", "max_items", "max_shingles", "max_candidates"),
    *("max_bucket_size", "rate_per_s", "burst"),
)
"""The keys of a tenant configuration's JSON form, in the order it is written
(``tokenizer`` only for word shingles)."""

# The flat keys that are the scheme's fields of the same name, and the tenant's own.
_SCHEME_KEYS = (
    *("threshold", "normalizer", "num_perm", "bands", "rows", "max_candidates"),
    "max_bucket_size",
)
_OWN_KEYS = ("retain", "scheme_version", "policy_version", "max_items", "rate_per_s", "burst")
# Settings of the scheme that a tenant's JSON form does not carry.
_FIXED = ("hash_algorithm", "seed", "signature", "recall_target", "verify", "max_document_bytes")


@dataclass(frozen=True, kw_only=True, slots=True)
class TenantConfig:
    """A tenant's scheme and limits (frozen, keyword-only, validated, fingerprinted).

    ``scheme`` is the :class:`~neardup.core.config.Config` that shingles, signs,
    bands and verifies the tenant's items: :data:`SERVICE_SCHEME` with the
    tenant's threshold, shingle spec and cap, normalizer, layout and candidate and
    bucket budgets.  ``retain`` is ``hashes`` (default: only sorted shingle-hash
    sets are kept) or ``text`` (the normalized text too: needed for span
    explanations and for rebuilds under a new shingle spec).  ``scheme_version`` is
    part of the key derivation: bump it to rotate the key (a new scheme, never
    mixed).  The policy's threshold starts at ``scheme.threshold``.

    The JSON form (:meth:`to_dict` / :meth:`from_dict`: HTTP bodies, the tenant's
    ``meta.json``, snapshots, the migration log) is flat, one key per name of
    :data:`FLAT_FIELDS`, and round-trips exactly; :attr:`fingerprint` is taken over
    it.  ``shingle_text`` keeps a ``shingle`` spelled other than ``kind:k`` (e.g.
    ``word:05``) as it was given, so that such a form and its fingerprint survive a
    round trip too; it is None otherwise.

    ``tokenizer`` (word shingles only) is the word tokenizer,
    ``scheme.shingle.tokenizer``: a request that leaves it out gets the current
    default, a *record* that leaves it out (``tenant.json`` written before
    tokenizers had versions, see :meth:`from_dict`) the legacy one, so that an old
    tenant keeps answering as before until it is migrated.
    """

    scheme: Config = SERVICE_SCHEME
    retain: Literal["hashes", "text"] = "hashes"
    scheme_version: int = 1
    policy_version: int = 1
    max_items: int = 10_000_000
    rate_per_s: float = 5_000.0
    burst: int = 10_000
    shingle_text: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.scheme, Config):
            raise InvalidConfig(
                "scheme", self.scheme, "must be a Config", "start from SERVICE_SCHEME"
            )
        fixed = [n for n in _FIXED if getattr(self.scheme, n) != getattr(SERVICE_SCHEME, n)]
        if fixed:
            raise InvalidConfig(
                f"scheme.{fixed[0]}",
                getattr(self.scheme, fixed[0]),
                "is fixed for tenants",
                f"use {getattr(SERVICE_SCHEME, fixed[0])!r} (SERVICE_SCHEME's)",
            )
        if self.shingle_text is not None:
            spec = ShingleSpec.parse(self.shingle_text)
            if (spec.kind, spec.k) != (self.scheme.shingle.kind, self.scheme.shingle.k):
                raise InvalidConfig(
                    "shingle_text",
                    self.shingle_text,
                    f"does not spell scheme.shingle={self.scheme.shingle}",
                    "leave it None",
                )
        _check_limits(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        """The flat JSON form (keys in :data:`FLAT_FIELDS` order)."""
        s = self.scheme
        values = {
            "shingle": self.shingle_text or str(s.shingle),
            "tokenizer": s.shingle.tokenizer,
            "max_shingles": s.shingle.max_shingles,
            **{k: getattr(s, k) for k in _SCHEME_KEYS},
            **{k: getattr(self, k) for k in _OWN_KEYS},
        }
        return {
            k: values[k]
            for k in FLAT_FIELDS
            if k != "tokenizer" or s.shingle.kind == "word"
        }

    def with_tokenizer(self, tokenizer: int) -> TenantConfig:
        """This configuration with another word tokenizer (itself for char and byte
        shingles)."""
        shingle = dataclasses.replace(self.scheme.shingle, tokenizer=tokenizer)
        return dataclasses.replace(self, scheme=dataclasses.replace(self.scheme, shingle=shingle))

    def initial_policy(self) -> Policy:
        """The policy a tenant of this configuration starts with."""
        return Policy(
            version=self.policy_version,
            threshold=self.scheme.threshold,
            max_candidates=self.scheme.max_candidates,
        )

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, recorded: bool = False) -> TenantConfig:
        """Read the flat JSON form; a key left out takes its :data:`SERVICE_SCHEME` /
        default value, but ``tokenizer`` in a ``recorded`` form (one this service
        wrote, which names every key) takes the legacy tokenizer: such a form was
        written before tokenizers had versions.  The limits are checked before the
        scheme (the first error found is the one raised)."""
        if not isinstance(d, dict):
            raise InvalidConfig(
                "config", d, "must be a JSON object", 'send e.g. {"threshold": 0.8}'
            )
        extra = sorted(set(d) - set(FLAT_FIELDS))
        if extra:
            raise InvalidConfig(
                "config", extra[0], "unknown field", f"use only {', '.join(sorted(FLAT_FIELDS))}"
            )
        v = {**_DEFAULT_FORM, **d}
        if recorded and "tokenizer" not in d:
            v["tokenizer"] = LEGACY_TOKENIZER
        try:
            _check_limits(v)
            shingle = ShingleSpec.parse(
                v["shingle"], max_shingles=v["max_shingles"], tokenizer=v["tokenizer"]
            )
            scheme = dataclasses.replace(
                SERVICE_SCHEME, shingle=shingle, **{k: v[k] for k in _SCHEME_KEYS}
            )
            return cls(
                scheme=scheme,
                shingle_text=None if v["shingle"] == str(shingle) else v["shingle"],
                **{k: v[k] for k in _OWN_KEYS},
            )
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
                "tokenizer",
                "normalizer",
                "num_perm",
                "bands",
                "rows",
                "scheme_version",
                "max_shingles",
            )
            if k in d
        }

    @property
    def fingerprint(self) -> str:
        """Fingerprint of :meth:`to_dict`, without a legacy ``tokenizer``: a tenant of
        tokenizer 1 keeps the fingerprint its ``tenant.json`` recorded before
        tokenizers had versions."""
        d = self.to_dict()
        if d.get("tokenizer") == LEGACY_TOKENIZER:
            del d["tokenizer"]
        return fingerprint(d)


def _check_limits(v: dict[str, Any]) -> None:
    """The tenant's own bounds, on the flat form (the scheme checks the rest)."""
    if v["retain"] not in ("hashes", "text"):
        raise InvalidConfig("retain", v["retain"], "unknown retention", "use hashes or text")
    for name, lo, hi in (
        ("scheme_version", 1, 1 << 30),
        ("policy_version", 1, 1 << 30),
        ("max_items", 1, 1 << 40),
        ("max_candidates", 1, 10_000),
        ("max_bucket_size", 2, 1 << 30),
        ("burst", 1, 1 << 30),
    ):
        x = v[name]
        if isinstance(x, bool) or not isinstance(x, int) or not lo <= x <= hi:
            raise InvalidConfig(name, x, f"must be an integer in [{lo}, {hi}]", "fix the value")
    r = v["rate_per_s"]
    if isinstance(r, bool) or not isinstance(r, int | float) or not 0 < r <= 1e7:
        raise InvalidConfig("rate_per_s", r, "must be in (0, 1e7]", "use e.g. 5000")


_DEFAULT_FORM = TenantConfig().to_dict()


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

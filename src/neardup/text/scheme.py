"""What a set of hashes was computed under: the per-tenant SipHash key
(:class:`HashKey`) and the scheme descriptor (:class:`SchemeDescriptor`) that
signature sets, indexes and snapshots record and compare.

The key bytes never leave this module's objects: descriptors keep only the key's
id and a one-way fingerprint, and ``repr`` hides them.

Example:
    >>> from neardup import Config
    >>> key = HashKey.derive(b"m" * 32, "acme")
    >>> key.key_id
    'acme/v1'
    >>> d = SchemeDescriptor.from_config(Config(hash_algorithm="siphash24"), key)
    >>> d.seed is None, d.key_id
    (True, 'acme/v1')
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, fields

from neardup.core._errors import InvalidConfig, SchemeMismatch
from neardup.core._fingerprint import FORMAT_VERSION, fingerprint
from neardup.core.checks import check_type
from neardup.core.config import LEGACY_TOKENIZER, Config
from neardup.text.normalize import get_normalizer

__all__ = ["HashKey", "SchemeDescriptor", "check_key"]


@dataclass(frozen=True, slots=True)
class HashKey:
    """A 128-bit SipHash key with a public id; ``repr`` never shows the key bytes."""

    key_id: str
    key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.key, bytes) or len(self.key) != 16:
            raise InvalidConfig(
                "key", "<hidden>", "must be exactly 16 bytes", "use HashKey.derive(master, tenant)"
            )
        if not self.key_id:
            raise InvalidConfig("key_id", self.key_id, "must not be empty", "name the key")

    @classmethod
    def derive(cls, master_secret: bytes, tenant: str, *, scheme_version: int = 1) -> HashKey:
        """Derive the key of ``tenant`` for ``scheme_version`` from a master secret.

        Keyed BLAKE2b is the KDF, so tenants' keys are independent and none reveals
        the master secret.  ``key_id`` is ``"<tenant>/v<scheme_version>"``.
        """
        if not isinstance(master_secret, bytes) or len(master_secret) < 16:
            raise InvalidConfig(
                "master_secret",
                "<hidden>",
                "must be at least 16 random bytes",
                "generate one with secrets.token_bytes(32) and keep it outside the data directory",
            )
        h = hashlib.blake2b(
            f"{tenant}\x00{scheme_version}".encode(),
            key=master_secret[:64],
            digest_size=16,
            person=b"neardup-shkey-v1",
        )
        return cls(f"{tenant}/v{scheme_version}", h.digest())

    @property
    def fingerprint(self) -> str:
        """A one-way 16-hex-digit fingerprint of the key, safe to store and log."""
        return hashlib.blake2b(self.key, digest_size=8, person=b"neardup-keyfp").hexdigest()

    def halves(self) -> tuple[int, int]:
        return int.from_bytes(self.key[:8], "little"), int.from_bytes(self.key[8:], "little")

    def derived_seed(self, purpose: bytes) -> int:
        """A 64-bit seed that is a pure function of the key and ``purpose``."""
        d = hashlib.blake2b(purpose, key=self.key, digest_size=8, person=b"neardup-seed")
        return int.from_bytes(d.digest(), "little")


@dataclass(frozen=True, kw_only=True, slots=True)
class SchemeDescriptor:
    """What a signature, shingle set or index was computed under.

    Two objects may be compared or merged only if their descriptors are equal
    (:meth:`require_same`).  The key itself is never recorded: only its id and a
    one-way fingerprint.  ``tokenizer`` is the word tokenizer of word shingles
    (:data:`~neardup.core.config.LEGACY_TOKENIZER` for char and byte shingles and
    in records that name none, which older releases wrote).
    """

    normalizer: str
    shingle: str
    max_shingles: int
    hash_algorithm: str
    seed: int | None
    key_id: str | None
    key_fingerprint: str | None
    signature: str
    permutation_family: str
    num_perm: int
    bands: int
    rows: int
    format_version: int = FORMAT_VERSION
    tokenizer: int = LEGACY_TOKENIZER

    @classmethod
    def from_config(cls, config: Config, key: HashKey | None = None) -> SchemeDescriptor:
        check_key(config, key)
        bands, rows = config.layout
        family = (
            "multiply-add-shift-64>>32/splitmix64"
            if config.signature == "minhash"
            else "oph-fmix64-fastrange/optimal-densification"
        )
        return cls(
            normalizer=get_normalizer(config.normalizer).fingerprint,
            shingle=str(config.shingle),
            max_shingles=config.shingle.max_shingles,
            hash_algorithm=config.hash_algorithm,
            seed=None if key is not None else config.seed,
            key_id=key.key_id if key is not None else None,
            key_fingerprint=key.fingerprint if key is not None else None,
            signature=config.signature,
            permutation_family=family,
            num_perm=config.num_perm,
            bands=bands,
            rows=rows,
            tokenizer=config.shingle.recorded().get("tokenizer", LEGACY_TOKENIZER),
        )

    def to_dict(self) -> dict[str, object]:
        """Every field by name, in declaration order (what :meth:`from_dict` reads),
        but ``tokenizer`` only when it is not the legacy one: descriptors of char,
        byte and tokenizer-1 shingles are the ones older releases wrote."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        if d["tokenizer"] == LEGACY_TOKENIZER:
            del d["tokenizer"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> SchemeDescriptor:
        try:
            return cls(**d)  # type: ignore[arg-type]
        except TypeError as exc:
            raise InvalidConfig(
                "scheme", d, f"not a scheme descriptor ({exc})", "rebuild it"
            ) from exc

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.to_dict())

    @property
    def set_fingerprint(self) -> str:
        """Fingerprint of the part that determines shingle-hash sets."""
        d = self.to_dict()
        keep = (
            "normalizer",
            "shingle",
            "max_shingles",
            "hash_algorithm",
            "seed",
            "key_id",
            "key_fingerprint",
            "format_version",
            "tokenizer",
        )
        return fingerprint({k: d[k] for k in keep if k in d})

    def require_same(self, other: SchemeDescriptor, what: str = "signatures") -> None:
        if self != other:
            mine, theirs = self.to_dict(), other.to_dict()
            differ = "; ".join(
                f"{k}: {mine.get(k, LEGACY_TOKENIZER)!r} vs {theirs.get(k, LEGACY_TOKENIZER)!r}"
                if k == "tokenizer"
                else f"{k}: {mine.get(k)!r} vs {theirs.get(k)!r}"
                for k in {**mine, **theirs}
                if mine.get(k) != theirs.get(k)
            )
            raise SchemeMismatch(self.fingerprint, other.fingerprint, what, differ)

    def require_same_sets(self, other: SchemeDescriptor) -> None:
        # Equal descriptors have equal set fingerprints; skip hashing on the hot path.
        if self is other or self == other:
            return
        if self.set_fingerprint != other.set_fingerprint:
            raise SchemeMismatch(self.set_fingerprint, other.set_fingerprint, "shingle sets")


def check_key(config: Config, key: HashKey | None) -> None:
    """Refuse a key the hash algorithm of ``config`` cannot use, or a missing one
    (and a ``config`` that is no :class:`~neardup.Config`, a ``key`` no :class:`HashKey`)."""
    check_type("config", config, Config, "pass a Config, e.g. Config(threshold=0.8)")
    if key is not None:
        check_type("key", key, HashKey, "pass key=HashKey.derive(master_secret, tenant)")
    if config.hash_algorithm == "siphash24" and key is None:
        raise InvalidConfig(
            "key",
            None,
            "hash_algorithm='siphash24' is keyed and needs a HashKey",
            "pass key=HashKey.derive(master_secret, tenant)",
        )
    if config.hash_algorithm == "xxh64" and key is not None:
        raise InvalidConfig(
            "hash_algorithm",
            "xxh64",
            "a key was given but xxh64 is not a keyed PRF",
            "use Config(hash_algorithm='siphash24') with a key",
        )

"""Per-tenant keys and authenticated encryption for data at rest.

Every key is derived from one master secret that lives outside the data
directory: keyed BLAKE2b over ``(purpose, tenant, scheme version)`` is the KDF, so
keys of different tenants or purposes are independent and none reveals the master.

:class:`Sealer` is AES-256-GCM (the ``cryptography`` package) with a *synthetic*
nonce: the nonce is a keyed hash of the associated data and the plaintext.  Sealing
is therefore deterministic (same plaintext, same bytes — needed for byte-identical
replays) and never reuses a nonce for two different plaintexts (the nonce is 96
bits of a PRF of the plaintext; a collision needs ~2**48 sealed records per key).
Equal plaintexts give equal ciphertexts, which reveals only equality.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field

from neardup.core._errors import CorruptFile, InvalidConfig

__all__ = ["MasterSecret", "Sealer"]

_NONCE = 12


@dataclass(frozen=True, slots=True)
class MasterSecret:
    """The service's root secret (>= 32 bytes); ``repr`` never shows it."""

    secret: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.secret, bytes) or len(self.secret) < 32:
            raise InvalidConfig(
                "master_secret",
                "<hidden>",
                "must be at least 32 random bytes",
                "start `neardup serve --data-dir DIR` once (it creates one), or use "
                "secrets.token_bytes(32), and keep it outside the data directory",
            )

    def derive(self, purpose: str, tenant: str, *, version: int = 1, size: int = 32) -> bytes:
        """A ``size``-byte key for ``purpose`` of ``tenant`` (pure function of the inputs)."""
        h = hashlib.blake2b(
            f"{purpose}\x00{tenant}\x00{version}".encode(),
            key=self.secret[:64],
            digest_size=size,
            person=b"neardup-kdf-v1",
        )
        return h.digest()

    @property
    def fingerprint(self) -> str:
        """A one-way id of the secret, safe to record (detects a swapped secret)."""
        return hashlib.blake2b(self.secret, digest_size=8, person=b"neardup-mfp").hexdigest()


class Sealer:
    """Deterministic authenticated encryption (AES-256-GCM, synthetic nonce)."""

    __slots__ = ("_aead", "_mac_key")

    def __init__(self, key: bytes) -> None:
        try:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        except ImportError as exc:  # pragma: no cover - exercised without the extra
            raise InvalidConfig(
                "encryption",
                "aes-256-gcm",
                "the `cryptography` package is not installed",
                "pip install 'neardup[service]'",
            ) from exc
        if len(key) != 32:
            raise InvalidConfig(
                "key", "<hidden>", "must be 32 bytes", "derive it with MasterSecret"
            )
        enc = hashlib.blake2b(b"enc", key=key, digest_size=32).digest()
        self._mac_key = hashlib.blake2b(b"nonce", key=key, digest_size=32).digest()
        self._aead = AESGCM(enc)

    def seal(self, plaintext: bytes, aad: bytes = b"") -> bytes:
        """``nonce || ciphertext || tag``; ``aad`` is authenticated, not stored."""
        nonce = hmac.new(self._mac_key, aad + b"\x00" + plaintext, "sha256").digest()[:_NONCE]
        return nonce + self._aead.encrypt(nonce, plaintext, aad)

    def open(self, blob: bytes, aad: bytes = b"", *, what: str = "record") -> bytes:
        """Decrypt and authenticate, or raise :class:`CorruptFile` naming ``what``."""
        from cryptography.exceptions import InvalidTag

        if len(blob) < _NONCE + 16:
            raise CorruptFile(what, f"sealed blob of {len(blob)} bytes is too short")
        try:
            return bytes(self._aead.decrypt(blob[:_NONCE], blob[_NONCE:], aad))
        except InvalidTag:
            raise CorruptFile(
                what, "authentication failed (tampered, truncated, or sealed under another key)"
            ) from None

"""Per-tenant keys and authenticated encryption for data at rest.

Every key is derived from one master secret that lives outside the data
directory, so keys of different tenants or purposes are independent and none
reveals the master.

**Sealing** (:class:`Sealer`) is AES-256-SIV (RFC 5297, ``cryptography``'s
``AESSIV``) under a 512-bit key derived with HKDF-SHA256
(:meth:`MasterSecret.sealing_key`: a fixed salt, and ``info`` holding the purpose,
tenant and scheme version, each length-prefixed).  SIV is deterministic by
design: the same plaintext under the same associated data gives the same bytes,
which the feature store needs for lookups by sealed id and which makes a replay
of the command log write byte-identical rows; equal plaintexts reveal only their
equality, and two different plaintexts never share an IV.  A sealed value is
``IV (16 bytes) || AES-CTR(b"\\x01" || plaintext)``: the one-byte framing keeps
the plaintext non-empty (``cryptography`` before 45, and OpenSSL before 3.5,
refuse an empty AES-SIV plaintext) and is checked on opening.

**The first construction** (:class:`LegacySealer`, opening only) was AES-256-GCM
with a *synthetic* nonce (an HMAC of the associated data and the plaintext) under
keys from keyed BLAKE2b (:meth:`MasterSecret.derive`).  Data it sealed is still
read: every container says which construction sealed it (the store's ``meta``
format, the command log's header version, the snapshot manifest's format
version), and the store and the command log are rewritten with :class:`Sealer`
the first time they are opened.

:meth:`MasterSecret.derive` stays what it was for the keys that are not sealing
keys (a tenant's shingle-hash key, the snapshot manifest's HMAC key): changing it
would change the shingle hashes of every existing tenant.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from neardup.core._errors import CorruptFile, InvalidConfig

__all__ = ["LEGACY_SEALING", "SEALING", "LegacySealer", "MasterSecret", "Opener", "Sealer"]

#: The construction new data is sealed with (named in errors and documents).
SEALING = "AES-256-SIV"
#: The first construction, read for upgrades only.
LEGACY_SEALING = "AES-256-GCM with a synthetic nonce"

_SIV_KEY = 64
_IV = 16
_FRAME = b"\x01"
_GCM_NONCE = 12
_GCM_TAG = 16
# HKDF's salt, fixed for this construction (a new construction takes a new salt).
_HKDF_SALT = b"neardup/seal/aes-256-siv/v1"


@functools.cache
def _aead() -> tuple[Any, type[Exception]]:
    """``cryptography``'s AEAD module and its ``InvalidTag`` (imported once: an
    import inside ``open`` would cost a third of it), or :class:`InvalidConfig`
    saying how to get them."""
    try:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers import aead
    except ImportError as exc:  # pragma: no cover - exercised without the extra
        raise InvalidConfig(
            "encryption",
            SEALING,
            "the `cryptography` package is not installed",
            "pip install 'neardup[service]'",
        ) from exc
    return aead, InvalidTag


def _field(value: str | bytes) -> bytes:
    raw = value.encode("utf-8") if isinstance(value, str) else value
    return len(raw).to_bytes(4, "big") + raw


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
        """A ``size``-byte key for ``purpose`` of ``tenant`` (keyed BLAKE2b; a pure
        function of the inputs).  The keys that are not sealing keys (shingle hashes,
        the snapshot manifest's HMAC) and the first construction's sealing keys."""
        h = hashlib.blake2b(
            f"{purpose}\x00{tenant}\x00{version}".encode(),
            key=self.secret[:64],
            digest_size=size,
            person=b"neardup-kdf-v1",
        )
        return h.digest()

    def sealing_key(self, purpose: str, tenant: str, *, version: int = 1) -> bytes:
        """The 64-byte AES-256-SIV key of ``purpose`` for ``tenant`` (HKDF-SHA256 over
        the whole secret; ``info`` holds a label, the purpose, the tenant and the
        scheme version, each prefixed by its length, so no two inputs share one)."""
        _aead()  # InvalidConfig, saying how to install it, without `cryptography`
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF

        info = b"".join(
            _field(p) for p in (b"neardup-seal", purpose, tenant, str(int(version)))
        )
        kdf = HKDF(algorithm=hashes.SHA256(), length=_SIV_KEY, salt=_HKDF_SALT, info=info)
        return kdf.derive(self.secret)

    def sealer(self, purpose: str, tenant: str, *, version: int = 1) -> Sealer:
        """The :class:`Sealer` of ``purpose`` for ``tenant``."""
        return Sealer(self.sealing_key(purpose, tenant, version=version))

    def legacy_sealer(self, purpose: str, tenant: str, *, version: int = 1) -> LegacySealer:
        """The :class:`LegacySealer` that opens what the first construction sealed."""
        return LegacySealer(self.derive(purpose, tenant, version=version))

    @property
    def fingerprint(self) -> str:
        """A one-way id of the secret, safe to record (detects a swapped secret)."""
        return hashlib.blake2b(self.secret, digest_size=8, person=b"neardup-mfp").hexdigest()


def _refused(what: str, construction: str, blob: bytes) -> CorruptFile:
    return CorruptFile(
        what,
        f"authentication failed for a {len(blob)}-byte value sealed with {construction} "
        "(tampered, truncated, moved from another row, table or tenant, or sealed under "
        "another key)",
        "if the master key file was replaced, put the original back; otherwise restore "
        "this file from a backup or rebuild it",
    )


class Sealer:
    """Deterministic authenticated encryption: AES-256-SIV (RFC 5297).

    Example:
        >>> s = Sealer(bytes(64))
        >>> blob = s.seal(b"doc/1", b"acme")
        >>> blob == s.seal(b"doc/1", b"acme"), s.open(blob, b"acme")
        (True, b'doc/1')
    """

    __slots__ = ("_invalid", "_siv")

    def __init__(self, key: bytes) -> None:
        aead, self._invalid = _aead()
        if not isinstance(key, bytes) or len(key) != _SIV_KEY:
            raise InvalidConfig(
                "key",
                f"<hidden, {len(key) if isinstance(key, bytes) else type(key).__name__}>",
                f"an {SEALING} key must be {_SIV_KEY} bytes",
                "derive it with MasterSecret.sealing_key (or MasterSecret.sealer)",
            )
        self._siv = aead.AESSIV(key)

    def seal(self, plaintext: bytes, aad: bytes = b"") -> bytes:
        """``IV || ciphertext`` of ``plaintext``; ``aad`` is authenticated, not stored."""
        return self._siv.encrypt(_FRAME + plaintext, [aad])  # type: ignore[no-any-return]

    def open(self, blob: bytes, aad: bytes = b"", *, what: str = "record") -> bytes:
        """Decrypt and authenticate, or raise :class:`CorruptFile` naming ``what``."""
        if len(blob) < _IV + len(_FRAME):
            raise CorruptFile(
                what,
                f"a value sealed with {SEALING} is {len(blob)} bytes, shorter than the "
                f"{_IV + len(_FRAME)} every such value has (truncated)",
            )
        try:
            raw = self._siv.decrypt(blob, [aad])
        except self._invalid:
            raise _refused(what, SEALING, blob) from None
        if raw[:1] != _FRAME:
            raise CorruptFile(
                what,
                f"an authentic value sealed with {SEALING} starts with byte "
                f"{raw[:1].hex() or 'none'}, expected {_FRAME.hex()} (written by a newer "
                "version of neardup?)",
                "open it with the version of neardup that wrote it",
            )
        return raw[1:]  # type: ignore[no-any-return]


class LegacySealer:
    """Opens what the first construction sealed: AES-256-GCM, ``nonce || ciphertext
    || tag`` with a synthetic nonce, under a 32-byte key from :meth:`MasterSecret.derive`.

    It cannot seal: data is only ever written with :class:`Sealer`; this class is
    kept to read (and upgrade) stores, logs and snapshots written before.
    """

    __slots__ = ("_aead", "_invalid")

    def __init__(self, key: bytes) -> None:
        aead, self._invalid = _aead()
        if not isinstance(key, bytes) or len(key) != 32:
            raise InvalidConfig(
                "key",
                f"<hidden, {len(key) if isinstance(key, bytes) else type(key).__name__}>",
                "a key of the first sealing construction must be 32 bytes",
                "derive it with MasterSecret.derive (or MasterSecret.legacy_sealer)",
            )
        self._aead = aead.AESGCM(hashlib.blake2b(b"enc", key=key, digest_size=32).digest())

    def open(self, blob: bytes, aad: bytes = b"", *, what: str = "record") -> bytes:
        """Decrypt and authenticate, or raise :class:`CorruptFile` naming ``what``."""
        if len(blob) < _GCM_NONCE + _GCM_TAG:
            raise CorruptFile(
                what,
                f"a value sealed with {LEGACY_SEALING} is {len(blob)} bytes, shorter than "
                f"the {_GCM_NONCE + _GCM_TAG} every such value has (truncated)",
            )
        try:
            return bytes(self._aead.decrypt(blob[:_GCM_NONCE], blob[_GCM_NONCE:], aad))
        except self._invalid:
            raise _refused(what, LEGACY_SEALING, blob) from None


#: What opens sealed values: the current sealer, or the first construction's.
Opener: TypeAlias = Sealer | LegacySealer

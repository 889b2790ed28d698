"""Keys and sealing: AES-256-SIV under HKDF-SHA256 keys; the first construction
(AES-256-GCM with a synthetic nonce, BLAKE2b keys) still opened."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, AESSIV
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import CorruptFile, InvalidConfig
from neardup.service._crypto import LegacySealer, MasterSecret, Sealer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MASTER = MasterSecret(b"m" * 32)
KEY = bytes(range(64))


def _old_seal(key: bytes, plaintext: bytes, aad: bytes) -> bytes:
    """The first construction's sealing, as it was written (kept here only: the
    package no longer seals with it)."""
    enc = hashlib.blake2b(b"enc", key=key, digest_size=32).digest()
    mac = hashlib.blake2b(b"nonce", key=key, digest_size=32).digest()
    nonce = hmac.new(mac, aad + b"\x00" + plaintext, "sha256").digest()[:12]
    return nonce + AESGCM(enc).encrypt(nonce, plaintext, aad)


def _hkdf_sha256(ikm: bytes, salt: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869 with the standard library, to pin what the KDF is."""
    prk = hmac.new(salt, ikm, "sha256").digest()
    out, block = b"", b""
    for i in range(1, -(-length // 32) + 1):
        block = hmac.new(prk, block + info + bytes([i]), "sha256").digest()
        out += block
    return out[:length]


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=2000), st.binary(max_size=100))
def test_round_trip_of_any_value_and_associated_data(plaintext: bytes, aad: bytes) -> None:
    s = Sealer(KEY)
    blob = s.seal(plaintext, aad)
    assert len(blob) == len(plaintext) + 17  # IV and the framing byte
    assert s.open(blob, aad) == plaintext


def test_sealing_is_aes_siv_over_a_framed_plaintext() -> None:
    blob = Sealer(KEY).seal(b"doc/1", b"acme")
    assert blob == AESSIV(KEY).encrypt(b"\x01doc/1", [b"acme"])
    assert Sealer(KEY).seal(b"", b"acme") == AESSIV(KEY).encrypt(b"\x01", [b"acme"])


def test_sealing_is_deterministic_and_reveals_only_equality() -> None:
    s = Sealer(KEY)
    a = s.seal(b"doc/1", b"acme\x00id")
    assert a == s.seal(b"doc/1", b"acme\x00id") == Sealer(KEY).seal(b"doc/1", b"acme\x00id")
    assert a != s.seal(b"doc/2", b"acme\x00id")
    assert a != s.seal(b"doc/1", b"acme\x00idem")
    assert a != Sealer(bytes(64)).seal(b"doc/1", b"acme\x00id")
    assert b"doc/1" not in a


def test_wrong_associated_data_or_key_is_refused_naming_what() -> None:
    blob = Sealer(KEY).seal(b"features", b"acme\x001\x00features")
    with pytest.raises(CorruptFile, match="authentication failed") as err:
        Sealer(KEY).open(blob, b"acme\x002\x00features", what="store.sqlite item 2")
    assert err.value.path == "store.sqlite item 2"
    assert f"{len(blob)}-byte value sealed with AES-256-SIV" in err.value.reason
    assert "master key file" in err.value.fix
    with pytest.raises(CorruptFile, match="authentication failed"):
        Sealer(bytes(64)).open(blob, b"acme\x001\x00features")
    # Another tenant's key for the same purpose opens nothing of this tenant.
    t1, t2 = MASTER.sealer("features", "t1"), MASTER.sealer("features", "t2")
    with pytest.raises(CorruptFile, match="authentication failed"):
        t2.open(t1.seal(b"x", b"ad"), b"ad")


def test_tampered_or_truncated_values_are_refused() -> None:
    s = Sealer(KEY)
    blob = s.seal(b"retained text of doc/1", b"ad")
    for i in range(len(blob)):
        bad = bytearray(blob)
        bad[i] ^= 0x01
        with pytest.raises(CorruptFile, match="authentication failed"):
            s.open(bytes(bad), b"ad")
    with pytest.raises(CorruptFile, match="authentication failed"):
        s.open(blob[:-1], b"ad")
    with pytest.raises(CorruptFile, match="is 16 bytes, shorter than the 17"):
        s.open(blob[:16], b"ad")


def test_an_authentic_value_of_another_framing_is_refused() -> None:
    blob = AESSIV(KEY).encrypt(b"\x02later layout", [b"ad"])
    with pytest.raises(CorruptFile, match="starts with byte 02, expected 01") as err:
        Sealer(KEY).open(blob, b"ad", what="log")
    assert "version of neardup that wrote it" in err.value.fix


def test_keys_of_the_wrong_size_are_refused_without_showing_them() -> None:
    with pytest.raises(InvalidConfig, match="must be 64 bytes") as err:
        Sealer(bytes(32))
    assert err.value.value == "<hidden, 32>" and "MasterSecret.sealing_key" in err.value.fix
    with pytest.raises(InvalidConfig, match="must be 32 bytes"):
        LegacySealer(bytes(64))
    with pytest.raises(InvalidConfig, match="at least 32 random bytes"):
        MasterSecret(b"short")


def test_sealing_keys_are_hkdf_sha256_with_a_fixed_salt_and_length_prefixed_info() -> None:
    info = b"".join(
        len(p).to_bytes(4, "big") + p for p in (b"neardup-seal", b"features", b"t1", b"1")
    )
    want = _hkdf_sha256(b"m" * 32, b"neardup/seal/aes-256-siv/v1", info, 64)
    assert MASTER.sealing_key("features", "t1", version=1) == want
    # Pinned: a change here makes every sealed store, log and snapshot unreadable.
    assert want.hex().startswith("c327bb613e967e543cdefd308dd19f8ce35ca2c58e64a26e")
    assert MASTER.sealer("features", "t1").seal(b"doc/1", b"acme\x00id\x00\x00").hex() == (
        "96b26bd313423821932e56e0c5cffa05267f1c70bfce"
    )


def test_sealing_keys_are_independent_per_purpose_tenant_and_version() -> None:
    keys = {
        MASTER.sealing_key("features", "t1"),
        MASTER.sealing_key("log", "t1"),
        MASTER.sealing_key("features", "t2"),
        MASTER.sealing_key("features", "t1", version=2),
        # Length prefixes: moving a character between fields gives another key.
        MASTER.sealing_key("features", "t", version=11),
        MASTER.sealing_key("feature", "st1"),
        MasterSecret(b"n" * 32).sealing_key("features", "t1"),
    }
    assert len(keys) == 7 and all(len(k) == 64 for k in keys)
    # The whole secret counts, not only its first 64 bytes.
    long_a, long_b = MasterSecret(b"a" * 64 + b"x"), MasterSecret(b"a" * 64 + b"y")
    assert long_a.sealing_key("log", "t1") != long_b.sealing_key("log", "t1")


def test_the_other_keys_are_derived_as_before() -> None:
    """Shingle-hash keys and the snapshot MAC key come from ``derive``, unchanged:
    a new value would change every existing tenant's shingle hashes."""
    assert MASTER.derive("shingle-key", "t1", version=1, size=16).hex() == (
        "0145ef8f4d17ea0e7887429272b373c1"
    )
    assert MASTER.derive("snapshot-mac", "t1").hex() == (
        "97e958067951388b86c6afdead8bfac2e46621cc60b58bf178a20de3424d036e"
    )


def test_values_the_first_construction_sealed_still_open() -> None:
    record = json.loads((FIXTURES / "sealed_v2.json").read_text())
    old = LegacySealer(bytes.fromhex(record["key_hex"]))
    for v in record["vectors"]:
        aad, plaintext = bytes.fromhex(v["aad"]), bytes.fromhex(v["plaintext"])
        assert old.open(bytes.fromhex(v["sealed"]), aad) == plaintext
        assert _old_seal(bytes.fromhex(record["key_hex"]), plaintext, aad).hex() == v["sealed"]
    key = MASTER.derive("features", "t1")
    blob = _old_seal(key, b"doc/1", b"acme\x00id\x00\x00")
    assert MASTER.legacy_sealer("features", "t1").open(blob, b"acme\x00id\x00\x00") == b"doc/1"


def test_the_first_construction_refuses_tampering_and_other_contexts() -> None:
    old = LegacySealer(bytes(range(32)))
    blob = _old_seal(bytes(range(32)), b"doc/1", b"ad")
    assert old.open(blob, b"ad") == b"doc/1"
    with pytest.raises(CorruptFile, match=r"authentication failed .* AES-256-GCM"):
        old.open(blob, b"other", what="t1 store")
    bad = bytearray(blob)
    bad[-1] ^= 0x80
    with pytest.raises(CorruptFile, match="authentication failed"):
        old.open(bytes(bad), b"ad")
    with pytest.raises(CorruptFile, match="is 27 bytes, shorter than the 28"):
        old.open(blob[:27], b"ad")
    # It only opens: nothing is written with it any more.
    assert not hasattr(old, "seal")

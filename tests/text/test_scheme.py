"""HashKey and SchemeDescriptor: what a set of hashes was computed under."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup import Config, InvalidConfig, SchemeMismatch, ShingleSpec
from neardup.text.scheme import HashKey, SchemeDescriptor, check_key

MASTER = b"0123456789abcdef0123456789abcdef"


def test_scheme_descriptor_records_key_fingerprint_not_key() -> None:
    key = HashKey.derive(b"k" * 32, "acme")
    d = SchemeDescriptor.from_config(Config(hash_algorithm="siphash24"), key)
    assert d.seed is None and d.key_id == "acme/v1" and d.key_fingerprint == key.fingerprint
    assert key.key.hex() not in str(d.to_dict())
    assert SchemeDescriptor.from_dict(d.to_dict()) == d
    plain = SchemeDescriptor.from_config(Config())
    with pytest.raises(SchemeMismatch):
        plain.require_same(d)


@given(st.text(min_size=1, max_size=20), st.text(min_size=1, max_size=20))
def test_derived_keys_are_deterministic_and_independent(a: str, b: str) -> None:
    ka, kb = HashKey.derive(MASTER, a), HashKey.derive(MASTER, b)
    assert ka == HashKey.derive(MASTER, a)
    assert (ka.key == kb.key) == (a == b)
    assert len(ka.key) == 16 and len(ka.fingerprint) == 16
    assert ka.derived_seed(b"x") == HashKey.derive(MASTER, a).derived_seed(b"x")
    assert ka.derived_seed(b"x") != ka.derived_seed(b"y")
    lo, hi = ka.halves()
    assert (lo.to_bytes(8, "little") + hi.to_bytes(8, "little")) == ka.key


def test_bad_keys_are_refused_with_the_fix() -> None:
    with pytest.raises(InvalidConfig, match="exactly 16 bytes"):
        HashKey("t/v1", b"short")
    with pytest.raises(InvalidConfig, match="must not be empty"):
        HashKey("", b"k" * 16)
    with pytest.raises(InvalidConfig, match=r"secrets\.token_bytes"):
        HashKey.derive(b"tiny", "t")


def test_check_key_matches_the_algorithm() -> None:
    key = HashKey.derive(MASTER, "t")
    check_key(Config(), None)
    check_key(Config(hash_algorithm="siphash24"), key)
    with pytest.raises(InvalidConfig, match="needs a HashKey"):
        check_key(Config(hash_algorithm="siphash24"), None)
    with pytest.raises(InvalidConfig, match="not a keyed PRF"):
        check_key(Config(), key)


def test_set_fingerprint_ignores_the_signature_but_not_the_shingles() -> None:
    base = SchemeDescriptor.from_config(Config())
    other_sig = SchemeDescriptor.from_config(Config(num_perm=64))
    assert base.set_fingerprint == other_sig.set_fingerprint
    assert base.fingerprint != other_sig.fingerprint
    base.require_same_sets(other_sig)
    with pytest.raises(SchemeMismatch, match="differ in num_perm"):
        base.require_same(other_sig)
    other_sets = SchemeDescriptor.from_config(Config(shingle=ShingleSpec(k=3)))
    with pytest.raises(SchemeMismatch, match="shingle sets"):
        base.require_same_sets(other_sets)


def test_from_dict_refuses_what_is_not_a_descriptor() -> None:
    d = SchemeDescriptor.from_config(Config()).to_dict()
    d["extra"] = 1
    with pytest.raises(InvalidConfig, match="not a scheme descriptor"):
        SchemeDescriptor.from_dict(d)


def test_descriptors_record_the_tokenizer_only_when_not_legacy() -> None:
    old = SchemeDescriptor.from_config(Config(shingle=ShingleSpec(tokenizer=1)))
    new = SchemeDescriptor.from_config(Config())
    char = SchemeDescriptor.from_config(Config(shingle=ShingleSpec(kind="char", k=5)))
    # Records of tokenizer 1 and of char shingles are those older releases wrote.
    assert "tokenizer" not in old.to_dict() and "tokenizer" not in char.to_dict()
    assert new.to_dict()["tokenizer"] == 2
    for d in (old, new, char):
        assert SchemeDescriptor.from_dict(d.to_dict()) == d
    assert old.set_fingerprint != new.set_fingerprint
    with pytest.raises(SchemeMismatch, match="tokenizer: 2 vs 1"):
        new.require_same(old, "a saved index and this run")
    with pytest.raises(SchemeMismatch):
        new.require_same_sets(old)

"""Signatures read from hex strings or bytes (core/hexsig.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup import InvalidConfig
from neardup.core.hexsig import signature_bytes


@given(st.binary(max_size=64), st.sampled_from(["", "0x", "0X"]), st.booleans())
def test_signature_bytes_reads_what_hex_wrote(data: bytes, prefix: str, upper: bool) -> None:
    text = data.hex().upper() if upper else data.hex()
    assert signature_bytes("s", prefix + text) == data
    assert signature_bytes("s", data) == data


@pytest.mark.parametrize(
    ("value", "item", "match"),
    [
        ("9f3", 1, "not a hex string"),
        ("9g", 1, "not a hex string"),
        ("9f 3a", 1, "spaces"),
        ("9f3a00", 4, "not a multiple of 4"),
        (12, 1, "not a hex string or bytes"),
    ],
)
def test_signature_bytes_refuses_bad_text(value: object, item: int, match: str) -> None:
    with pytest.raises(InvalidConfig, match=match) as info:
        signature_bytes("signature", value, item_bytes=item)  # type: ignore[arg-type]
    assert "fix:" in str(info.value)

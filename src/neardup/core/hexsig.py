"""Signatures as text: hex strings (and raw bytes) in, checked, with errors from the
one exception tree.

One reading of a signature given as a hex string or bytes, shared by the MinHash
signatures (:class:`neardup.Signature`) and the vector signatures
(:mod:`neardup.vectors`): whitespace around the text and an optional ``0x`` are
ignored, anything else that is not an even number of hex digits raises
:class:`~neardup.InvalidConfig` naming the field, the value and the fix.

Example:
    >>> signature_bytes("signature", "0x9f3a")
    b'\\x9f:'
    >>> signature_bytes("signature", "9f3")
    Traceback (most recent call last):
    ...
    neardup.core._errors.InvalidConfig: invalid signature='9f3': ...
"""

from __future__ import annotations

from neardup.core._errors import InvalidConfig, shown

__all__ = ["signature_bytes"]


def signature_bytes(
    field: str, value: str | bytes | bytearray | memoryview, *, item_bytes: int = 1
) -> bytes:
    """The bytes of a signature given as a hex string or as bytes.

    ``item_bytes``: the size of one signature entry (4 for MinHash rows, 8 for
    packed bit words); a length that is not a multiple of it raises.
    """
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
    elif isinstance(value, str):
        text = value.strip()
        if text[:2].lower() == "0x":
            text = text[2:]
        try:
            data = bytes.fromhex(text)
        except ValueError:
            raise InvalidConfig(
                field,
                shown(value),
                "is not a hex string (an even number of digits 0-9, a-f)",
                "pass the text that .hex() gave, or the signature's bytes",
            ) from None
        if any(c.isspace() for c in text):
            raise InvalidConfig(
                field, shown(value), "has spaces inside the hex digits", "remove the spaces"
            )
    else:
        raise InvalidConfig(
            field,
            type(value).__name__,
            "is not a hex string or bytes",
            "pass the text that .hex() gave, or the signature's bytes",
        )
    if len(data) % item_bytes:
        raise InvalidConfig(
            field,
            shown(value if isinstance(value, str) else data.hex()),
            f"has {len(data)} bytes, not a multiple of {item_bytes} (one entry)",
            "pass a whole signature, as .hex() gave it",
        )
    return data

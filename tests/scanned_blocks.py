"""Blocks of documents as the JSONL scanner hands them on, for tests of the code
that takes them (text columns, the hash feeder)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def scanned_block(
    texts: list[str], as_str: dict[int, str] | None = None
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], dict[int, str]]:
    """``(buf, offsets, others)``: document ``j`` is ``buf[offsets[j]:offsets[j + 1]]``
    (``texts[j]`` encoded), or, for ``j`` in ``as_str``, the text ``as_str[j]`` (its
    bytes then empty) — as the scanner passes on the documents it does not decode."""
    others = as_str or {}
    raw = [b"" if j in others else t.encode() for j, t in enumerate(texts)]
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in raw], out=offsets[1:])
    return np.frombuffer(b"".join(raw), dtype=np.uint8), offsets, others

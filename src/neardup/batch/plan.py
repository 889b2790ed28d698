"""The memory an in-memory run over some inputs is planned to need, before reading them.

A run holds its text about three times (as read, as kept for output, normalized)
and one 8-byte hash per shingle, plus hashing scratch
(:func:`neardup.core.config.scratch_bytes`).  How many shingles a byte of input
gives depends on the script: about one per 6 bytes of English under ``word``
shingles, but one per character — one per 3 bytes of UTF-8 — of Chinese or
Japanese, whose characters are tokens of their own (tokenizer 2,
:mod:`neardup.text.words`).  So the rate is measured: :func:`shingle_rate`
counts the shingles of a small sample of the inputs
(:func:`neardup.io.corpus.text_sample`: 8 blocks of 16 KiB spread over them) under
the run's own normalizer, tokenizer (:func:`neardup.text.words.token_counts`, which
needs no compiled kernel: the command line loads those while the input is read)
and shingle spec: one hash per shingle before de-duplication.  The rate is
never planned below :data:`MIN_WORD_RATE` (one shingle per 6 bytes, the rate
earlier releases assumed for every input), so an English corpus plans as before
and only denser text plans more.  ``char`` and ``byte`` shingles are planned at one
per byte, their upper bound.

Compressed inputs are assumed to expand four times; Parquet, saved datasets and
folders of ``.txt`` files are not sampled (they plan at :data:`MIN_WORD_RATE`).

Example:
    >>> import os, tempfile
    >>> from neardup import Config
    >>> path = os.path.join(tempfile.mkdtemp(), "zh.jsonl")
    >>> line = '{"text": "' + "一二三四五六七八九十" * 6 + '"}\\n'  # 193 bytes
    >>> with open(path, "w", encoding="utf-8") as f:
    ...     _ = f.write(line * 1000)
    >>> round(shingle_rate([path], Config()), 3)  # 56 shingles a line
    0.29
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

import numpy as np

from neardup.core.config import Config, ShingleSpec, scratch_bytes
from neardup.io.corpus import input_bytes, text_sample
from neardup.text.normalize import get_normalizer
from neardup.text.words import token_counts

__all__ = ["MAX_SHINGLES_PER_BYTE", "MIN_WORD_RATE", "in_memory_plan", "shingle_rate"]

MIN_WORD_RATE = 1 / 6
"""The fewest ``word`` shingles per input byte a plan assumes."""

TEXT_COPIES = 3
"""How many times an in-memory run holds its text."""


def shingle_rate(inputs: Sequence[str], config: Config) -> float:
    """Planned shingles per input byte of ``inputs`` under ``config`` (see the
    module docstring); deterministic for the same files and config.

    The command line plans a run twice (to start reading early, then in the job);
    the sample is read and counted once for files of unchanged size and
    modification time."""
    if config.shingle.kind != "word":
        return 1.0
    return _rate(tuple((p, _stamp(p)) for p in inputs), config.shingle, config.normalizer)


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None  # a URL, a glob or a missing path: the reader words the error
    return st.st_size, st.st_mtime_ns


@functools.lru_cache(maxsize=8)
def _rate(
    inputs: tuple[tuple[str, tuple[int, int] | None], ...], spec: ShingleSpec, normalizer: str
) -> float:
    docs, nbytes = text_sample([p for p, _ in inputs])
    if not nbytes:
        return MIN_WORD_RATE
    normalize = get_normalizer(normalizer)
    tokens = token_counts([normalize(d) for d in docs], spec.tokenizer)
    # Shingles of a document of t tokens, as the kernel counts them (documents
    # over max_document_bytes, which get none, are counted too).
    per_doc = np.where(
        tokens > 0, np.minimum(np.maximum(tokens - spec.k + 1, 1), spec.max_shingles), 0
    )
    return max(MIN_WORD_RATE, int(per_doc.sum()) / nbytes)


MAX_SHINGLES_PER_BYTE = 18
"""The most shingles an input byte can give: a byte holds at most one character,
NFKC turns a character into at most 18 (U+FDFA), and each starts at most one
token or character shingle."""


def in_memory_plan(inputs: Sequence[str], config: Config, *, limit: int | None = None) -> int:
    """Planned bytes of an in-memory run over ``inputs``: the text held
    :data:`TEXT_COPIES` times, 8 bytes per shingle at :func:`shingle_rate`, and the
    hashing scratch, from the inputs' sizes on disk (:func:`input_bytes`).

    With ``limit``, inputs so small that even :data:`MAX_SHINGLES_PER_BYTE` keeps
    the plan within it get that bound instead, without sampling them: the same
    answer to ``plan <= limit``, for a fraction of a small run's time.

    >>> import os, tempfile
    >>> from neardup import Config
    >>> path = os.path.join(tempfile.mkdtemp(), "en.jsonl")
    >>> with open(path, "w", encoding="utf-8") as f:
    ...     _ = f.write('{"text": "the quick brown fox jumps over the lazy dog"}\\n' * 100)
    >>> size = os.path.getsize(path)  # 5 shingles a line: planned at 1 per 6 bytes
    >>> in_memory_plan([path], Config()) == scratch_bytes(size) + int(size * (3 + 8 / 6))
    True
    """
    total = input_bytes(inputs)

    def planned(rate: float) -> int:
        return scratch_bytes(total) + int(total * (TEXT_COPIES + 8 * rate))

    if limit is not None and planned(MAX_SHINGLES_PER_BYTE) <= limit:
        return planned(MAX_SHINGLES_PER_BYTE)
    return planned(shingle_rate(inputs, config))

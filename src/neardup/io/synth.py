"""Corpora for tests, calibration and benchmarks: real text found on this machine
and planted near duplicates whose exact similarity is measured, not assumed.

* :func:`stdlib_paragraphs` — paragraphs of prose and code from the Python standard
  library's own source files (present wherever Python is), in a stable order.
* :func:`synthetic_documents` — documents of words drawn from a Zipf-like
  vocabulary, reproducible from a seed.
* :func:`plant_near_duplicates` — copies of base documents edited by word
  substitution, insertion and deletion at a chosen rate, so that every copy has a
  known parent; the exact Jaccard of each planted pair is measured by the caller's
  scheme (e.g. with :func:`neardup.verify.oracle.brute_force_pairs`).

Everything is a pure function of its arguments (``random.Random(seed)``), never of a
shared RNG.

Example:
    >>> docs = synthetic_documents(3, seed=1, words=20)
    >>> texts, parents = plant_near_duplicates(docs, copies=2, edit_rate=0.05, seed=2)
    >>> len(texts), parents[3]
    (5, 0)
"""

from __future__ import annotations

import itertools
import os
import random
import re
from collections.abc import Sequence
from pathlib import Path

__all__ = ["plant_near_duplicates", "stdlib_paragraphs", "synthetic_documents"]

_SPLIT = re.compile(r"\n\s*\n")


def stdlib_paragraphs(
    *, limit: int = 10_000, min_chars: int = 200, max_files: int | None = None
) -> list[str]:
    """Up to ``limit`` distinct paragraphs (>= ``min_chars``) from the stdlib sources."""
    root = Path(os.__file__).parent
    files = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts)
    if max_files is not None:
        files = files[:max_files]
    seen: set[str] = set()
    out: list[str] = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for para in _SPLIT.split(text):
            para = para.strip()
            if len(para) >= min_chars and para not in seen:
                seen.add(para)
                out.append(para)
                if len(out) >= limit:
                    return out
    return out


def synthetic_documents(
    n: int, *, seed: int, words: int = 120, vocabulary: int = 20_000
) -> list[str]:
    """``n`` documents of ``words`` words from a Zipf-like vocabulary of ``vocabulary`` words."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(vocabulary)]
    cum = list(itertools.accumulate(1.0 / (i + 10) for i in range(vocabulary)))
    return [" ".join(rng.choices(vocab, cum_weights=cum, k=words)) for _ in range(n)]


def _edit(text: str, rate: float, rng: random.Random, vocab: Sequence[str]) -> str:
    toks = text.split(" ")
    out: list[str] = []
    for tok in toks:
        u = rng.random()
        if u < rate / 3:
            continue  # deletion
        if u < 2 * rate / 3:
            out.append(rng.choice(vocab))  # substitution
            continue
        out.append(tok)
        if u < rate:
            out.append(rng.choice(vocab))  # insertion
    return " ".join(out) if out else text


def plant_near_duplicates(
    base: Sequence[str],
    *,
    copies: int,
    edit_rate: float | Sequence[float],
    seed: int,
) -> tuple[list[str], list[int]]:
    """Append ``copies`` edited copies of randomly chosen base documents.

    Returns ``(texts, parents)``: ``texts`` is the base followed by the copies, and
    ``parents[i]`` is the base index a copy came from (-1 for base documents).
    ``edit_rate`` is the per-word edit probability, or a sequence to cycle through.
    """
    rng = random.Random(seed)
    rates = [edit_rate] if isinstance(edit_rate, int | float) else list(edit_rate)
    vocab = sorted({t for doc in base[:2000] for t in doc.split(" ") if t})[:50_000] or ["x"]
    if not base:
        return [], []
    texts = list(base)
    parents = [-1] * len(base)
    for c in range(copies):
        p = rng.randrange(len(base))
        texts.append(_edit(base[p], float(rates[c % len(rates)]), rng, vocab))
        parents.append(p)
    return texts, parents

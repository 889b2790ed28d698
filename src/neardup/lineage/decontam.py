"""Decontamination: which evaluation items a training document contains.

An :class:`EvalIndex` holds every evaluation item's word n-grams (normalized as
everywhere in neardup).  A batch of training documents is hashed by the shingle
kernel; each document's distinct n-gram hashes are looked up in the index and
counted per evaluation item (:meth:`EvalIndex.candidates`).  A pair whose share of
the item's n-grams reaches ``min_containment`` on the hashes is then checked on
the n-gram *strings* (:meth:`EvalIndex.verify`): containment and Jaccard are exact,
and the matched spans are character offsets into both original texts.  Hashes only
propose pairs, so the hash key does not change any result: by default a fresh
SipHash key per run (:func:`run_key`) keeps crafted inputs from flooding the
lookup with collisions.

Containment of item E in document T is ``|N(E) ∩ N(T)| / |N(E)|`` over distinct
n-grams — 1.0 for a test question pasted whole into a long web page, whose Jaccard
is tiny.  Items with fewer than ``ngram`` words cannot be checked at that n and are
reported as too short.

Example:
    >>> cfg = DecontamConfig(ngram=3, min_containment=0.5)
    >>> idx = EvalIndex.build([("set", "q1", "what is the boiling point of water")], cfg)
    >>> text = "Intro. What is the boiling point of water? About 100 C."
    >>> [(m.item.item_id, m.containment) for m in idx.matches([text])[0]]
    [('q1', 1.0)]
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from neardup.core._errors import InvalidConfig
from neardup.core._fingerprint import fingerprint
from neardup.core.arrays import concat_ranges, distinct
from neardup.core.config import Config, ShingleSpec, check_normalizer
from neardup.text.hashing import HashKey, SchemeDescriptor, ShingleSets, hash_texts
from neardup.text.normalize import NormalizedText, get_normalizer

__all__ = [
    "DecontamConfig",
    "EvalIndex",
    "EvalItem",
    "Match",
    "run_key",
]

_WORD = re.compile(r"\w+")
_MAX_BLOCKS = 50
_BIT = (1 << np.arange(8)).astype(np.uint8)


@dataclass(frozen=True, kw_only=True, slots=True)
class DecontamConfig:
    """What counts as contamination.

    * ``ngram`` (13): word n-gram length, after normalization — the n of GPT-3's
      13-gram overlap rule (Brown et al. 2020, appendix C);
    * ``min_containment`` (0.5): a training document contains an evaluation item
      when at least this share of the item's distinct n-grams occurs in it.  GPT-3
      (and datatrove's n-gram filter, n = 12) flag an item on a single shared n-gram;
      requiring half keeps shared boilerplate from flagging documents, while an item
      pasted whole (containment 1) or with a few edits is still found;
    * ``normalizer``: as for dedup (``nfkc-casefold``);
    * ``hash_algorithm``: ``siphash24`` (default: keyed, a fresh key per run) or
      ``xxh64`` (seeded by ``seed``); candidates only, results do not depend on it;
    * ``batch_bytes``: text hashed at a time (the memory of a batch);
    * ``window_chars``: a longer document is hashed in windows of this many
      characters overlapping by ``overlap_chars`` (an n-gram longer than the
      overlap could be missed by the lookup; none of 13 words is).

    Memory: hashing holds one batch (about 10 bytes per character of it); the
    exact check of a candidate record holds its offset map and n-gram strings
    (on the order of 100 bytes per character of that record), so one very
    large contaminated record costs that much once.
    """

    ngram: int = 13
    min_containment: float = 0.5
    normalizer: str = "nfkc-casefold"
    hash_algorithm: Literal["siphash24", "xxh64"] = "siphash24"
    seed: int = 42
    batch_bytes: int = 8 << 20
    window_chars: int = 8 << 20
    overlap_chars: int = 64 << 10

    def __post_init__(self) -> None:
        n = self.ngram
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 1024:
            raise InvalidConfig("ngram", n, "must be an integer in [1, 1024]", "use e.g. 13")
        c = self.min_containment
        if isinstance(c, bool) or not isinstance(c, int | float) or not 0.0 < float(c) <= 1.0:
            raise InvalidConfig("min_containment", c, "must be in (0, 1]", "use e.g. 0.5")
        check_normalizer(self.normalizer)
        if self.hash_algorithm not in ("siphash24", "xxh64"):
            raise InvalidConfig(
                "hash_algorithm", self.hash_algorithm, "unknown algorithm", "use siphash24 or xxh64"
            )
        for name in ("batch_bytes", "window_chars", "overlap_chars"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InvalidConfig(name, v, "must be a positive integer", "use e.g. 8388608")
        if self.overlap_chars * 2 > self.window_chars:
            raise InvalidConfig(
                "overlap_chars",
                self.overlap_chars,
                f"must be at most half of window_chars ({self.window_chars})",
                "raise window_chars or lower overlap_chars",
            )

    def hashing(self) -> Config:
        """The :class:`Config` the shingle kernel runs under (no cap on shingles)."""
        return Config(
            normalizer=self.normalizer,
            shingle=ShingleSpec(kind="word", k=self.ngram, max_shingles=1 << 40),
            hash_algorithm=self.hash_algorithm,
            seed=self.seed,
            max_document_bytes=4 * self.window_chars + 16,
        )

    @property
    def fingerprint(self) -> str:
        return fingerprint(asdict(self))


def run_key(cfg: DecontamConfig) -> HashKey | None:
    """A fresh random key for one run (None under ``xxh64``)."""
    if cfg.hash_algorithm == "xxh64":
        return None
    return HashKey.derive(secrets.token_bytes(32), "decontaminate")


@dataclass(frozen=True, slots=True)
class EvalItem:
    """One evaluation item: its set, id, original text and position in the index."""

    set_name: str
    item_id: Any
    text: str
    index: int


@dataclass(frozen=True, slots=True)
class Match:
    """An evaluation item found in a training document, checked on the n-gram strings.

    ``containment`` = shared / item_ngrams, ``jaccard`` = shared / (item_ngrams +
    doc_ngrams - shared), over distinct n-grams.  ``blocks`` pair runs of
    consecutive shared n-grams: ``(doc_start, doc_end, item_start, item_end)``
    character offsets into the original texts (at most 50 per match);
    ``doc_spans`` and ``item_spans`` are the merged text covered by shared n-grams
    on each side, and ``item_coverage`` the share of the item's words they cover.
    """

    item: EvalItem
    containment: float
    jaccard: float
    shared: int
    item_ngrams: int
    doc_ngrams: int
    item_coverage: float
    blocks: tuple[tuple[int, int, int, int], ...]
    doc_spans: tuple[tuple[int, int], ...]
    item_spans: tuple[tuple[int, int], ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "eval_set": self.item.set_name,
            "eval_id": self.item.item_id,
            "containment": round(self.containment, 6),
            "jaccard": round(self.jaccard, 6),
            "shared_ngrams": self.shared,
            "eval_ngrams": self.item_ngrams,
            "doc_ngrams": self.doc_ngrams,
            "eval_coverage": round(self.item_coverage, 6),
            "blocks": [{"doc": [a, b], "eval": [c, d]} for a, b, c, d in self.blocks],
            "doc_spans": [list(s) for s in self.doc_spans],
            "eval_spans": [list(s) for s in self.item_spans],
        }


@dataclass(slots=True)
class _Grams:
    """A text's normalized words (spans into the original) and n-grams by position."""

    norm: NormalizedText
    words: list[tuple[int, int]]
    grams: list[str]
    where: dict[str, list[int]] = field(default_factory=dict)

    @classmethod
    def of(cls, text: str, cfg: DecontamConfig, positions: bool) -> _Grams:
        nt = get_normalizer(cfg.normalizer).with_offsets(text)
        spans = [(m.start(), m.end()) for m in _WORD.finditer(nt.text)]
        toks = [nt.text[a:b] for a, b in spans]
        n = cfg.ngram
        grams = [" ".join(toks[i : i + n]) for i in range(len(toks) - n + 1)]
        g = cls(nt, spans, grams)
        if positions:
            for i, s in enumerate(grams):
                g.where.setdefault(s, []).append(i)
        return g

    def span(self, first_word: int, last_word: int) -> tuple[int, int]:
        """Original character offsets of words ``first_word..last_word``."""
        return self.norm.original_span(self.words[first_word][0], self.words[last_word][1])


def _merge(runs: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Merge overlapping or adjacent inclusive word ranges."""
    out: list[tuple[int, int]] = []
    for a, b in sorted(runs):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


class EvalIndex:
    """Every checkable evaluation item's n-gram hashes, sorted, with the items
    holding each hash (CSR), and the items themselves.

    Memory: about 16 bytes per (item, distinct n-gram) plus the item texts.
    """

    def __init__(
        self,
        items: list[EvalItem],
        too_short: list[EvalItem],
        sets: ShingleSets,
        cfg: DecontamConfig,
        key: HashKey | None,
    ) -> None:
        self.cfg = cfg
        self.key = key
        self.items = items
        self.too_short = too_short
        self._config = cfg.hashing()
        self._scheme = SchemeDescriptor.from_config(self._config, key)
        self._norm = get_normalizer(cfg.normalizer)
        self.sizes = sets.sizes()
        owner = np.repeat(np.arange(len(items), dtype=np.int64), self.sizes)
        order = np.argsort(sets.data, kind="stable")
        hashes = sets.data[order]
        self.item_of = owner[order]
        if hashes.size:
            first = np.ones(hashes.size, dtype=np.bool_)
            first[1:] = hashes[1:] != hashes[:-1]
            starts = np.flatnonzero(first)
        else:
            starts = np.empty(0, np.int64)
        self.keys = hashes[starts]
        self.indptr = np.append(starts, hashes.size).astype(np.int64)
        # A bitmap of the keys' top bits, about 32 bits per key: one memory access
        # rules out most training n-grams before the binary search.
        log2 = int(min(max(int(self.keys.size * 32).bit_length(), 16), 32))
        self._shift = np.uint64(64 - log2)
        slot = self.keys >> self._shift
        self._bitmap = np.zeros(1 << (log2 - 3), dtype=np.uint8)
        np.bitwise_or.at(
            self._bitmap, (slot >> np.uint64(3)).astype(np.int64), _BIT[(slot & np.uint64(7))]
        )
        self._grams: dict[int, _Grams] = {}

    @classmethod
    def build(
        cls,
        items: Sequence[tuple[str, Any, str]],
        cfg: DecontamConfig,
        key: HashKey | None = None,
    ) -> EvalIndex:
        """Index ``(set name, item id, text)`` triples; items with fewer than
        ``cfg.ngram`` words go to :attr:`too_short`."""
        if key is None and cfg.hash_algorithm == "siphash24":
            key = run_key(cfg)
        norm = get_normalizer(cfg.normalizer)
        ok: list[EvalItem] = []
        short: list[EvalItem] = []
        for name, ident, text in items:
            words = len(_WORD.findall(norm(text)))
            dest = ok if words >= cfg.ngram else short
            dest.append(EvalItem(name, ident, text, len(dest)))
        config = cfg.hashing()
        scheme = SchemeDescriptor.from_config(config, key)
        sets, _ = hash_texts([it.text for it in ok], norm, config, key, scheme)
        return cls(ok, short, sets, cfg, key)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def nbytes(self) -> int:
        return int(self.keys.nbytes + self.indptr.nbytes + self.item_of.nbytes)

    def hash_batch(self, texts: Sequence[str]) -> tuple[ShingleSets, npt.NDArray[np.int64]]:
        """Hash ``texts``, long ones in overlapping windows; the sets of the pieces
        and, per piece, the index of its text."""
        w, ov = self.cfg.window_chars, self.cfg.overlap_chars
        pieces: list[str] = []
        owner: list[int] = []
        for d, t in enumerate(texts):
            if len(t) <= w:
                pieces.append(t)
                owner.append(d)
                continue
            start = 0
            while True:
                pieces.append(t[start : start + w])
                owner.append(d)
                if start + w >= len(t):
                    break
                start += w - ov
        sets, _ = hash_texts(pieces, self._norm, self._config, self.key, self._scheme)
        return sets, np.asarray(owner, dtype=np.int64)

    def candidates(
        self, sets: ShingleSets, owner: npt.NDArray[np.int64], n_docs: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(document, item) pairs whose shared distinct hashes reach
        ``min_containment`` of the item's, sorted by document then item."""
        empty = np.empty(0, np.int64)
        if not self.keys.size or not sets.data.size:
            return empty, empty
        data = sets.data
        slot = data >> self._shift
        maybe = np.flatnonzero(self._bitmap[slot >> np.uint64(3)] & _BIT[slot & np.uint64(7)])
        sub = data[maybe]
        pos = np.searchsorted(self.keys, sub)
        pos[pos == self.keys.size] = 0
        hit = self.keys[pos] == sub
        if not hit.any():
            return empty, empty
        at = maybe[hit]
        doc = owner[np.searchsorted(sets.indptr, at, side="right") - 1]
        h = pos[hit].astype(np.int64)
        if owner.size and np.any(owner[1:] == owner[:-1]):
            # A windowed document: an n-gram in two overlapping windows counts once.
            u = distinct(doc * np.int64(self.keys.size) + h)
            doc, h = u // self.keys.size, u % self.keys.size
        lo, hi = self.indptr[h], self.indptr[h + 1]
        reps = hi - lo
        items = self.item_of[concat_ranges(lo, reps)]
        docs = np.repeat(doc, reps)
        pair, shared = np.unique(docs * np.int64(len(self.items)) + items, return_counts=True)
        pdoc, pitem = pair // len(self.items), pair % len(self.items)
        # The verified containment is over strings; a hair of slack keeps float
        # rounding on the hash side from dropping a pair exactly at the threshold.
        keep = shared >= (self.cfg.min_containment - 1e-9) * self.sizes[pitem]
        return pdoc[keep], pitem[keep]

    def _item_grams(self, i: int) -> _Grams:
        g = self._grams.get(i)
        if g is None:
            g = self._grams[i] = _Grams.of(self.items[i].text, self.cfg, positions=True)
        return g

    def verify(self, text: str, items: Sequence[int]) -> list[Match]:
        """The exact :class:`Match` of each of ``items`` in ``text`` that reaches
        ``min_containment`` on the n-gram strings, best first."""
        doc = _Grams.of(text, self.cfg, positions=False)
        doc_set = set(doc.grams)
        out: list[Match] = []
        n = self.cfg.ngram
        for i in items:
            ev = self._item_grams(int(i))
            shared_grams = doc_set.intersection(ev.where)
            c = len(shared_grams) / len(ev.where) if ev.where else 0.0
            if c < self.cfg.min_containment or not shared_grams:
                continue
            union = len(ev.where) + len(doc_set) - len(shared_grams)
            blocks = _blocks(doc.grams, ev.where, shared_grams)
            doc_runs = _merge([(a, b + n - 1) for a, b, _, _ in blocks])
            item_runs = _merge([(c0, c1 + n - 1) for _, _, c0, c1 in blocks])
            covered = sum(b - a + 1 for a, b in item_runs)
            out.append(
                Match(
                    item=self.items[int(i)],
                    containment=c,
                    jaccard=len(shared_grams) / union,
                    shared=len(shared_grams),
                    item_ngrams=len(ev.where),
                    doc_ngrams=len(doc_set),
                    item_coverage=covered / len(ev.words),
                    blocks=tuple(
                        (*doc.span(a, b + n - 1), *ev.span(c0, c1 + n - 1))
                        for a, b, c0, c1 in blocks[:_MAX_BLOCKS]
                    ),
                    doc_spans=tuple(doc.span(a, b) for a, b in doc_runs),
                    item_spans=tuple(ev.span(a, b) for a, b in item_runs),
                )
            )
        out.sort(key=lambda m: (-m.containment, m.item.index))
        return out

    def matches(self, texts: Sequence[str]) -> list[list[Match]]:
        """Every document's verified matches (hash, look up, verify: one batch)."""
        sets, owner = self.hash_batch(texts)
        docs, items = self.candidates(sets, owner, len(texts))
        out: list[list[Match]] = [[] for _ in texts]
        if docs.size:
            bounds = np.flatnonzero(np.diff(docs)) + 1
            for part in np.split(np.arange(docs.size), bounds):
                d = int(docs[part[0]])
                out[d] = self.verify(texts[d], items[part].tolist())
        return out


def _blocks(
    grams: Sequence[str], where: dict[str, list[int]], shared: set[str]
) -> list[tuple[int, int, int, int]]:
    """Runs of consecutive shared n-grams at consecutive positions on both sides:
    ``(doc first, doc last, item first, item last)`` n-gram positions."""
    out: list[list[int]] = []
    for i, g in enumerate(grams):
        if g not in shared:
            continue
        if out and out[-1][1] == i - 1:
            nxt = out[-1][3] + 1
            if nxt in where[g]:
                out[-1][1], out[-1][3] = i, nxt
                continue
        j = where[g][0]
        out.append([i, i, j, j])
    return [(a, b, c, d) for a, b, c, d in out]

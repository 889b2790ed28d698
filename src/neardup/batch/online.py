"""The online catalogue: :class:`Deduplicator` adds texts one at a time and tells
whether a text was seen before."""

from __future__ import annotations

from collections.abc import Hashable

from neardup.batch.results import Match
from neardup.core._errors import DocumentTooLarge, EmptyDocument
from neardup.core.config import Config
from neardup.sketch.lsh import LSHIndex
from neardup.sketch.minhash import MinHasher, Signature
from neardup.sketch.screen import BloomFilter
from neardup.text.hashing import HashKey, ShingleSets, hash_encoded
from neardup.text.normalize import EncodedTexts, encode_text, get_normalizer

__all__ = ["Deduplicator"]


class Deduplicator:
    """An online catalogue: add texts one at a time, ask whether a text was seen.

    Each added text is screened by a Bloom filter over content hashes (cheap
    "definitely unseen"), looked up by exact content, then by LSH; every candidate
    is verified exactly against its retained shingle-hash set.  ``duplicate`` is
    True only for a verified score >= threshold.

    Example:
        >>> from neardup import Config, ShingleSpec
        >>> d = Deduplicator(Config(threshold=0.75, shingle=ShingleSpec(k=2)))
        >>> d.add("A", "red fox runs very fast")
        []
        >>> [(m.key, m.jaccard, m.duplicate) for m in d.add("B", "red fox runs very fast today")]
        [('A', 0.8, True)]
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        key: HashKey | None = None,
        expected_items: int = 100_000,
    ) -> None:
        self.config = config or Config()
        self.key = key
        self.hasher = MinHasher(self.config, key=key)
        self.index = LSHIndex(
            self.hasher.scheme,
            threshold=self.config.threshold,
            max_bucket_size=self.config.max_bucket_size,
            max_candidates=max(self.config.max_candidates, 1),
        )
        self.screen = BloomFilter(capacity=max(expected_items, 1), fp_rate=0.001)
        self._by_content: dict[int, list[Hashable]] = {}
        self._normalizer = get_normalizer(self.config.normalizer)

    def _prepare(self, text: str) -> tuple[ShingleSets, Signature]:
        enc = encode_text(self._normalizer(text))
        if len(enc) > self.config.max_document_bytes:
            raise DocumentTooLarge(None, len(enc), self.config.max_document_bytes)
        sets = hash_encoded(
            EncodedTexts.from_bytes([enc]), self.config, self.key, self.hasher.scheme
        )
        if sets.raw_counts[0] == 0:
            raise EmptyDocument(None)
        return sets, self.hasher.from_sets(sets)[0]

    def _matches(self, sets: ShingleSets, sig: Signature, limit: int | None) -> list[Match]:
        h = int(sets.content_hash[0])
        # The Bloom screen answers "definitely unseen" for most new content, so the
        # exact-content table is consulted only for possible repeats.
        same = self._by_content.get(h, []) if h in self.screen else []
        scored = self.index.query_verified(sig, sets.get(0), limit=limit, extra=same)
        out: list[Match] = []
        for key, e in scored:
            score = e.jaccard if e.jaccard is not None else e.estimate
            method = "identical" if key in same and e.jaccard == 1.0 else e.method
            out.append(
                Match(
                    key,
                    e.jaccard,
                    e.estimate or 0.0,
                    method,
                    score is not None and score >= self.config.threshold,
                )
            )
        out.sort(key=lambda m: (-(m.jaccard or 0.0), str(m.key)))
        return out

    def query(self, text: str, *, limit: int | None = None) -> list[Match]:
        """Verified matches of ``text`` among stored items (nothing is stored)."""
        sets, sig = self._prepare(text)
        return self._matches(sets, sig, limit)

    def seen_exact(self, text: str) -> bool:
        """True if exactly this normalized content was added (Bloom screen first)."""
        sets, _ = self._prepare(text)
        h = int(sets.content_hash[0])
        return h in self.screen and h in self._by_content

    def add(self, key: Hashable, text: str) -> list[Match]:
        """Store ``text`` under ``key`` and return its verified matches among earlier items."""
        sets, sig = self._prepare(text)
        matches = self._matches(sets, sig, None)
        h = int(sets.content_hash[0])
        self.index.insert(key, sig, sets.get(0).copy())
        self.screen.add([h])
        self._by_content.setdefault(h, []).append(key)
        return matches

    def __len__(self) -> int:
        return len(self.index)

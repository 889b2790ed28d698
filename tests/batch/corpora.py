"""Small corpora shared by the batch tests, so that the batch run and the online
Deduplicator are shown the very same documents."""

from __future__ import annotations

from neardup import Config, ShingleSpec

#: Two copies differing in case and spacing, two empties, one too large (for
#: :data:`LIMITED`), one unique text.
MIXED_DOCS = (
    "Hello  World again and again",
    "hello world again and again",
    "",
    "   ",
    "x" * 50,
    "unique words that nobody else has here",
)
#: A config whose byte limit (40) makes ``MIXED_DOCS[4]`` too large.
LIMITED = Config(max_document_bytes=40, shingle=ShingleSpec(kind="word", k=2))

"""Generated corpora with planted near-duplicates, for tests, examples and benchmarks.

>>> from neardup.testing import synthetic_documents
>>> len(synthetic_documents(3, seed=1))
3
"""

from __future__ import annotations

from neardup.io.synth import plant_near_duplicates, stdlib_paragraphs, synthetic_documents

__all__ = ["plant_near_duplicates", "stdlib_paragraphs", "synthetic_documents"]

"""Build ``lsh-index-v1.ndx``: an ``LSHIndex`` file written by neardup before an
index could hold several band layouts (commit d5689a5), for the old-format test in
``tests/sketch/test_ranges.py``.

Run it with that version's sources first on the path, e.g.::

    git archive d5689a5 src | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old/src python tests/data/make_legacy_lsh_index.py

Three items under word:2 shingles at threshold 0.75 (k1 a near copy of k0, k2
unrelated), k2 then removed, so the file holds a tombstone too.
"""

from __future__ import annotations

import os

from neardup import Config, LSHIndex, MinHasher, ShingleSpec, hash_documents

TEXTS = ["red fox runs very fast", "red fox runs very fast today", "something else entirely"]


def main() -> None:
    mh = MinHasher(Config(threshold=0.75, shingle=ShingleSpec(kind="word", k=2)))
    index = LSHIndex(mh.scheme, threshold=0.75)
    feats = hash_documents(TEXTS, mh.config)
    sigs = mh.from_sets(feats)
    for i in range(len(TEXTS)):
        index.insert(f"k{i}", sigs[i], feats.get(i))
    index.remove("k2")
    index.save(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lsh-index-v1.ndx"))


if __name__ == "__main__":
    main()

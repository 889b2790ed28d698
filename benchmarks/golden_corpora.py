"""Byte-identical outputs on the benchmark corpora: record with one version of
neardup, check with another.

``scripts/golden_outputs.py`` digests every file ``dedup`` (defaults and
``--method exact``), ``audit`` and ``split`` write for one text corpus, and what
``dedup --vectors`` writes for one vector corpus.  This script runs it on each
benchmark corpus shape at 10k documents — templated records, gettext messages in
every script, man pages, the real corpus (Python sources and Debian docs) — and
on 20,000 planted 64-dimensional vectors (``bench_vectors.make_corpus``), and
writes or compares one JSON of all the digests::

    # the old version (the src folder of any checkout of it), then this one:
    python benchmarks/golden_corpora.py --neardup-src /path/to/old/src --write before.json
    python benchmarks/golden_corpora.py --check before.json

``results/golden_corpora.json`` holds the digests recorded with the version
before the redesign of the package layout (commit 1433d2a, the one that also
recorded ``tests/golden/outputs.json``); ``--check results/golden_corpora.json``
compares the working tree with it.  The text corpora are built from files of
this machine (``corpus.py``): on another machine the inputs differ, which the
check reports as such (record both versions there instead).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "scripts"))

import corpus as c  # noqa: E402
import golden_outputs as g  # noqa: E402

DOCS = 10_000
VECTORS = 20_000
DIM = 64


def _text_corpora() -> dict[str, Path]:
    out = {
        shape: Path(c.build_templated_corpus(DOCS, shape=shape)["path"])
        for shape in ("templated", "scripts", "manpages")
    }
    out["real"] = Path(c.build_real_corpus(DOCS)["path"])
    return out


def _vector_corpus() -> Path:
    from bench_vectors import make_corpus

    path = c.CACHE_DIR / f"golden-vectors-{VECTORS}x{DIM}.jsonl"
    if not path.exists():
        X, _ = make_corpus(VECTORS, DIM, 0.05, seed=20261206)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for i, v in enumerate(X):
                # Rounded so that the text form, not float printing, fixes the input.
                rec = {"id": f"v{i:06d}", "embedding": [round(float(x), 6) for x in v]}
                f.write(json.dumps(rec) + "\n")
        tmp.rename(path)
    return path


def collect(progress: Any, neardup_src: Path | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for name, path in _text_corpora().items():
        progress(f"{name} ({path.name})")
        result[name] = g.collect(input_path=path, neardup_src=neardup_src, progress=progress)
    vectors = _vector_corpus()
    progress(f"vectors ({vectors.name})")
    result["vectors"] = g.collect(vectors_path=vectors, neardup_src=neardup_src, progress=progress)
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g.add_mode_arguments(p)
    a = p.parse_args(argv)
    got = collect(lambda s: print(f"  {s}", file=sys.stderr, flush=True), a.neardup_src)
    if a.write:
        return g.write(a.write, got)
    expected = json.loads(a.check.read_text())
    diffs = [
        f"{name}: {d}"
        for name in sorted(set(expected) | set(got))
        for d in (
            g.compare(expected[name], got[name])
            if name in expected and name in got
            else [f"only in {'the check' if name not in expected else 'the record'}"]
        )
    ]
    return g.verdict(diffs, sum(len(r["runs"]) for r in got.values()))


if __name__ == "__main__":
    raise SystemExit(main())

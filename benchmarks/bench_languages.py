"""The cost of the per-language counts: ``neardup dedup`` with them vs the version
before them, on English text, and the script detector's own throughput.

Per-language counts (``by_language`` in ``stats.json``, a table in
``report.html``) need each document's script, detected by a compiled pass over
the normalized UTF-8 text inside the hashing workers.  This measures what that
adds to a whole run:

* ``dedup`` — the real CLI (``python -m neardup dedup CORPUS --output OUT --quiet``)
  of this checkout and of ``--base-commit`` (exported with ``git archive``), each
  in its own subprocess, timed from the parent (interpreter start included), round
  robin, ``--repeats`` times after one untimed warm-up run each (numba's cache);
  best and median wall seconds, the median CPU seconds (user + system of the
  process, from ``os.wait4``: less sensitive to other load on the machine than
  wall time) and the ratios this/base.  Corpora: the end-to-end
  benchmark's real paragraphs (``corpus.py`` :func:`build_real_corpus`, English
  prose and code, cut to ``--docs`` documents) and its synthetic corpus
  (:func:`build_scale_corpus`, ASCII only) of ``--docs`` documents.
* ``detector`` — :func:`neardup.text.scripts.detect_scripts` alone, in this
  process, on the normalized text of each corpus and on Chinese-like and
  Japanese-like text of about the same size (random Han / Han + kana letters in
  10–40-letter runs): MB/s of UTF-8, best of ``--repeats``; and the first-use
  cost of its code-point table.

The peers (rensa, datasketch) count no languages, so no peer ratio applies here;
their end-to-end ratios are ``bench_end_to_end.py``'s.

Usage::

    python benchmarks/bench_languages.py                       # 100k documents, 5 repeats
    python benchmarks/bench_languages.py --docs 20000 --repeats 2 --out /tmp/lang.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_OUT = HERE / "results" / "languages.json"
BASE_COMMIT = "12dd9e7"  # the branch point of the per-language counts


def _export(commit: str, dest: Path) -> Path:
    """``src`` of ``commit`` under ``dest``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, "src"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest / "src"


def _dedup(src: Path, corpus: str, out: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, from ``os.wait4``) of one run."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, "-m", "neardup", "dedup", corpus, "--output", str(out),
           "--quiet", "--overwrite"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{err[-2000:]!r}")
    return wall, usage.ru_utime + usage.ru_stime


def _time_versions(
    versions: dict[str, Path], corpus: str, repeats: int, scratch: Path
) -> dict[str, Any]:
    walls: dict[str, list[float]] = {name: [] for name in versions}
    cpus: dict[str, list[float]] = {name: [] for name in versions}
    for name, src in versions.items():
        _dedup(src, corpus, scratch / f"warm-{name}")
    for _ in range(repeats):
        for name, src in versions.items():
            wall, cpu = _dedup(src, corpus, scratch / name)
            walls[name].append(round(wall, 4))
            cpus[name].append(round(cpu, 4))
    stats = json.loads((scratch / "this" / "stats.json").read_text())
    out: dict[str, Any] = {
        name: {
            "walls_s": w,
            "best_s": min(w),
            "median_s": statistics.median(w),
            "cpu_s": cpus[name],
            "cpu_median_s": statistics.median(cpus[name]),
        }
        for name, w in walls.items()
    }
    out["ratio_best"] = round(out["this"]["best_s"] / out["base"]["best_s"], 4)
    out["ratio_median"] = round(out["this"]["median_s"] / out["base"]["median_s"], 4)
    out["ratio_cpu_median"] = round(
        out["this"]["cpu_median_s"] / out["base"]["cpu_median_s"], 4
    )
    out["documents_in"] = stats["documents_in"]
    out["by_language"] = stats["by_language"]
    return out


def _cjk(n_bytes: int, kana: bool, seed: int) -> list[str]:
    rng = random.Random(seed)
    letters = [chr(c) for c in range(0x4E00, 0x9FA6)]
    if kana:
        letters += [chr(c) for c in range(0x3041, 0x3097)] * 20
    docs, size = [], 0
    while size < n_bytes:
        runs = [
            "".join(rng.choices(letters, k=rng.randint(10, 40))) for _ in range(rng.randint(5, 30))
        ]
        doc = "。".join(runs)
        docs.append(doc)
        size += len(doc.encode())
    return docs


def _throughput(texts: list[str], repeats: int) -> dict[str, Any]:
    from neardup.text.normalize import get_normalizer, unicode_stage
    from neardup.text.scripts import detect_scripts, script_names

    raw, _ = unicode_stage(texts, get_normalizer("nfkc-casefold"))
    detect_scripts(raw.slice(0, 1))  # compiled (or loaded from the cache) untimed
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        ids = detect_scripts(raw)
        best = min(best, time.perf_counter() - t0)
    names = script_names(ids)
    return {
        "documents": len(texts),
        "utf8_bytes": raw.nbytes,
        "best_s": round(best, 6),
        "mb_per_s": round(raw.nbytes / best / 1e6, 1),
        "scripts": {n: names.count(n) for n in sorted(set(names))},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--docs", type=int, default=100_000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--base-commit", default=BASE_COMMIT)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    a = p.parse_args(argv)
    sys.path.insert(0, str(HERE))
    import corpus as c
    from _common import machine_info, write_results

    from neardup.text import scripts as S

    results: dict[str, Any] = {"machine": machine_info(), "params": vars(a) | {"out": str(a.out)}}
    corpora = {
        "real": c.build_real_corpus(max(1, a.docs * 10 // 11), name=f"real-lang-{a.docs}"),
        "synthetic": c.build_scale_corpus(a.docs),
    }
    scratch = Path(tempfile.mkdtemp(prefix="neardup-bench-lang-"))
    try:
        versions = {"base": _export(a.base_commit, scratch), "this": ROOT / "src"}
        results["dedup"] = {}
        for name, meta in corpora.items():
            print(f"dedup {name}: {meta['n_docs']} documents", file=sys.stderr, flush=True)
            results["dedup"][name] = {
                "corpus": {k: meta[k] for k in ("n_docs", "text_bytes", "path")},
                **_time_versions(versions, meta["path"], a.repeats, scratch),
            }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    S._table.cache_clear()
    t0 = time.perf_counter()
    S._table()
    results["detector"] = {"table_build_s": round(time.perf_counter() - t0, 4)}
    size = 0
    for name, meta in corpora.items():
        with open(meta["path"], encoding="utf-8") as fh:
            texts = [json.loads(line)["text"] for line in fh]
        size = max(size, sum(len(t.encode("utf-8", "surrogatepass")) for t in texts))
        results["detector"][name] = _throughput(texts, a.repeats)
    results["detector"]["chinese_like"] = _throughput(_cjk(size, False, 1), a.repeats)
    results["detector"]["japanese_like"] = _throughput(_cjk(size, True, 2), a.repeats)
    write_results(a.out, results)
    print(json.dumps({k: {n: {m: v.get(m) for m in ("ratio_best", "ratio_median",
                                                    "ratio_cpu_median")}
                          for n, v in results[k].items()} for k in ("dedup",)}, indent=1))
    print(json.dumps(results["detector"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Decontamination throughput: ``neardup decontaminate`` vs datatrove's n-gram filter.

Data (generated, deterministic from ``--seed``): a vocabulary of letter-only
pseudo-words with Zipf-like frequencies (no digits: datatrove's normalization maps
every number to ``0``); ``--items`` evaluation items of 30-80 words
(``eval.jsonl``); a training JSONL of ``--size`` MB of documents of 300-1500 words,
one in ``--plant-every`` with an evaluation item pasted at a random place, with one
word substituted in half of them (``train.jsonl``).  The planted rows are the truth.

Runs, each a fresh process on the same files, wall time and peak RSS from
``os.wait4`` (interpreter start and index building included):

* ``neardup`` — ``neardup decontaminate train.jsonl --against eval.jsonl -o OUT
  --quiet`` at its defaults (13-grams, containment >= 0.5, SipHash candidates), and
  ``neardup_xxh64`` with ``--hash-algorithm xxh64``;
* ``neardup_quarter`` — the default run on the first quarter of the file (peak
  memory must not grow with the corpus);
* ``datatrove`` — ``NGramsDecontFilter`` (datatrove's n-gram decontamination filter)
  with ``n_grams=13`` and its default text normalization, the index written as its
  ``NGramsDecontIndexer`` writes it (xxhash64 of each item's n-grams; the indexer's
  ``run`` needs lighteval, so the script computes the same hashes as the indexer's
  ``compute_hashes``, with datatrove's ``simplify_text``, ``ngrams`` and hash function), the records streamed from the same file and the kept
  ones written as JSONL.  Its default English word tokenizer needs NLTK's ``punkt``
  data (a download); the run gives it a whitespace tokenizer on the already
  simplified text (punctuation removed), which is what that text tokenizes to.
  datatrove drops a document on its first shared n-gram (GPT-3's rule); neardup
  requires half of an item's n-grams.

datatrove runs in its own interpreter (``--datatrove-python``, default
``/tmp/dtvenv/bin/python`` when it exists); without it only neardup runs.

Usage::

    python benchmarks/bench_decontaminate.py --size 200 --out benchmarks/results/decontaminate.json
    python benchmarks/bench_decontaminate.py --quick --out /tmp/decon.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_info, write_json

ROOT = Path(__file__).resolve().parents[1]
EXE = shutil.which("neardup") or str(Path(sys.executable).parent / "neardup")
DATATROVE = """
import json, sys, time
import numpy as np
from datatrove.data import Document
from datatrove.pipeline.decont.n_grams import NGramsDecontConfig, NGramsDecontFilter
from datatrove.utils.hashing import create_hash_func
from datatrove.utils.text import ngrams, simplify_text
from datatrove.utils.word_tokenizers import WordTokenizer

class Whitespace(WordTokenizer):
    def word_tokenize(self, text): return text.split()
    def sent_tokenize(self, text): return [text]
    def span_tokenize(self, text): return [(0, len(text))]

ev, train, index_dir, clean, flagged_out, n = sys.argv[1:7]
cfg = NGramsDecontConfig(n_grams=int(n), find_query_ngrams=True)
t0 = time.perf_counter()
tok, hash_func = Whitespace(), create_hash_func(cfg.hash_config)
hashes = set()
for line in open(ev, encoding="utf-8"):
    # NGramsDecontIndexer.compute_hashes of a label without a query.
    toks = tok.word_tokenize(simplify_text(json.loads(line)["text"], cfg.norm_config))
    hashes.update(map(hash_func, map(" ".join, ngrams(toks, cfg.n_grams))))
np.array(sorted(hashes), dtype=cfg.hash_config.np_descr).tofile(index_dir + "/eval.index.hashes")
filt = NGramsDecontFilter(index_dir, config=cfg, language=Whitespace())
filt.load_index_hashes()
t_index = time.perf_counter() - t0
flagged = []
with open(train, "rb") as src, open(clean, "wb") as out:
    for row, line in enumerate(src):
        doc = Document(text=json.loads(line)["text"], id=str(row))
        if filt.filter(doc) is True:
            out.write(line)
        else:
            flagged.append(row)
json.dump({"flagged": flagged, "index_s": t_index, "index_hashes": len(hashes)},
          open(flagged_out, "w"))
"""


def vocabulary(rng: random.Random, size: int) -> list[str]:
    sy = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(sy) for _ in range(rng.randint(1, 4))))
    return sorted(words)


def make_data(
    folder: Path, size_mb: int, n_items: int, plant_every: int, seed: int
) -> dict[str, Any]:
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    vocab = np.array(vocabulary(rng, 30_000), dtype=object)
    weights = 1.0 / (np.arange(len(vocab)) + 10.0)
    weights /= weights.sum()

    def words(k: int) -> list[str]:
        return list(vocab[nrng.choice(len(vocab), size=k, p=weights)])

    items = [" ".join(words(rng.randint(30, 80))) for _ in range(n_items)]
    with open(folder / "eval.jsonl", "w", encoding="utf-8") as fh:
        for i, t in enumerate(items):
            fh.write(json.dumps({"id": f"e{i}", "text": t}) + "\n")
    planted: list[dict[str, Any]] = []
    written = row = 0
    target = size_mb * 1_000_000
    pool = words(2_000_000)
    pos = 0
    with open(folder / "train.jsonl", "w", encoding="utf-8") as fh:
        while written < target:
            k = rng.randint(300, 1500)
            if pos + k > len(pool):
                pool, pos = words(2_000_000), 0
            doc = pool[pos : pos + k]
            pos += k
            if row % plant_every == plant_every // 2:
                item = rng.randrange(n_items)
                w = items[item].split(" ")
                edited = rng.random() < 0.5
                if edited:
                    w[rng.randrange(len(w))] = "zzedit"
                at = rng.randrange(len(doc) + 1)
                doc = doc[:at] + w + doc[at:]
                planted.append({"row": row, "item": f"e{item}", "edited": edited})
            line = json.dumps({"id": row, "text": " ".join(doc)}) + "\n"
            fh.write(line)
            written += len(line)
            row += 1
    return {"rows": row, "bytes": written, "planted": planted}


def timed_process(args: list[str]) -> dict[str, Any]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{args[:3]} failed ({code}): {err.decode()[-2000:]}")
    return {"wall_s": round(wall, 3), "peak_rss_bytes": usage.ru_maxrss * 1024,
            "stdout": out.decode()[-500:]}


def head_file(src: Path, dst: Path, fraction: float) -> int:
    limit = int(src.stat().st_size * fraction)
    n = 0
    with open(src, "rb") as a, open(dst, "wb") as b:
        for line in a:
            if n >= limit:
                break
            b.write(line)
            n += len(line)
    return n


def neardup_run(train: Path, ev: Path, out: Path, *extra: str) -> dict[str, Any]:
    got = timed_process([EXE, "decontaminate", str(train), "--against", str(ev), "-o", str(out),
                         "--overwrite", "--quiet", *extra])
    with open(out / "removed.jsonl", encoding="utf-8") as fh:
        got["flagged"] = [json.loads(line)["row"] for line in fh]
    got["report"] = json.loads((out / "report.json").read_text())["sets"]["eval"]
    return got


def score(run: dict[str, Any], planted: list[dict[str, Any]], nbytes: int) -> dict[str, Any]:
    flagged = set(run.pop("flagged"))
    truth = {p["row"] for p in planted}
    edited = {p["row"] for p in planted if p["edited"]}
    run.update(
        mb_per_s=round(nbytes / 1e6 / run["wall_s"], 2),
        flagged=len(flagged),
        planted_found=len(flagged & truth),
        planted_edited_found=len(flagged & edited),
        flagged_not_planted=len(flagged - truth),
    )
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=200, help="training MB (default 200)")
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--plant-every", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="5 MB, 500 items")
    ap.add_argument("--datatrove-python", default="/tmp/dtvenv/bin/python")
    ap.add_argument("--work", default=None, help="folder for the data (default: a temp one)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/decontaminate.json")
    a = ap.parse_args()
    if a.quick:
        a.size, a.items, a.plant_every = 5, 500, 50
    work = Path(a.work or tempfile.mkdtemp(prefix="bench-decon-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    data = make_data(work, a.size, a.items, a.plant_every, a.seed)
    print(f"data: {data['rows']} rows, {data['bytes'] / 1e6:.0f} MB, "
          f"{len(data['planted'])} planted, {time.perf_counter() - t0:.0f} s", flush=True)
    train, ev = work / "train.jsonl", work / "eval.jsonl"
    results: dict[str, Any] = {
        "machine": machine_info(),
        "params": {"size_mb": a.size, "items": a.items, "plant_every": a.plant_every,
                   "seed": a.seed, "ngram": 13},
        "data": {"rows": data["rows"], "bytes": data["bytes"], "planted": len(data["planted"]),
                 "planted_edited": sum(p["edited"] for p in data["planted"])},
        "runs": {},
    }
    runs = results["runs"]
    runs["neardup"] = score(neardup_run(train, ev, work / "o1"), data["planted"], data["bytes"])
    print("neardup", runs["neardup"]["mb_per_s"], "MB/s", flush=True)
    runs["neardup_xxh64"] = score(
        neardup_run(train, ev, work / "o2", "--hash-algorithm", "xxh64"),
        data["planted"], data["bytes"],
    )
    quarter = work / "quarter.jsonl"
    qbytes = head_file(train, quarter, 0.25)
    with open(quarter, "rb") as fh:
        qrows = sum(1 for _ in fh)
    runs["neardup_quarter"] = score(
        neardup_run(quarter, ev, work / "o3"),
        [p for p in data["planted"] if p["row"] < qrows], qbytes,
    )
    runs["neardup_quarter"]["bytes"] = qbytes
    dt = Path(a.datatrove_python)
    if dt.exists():
        idx = work / "dtindex"
        idx.mkdir(exist_ok=True)
        res = timed_process([str(dt), "-c", DATATROVE, str(ev), str(train), str(idx),
                             str(work / "dt_clean.jsonl"), str(work / "dt.json"), "13"])
        extra = json.loads((work / "dt.json").read_text())
        res.update(flagged=extra["flagged"], index_s=round(extra["index_s"], 3),
                   index_hashes=extra["index_hashes"])
        ver = subprocess.run([str(dt), "-c", "import importlib.metadata as m;"
                              "print(m.version('datatrove'))"], capture_output=True, text=True)
        res["version"] = ver.stdout.strip()
        runs["datatrove"] = score(res, data["planted"], data["bytes"])
        results["ratios"] = {
            "neardup_speed_vs_datatrove": round(
                runs["neardup"]["mb_per_s"] / runs["datatrove"]["mb_per_s"], 2),
            "neardup_peak_memory_vs_datatrove": round(
                runs["neardup"]["peak_rss_bytes"] / runs["datatrove"]["peak_rss_bytes"], 2),
        }
    results["memory_growth_bytes_quarter_to_full"] = (
        runs["neardup"]["peak_rss_bytes"] - runs["neardup_quarter"]["peak_rss_bytes"]
    )
    write_json(a.out, results)
    if a.work is None:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({k: {x: v.get(x) for x in ("mb_per_s", "peak_rss_bytes", "planted_found",
                                                 "flagged_not_planted")}
                      for k, v in runs.items()}, indent=1))


if __name__ == "__main__":
    main()

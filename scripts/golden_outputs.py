"""Digests of neardup's outputs on fixed inputs: proof that a change kept them.

A restructuring must not change what neardup writes.  This script runs the
commands of the command line (real processes) on inputs it builds
deterministically, hashes every output file, and writes or checks a JSON of the
digests:

    python scripts/golden_outputs.py --write tests/golden/outputs.json  # record
    python scripts/golden_outputs.py --check tests/golden/outputs.json  # compare

``tests/batch/test_golden_outputs.py`` runs the check against the committed digests.
The same works on any corpus (a benchmark corpus, your own data): record with the
old version, check with the new one::

    python scripts/golden_outputs.py --input big.jsonl --write /tmp/before.json
    python scripts/golden_outputs.py --input big.jsonl --check /tmp/before.json

With ``--input`` the runs are ``dedup`` (defaults and ``--method exact``),
``audit`` and ``split`` of that corpus (records need an ``id``; a record without a
``split`` field gets one, every fifth ``test``); with ``--vectors-input`` (and
``--vector-field``), ``dedup --vectors`` at cosine 0.9.
``benchmarks/golden_corpora.py`` does this for every benchmark corpus shape.

What is compared: every file each command writes, byte for byte, after two
normalisations that make runs comparable — the run's own folder is written
``<dir>`` wherever it appears (outputs name their inputs), and the fields that
measure the run rather than its result (``VOLATILE``: timings, memory) are
removed from JSON files.  Everything else counts, including the order of lines.

Outputs added after the committed record was made (``ADDED``: the per-language
counts of ``stats.json`` and ``audit.json``, the access-policy counts of
``audit.json``, and the per-language section of each ``report.html``) are removed
too, so that the record keeps proving that every
output that existed before is unchanged byte for byte; the added outputs are
checked by their own tests (tests/batch/test_languages.py, tests/lineage/test_audit.py).

Runs: ``dedup`` of the bundled sample (defaults, ``--method exact``, ``--keep
longest``); ``dedup``, ``audit`` and ``split`` of a planted corpus of 3,000
synthetic documents with split and origin fields; ``dedup --vectors`` of 2,000
planted vectors; with ``--ray``, ``dedup --engine ray`` of the planted corpus.

Text runs pass ``--tokenizer 1`` (the word tokenizer of the releases before
tokenizer versions) to a neardup that has the option, so that a record pins the
one behaviour that older checkouts (``--neardup-src``) and newer ones share.  The
default tokenizer writes other scheme fingerprints into ``stats.json``, the
report and saved indexes, and finds other words in text of scripts written
without spaces.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "sample.jsonl"
# Fields that measure the run, not its result (removed at any depth of a JSON file):
# times, memory, and the bytes the Ray engine shuffled (Arrow block sizes vary).
VOLATILE = frozenset({"timings_s", "peak_memory_bytes", "wall_s", "elapsed_s", "shuffles"})
# Keys (at any depth of a JSON file) and HTML sections added after the record.
ADDED = frozenset({"by_language", "language_field", "policies", "policy_field"})
ADDED_HTML = re.compile(rb"<section class='languages'>.*?</section>", re.DOTALL)
PLANTED_DOCS = 3_000
VECTORS = 2_000
DIM = 32


def _planted(path: Path) -> None:
    """3,000 documents (10 % planted near copies) with split and origin fields."""
    import neardup
    import neardup.testing

    base = neardup.testing.synthetic_documents(PLANTED_DOCS - PLANTED_DOCS // 10, seed=11, words=60)
    texts, parents = neardup.testing.plant_near_duplicates(
        base, copies=PLANTED_DOCS // 10, edit_rate=[0.0, 0.02, 0.05, 0.1], seed=12
    )
    with open(path, "w", encoding="utf-8") as f:
        for i, (text, parent) in enumerate(zip(texts, parents, strict=True)):
            rec = {
                "id": f"d{i:05d}",
                "text": text,
                "split": "test" if i % 5 == 0 else "train",
                "origin": f"o{parent if parent >= 0 else i}" if i % 3 else None,
            }
            f.write(json.dumps(rec) + "\n")


def _vectors(path: Path) -> None:
    """2,000 vectors of 32 dimensions, 10 % of them small perturbations of others."""
    import numpy as np

    rng = np.random.RandomState(13)  # the legacy generator: its stream never changes
    n_base = VECTORS - VECTORS // 10
    vecs = rng.standard_normal((VECTORS, DIM))
    src = rng.randint(0, n_base, size=VECTORS - n_base)
    vecs[n_base:] = vecs[src] + 0.05 * rng.standard_normal((VECTORS - n_base, DIM))
    with open(path, "w", encoding="utf-8") as f:
        for i, v in enumerate(vecs):
            # Rounded so that the text form, not float printing, fixes the input.
            f.write(json.dumps({"id": f"v{i:05d}", "embedding": [round(float(x), 6) for x in v]}))
            f.write("\n")


SPLIT_FIELDS = ("--split-field", "split", "--origin-field", "origin")


def _with_split(src: Path, dst: Path) -> None:
    """Copy a JSONL corpus, giving each record without one a ``split`` field (every
    fifth record ``test``) so that ``audit`` has splits to compare."""
    with open(src, encoding="utf-8") as f, open(dst, "w", encoding="utf-8") as out:
        for i, line in enumerate(f):
            rec = json.loads(line)
            if "split" not in rec:
                rec["split"] = "test" if i % 5 == 0 else "train"
                line = json.dumps(rec, ensure_ascii=False) + "\n"
            out.write(line)


def _audit_split(name: str, path: str) -> list[tuple[str, list[str]]]:
    return [
        (
            f"audit-{name}",
            ["audit", path, "--id-field", "id", *SPLIT_FIELDS],
        ),
        (
            f"split-{name}",
            ["split", path, "--id-field", "id", "--ratios", "train=0.8,test=0.2", "--seed", "7"],
        ),
    ]


def _vector_dedup(name: str, path: str, field: str) -> tuple[str, list[str]]:
    args = ["--id-field", "id", "--vectors", field, "--metric", "cosine", "--threshold", "0.9"]
    return (f"dedup-{name}", ["dedup", path, *args])


def _runs(inputs: dict[str, Path], ray: bool, vector_field: str) -> list[tuple[str, list[str]]]:
    """(name, neardup arguments before the output folder)."""
    if "input" in inputs:
        p = str(inputs["input"])
        return [
            ("dedup-input", ["dedup", p]),
            ("dedup-input-exact", ["dedup", p, "--method", "exact"]),
            *_audit_split("input", p),
        ]
    if "vectors-input" in inputs:
        return [_vector_dedup("vectors-input", str(inputs["vectors-input"]), vector_field)]
    s, c, v = str(inputs["sample"]), str(inputs["planted"]), str(inputs["vectors"])
    runs = [
        ("dedup-sample", ["dedup", s]),
        ("dedup-sample-exact", ["dedup", s, "--method", "exact"]),
        ("dedup-sample-keep-longest", ["dedup", s, "--keep", "longest"]),
        ("dedup-planted", ["dedup", c, "--id-field", "id"]),
        *_audit_split("planted", c),
        _vector_dedup("vectors", v, "embedding"),
    ]
    if ray:
        runs.append(
            (
                "dedup-planted-ray",
                ["dedup", c, "--id-field", "id", "--engine", "ray", "--ray-cpus", "2"],
            )
        )
    return runs


def _drop_volatile(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _drop_volatile(v) for k, v in x.items() if k not in VOLATILE | ADDED}
    if isinstance(x, list):
        return [_drop_volatile(v) for v in x]
    return x


def normalized(path: Path, folder: Path) -> bytes:
    """The bytes of one output file as compared: ``folder`` written ``<dir>``, for
    JSON files the ``VOLATILE`` and ``ADDED`` fields removed, for HTML files the
    ``ADDED_HTML`` sections."""
    data = path.read_bytes().replace(str(folder).encode(), b"<dir>")
    if path.suffix == ".html":
        data = ADDED_HTML.sub(b"", data)
    if path.suffix == ".json":
        doc = _drop_volatile(json.loads(data))
        data = json.dumps(doc, sort_keys=True, ensure_ascii=False).encode()
    return data


def digests(out: Path, folder: Path) -> dict[str, str]:
    """SHA-256 of every file under ``out`` (relative path -> digest)."""
    return {
        str(p.relative_to(out)): hashlib.sha256(normalized(p, folder)).hexdigest()
        for p in sorted(out.rglob("*"))
        if p.is_file()
    }


def _legacy_tokenizer(env: dict[str, str], folder: Path) -> list[str]:
    """``["--tokenizer", "1"]`` if the neardup that ``env`` runs has the option, else
    none (a checkout from before tokenizer versions has only that tokenizer)."""
    proc = subprocess.run(
        [sys.executable, "-m", "neardup", "dedup", "--help"],
        capture_output=True,
        text=True,
        cwd=folder,
        env=env,
        check=False,
    )
    return ["--tokenizer", "1"] if "--tokenizer" in proc.stdout else []


def collect(
    *,
    input_path: Path | None = None,
    vectors_path: Path | None = None,
    vector_field: str = "embedding",
    neardup_src: Path | None = None,
    ray: bool = False,
    progress: Callable[[str], None] = lambda s: None,
) -> dict[str, Any]:
    """Run every command in a fresh temporary folder; {run name: {file: digest}}.

    ``neardup_src`` runs the commands with the neardup of that source folder (an
    older checkout's ``src``) instead of the one this Python imports.  Raises
    ``RuntimeError`` with the command's output when a command fails."""
    env = dict(os.environ)
    if neardup_src is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(neardup_src.resolve()), *filter(None, [env.get("PYTHONPATH")])]
        )
    folder = Path(tempfile.mkdtemp(prefix="neardup-golden-"))
    try:
        if input_path is not None:
            inputs = {"input": folder / input_path.name}
            _with_split(input_path, inputs["input"])
        elif vectors_path is not None:
            inputs = {"vectors-input": folder / vectors_path.name}
            shutil.copyfile(vectors_path, inputs["vectors-input"])
        else:
            inputs = {
                "sample": folder / "sample.jsonl",
                "planted": folder / "planted.jsonl",
                "vectors": folder / "vectors.jsonl",
            }
            shutil.copyfile(SAMPLE, inputs["sample"])
            _planted(inputs["planted"])
            _vectors(inputs["vectors"])
        result: dict[str, Any] = {
            "inputs": {k: hashlib.sha256(p.read_bytes()).hexdigest() for k, p in inputs.items()},
            "runs": {},
        }
        legacy = _legacy_tokenizer(env, folder)
        for name, args in _runs(inputs, ray, vector_field):
            out = folder / name
            words = legacy if "--vectors" not in args else []
            cmd = [sys.executable, "-m", "neardup", *args, *words, "--output", str(out), "--quiet"]
            progress(name)
            proc = subprocess.run(
                cmd, capture_output=True, text=True, cwd=folder, env=env, check=False
            )
            # audit and split exit 6 when they find leakage; their outputs are complete.
            if proc.returncode not in (0, 6) or not out.is_dir():
                raise RuntimeError(
                    f"{name}: {' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
                )
            result["runs"][name] = {"exit_code": proc.returncode, "files": digests(out, folder)}
        return result
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def compare(expected: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """Differences between two results of :func:`collect`, one line each."""
    diffs: list[str] = []
    if expected.get("inputs") != got.get("inputs"):
        diffs.append(f"inputs differ: {expected.get('inputs')} vs {got.get('inputs')}")
    for name in sorted(set(expected["runs"]) | set(got["runs"])):
        a, b = expected["runs"].get(name), got["runs"].get(name)
        if a is None or b is None:
            diffs.append(f"{name}: only in {'the check' if a is None else 'the record'}")
            continue
        if a["exit_code"] != b["exit_code"]:
            diffs.append(f"{name}: exit code {a['exit_code']} -> {b['exit_code']}")
        for f in sorted(set(a["files"]) | set(b["files"])):
            if a["files"].get(f) != b["files"].get(f):
                diffs.append(f"{name}/{f}: {a['files'].get(f)} -> {b['files'].get(f)}")
    return diffs


def add_mode_arguments(p: argparse.ArgumentParser) -> None:
    """``--write``/``--check`` (one of them) and ``--neardup-src``, shared with
    ``benchmarks/golden_corpora.py``."""
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", type=Path, help="record the digests in this JSON file")
    g.add_argument("--check", type=Path, help="compare with the digests in this JSON file")
    p.add_argument(
        "--neardup-src", type=Path, help="run the neardup of this src folder (an older checkout)"
    )


def write(path: Path, got: dict[str, Any]) -> int:
    """Record ``got`` in ``path``; the exit status."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    print(f"wrote {path}", file=sys.stderr)
    return 0


def verdict(diffs: list[str], runs: int) -> int:
    """Print the differences and a one-line summary; the exit status."""
    for d in diffs:
        print(d)
    summary = "identical" if not diffs else f"{len(diffs)} differences"
    print(f"{summary} ({runs} runs)", file=sys.stderr)
    return 1 if diffs else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_mode_arguments(p)
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--input", type=Path, help="digest dedup, audit and split runs of this JSONL corpus instead"
    )
    src.add_argument(
        "--vectors-input", type=Path, help="digest a dedup --vectors run of this corpus instead"
    )
    p.add_argument("--vector-field", default="embedding", help="with --vectors-input")
    p.add_argument("--ray", action="store_true", help="also dedup --engine ray")
    a = p.parse_args(argv)
    got = collect(
        input_path=a.input,
        vectors_path=a.vectors_input,
        vector_field=a.vector_field,
        neardup_src=a.neardup_src,
        ray=a.ray,
        progress=lambda s: print(f"  {s}", file=sys.stderr, flush=True),
    )
    if a.write:
        return write(a.write, got)
    expected = json.loads(a.check.read_text())
    if not a.ray:
        expected["runs"] = {k: v for k, v in expected["runs"].items() if not k.endswith("-ray")}
    return verdict(compare(expected, got), len(got["runs"]))


if __name__ == "__main__":
    raise SystemExit(main())

"""``neardup decontaminate``: stream a training corpus once against indexed
evaluation sets, and write the clean corpus, the removed records with their
matches, and a per-evaluation-set report.

Memory is the evaluation index plus one batch of training text
(``DecontamConfig.batch_bytes``), whatever the size of the corpus: records are
read, checked and written batch by batch.  The report keeps per evaluation item
counters and, per set, the sources of contaminated documents (at most
:data:`~neardup.lineage.decontam_shard.MAX_SOURCES` distinct ones; later ones are
counted under ``"(other)"``).

Output folder (staged and committed whole, like every command's):

* ``clean/<input name>`` — each training input's records that contain no
  evaluation item, in the input's format and compression (JSONL lines byte for
  byte; Parquet with the input's schema);
* ``removed.jsonl`` — one line per removed record: ``input``, ``row``, ``id``,
  ``matches`` (:meth:`Match.to_dict`) and ``record`` (the original record);
* ``report.json`` and ``report.html`` — per evaluation set: items, items too short
  to check, contaminated items, training documents containing them, top items and
  top sources.

Example:
    >>> import tempfile, json, os
    >>> d = tempfile.mkdtemp()
    >>> q = "what is the capital city of france and why is it there"
    >>> with open(os.path.join(d, "eval.jsonl"), "w") as f:
    ...     _ = f.write(json.dumps({"text": q}) + "\\n")
    >>> with open(os.path.join(d, "train.jsonl"), "w") as f:
    ...     _ = f.write(json.dumps({"text": "blog. " + q + ". bye"}) + "\\n")
    >>> res = run_decontaminate([os.path.join(d, "train.jsonl")],
    ...     [("eval", os.path.join(d, "eval.jsonl"))], os.path.join(d, "out"),
    ...     config=DecontamConfig(ngram=5))
    >>> res.removed, res.report["sets"]["eval"]["contaminated_items"]
    (1, 1)
"""

from __future__ import annotations

import io
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from neardup.batch.outputs import commit_output, staged_output, write_json, writing
from neardup.core._errors import InputError
from neardup.core._posix import peak_rss_bytes
from neardup.core.ids import json_id
from neardup.io.corpus import read_corpus
from neardup.io.inputs import resolve_inputs, strip_compression
from neardup.lineage.decontam import DecontamConfig, EvalIndex, run_key
from neardup.lineage.decontam_report import render_html
from neardup.lineage.decontam_shard import InputCounts, Tally, check_input, training_format
from neardup.text.hashing import HashKey

__all__ = [
    "DecontamResult",
    "Plan",
    "clean_names",
    "eval_set_name",
    "finish",
    "prepare",
    "run_decontaminate",
]


def eval_set_name(spec: str) -> tuple[str, str]:
    """``NAME=PATH`` or ``PATH`` (named by its file name without extensions)."""
    name, sep, path = spec.partition("=")
    if sep and name and not os.path.exists(spec):
        return name, path
    base = strip_compression(os.path.basename(spec.rstrip(os.sep)))[0]
    return base.split(".")[0] or base, spec


@dataclass
class DecontamResult:
    """What a run found: documents read, removed and kept, and the report."""

    documents: int
    removed: int
    kept: int
    bad: int
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def contaminated_items(self) -> int:
        return sum(int(s["contaminated_items"]) for s in self.report["sets"].values())


def _load_eval(
    against: Sequence[tuple[str, str]], text_field: str, id_field: str | None, skip_bad: bool
) -> tuple[list[tuple[str, Any, str]], dict[str, int]]:
    items: list[tuple[str, Any, str]] = []
    counts: dict[str, int] = {}
    for name, path in against:
        if name in counts:
            raise InputError(
                path, None, f"two evaluation sets are named {name!r}", "name them NAME=PATH"
            )
        corpus = read_corpus(
            resolve_inputs([path]),
            text_field=text_field,
            id_field=id_field,
            skip_bad=skip_bad,
            detect_id=id_field is None,
        )
        texts = list(corpus.texts)
        counts[name] = len(texts)
        items.extend((name, json_id(i), t) for i, t in zip(corpus.ids, texts, strict=True))
    return items, counts


def clean_names(inputs: Sequence[str]) -> list[str]:
    names = [os.path.basename(p.rstrip(os.sep)) for p in inputs]
    if len(set(names)) == len(names):
        return names
    return [f"{i:05d}-{n}" for i, n in enumerate(names)]


def run_decontaminate(
    inputs: Sequence[str],
    against: Sequence[tuple[str, str]],
    output: str | None,
    *,
    config: DecontamConfig | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    eval_text_field: str | None = None,
    eval_id_field: str | None = None,
    source_field: str | None = None,
    skip_bad: bool = False,
    overwrite: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> DecontamResult:
    """Check every training record of ``inputs`` against the evaluation sets
    ``against`` (``(name, path)`` pairs) and write the outputs into ``output``
    (None: report only).  ``progress(documents, bytes)`` is called per batch."""
    plan = prepare(inputs, against, config, eval_text_field or text_field, eval_id_field, skip_bad)
    index = EvalIndex.build(plan.items, plan.config, plan.key)
    tally = Tally(index, dict(against), plan.counts)
    plan.t_index = time.perf_counter() - plan.t0
    totals = InputCounts()
    with staged_output(output, overwrite, plan.protect) as tmp:
        rem_fh: IO[bytes] = (
            open(os.path.join(tmp, "removed.jsonl"), "wb") if tmp else io.BytesIO()  # noqa: SIM115
        )
        if tmp:
            os.mkdir(os.path.join(tmp, "clean"))
        names = clean_names(inputs)
        with writing(tmp or "<memory>"), rem_fh:
            for fi, path in enumerate(inputs):
                done = (totals.documents, totals.bytes)

                def step(d: int, b: int, done: tuple[int, int] = done) -> None:
                    if progress is not None:
                        progress(done[0] + d, done[1] + b)

                c = check_input(
                    path,
                    fi,
                    index,
                    tally,
                    clean_path=os.path.join(tmp, "clean", names[fi]) if tmp else None,
                    removed=rem_fh,
                    text_field=text_field,
                    id_field=id_field,
                    source_field=source_field,
                    skip_bad=skip_bad,
                    batch_bytes=plan.config.batch_bytes,
                    progress=step,
                )
                totals += c
        return finish(plan, tally, index.nbytes, totals, tmp, output)


@dataclass
class Plan:
    """A run's checked inputs and evaluation items, before any checking: what
    both engines start from (:func:`prepare`)."""

    inputs: list[str]
    config: DecontamConfig
    items: list[tuple[str, Any, str]]
    counts: dict[str, int]
    key: HashKey | None
    protect: list[str]
    t0: float
    t_index: float = 0.0


def prepare(
    inputs: Sequence[str],
    against: Sequence[tuple[str, str]],
    config: DecontamConfig | None,
    eval_text_field: str,
    eval_id_field: str | None,
    skip_bad: bool,
) -> Plan:
    """Check the inputs' formats and read the evaluation sets (the run's key is
    drawn here, so that every worker of a run hashes alike)."""
    cfg = config or DecontamConfig()
    t0 = time.perf_counter()
    if not inputs:
        raise InputError("<none>", None, "no training input given", "name at least one input")
    if not against:
        raise InputError("<none>", None, "no evaluation set given", "pass --against EVAL")
    for p in inputs:
        training_format(p)
    items, counts = _load_eval(against, eval_text_field, eval_id_field, skip_bad)
    protect = [*inputs, *(p for _, p in against)]
    return Plan(list(inputs), cfg, items, counts, run_key(cfg), protect, t0)


def finish(
    plan: Plan,
    tally: Tally,
    index_bytes: int,
    totals: InputCounts,
    tmp: str | None,
    output: str | None,
) -> DecontamResult:
    """The report of a run from its merged tally and totals; written with
    ``report.html`` into ``tmp`` and the staged folder committed as ``output``
    (when both are given)."""
    docs, removed, nbytes, bad = totals.documents, totals.removed, totals.bytes, totals.bad
    cfg = plan.config
    report = {
        "parameters": {
            "ngram": cfg.ngram,
            "min_containment": cfg.min_containment,
            "normalizer": cfg.normalizer,
            "hash_algorithm": cfg.hash_algorithm,
            "config_fingerprint": cfg.fingerprint,
        },
        "training": {
            "inputs": plan.inputs,
            "documents": docs,
            "removed": removed,
            "kept": docs - removed,
            "bad_records": bad,
            "bytes": nbytes,
        },
        "sets": tally.report(),
        "examples": tally.samples,
        "timings_s": {
            "index": round(plan.t_index, 6),
            "total": round(time.perf_counter() - plan.t0, 6),
        },
        "peak_memory_bytes": peak_rss_bytes(),
        "index_bytes": index_bytes,
    }
    if tmp is not None and output is not None:
        with writing(tmp):
            write_json(os.path.join(tmp, "report.json"), report)
            with open(os.path.join(tmp, "report.html"), "w", encoding="utf-8") as fh:
                fh.write(render_html(report))
        commit_output(tmp, output)
    return DecontamResult(docs, removed, docs - removed, bad, report)

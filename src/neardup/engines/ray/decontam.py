"""``neardup decontaminate --engine ray``: the training inputs checked in parallel
on Ray, the same outputs as the local job.

Every worker is an actor that indexes the evaluation items once (with the run's
key, drawn by the driver) and then checks whole training inputs, one call per
input, with :func:`~neardup.lineage.decontam_shard.check_input` — the local
engine's unit of work.  A worker writes the input's clean file straight into the
staged output folder and its removed records into a part file there; the driver
merges the workers' tallies and concatenates the parts in input order.  So
``clean/``, ``removed.jsonl`` and ``report.json``'s counts equal the local
job's; only the timings, the peak memory (the driver's) and, past
:data:`~neardup.lineage.decontam_shard.MAX_SOURCES` distinct sources in one
input, which sources are counted under ``"(other)"`` can differ.

Memory per worker is the evaluation index plus one batch of training text, as in
the local job.  The output folder's parent must be visible to every node (a
local disk for a one-machine cluster, a shared mount otherwise).

Example (needs the ``ray`` extra; starts a local Ray with 2 CPUs)::

    run_decontaminate_ray(["shards/"], [("mmlu", "mmlu_test.jsonl")], "decon/",
                          num_cpus=2)
"""

from __future__ import annotations

import io
import os
import shutil
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

from neardup.batch.outputs import staged_output, writing
from neardup.core._errors import NeardupError
from neardup.engines.ray.common import one_thread
from neardup.engines.ray.runner import start_ray
from neardup.lineage.decontam import DecontamConfig, EvalIndex
from neardup.lineage.decontam_job import DecontamResult, Plan, clean_names, finish, prepare
from neardup.lineage.decontam_shard import InputCounts, Tally, check_input
from neardup.text.hashing import HashKey

__all__ = ["run_decontaminate_ray"]

_PARTS = ".removed-parts"


class _Checker:
    """A Ray actor: the evaluation index, built once, and the options of the run."""

    def __init__(
        self,
        items: list[tuple[str, Any, str]],
        config: DecontamConfig,
        key: HashKey | None,
        sets: dict[str, str],
        counts: dict[str, int],
        options: dict[str, Any],
    ) -> None:
        one_thread()
        self.index = EvalIndex.build(items, config, key)
        self.sets = sets
        self.counts = counts
        self.options = options

    def check(
        self, path: str, input_no: int, clean_path: str | None, removed_path: str | None
    ) -> tuple[dict[str, Any], InputCounts]:
        tally = Tally(self.index, self.sets, self.counts)
        fh: IO[bytes] = open(removed_path, "wb") if removed_path else io.BytesIO()  # noqa: SIM115
        with fh:
            c = check_input(
                path, input_no, self.index, tally, clean_path=clean_path, removed=fh, **self.options
            )
        return tally.state(), c


def run_decontaminate_ray(
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
    ray_address: str | None = None,
    num_cpus: int | None = None,
) -> DecontamResult:
    """:func:`~neardup.lineage.decontam_job.run_decontaminate` with one Ray task
    per training input (same arguments, same outputs).  ``ray_address`` joins a
    running cluster; without it a local Ray with ``num_cpus`` CPUs is started (and
    stopped) for the run, or an already initialized Ray is used as is.
    ``progress(documents, bytes)`` is called as inputs finish, in input order."""
    plan = prepare(inputs, against, config, eval_text_field or text_field, eval_id_field, skip_bad)
    options = {
        "text_field": text_field,
        "id_field": id_field,
        "source_field": source_field,
        "skip_bad": skip_bad,
        "batch_bytes": plan.config.batch_bytes,
    }
    ray, started = start_ray(ray_address, num_cpus)
    try:
        with staged_output(output, overwrite, plan.protect) as tmp:
            return _run(ray, plan, dict(against), options, tmp, output, progress)
    finally:
        if started:
            ray.shutdown()


def _run(
    ray: Any,
    plan: Plan,
    sets: dict[str, str],
    options: dict[str, Any],
    tmp: str | None,
    output: str | None,
    progress: Callable[[int, int], None] | None,
) -> DecontamResult:
    from ray.util import ActorPool

    index = EvalIndex.build(plan.items, plan.config, plan.key)
    tally = Tally(index, sets, plan.counts)
    plan.t_index = time.perf_counter() - plan.t0
    names = clean_names(plan.inputs)
    if tmp is not None:
        os.mkdir(os.path.join(tmp, "clean"))
        os.mkdir(os.path.join(tmp, _PARTS))
    cpus = max(1, int(ray.available_resources().get("CPU", 1)))
    items = ray.put(plan.items)
    actor = ray.remote(num_cpus=1)(_Checker)
    pool = ActorPool(
        [
            actor.remote(items, plan.config, plan.key, sets, plan.counts, options)
            for _ in range(min(cpus, len(plan.inputs)))
        ]
    )
    jobs = [
        (
            path,
            fi,
            os.path.join(tmp, "clean", names[fi]) if tmp else None,
            os.path.join(tmp, _PARTS, f"{fi:05d}.jsonl") if tmp else None,
        )
        for fi, path in enumerate(plan.inputs)
    ]
    totals = InputCounts()
    try:
        results = pool.map(lambda a, job: a.check.remote(*job), jobs)
        for state, counts in results:
            tally.merge(state)
            totals += counts
            if progress is not None:
                progress(totals.documents, totals.bytes)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, NeardupError):
            raise cause from None
        raise
    if tmp is not None:
        parts = os.path.join(tmp, _PARTS)
        with writing(tmp), open(os.path.join(tmp, "removed.jsonl"), "wb") as out:
            for job in jobs:
                with open(str(job[3]), "rb") as part:
                    shutil.copyfileobj(part, out, 1 << 20)
        shutil.rmtree(parts)
    return finish(plan, tally, index.nbytes, totals, tmp, output)

"""The driver's side of a Ray run: starting Ray, the Ray Data settings, and
:class:`Run` — the shuffle, the stage files in the work folder and the manifest
records that every stage goes through."""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from neardup.core._errors import InvalidConfig
from neardup.engines.ray.common import Job, column, feature_path
from neardup.engines.ray.manifest import Manifest

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Run", "data_context", "expr_col", "pq_rows", "restore_data_context", "start_ray"]


@dataclass
class Run:
    """Driver state of one run: the Ray module, the job, the manifest, measurements."""

    ray: Any
    job: Job
    manifest: Manifest
    timings: dict[str, float] = field(default_factory=dict)
    shuffles: dict[str, dict[str, int]] = field(default_factory=dict)
    progress: Callable[[str, int, int], None] | None = None
    partition_bytes: int = 128 << 20

    @property
    def rd(self) -> Any:
        return self.ray.data

    def shuffle(
        self,
        name: str,
        ds: Any,
        reduce: Callable[[pa.Table], pa.Table],
        *,
        exact: bool = False,
    ) -> Any:
        """Hash shuffle ``ds`` on its ``_part`` column and run ``reduce`` per partition.

        The partition count is the larger of ``job.parts`` and the input's size over
        ``partition_bytes``, so that one reduce holds about that much whatever the
        corpus size; reduces do not depend on it.  With ``exact`` the ``_part``
        values are the partitions themselves (one input shard each).
        """
        ds = ds.materialize()
        rows, size = int(ds.count()), int(ds.size_bytes())
        rec = self.shuffles.setdefault(name, {"rows": 0, "bytes": 0, "partitions": 0})
        rec["rows"] += rows
        rec["bytes"] += size
        if not exact:
            parts = max(self.job.parts, -(-size // self.partition_bytes))
            rec["partitions"] = max(rec["partitions"], parts)
            ds = ds.map_batches(lambda t: _modulo(t, parts), batch_format="pyarrow")
        return ds.groupby("_part").map_groups(reduce, batch_format="pyarrow")

    def files(self, stage: str) -> list[str]:
        folder = os.path.join(self.job.work, stage)
        if not os.path.isdir(folder):
            return []
        return sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".parquet"))

    def write(self, stage: str, ds: Any) -> list[str]:
        folder = os.path.join(self.job.work, stage)
        if os.path.isdir(folder):
            shutil.rmtree(folder)
        ds.write_parquet(folder)
        return self.files(stage)

    def read(self, stage: str, columns: list[str] | None = None) -> Any:
        files = self.files(stage)
        if not files:
            return None
        return self.read_files(files, columns)

    def read_files(self, files: Sequence[str], columns: list[str] | None = None) -> Any:
        """A dataset of Parquet files, one read task per file."""
        items = [{"path": f} for f in files]
        ds = self.rd.from_items(items, override_num_blocks=max(1, len(items)))
        return ds.map_batches(lambda b: _read_parquet(b, columns), batch_size=1)

    def features(self, columns: list[str]) -> Any:
        """``columns`` of every input shard's feature file, in shard order."""
        files = [feature_path(self.job.work, i) for i in range(len(self.job.shards))]
        return self.read_files(files, columns)

    def stage(
        self, name: str, run: Callable[[], tuple[list[str], dict[str, Any]]]
    ) -> dict[str, Any]:
        """The info of stage ``name``: recorded by an earlier run, or ``run()`` now."""
        info = self.manifest.done(name)
        if info is not None:
            return info
        t0 = time.perf_counter()
        files, info = run()
        secs = time.perf_counter() - t0
        self.timings[name.split("/")[0]] = self.timings.get(name.split("/")[0], 0.0) + secs
        self.manifest.record(name, files, info, secs)
        if self.progress is not None:
            self.progress(name, 1, 1)
        return info


def start_ray(address: str | None, num_cpus: int | None) -> tuple[Any, bool]:
    """The ``ray`` module, initialized, and whether this run started it."""
    try:
        import ray
    except ImportError as exc:
        raise InvalidConfig(
            "engine", "ray", "Ray is not installed", "pip install 'neardup[ray]'"
        ) from exc
    if ray.is_initialized():
        return ray, False

    if address is not None:
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    else:
        ray.init(
            num_cpus=num_cpus,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
    return ray, True


def data_context(ray: Any) -> dict[str, Any]:
    """Set the Ray Data context for the run; returns the previous values.

    The sort-based pull shuffle runs as plain tasks; the default hash shuffle
    starts aggregator actors for every ``groupby``, which dominates small
    shuffles.
    """
    from ray.data.context import ShuffleStrategy

    ctx = ray.data.DataContext.get_current()
    old = {
        "enable_progress_bars": ctx.enable_progress_bars,
        "shuffle_strategy": ctx.shuffle_strategy,
    }
    ctx.enable_progress_bars = False
    ctx.shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED
    # Ray Data logs every execution at INFO on stderr; keep its warnings only.
    old["log_level"] = logging.getLogger("ray.data").level
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    return old


def restore_data_context(ray: Any, saved: dict[str, Any]) -> None:
    """Put back the values :func:`data_context` returned (``saved`` is consumed)."""
    ctx = ray.data.DataContext.get_current()
    logging.getLogger("ray.data").setLevel(saved.pop("log_level"))
    for name, value in saved.items():
        setattr(ctx, name, value)


def _read_parquet(batch: dict[str, Any], columns: list[str] | None) -> pa.Table:
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pa.concat_tables([pq.read_table(str(p), columns=columns) for p in batch["path"]])


def _modulo(t: pa.Table, parts: int) -> pa.Table:
    import pyarrow as pa

    i = t.schema.get_field_index("_part")
    return t.set_column(i, "_part", pa.array(column(t, "_part") % parts))


def expr_col(name: str) -> Any:
    """A Ray Data column expression (for ``Dataset.filter(expr=...)``)."""
    from ray.data.expressions import col

    return col(name)


def pq_rows(path: str) -> int:
    """Rows of a Parquet file, from its footer."""
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(path).metadata.num_rows)

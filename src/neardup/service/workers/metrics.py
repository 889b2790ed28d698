"""The workers' Prometheus expositions merged into one."""

from __future__ import annotations

from typing import Any


def merge_metrics(
    texts: dict[str, str], up: dict[str, bool], restarts: dict[str, int]
) -> bytes:
    """The workers' expositions as one, as a single process would export them.

    Per-tenant series come from the tenant's owner only; process-wide counters and
    histograms (requests, latency) are summed over the workers (a restarted
    worker's counters restart from 0, which Prometheus reads as a counter reset);
    ``*_created`` timestamps keep the earliest.  Worker liveness and restarts are
    added with a ``worker`` label.
    """
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.metrics_core import Metric
    from prometheus_client.parser import text_string_to_metric_families

    families: dict[str, Metric] = {}
    values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for _, text in sorted(texts.items()):
        for fam in text_string_to_metric_families(text):
            if fam.name not in families:
                families[fam.name] = Metric(fam.name, fam.documentation, fam.type)
                values[fam.name] = {}
            vals = values[fam.name]
            for smp in fam.samples:
                key = (smp.name, tuple(sorted(smp.labels.items())))
                if key not in vals:
                    vals[key] = smp.value
                elif smp.name.endswith("_created"):
                    vals[key] = min(vals[key], smp.value)
                else:
                    vals[key] += smp.value
    for name, fam in families.items():
        for (sname, labels), v in values[name].items():
            fam.add_sample(sname, dict(labels), v)
    wup = Metric("neardup_worker_up", "1 while the worker process answers", "gauge")
    wre = Metric("neardup_worker_restarts", "times the worker process was restarted", "counter")
    for worker in sorted(up):
        wup.add_sample("neardup_worker_up", {"worker": worker}, 1.0 if up[worker] else 0.0)
        wre.add_sample("neardup_worker_restarts_total", {"worker": worker}, restarts[worker])
    merged = [*families.values(), wup, wre]

    class _Collector:
        def collect(self) -> Any:
            yield from merged

    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Collector())
    return bytes(generate_latest(reg))

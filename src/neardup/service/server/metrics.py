"""The Prometheus metrics of one app: request counters and latency, per-tenant gauges."""

from __future__ import annotations

import functools
import time
from typing import Any

import numpy as np

from neardup.service.manager import Service

#: Bucket bounds of the histograms: request seconds, candidates per query, scores.
_SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2.5)
_CANDIDATES = (0, 1, 2, 5, 10, 20, 50, 100, 1000)
_SCORES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)


class Metrics:
    """Prometheus metrics of one app (its own registry: no process-global state)."""

    def __init__(self, service: Service) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram
        from prometheus_client.core import GaugeMetricFamily

        self.registry = CollectorRegistry()
        self.requests = Counter(
            "neardup_requests_total", "HTTP requests", ["route", "status"], registry=self.registry
        )
        histogram = functools.partial(Histogram, registry=self.registry)
        self.latency = histogram(
            "neardup_request_seconds", "request latency", ["route"], buckets=_SECONDS
        )
        self.candidates = histogram(
            "neardup_candidates_per_query",
            "exactly verified candidates per query",
            ["tenant"],
            buckets=_CANDIDATES,
        )
        self.scores = histogram(
            "neardup_verification_score",
            "exact Jaccard of verified candidates",
            ["tenant"],
            buckets=_SCORES,
        )
        self.decisions = Counter(
            "neardup_decisions_total",
            "decisions by state",
            ["tenant", "state"],
            registry=self.registry,
        )
        svc = service

        class _TenantGauges:
            def collect(self) -> Any:
                items = GaugeMetricFamily("neardup_items", "live items", labels=["tenant"])
                ibytes = GaugeMetricFamily("neardup_index_bytes", "index bytes", labels=["tenant"])
                over = GaugeMetricFamily(
                    "neardup_bucket_overflow", "inserts cut by the bucket cap", labels=["tenant"]
                )
                capped = GaugeMetricFamily(
                    "neardup_candidate_cap_hits",
                    "queries whose candidates hit a cap",
                    labels=["tenant"],
                )
                age = GaugeMetricFamily(
                    "neardup_snapshot_age_seconds",
                    "seconds since the last snapshot (-1: none)",
                    labels=["tenant"],
                )
                seq = GaugeMetricFamily(
                    "neardup_applied_seq", "last applied command", labels=["tenant"]
                )
                g = {
                    name: GaugeMetricFamily(name, doc, labels=labels)
                    for name, doc, labels in (
                        (
                            "neardup_ingest_lag_seconds",
                            "now minus the newest source_time indexed (-1: none sent)",
                            ["tenant"],
                        ),
                        (
                            "neardup_commands_not_durable",
                            "commands written but not yet fsynced",
                            ["tenant"],
                        ),
                        (
                            "neardup_bucket_size",
                            "bucket sizes of the band index (main arrays)",
                            ["tenant", "quantile"],
                        ),
                        (
                            "neardup_tombstone_lag_entries",
                            "index entries of tombstoned items awaiting compaction",
                            ["tenant"],
                        ),
                        (
                            "neardup_labelled",
                            "precision / recall at the current threshold on reviewer labels "
                            "(last threshold report; -1: none)",
                            ["tenant", "measure"],
                        ),
                        (
                            "neardup_shadow_queries",
                            "queries compared between live and shadow / previous",
                            ["tenant"],
                        ),
                        (
                            "neardup_shadow_disagreements",
                            "compared queries whose candidates or decisions differ",
                            ["tenant", "kind"],
                        ),
                        (
                            "neardup_audit_total",
                            "sampled exact audits: queries, pairs at the threshold, misses",
                            ["tenant", "what"],
                        ),
                        (
                            "neardup_decisions_rejected",
                            "decisions recorded as rejected",
                            ["tenant"],
                        ),
                        (
                            "neardup_cross_version_attempts",
                            "requests refused for another scheme or policy version",
                            ["tenant"],
                        ),
                        (
                            "neardup_mode",
                            "1 for the tenant's current mode (normal, exact-hash-only, "
                            "stopped: writes stopped after a storage error, failed: cannot "
                            "start)",
                            ["tenant", "mode"],
                        ),
                        (
                            "neardup_failed_commands",
                            "logged commands recorded as failed (skipped on replay)",
                            ["tenant"],
                        ),
                    )
                }
                now = time.time()
                for name, t in sorted(svc.tenants().items()):
                    c = t.counters
                    items.add_metric([name], len(t))
                    ibytes.add_metric([name], t.index.nbytes)
                    over.add_metric([name], t.index.overflow)
                    capped.add_metric([name], c.capped)
                    last = c.last_snapshot_time
                    age.add_metric([name], -1 if last is None else now - last)
                    seq.add_metric([name], t.seq)
                    lag = -1 if c.last_source_time is None else now - c.last_source_time
                    g["neardup_ingest_lag_seconds"].add_metric([name], lag)
                    g["neardup_commands_not_durable"].add_metric(
                        [name], t.log.last_seq - t.log.durable_seq
                    )
                    sizes = t.index.bucket_sizes()
                    for q in (0.5, 0.9, 0.99, 1.0):
                        v = float(np.quantile(sizes, q)) if sizes.size else 0.0
                        g["neardup_bucket_size"].add_metric([name, str(q)], v)
                    g["neardup_tombstone_lag_entries"].add_metric([name], t.index.dead_entries())
                    rep = c.last_report or {}
                    for m in ("precision", "recall"):
                        val = rep.get(m)
                        g["neardup_labelled"].add_metric([name, m], -1 if val is None else val)
                    mig = svc.migration(name)
                    if mig is not None:
                        mc = mig.counts
                        g["neardup_shadow_queries"].add_metric([name], mc.queries)
                        g["neardup_shadow_disagreements"].add_metric(
                            [name, "candidates"], mc.candidate_disagreements
                        )
                        g["neardup_shadow_disagreements"].add_metric(
                            [name, "decisions"], mc.decision_disagreements
                        )
                    for what, val in (
                        ("queries", c.audits),
                        ("pairs", c.audit_pairs),
                        ("misses", c.audit_misses),
                    ):
                        g["neardup_audit_total"].add_metric([name, what], val)
                    g["neardup_decisions_rejected"].add_metric([name], c.rejected)
                    g["neardup_cross_version_attempts"].add_metric([name], c.cross_version)
                    g["neardup_mode"].add_metric([name, t.mode], 1)
                    g["neardup_failed_commands"].add_metric([name], t.failed_commands)
                for name in sorted(svc.failed):
                    g["neardup_mode"].add_metric([name, "failed"], 1)
                yield from (items, ibytes, over, capped, age, seq, *g.values())

        self.registry.register(_TenantGauges())

    def render(self) -> bytes:
        from prometheus_client import generate_latest

        return bytes(generate_latest(self.registry))

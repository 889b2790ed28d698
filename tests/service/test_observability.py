"""Traces, metrics, sampled exact audits and rejected decisions of the service."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from neardup.service.manager import Service, ServiceConfig
from neardup.service.server import create_app
from service_helpers import write_master_key

BASE = {"threshold": 0.75, "shingle": "word:2", "num_perm": 32, "bands": 8, "rows": 4}
A = "the red fox runs very fast across the field"
B = "The red fox runs very fast across the FIELD today"


@pytest.fixture(scope="module")
def exporter():
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exp = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exp))
    trace.set_tracer_provider(provider)
    return exp


@pytest.fixture
def client(tmp_path: Path):
    cfg = ServiceConfig(
        data_dir=str(tmp_path / "d"),
        master_key_file=str(write_master_key(tmp_path / "m.key")),
        keys_file=str(tmp_path / "k.json"),
        audit_sample_rate=1.0,
        audit_interval_s=0.0,
    )
    svc, token = Service.init(cfg, operator_tenants=["t1"])
    c = TestClient(create_app(svc))
    op = {"Authorization": f"Bearer {token}"}
    assert c.put("/v1/tenants/t1", json=BASE, headers=op).status_code == 200
    tok = c.post("/v1/keys", json={"role": "producer", "tenants": ["t1"]}, headers=op).json()
    yield c, {"Authorization": f"Bearer {tok['token']}"}, op, svc
    svc.close()


def test_one_request_is_one_trace_through_every_stage(client, exporter) -> None:
    c, p, _, _ = client
    assert c.post("/v1/tenants/t1/items", json={"item_id": "A", "content": A}, headers=p).is_success
    exporter.clear()
    r = c.post("/v1/tenants/t1/decide", json={"item_id": "B", "content": B}, headers=p)
    assert r.status_code == 200 and r.json()["decision"]["state"] == "duplicate"
    spans = exporter.get_finished_spans()
    by_name = {s.name: s for s in spans}
    root = by_name["neardup.decide"]
    for stage in ("normalize", "signature", "band_read", "verify", "decide"):
        assert stage in by_name, sorted(by_name)
        s = by_name[stage]
        assert s.context.trace_id == root.context.trace_id  # one trace per request
        assert s.parent is not None
    assert root.attributes["tenant"] == "t1"


def test_metrics_audit_rejections_and_cross_version(client) -> None:
    import time

    c, p, op, svc = client
    c.post("/v1/tenants/t1/items", json={"item_id": "A", "content": A}, headers=p)
    c.post("/v1/tenants/t1/candidates", json={"content": B}, headers=p)
    t = svc.tenants()["t1"]
    deadline = time.monotonic() + 60
    while t.counters.audits < 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # the audits run in the background
    assert t.counters.audits >= 2 and t.counters.audit_misses == 0
    assert t.counters.audit_pairs >= 1  # B vs A, found by the index
    # Content with nothing to compare is a recorded rejection, not an error.
    rej = c.post("/v1/tenants/t1/decide", json={"content": "   "}, headers=p)
    assert rej.status_code == 200 and rej.json()["decision"]["state"] == "rejected"
    # A producer on another normalizer version is refused and counted.
    cv = c.post(
        "/v1/tenants/t1/candidates", json={"content": A, "normalization_version": 2}, headers=p
    )
    assert cv.status_code == 409
    c.delete("/v1/tenants/t1/items/A", headers=p)
    text = c.get("/metrics").text
    for needle in (
        'neardup_audit_total{tenant="t1",what="queries"}',
        'neardup_audit_total{tenant="t1",what="misses"} 0.0',
        'neardup_decisions_rejected{tenant="t1"} 1.0',
        'neardup_cross_version_attempts{tenant="t1"} 1.0',
        'neardup_bucket_size{quantile="1.0",tenant="t1"} 1.0',  # before any compaction
        'neardup_candidates_per_query_count{tenant="t1"}',
        'neardup_verification_score_count{tenant="t1"}',
        'neardup_tombstone_lag_entries{tenant="t1"} 8.0',  # A's 8 bands until compaction
        'neardup_mode{mode="normal",tenant="t1"} 1.0',
        'neardup_labelled{measure="precision",tenant="t1"} -1.0',
        'neardup_ingest_lag_seconds{tenant="t1"}',
        'neardup_commands_not_durable{tenant="t1"} 0.0',
        'neardup_decisions_total{state="rejected",tenant="t1"}',
    ):
        assert needle in text, needle
    assert c.post("/v1/tenants/t1/compact", headers=op).status_code == 200
    assert 'neardup_tombstone_lag_entries{tenant="t1"} 0.0' in c.get("/metrics").text

"""The shipped Prometheus alert rules are well formed and name metrics the server
really exports."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from starlette.testclient import TestClient

from neardup.service.manager import Service, ServiceConfig
from neardup.service.server import create_app
from neardup.service.workers import merge_metrics
from service_helpers import write_master_key

RULES = Path(__file__).resolve().parents[2] / "docs" / "alerts" / "neardup.rules.yml"


def _rules() -> list[dict[str, object]]:
    doc = yaml.safe_load(RULES.read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def test_every_rule_has_a_severity_a_summary_and_a_runbook() -> None:
    rules = _rules()
    assert len(rules) >= 15
    names = [r["alert"] for r in rules]
    assert len(names) == len(set(names))
    for r in rules:
        assert r["labels"]["severity"] in ("critical", "warning", "info"), r
        assert r["annotations"]["summary"] and r["annotations"]["runbook"], r
        assert str(r["expr"]).count("(") == str(r["expr"]).count(")"), r


def test_every_metric_in_the_rules_is_exported(tmp_path: Path) -> None:
    cfg = ServiceConfig(
        data_dir=str(tmp_path / "d"),
        master_key_file=str(write_master_key(tmp_path / "m.key")),
        keys_file=str(tmp_path / "k.json"),
    )
    svc, token = Service.init(cfg, operator_tenants=["t1"])
    try:
        c = TestClient(create_app(svc))
        op = {"Authorization": f"Bearer {token}"}
        assert c.put("/v1/tenants/t1", json={"threshold": 0.8}, headers=op).is_success
        tok = c.post("/v1/keys", json={"role": "producer", "tenants": ["t1"]}, headers=op)
        p = {"Authorization": f"Bearer {tok.json()['token']}"}
        for route in ("items", "candidates"):
            body = {"item_id": "a", "content": "one two three four five six seven"}
            if route == "candidates":
                body.pop("item_id")
            assert c.post(f"/v1/tenants/t1/{route}", json=body, headers=p).is_success
        assert c.post("/v1/tenants/t1/upsert-nowhere", headers=p).status_code == 404
        text = c.get("/metrics").text
    finally:
        svc.close()
    # `serve --workers N` exports the same, plus the front's worker metrics.
    text += merge_metrics({}, {"0": True}, {"0": 0}).decode()
    exported = set(re.findall(r"^(neardup_[a-z_]+)", text, flags=re.M))
    for r in _rules():
        for name in re.findall(r"\bneardup_[a-z_]+", str(r["expr"])):
            assert name in exported, (r["alert"], name)

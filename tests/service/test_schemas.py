"""The published schemas are in sync, cover every route, and describe real responses."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import jsonschema
import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from neardup.service.manager import Service, ServiceConfig
from neardup.service.models import json_schemas, openapi
from neardup.service.server import create_app
from service_helpers import write_master_key

ROOT = Path(__file__).resolve().parents[2]


def _export():
    spec = importlib.util.spec_from_file_location(
        "export_schemas", ROOT / "scripts" / "export_schemas.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_docs_schemas_are_in_sync() -> None:
    for name, text in _export().render().items():
        path = ROOT / "docs" / "schemas" / name
        assert path.read_text(encoding="utf-8") == text, f"run scripts/export_schemas.py ({name})"


def test_every_schema_is_valid_json_schema() -> None:
    for schema in json_schemas().values():
        jsonschema.Draft202012Validator.check_schema(schema)


@pytest.fixture
def app(tmp_path: Path):
    cfg = ServiceConfig(
        data_dir=str(tmp_path / "d"),
        master_key_file=str(write_master_key(tmp_path / "m.key")),
        keys_file=str(tmp_path / "k.json"),
    )
    svc, token = Service.init(cfg, operator_tenants=["t1"])
    yield create_app(svc), token
    svc.close()


def test_openapi_lists_every_route_and_method(app) -> None:
    application, _ = app
    doc = openapi("0")
    for r in application.routes:
        assert isinstance(r, Route)
        assert r.path in doc["paths"], r.path
        for m in r.methods or ():
            if m != "HEAD":
                assert m.lower() in doc["paths"][r.path], (r.path, m)


SCHEMAS = json_schemas()


def _check(name: str, body: dict) -> None:
    jsonschema.validate(body, SCHEMAS[name])


def test_real_responses_match_their_schemas(app) -> None:
    application, token = app
    c = TestClient(application)
    op = {"Authorization": f"Bearer {token}"}
    c.put("/v1/tenants/t1", json={"threshold": 0.75, "shingle": "word:2"}, headers=op)
    tok = c.post("/v1/keys", json={"role": "producer", "tenants": ["t1"]}, headers=op).json()
    p = {"Authorization": f"Bearer {tok['token']}"}
    req = {"item_id": "A", "content": "red fox runs very fast"}
    _check("UpsertRequest", req)
    _check("UpsertResponse", c.post("/v1/tenants/t1/items", json=req, headers=p).json())
    r = c.post(
        "/v1/tenants/t1/items",
        json={"item_id": "B", "content": "red fox runs very fast today"},
        headers=p,
    ).json()
    _check("UpsertResponse", r)
    assert r["candidates"]
    _check(
        "CandidatesResponse",
        c.post("/v1/tenants/t1/candidates", json={"content": "red fox"}, headers=p).json(),
    )
    _check(
        "DecideResponse",
        c.post("/v1/tenants/t1/decide", json={"content": "red fox runs"}, headers=p).json(),
    )
    _check(
        "VerifyResponse",
        c.post("/v1/tenants/t1/verify", json={"left": "A", "right": "B"}, headers=p).json(),
    )
    _check("ItemResponse", c.get("/v1/tenants/t1/items/A", headers=p).json())
    _check("TombstoneResponse", c.delete("/v1/tenants/t1/items/A", headers=p).json())
    _check("Error", c.get("/v1/tenants/t1/items/zzz", headers=p).json())


def test_log_and_audit_events_match_their_schemas(tmp_path: Path) -> None:
    cfg = ServiceConfig(
        data_dir=str(tmp_path / "d"),
        master_key_file=str(write_master_key(tmp_path / "m.key")),
        keys_file=str(tmp_path / "k.json"),
    )
    svc, token = Service.init(cfg, operator_tenants=["t1"])
    op = svc.keyring.authenticate(f"Bearer {token}")
    svc.create_tenant(op, "t1", {"threshold": 0.75, "shingle": "word:2"})
    prod = svc.keyring.authenticate("Bearer " + svc.add_key(op, "producer", ["t1"]))
    svc.upsert(prod, "t1", {"item_id": "A", "content": "red fox runs very fast"})
    svc.tombstone(prod, "t1", "A")
    svc.compact(op, "t1")
    t = svc.tenants()["t1"]
    t.close()
    from neardup.service.cmdlog import CommandLog

    log = CommandLog.open(t.log.path, t._log_sealer, aad=t._aad)
    headers = [c.header for c in log.commands()]
    assert [h["op"] for h in headers] == ["upsert", "tombstone", "compact"]
    for h in headers:
        _check("CommandEvent", h)
    lines = (tmp_path / "d" / "audit.jsonl").read_text().splitlines()
    assert [json.loads(x)["op"] for x in lines] == ["create_tenant", "add_key", "compact"]
    for line in lines:
        _check("AuditEvent", json.loads(line))


def test_content_response_and_storage_failure(app, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    application, token = app
    c = TestClient(application)
    op = {"Authorization": f"Bearer {token}"}
    cfg = {"threshold": 0.75, "shingle": "word:2", "retain": "text"}
    assert c.put("/v1/tenants/t1", json=cfg, headers=op).status_code == 200
    keys = [
        c.post("/v1/keys", json={"role": r, "tenants": ["t1"]}, headers=op).json()["token"]
        for r in ("producer", "reviewer")
    ]
    p, rev = ({"Authorization": f"Bearer {k}"} for k in keys)
    assert c.post(
        "/v1/tenants/t1/items", json={"item_id": "A", "content": "red fox"}, headers=p
    ).status_code == 200
    _check("ContentResponse", c.get("/v1/tenants/t1/items/A/content", headers=rev).json())

    def broken(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken)
    r = c.post("/v1/tenants/t1/items", json={"item_id": "B", "content": "blue fox"}, headers=p)
    # The server's disk failed: 503, a fix, and no server path in the answer.
    assert r.status_code == 503 and r.json()["error"] == "io_error"
    _check("Error", r.json())
    assert "/" not in r.json()["message"] and "idempotency key" in r.json()["fix"]
    monkeypatch.undo()
    # The log is poisoned: no later write is acknowledged until a restart.
    r = c.post("/v1/tenants/t1/items", json={"item_id": "C", "content": "green fox"}, headers=p)
    assert r.status_code == 503


def test_tenant_config_model_is_the_flat_json_form() -> None:
    """The TenantConfig request model names the keys of the JSON form of
    ``neardup.service.TenantConfig`` (``to_dict``), in its order."""
    import msgspec

    from neardup.service import TenantConfig
    from neardup.service.models.requests import TenantConfig as TenantConfigBody

    names = [f.encode_name for f in msgspec.structs.fields(TenantConfigBody)]
    assert names == list(TenantConfig().to_dict())

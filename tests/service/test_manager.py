"""neardup.service.manager: the Service checks role and tenant scope first, keeps
tenants apart (no path from one tenant's request to another's index, store or key),
limits each tenant on its own, and reopens what it stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from neardup.core._errors import (
    Conflict,
    Forbidden,
    InvalidConfig,
    LimitExceeded,
    NotFound,
    TenantUnavailable,
)
from neardup.service import Service, ServiceConfig
from neardup.service.auth import Principal

CFG = {"threshold": 0.75, "shingle": "word:2", "num_perm": 32, "bands": 16, "rows": 2}
TEXT = "red fox runs very fast across the frozen lake at dawn"
NEAR = TEXT + " today"


def _config(tmp_path: Path, **kw: Any) -> ServiceConfig:
    return ServiceConfig(
        data_dir=str(tmp_path / "data"),
        master_key_file=str(tmp_path / "secrets" / "master.key"),
        keys_file=str(tmp_path / "secrets" / "keys.json"),
        **kw,
    )


def _service(tmp_path: Path, **kw: Any) -> tuple[Service, Principal, Principal, Principal]:
    svc, token = Service.init(_config(tmp_path, **kw), operator_tenants=["t1", "t2", "t3"])
    op = svc.keyring.authenticate(f"Bearer {token}")
    svc.create_tenant(op, "t1", CFG)
    svc.create_tenant(op, "t2", {**CFG, "retain": "text"})
    p1 = svc.keyring.authenticate("Bearer " + svc.add_key(op, "producer", ["t1"]))
    p2 = svc.keyring.authenticate("Bearer " + svc.add_key(op, "producer", ["t2"]))
    return svc, op, p1, p2


def test_tenants_do_not_see_each_others_items(tmp_path: Path) -> None:
    svc, _op, p1, p2 = _service(tmp_path)
    try:
        svc.upsert(p1, "t1", {"item_id": "A", "content": TEXT})
        # The same text in t2 finds nothing: t1's item is not in t2's index.
        r2 = svc.upsert(p2, "t2", {"item_id": "B", "content": NEAR})
        assert r2["candidates"] == [] and r2["decision"]["state"] != "duplicate"
        r1 = svc.candidates(p1, "t1", {"content": NEAR})
        assert [c["item_id"] for c in r1["candidates"]] == ["A"]
        with pytest.raises(NotFound):
            svc.item(p2, "t2", "A")
        assert svc.item(p1, "t1", "A")["item_id"] == "A"
        assert svc.stats(p1, "t1")["items"] == svc.stats(p2, "t2")["items"] == 1
    finally:
        svc.close()


def test_a_key_reaches_only_its_own_tenants_and_role(tmp_path: Path) -> None:
    svc, op, p1, _p2 = _service(tmp_path)
    try:
        svc.upsert(p1, "t1", {"item_id": "A", "content": TEXT})
        with pytest.raises(Forbidden, match="not scoped to tenant 't2'"):
            svc.upsert(p1, "t2", {"item_id": "X", "content": TEXT})
        with pytest.raises(Forbidden):
            svc.candidates(p1, "t2", {"content": TEXT})
        with pytest.raises(Forbidden):
            svc.item(p1, "t2", "A")
        with pytest.raises(Forbidden, match="may not 'tenant'"):
            svc.create_tenant(p1, "t3", CFG)
        with pytest.raises(Forbidden):
            svc.add_key(p1, "producer", ["t1"])
        with pytest.raises(Forbidden):  # an operator key issues keys for its tenants only
            svc.add_key(op, "producer", ["other"])
        with pytest.raises(Forbidden, match="may not 'upsert'"):
            svc.upsert(op, "t1", {"item_id": "Y", "content": TEXT})
        # A body naming another tenant is refused even with a key for the URL's.
        with pytest.raises(InvalidConfig, match="tenant_id"):
            svc.upsert(p1, "t1", {"item_id": "Z", "content": TEXT, "tenant_id": "t2"})
        assert svc.stats(p1, "t1")["items"] == 1
    finally:
        svc.close()


def test_a_tenants_rate_limit_does_not_touch_another(tmp_path: Path) -> None:
    svc, op, p1, _p2 = _service(tmp_path)
    try:
        svc.create_tenant(op, "t3", {**CFG, "rate_per_s": 0.001, "burst": 2})
        p3 = svc.keyring.authenticate("Bearer " + svc.add_key(op, "producer", ["t3"]))
        svc.upsert(p3, "t3", {"item_id": "a", "content": TEXT})
        svc.upsert(p3, "t3", {"item_id": "b", "content": NEAR})
        with pytest.raises(LimitExceeded) as err:
            svc.upsert(p3, "t3", {"item_id": "c", "content": "something else entirely here"})
        assert err.value.status == 429 and err.value.retry_after > 0
        for i in range(5):  # the others go on
            svc.upsert(p1, "t1", {"item_id": f"x{i}", "content": f"{TEXT} number {i}"})
        assert svc.stats(p1, "t1")["items"] == 5
    finally:
        svc.close()


def test_create_tenant_is_idempotent_and_refuses_another_config(tmp_path: Path) -> None:
    svc, op, p1, _p2 = _service(tmp_path)
    try:
        svc.upsert(p1, "t1", {"item_id": "A", "content": TEXT})
        again = svc.create_tenant(op, "t1", CFG)
        assert again["items"] == 1  # the existing tenant, untouched
        with pytest.raises(Conflict, match="another configuration"):
            svc.create_tenant(op, "t1", {**CFG, "threshold": 0.9})
        with pytest.raises(Forbidden):  # not in the operator key's scope
            svc.create_tenant(op, "t9", CFG)
        with pytest.raises(NotFound, match="does not exist"):
            svc.stats(svc.keyring.authenticate("Bearer " + _scoped(svc)), "t1x")
    finally:
        svc.close()


def _scoped(svc: Service) -> str:
    return svc.keyring.add_saved(svc.config.keys_file, "producer", ["t1x"])


def test_content_uri_is_read_only_under_a_content_root(tmp_path: Path) -> None:
    root = tmp_path / "content"
    root.mkdir()
    (root / "a.txt").write_text(TEXT, encoding="utf-8")
    (tmp_path / "secret.txt").write_text("not for you", encoding="utf-8")
    svc, _op, p1, _p2 = _service(tmp_path, content_roots=(str(root),))
    try:
        r = svc.upsert(p1, "t1", {"item_id": "A", "content_uri": (root / "a.txt").as_uri()})
        assert r["item_id"] == "A"
        for uri in [
            (tmp_path / "secret.txt").as_uri(),
            f"file://{root}/../secret.txt",
            "http://example.com/a.txt",
        ]:
            with pytest.raises(InvalidConfig, match="content_uri"):
                svc.upsert(p1, "t1", {"item_id": "B", "content_uri": uri})
        with pytest.raises(InvalidConfig, match="exactly one"):
            svc.upsert(p1, "t1", {"item_id": "C", "content": TEXT, "content_uri": uri})
        assert svc.stats(p1, "t1")["items"] == 1
    finally:
        svc.close()


def test_a_reopened_service_serves_what_it_stored_and_audits(tmp_path: Path) -> None:
    svc, op, p1, p2 = _service(tmp_path)
    svc.upsert(p1, "t1", {"item_id": "A", "content": TEXT})
    svc.upsert(p2, "t2", {"item_id": "B", "content": "database backup completed nightly ok"})
    digests = {t: svc.digest(op, t)["digest"] for t in ("t1", "t2")}
    svc.close()
    svc = Service(_config(tmp_path))
    try:
        assert sorted(svc.tenants()) == ["t1", "t2"]
        assert {t: svc.digest(op, t)["digest"] for t in ("t1", "t2")} == digests
        r = svc.candidates(p1, "t1", {"content": NEAR})
        assert [c["item_id"] for c in r["candidates"]] == ["A"]
    finally:
        svc.close()
    audit = [json.loads(line) for line in (tmp_path / "data" / "audit.jsonl").open()]
    text = json.dumps(audit)
    assert "create_tenant" in text and "add_key" in text
    assert TEXT not in text  # the audit log never holds content


def test_a_tenant_that_cannot_start_fails_alone_and_reopens(tmp_path: Path) -> None:
    svc, op, p1, p2 = _service(tmp_path)
    svc.upsert(p1, "t1", {"item_id": "A", "content": TEXT})
    svc.upsert(p2, "t2", {"item_id": "B", "content": TEXT})
    svc.close()
    meta = tmp_path / "data" / "tenants" / "t1" / "tenant.json"
    good = meta.read_bytes()
    meta.write_text("{ not json", encoding="utf-8")
    svc = Service(_config(tmp_path))
    try:
        assert sorted(svc.tenants()) == ["t2"] and sorted(svc.failed) == ["t1"]
        info = svc.failed["t1"]
        assert info["error"] == "CorruptFile" and "neardup repair" in info["runbook"]
        assert str(tmp_path) not in info["reason"] and "DATA_DIR" in info["reason"]
        with pytest.raises(TenantUnavailable, match="cannot start"):
            svc.candidates(p1, "t1", {"content": NEAR})
        with pytest.raises(TenantUnavailable):  # not re-created over the damage
            svc.create_tenant(op, "t1", CFG)
        # The other tenant reads and writes as usual.
        assert [
            c["item_id"] for c in svc.candidates(p2, "t2", {"content": NEAR})["candidates"]
        ] == ["B"]
        svc.upsert(p2, "t2", {"item_id": "C", "content": "database backup completed nightly"})
        assert svc.stats(p2, "t2")["items"] == 2
        with pytest.raises(TenantUnavailable, match="still cannot start"):
            svc.reopen(op, "t1")
        meta.write_bytes(good)  # the repair
        assert svc.reopen(op, "t1")["reopened"] is True
        assert svc.failed == {} and svc.stats(p1, "t1")["items"] == 1
    finally:
        svc.close()
    audit = (tmp_path / "data" / "audit.jsonl").read_text(encoding="utf-8")
    assert '"tenant_failed"' in audit and '"reopen_tenant"' in audit

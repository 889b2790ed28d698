"""One guard for every path that changes a live threshold or layout, and policy
versions that are never reused (issue 20, defect 5)."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from neardup.core._errors import Conflict, InvalidConfig
from neardup.service.manager import Service, ServiceConfig
from service_helpers import Server, producer, write_master_key

TEXTS = [
    "the quick brown fox jumps over the lazy dog near the river bank today",
    "a completely different sentence about databases backups and nightly jobs",
    "the quick brown fox jumps over the lazy dog near the river bank tonight",
]


def _policy(op: httpx.Client) -> tuple[dict, list[tuple[int, float]]]:
    r = op.get("/v1/tenants/t1/policy")
    assert r.status_code == 200, r.text
    body = r.json()
    return body["current"], [(h["version"], h["threshold"]) for h in body["history"]]


@pytest.mark.slow
def test_shadow_cannot_bypass_the_policy_guard_and_versions_are_never_reused(
    tmp_path: Path,
) -> None:
    data = tmp_path / "d"
    srv = Server(data).start()
    try:
        with srv.client(srv.operator_token) as op:
            op.put("/v1/tenants/t1", json={"threshold": 0.8}).raise_for_status()
            with producer(srv, op, "t1") as p:
                for i, text in enumerate(TEXTS):
                    p.post(
                        "/v1/tenants/t1/items", json={"item_id": f"i{i}", "content": text}
                    ).raise_for_status()
            snap_v1 = op.post("/v1/tenants/t1/snapshot").content
            # The sequence: the policy route refuses 0.3 ...
            r = op.put("/v1/tenants/t1/policy", json={"threshold": 0.3})
            assert r.status_code == 400 and "safe range" in r.json()["message"]
            # ... and a shadow at 0.2 (predicted recall 0.0000) is refused at its start.
            r = op.put("/v1/tenants/t1/shadow", json={"threshold": 0.2, "bands": 16, "rows": 8})
            assert r.status_code == 400, r.text
            assert "safe range" in r.json()["message"]
            # In range, but a layout that finds a pair at 0.6 with P = 1.4e-5: refused too.
            r = op.put("/v1/tenants/t1/shadow", json={"threshold": 0.6, "bands": 4, "rows": 32})
            assert r.status_code == 400 and "would lower candidate recall" in r.json()["message"]
            assert "bands=" in r.json()["fix"]
            # Nothing was built, nothing changed.
            assert op.get("/v1/tenants/t1/shadow").json()["role"] is None
            assert not [n for n in os.listdir(data / "tenants" / "t1") if n.startswith("shadow")]
            assert op.post("/v1/tenants/t1/shadow/promote").status_code == 409
            cur, hist = _policy(op)
            assert (cur["version"], cur["threshold"]) == (1, 0.8) and hist == [(1, 0.8)]
            # A guarded shadow: it brings the next version (2) with its threshold.
            r = op.put("/v1/tenants/t1/shadow", json={"threshold": 0.7, "bands": 32, "rows": 4})
            assert r.status_code == 200, r.text
            assert r.json()["warnings"] == []
            assert r.json()["other"]["policy"]["version"] == 2
            assert r.json()["other"]["policy"]["threshold"] == 0.7
            # While it exists, the live policy cannot take that number.
            r = op.put("/v1/tenants/t1/policy", json={"threshold": 0.85})
            assert r.status_code == 409 and "shadow" in r.json()["message"]
            # Promote: version 2 goes live; version 1 keeps its meaning.
            r = op.post("/v1/tenants/t1/shadow/promote")
            assert r.status_code == 200, r.text
            assert r.json()["live"]["policy"]["version"] == 2
            cur, hist = _policy(op)
            assert (cur["version"], cur["threshold"]) == (2, 0.7)
            assert hist == [(1, 0.8), (2, 0.7)]
            r = op.put("/v1/tenants/t1/policy", json={"threshold": 0.75})
            assert r.status_code == 200 and r.json()["policy"]["version"] == 3
            # Promoting the previous version back: its policy returns as version 4.
            r = op.post("/v1/tenants/t1/shadow/promote")
            assert r.status_code == 200, r.text
            cur, hist = _policy(op)
            assert (cur["version"], cur["threshold"]) == (4, 0.8)
            assert hist == [(1, 0.8), (2, 0.7), (3, 0.75), (4, 0.8)]
            with producer(srv, op, "t1") as p:
                d = p.post("/v1/tenants/t1/decide", json={"content": TEXTS[0]}).json()
                assert d["decision"]["policy_version"] == 4
            # A shadow rolled back leaves the history as it was; the next PUT is 5.
            assert op.post("/v1/tenants/t1/shadow/retire").status_code == 200
            r = op.put("/v1/tenants/t1/shadow", json={"threshold": 0.8, "bands": 32, "rows": 4})
            assert r.status_code == 200 and r.json()["other"]["policy"]["version"] == 5
            assert op.post("/v1/tenants/t1/shadow/rollback").status_code == 200
            assert _policy(op)[1] == [(1, 0.8), (2, 0.7), (3, 0.75), (4, 0.8)]
            r = op.put("/v1/tenants/t1/policy", json={"threshold": 0.85})
            assert r.status_code == 200 and r.json()["policy"]["version"] == 5
            before = _policy(op)
        # The history survives kill -9.
        srv.kill9()
        srv = Server(data).start()
        with srv.client(srv.operator_token) as op:
            assert _policy(op) == before
            # Restoring the snapshot taken at version 1: its policy comes back as 6,
            # after the versions it does not know (append-only).
            r = op.post("/v1/tenants/t1/restore", content=snap_v1)
            assert r.status_code == 200, r.text
            cur, hist = _policy(op)
            assert (cur["version"], cur["threshold"]) == (6, 0.8)
            assert hist == [(1, 0.8), (2, 0.7), (3, 0.75), (4, 0.8), (5, 0.85), (6, 0.8)]
            assert op.put("/v1/tenants/t1/policy", json={"threshold": 0.9}).json()["policy"][
                "version"
            ] == 7
    finally:
        srv.stop()


def _service(base: Path, **kw: object) -> Service:
    cfg = ServiceConfig(
        data_dir=str(base / "d"),
        master_key_file=str(base / "m.key"),
        keys_file=str(base / "k.json"),
        **kw,  # type: ignore[arg-type]
    )
    return Service(cfg)


def test_promotion_and_restore_are_checked_again_under_the_current_rules(
    tmp_path: Path,
) -> None:
    """The guard's figures may change between a shadow's start and its promotion (or
    between a snapshot and its restore): each switch is checked when it happens."""
    write_master_key(tmp_path / "m.key")
    svc, token = Service.init(
        ServiceConfig(
            data_dir=str(tmp_path / "d"),
            master_key_file=str(tmp_path / "m.key"),
            keys_file=str(tmp_path / "k.json"),
            policy_min_recall=0.5,
            recall_target=0.9,
        ),
        operator_tenants=["t1", "t2"],
    )
    op = svc.keyring.authenticate(f"Bearer {token}")
    svc.create_tenant(op, "t1", {"threshold": 0.8, "shingle": "word:2", "num_perm": 32})
    snap = svc.snapshot(op, "t1")
    # 4 x 8 at 0.8: P = 0.5203, allowed by this service (minimum 0.5), with a warning.
    weak = {"threshold": 0.8, "shingle": "word:2", "num_perm": 32, "bands": 4, "rows": 8}
    out = svc.shadow(op, "t1", "start", weak)
    assert out["role"] == "shadow" and "0.5203" in out["warnings"][0]
    svc.close()
    # Restarted with the default minimum (0.9): the promotion is refused, nothing moves.
    svc = _service(tmp_path)
    with pytest.raises(InvalidConfig, match=r"0\.5203"):
        svc.shadow(op, "t1", "promote")
    assert svc.shadow(op, "t1", "status")["role"] == "shadow"
    assert svc.policies(op, "t1")["current"]["version"] == 1
    with pytest.raises(Conflict, match="roll back the shadow"):
        svc.restore(op, "t1", snap)
    svc.shadow(op, "t1", "rollback")
    svc.close()
    # A narrower safe range: the snapshot's policy (0.8) may no longer go live.
    svc = _service(tmp_path, policy_threshold_range=(0.85, 0.99))
    digest = svc.digest(op, "t1")
    with pytest.raises(InvalidConfig, match="safe range"):
        svc.restore(op, "t1", snap)
    assert svc.digest(op, "t1") == digest
    # ... nor can a new tenant be created with it.
    with pytest.raises(InvalidConfig, match="safe range"):
        svc.create_tenant(op, "t2", {"threshold": 0.8})
    assert "t2" not in svc.tenants()
    svc.close()

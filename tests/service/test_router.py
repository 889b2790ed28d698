"""Two ``neardup serve`` processes with disjoint tenants behind ``neardup route``."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from service_helpers import EXE, Server, free_port

SEED = {"threshold": 0.75, "shingle": "word:2"}


@pytest.mark.slow
def test_two_servers_behind_a_routing_table(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    master = tmp_path / "master.key"
    shared = ("--keys-file", str(keys))
    a = Server(tmp_path / "a", operator_tenants=("t1", "t2"), master_key_file=master, extra=shared)
    a.start()
    token = a.operator_token
    b = Server(tmp_path / "b", master_key_file=master, extra=shared).start()
    table = tmp_path / "routes.json"
    table.write_text(
        json.dumps({"format": "neardup-routes-v1", "tenants": {"t1": a.url, "t2": b.url}})
    )
    port = free_port()
    log = open(tmp_path / "router.log", "wb")
    router = subprocess.Popen(
        [EXE, "route", "--table", str(table), "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        h = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=url, headers=h, timeout=30) as op:
            assert op.get("/readyz").json()["ready"] is True
            assert op.put("/v1/tenants/t1", json=SEED).status_code == 200
            assert op.put("/v1/tenants/t2", json=SEED).status_code == 200
            keys_for = {}
            for t, srv in (("t1", a), ("t2", b)):
                r = httpx.post(
                    srv.url + "/v1/keys", headers=h, json={"role": "producer", "tenants": [t]}
                )
                keys_for[t] = r.json()["token"]
            text = "red fox runs very fast"
            for t in ("t1", "t2"):
                with httpx.Client(
                    base_url=url, timeout=30, headers={"Authorization": f"Bearer {keys_for[t]}"}
                ) as p:
                    r = p.post(f"/v1/tenants/{t}/items", json={"item_id": "A", "content": text})
                    assert r.status_code == 200 and r.json()["tenant_id"] == t
                    r = p.post(
                        f"/v1/tenants/{t}/items", json={"item_id": "B", "content": text + " today"}
                    )
                    assert [c["item_id"] for c in r.json()["candidates"]] == ["A"]
            # Each tenant lives only on its own backend.
            assert (tmp_path / "a" / "tenants" / "t1").is_dir()
            assert not (tmp_path / "a" / "tenants" / "t2").exists()
            assert (tmp_path / "b" / "tenants" / "t2").is_dir()
            assert not (tmp_path / "b" / "tenants" / "t1").exists()
            assert op.get("/v1/tenants/t1").json()["items"] == 2
            r = op.get("/v1/tenants/t3")
            assert r.status_code == 404 and "routing table" in r.json()["message"]
        b.kill9()
        r = httpx.get(url + "/v1/tenants/t2", headers=h, timeout=30)
        assert r.status_code == 503 and r.json()["error"] == "backend_unavailable"
    finally:
        router.terminate()
        router.wait(timeout=30)
        log.close()
        a.stop()
        b.stop()

"""A slow write never holds up the tenant's other writes, and a write that overruns
its time budget ends in 503 ``deadline_exceeded`` with nothing recorded.

Real ``neardup serve`` processes.  The slow write is made slow where a large item
is slow, in the scoring of its candidates: a shim (see ``fault_shim``) stretches
``Tenant.preverify`` for item ids starting with ``slow``, so the test does not
depend on the machine's speed.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from service_helpers import Server, fault_shim, producer

SEED = {"threshold": 0.75, "shingle": "word:2", "num_perm": 32, "bands": 8, "rows": 4}

SHIM = """
import time
from neardup.service.tenant import Tenant

_real = Tenant.preverify

def _slow(self, prep, item_id=None):
    if item_id is not None and item_id.startswith("slow"):
        time.sleep(SLEEP)
    return _real(self, prep, item_id)

Tenant.preverify = _slow
"""


def _server(tmp_path: Path, sleep: float, budget: float) -> Server:
    env = fault_shim(tmp_path / "shim", SHIM.replace("SLEEP", repr(sleep)))
    return Server(
        tmp_path / "data", env=env, extra=("--workers", "1", "--request-budget", str(budget))
    )


def _item(i: int) -> dict[str, Any]:
    return {"item_id": f"s{i}", "content": f"small item {i} with words {i * 7} and {i * 11}"}


@pytest.mark.slow
def test_small_writes_finish_while_a_slow_one_scores_its_candidates(tmp_path: Path) -> None:
    with _server(tmp_path, sleep=3.0, budget=30.0) as srv, srv.client(srv.operator_token) as op:
        op.put("/v1/tenants/t1", json=SEED).raise_for_status()
        with producer(srv, op, "t1") as p:
            p.post("/v1/tenants/t1/items", json=_item(0)).raise_for_status()
            done: dict[str, float] = {}

            def slow() -> None:
                body = {"item_id": "slow1", "content": "small item 0 with words 0 and 0 too"}
                with srv.client(p.headers["Authorization"].split()[1]) as c:
                    r = c.post("/v1/tenants/t1/items", json=body)
                done["slow"] = time.monotonic()
                done["slow_status"] = r.status_code

            th = threading.Thread(target=slow)
            start = time.monotonic()
            th.start()
            time.sleep(0.5)  # the slow request is inside its scoring now
            for i in range(1, 6):
                p.post("/v1/tenants/t1/items", json=_item(i)).raise_for_status()
            small_done = time.monotonic()
            th.join()
            # The five small writes were acknowledged while the slow one was still
            # scoring (it sleeps 3 s there): they never waited for its lock.
            assert small_done < done["slow"]
            assert small_done - start < 3.0
            assert done["slow_status"] == 200
            r = p.get("/v1/tenants/t1/items/slow1")
            assert r.status_code == 200 and r.json()["live"] is True


@pytest.mark.slow
def test_a_write_over_its_budget_is_503_and_records_nothing(tmp_path: Path) -> None:
    srv = _server(tmp_path, sleep=2.0, budget=1.0)
    with srv, srv.client(srv.operator_token) as op:
        op.put("/v1/tenants/t1", json=SEED).raise_for_status()
        with producer(srv, op, "t1") as p:
            p.post("/v1/tenants/t1/items", json=_item(0)).raise_for_status()
            seq = op.get("/v1/tenants/t1").json()["seq"]
            body = {"item_id": "slow2", "content": "a slow one", "idempotency_key": "k-slow"}
            r = p.post("/v1/tenants/t1/items", json=body)
            assert r.status_code == 503, r.text
            err = r.json()
            assert err["error"] == "deadline_exceeded"
            assert "time budget of 1 s" in err["message"] and "--request-budget" in err["fix"]
            assert int(r.headers["Retry-After"]) >= 1
            assert p.get("/v1/tenants/t1/items/slow2").status_code == 404
            assert op.get("/v1/tenants/t1").json()["seq"] == seq
            # Ordinary writes go on; the same idempotency key is free for the retry.
            p.post("/v1/tenants/t1/items", json=_item(1)).raise_for_status()
    # Nothing of the refused write is in the log: a restart does not bring it back.
    with Server(tmp_path / "data") as srv2, srv2.client(srv2.operator_token) as op2:
        assert op2.get("/v1/tenants/t1/items/slow2").status_code == 404
        assert op2.get("/v1/tenants/t1/items/s1").json()["live"] is True

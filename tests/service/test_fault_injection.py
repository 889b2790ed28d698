"""Fault injection at every I/O point of the service's write paths, in real server
processes.

A preload shim (``sitecustomize.py`` on ``PYTHONPATH``, see
``service_helpers.fault_shim``) wraps ``os.fsync``, ``os.replace`` and ``os.rename``:
once armed (the test creates an arm file right before the operation), the k-th such
call either **crashes** the process there (``os._exit``, as ``kill -9`` at that
point) or **fails** with ``EIO`` (a disk error).  For each operation — upsert,
tombstone, policy change, compaction, snapshot, restore and shadow promotion —
a counting run finds its I/O points, then every point is hit in both ways on a
fresh copy of the same data directory.  After a restart without faults:

* the tenant opens (or is refused loudly, naming a file), and
* its state is exactly the state before the operation or after it — never a mix,
  never a loss — and an acknowledged operation is always there.

SQLite's own fsyncs happen in C and are not counted: the store is derived state,
rebuilt from the command log (its damage is covered by tests/service/test_storage_faults.py).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from service_helpers import Server, fault_shim, producer, record_figure

SEED = {"threshold": 0.75, "shingle": "word:2", "num_perm": 32, "bands": 32, "rows": 1}
SHADOW = {**SEED, "num_perm": 48, "bands": 48}

SHIM = r"""
import os, sys
_arm = os.environ.get("ND_FAULT_ARM")
_at = int(os.environ.get("ND_FAULT_AT", "0"))
_kind = os.environ.get("ND_FAULT_KIND", "count")
_count_file = os.environ.get("ND_FAULT_COUNT")
_n = [0]

def _point(name):
    if not _arm or not os.path.exists(_arm):
        return
    _n[0] += 1
    if _count_file:
        with open(_count_file, "w") as fh:
            fh.write(str(_n[0]))
    if _n[0] == _at:
        if _kind == "crash":
            os._exit(137)
        if _kind == "eio":
            raise OSError(5, f"injected EIO at {name} #{_n[0]}")

def _wrap(name):
    real = getattr(os, name)
    def wrapper(*a, **k):
        _point(name)
        return real(*a, **k)
    setattr(os, name, wrapper)

for _name in ("fsync", "replace", "rename"):
    _wrap(_name)
"""


class Case:
    """One operation on tenant t1 and how to read its before / after state."""

    def __init__(
        self,
        name: str,
        run: Callable[[httpx.Client, httpx.Client], httpx.Response],
        state: Callable[[httpx.Client, httpx.Client], Any],
        prepare: Callable[[httpx.Client, httpx.Client], None] | None = None,
    ) -> None:
        self.name, self.run, self.state, self.prepare = name, run, state, prepare


def _items(p: httpx.Client) -> dict[str, bool]:
    out = {}
    for i in range(6):
        r = p.get(f"/v1/tenants/t1/items/x{i}")
        out[f"x{i}"] = r.status_code == 200 and r.json()["live"]
    r = p.get("/v1/tenants/t1/items/new")
    out["new"] = r.status_code == 200 and r.json()["live"]
    return out


def _layout(op: httpx.Client, p: httpx.Client) -> Any:
    stats = op.get("/v1/tenants/t1").json()
    return stats["bands"], _items(p)


def _policy(op: httpx.Client, p: httpx.Client) -> Any:
    return op.get("/v1/tenants/t1/policy").json()["current"]["threshold"], _items(p)


CASES = [
    Case(
        "upsert",
        lambda op, p: p.post(
            "/v1/tenants/t1/items", json={"item_id": "new", "content": "brand new words here"}
        ),
        lambda op, p: _items(p),
    ),
    Case(
        "tombstone",
        lambda op, p: p.delete("/v1/tenants/t1/items/x3"),
        lambda op, p: _items(p),
    ),
    Case(
        "policy",
        lambda op, p: op.put("/v1/tenants/t1/policy", json={"threshold": 0.8}),
        _policy,
    ),
    Case("compact", lambda op, p: op.post("/v1/tenants/t1/compact"), lambda op, p: _items(p)),
    Case(
        "snapshot",
        lambda op, p: op.post("/v1/tenants/t1/snapshot"),
        lambda op, p: _items(p),
    ),
    Case(
        "restore",
        lambda op, p: op.post("/v1/tenants/t1/restore", content=SNAPSHOT[0]),
        lambda op, p: _items(p),
        prepare=lambda op, p: p.delete("/v1/tenants/t1/items/x1").raise_for_status(),
    ),
    Case(
        "promote",
        lambda op, p: op.post("/v1/tenants/t1/shadow/promote"),
        _layout,
        prepare=lambda op, p: op.put("/v1/tenants/t1/shadow", json=SHADOW).raise_for_status(),
    ),
]
SNAPSHOT: list[bytes] = []


def _base(tmp: Path) -> tuple[Path, str, str]:
    """A data directory with tenant t1 (six items, one snapshot), stopped."""
    srv = Server(tmp / "base" / "data")
    with srv, srv.client(srv.operator_token) as op:
        op.put("/v1/tenants/t1", json=SEED).raise_for_status()
        with producer(srv, op, "t1") as p:
            for i in range(6):
                p.post(
                    "/v1/tenants/t1/items",
                    json={"item_id": f"x{i}", "content": f"some text number {i} here"},
                ).raise_for_status()
            token = str(p.headers["authorization"]).split()[1]
        r = op.post("/v1/tenants/t1/snapshot")
        r.raise_for_status()
        SNAPSHOT[:] = [r.content]
    return srv.data_dir, srv.operator_token, token


def _server(tmp: Path, base: Path, name: str, env: dict[str, str] | None) -> Server:
    data = tmp / name / "data"
    shutil.copytree(base, data)
    for suffix in (".master.key", ".keys.json", ".token"):
        shutil.copy(str(base) + suffix, str(data) + suffix)
    return Server(data, env=env)


def _observe(srv: Server, op_token: str, p_token: str, case: Case) -> Any:
    with srv, srv.client(op_token) as op, srv.client(p_token) as p:
        r = op.get("/v1/tenants/t1")
        if r.status_code != 200:
            return ("refused", r.json())
        return case.state(op, p)


@pytest.mark.slow
def test_every_io_point_of_every_write_path_crashes_or_fails_safely(tmp_path: Path) -> None:
    base, op_token, p_token = _base(tmp_path)
    shim_dir = tmp_path / "shim"
    points_total = cases_run = 0
    summary: dict[str, int] = {}
    for case in CASES:
        # Reference: the states before and after the operation, and its I/O points.
        arm = tmp_path / f"{case.name}.arm"
        count = tmp_path / f"{case.name}.count"
        env = fault_shim(shim_dir, SHIM)
        env |= {"ND_FAULT_ARM": str(arm), "ND_FAULT_COUNT": str(count)}
        srv = _server(tmp_path, base, f"{case.name}-ref", env)
        with srv, srv.client(op_token) as op, srv.client(p_token) as p:
            if case.prepare is not None:
                case.prepare(op, p)
            before = case.state(op, p)
            arm.touch()
            assert case.run(op, p).status_code == 200, case.name
            arm.unlink()
            after = case.state(op, p)
        assert before != after or case.name in ("compact", "snapshot"), case.name
        n = int(count.read_text()) if count.exists() else 0
        assert n >= 1, f"{case.name}: no fsync or rename observed"
        summary[case.name] = n
        points_total += n
        for k in range(1, n + 1):
            for kind in ("crash", "eio"):
                cases_run += 1
                arm = tmp_path / f"{case.name}-{k}-{kind}.arm"
                env = fault_shim(shim_dir, SHIM) | {
                    "ND_FAULT_ARM": str(arm),
                    "ND_FAULT_AT": str(k),
                    "ND_FAULT_KIND": kind,
                }
                srv = _server(tmp_path, base, f"{case.name}-{k}-{kind}", env)
                acked = False
                with srv, srv.client(op_token) as op, srv.client(p_token) as p:
                    if case.prepare is not None:
                        case.prepare(op, p)
                    arm.touch()
                    try:
                        r = case.run(op, p)
                        assert r.status_code < 500 or r.status_code == 503, (
                            case.name,
                            k,
                            kind,
                            r.status_code,
                            r.text,
                        )
                        acked = r.status_code == 200
                    except httpx.TransportError:
                        assert kind == "crash"  # the process died at that point
                    if srv.proc is not None and srv.proc.poll() is None:
                        srv.kill9()  # what a failed disk leaves, without a clean stop
                # Restart without faults.
                srv.env = None
                state = _observe(srv, op_token, p_token, case)
                where = (case.name, k, kind, state)
                if isinstance(state, tuple) and state and state[0] == "refused":
                    body = json.dumps(state[1])
                    assert "DATA_DIR/" in body, where  # loud, naming the file
                    assert not acked, where
                    continue
                assert state in (before, after), where
                if acked:
                    assert state == after, where
    print(f"\nfault injection: {cases_run} cases over {points_total} I/O points: {summary}")
    record_figure(
        "fault_injection",
        cases=cases_run,
        io_points=points_total,
        points_per_operation=summary,
        acknowledged_writes_lost=0,
    )
    assert cases_run == 2 * points_total

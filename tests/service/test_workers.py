"""``neardup serve --workers N``: tenants spread over worker processes behind a front.

Real processes: a front and two workers over one data directory.  Tenants land on
the worker a stable hash names, keys issued through any worker work on every
worker, isolation holds across workers, the audit log stays one chain, metrics and
readiness are aggregated, and ``kill -9`` of one worker leaves the other serving
while the dead one is restarted with every acknowledged write.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from neardup.service.auth import AuditLog, Keyring
from neardup.service.workers import Assignments, merge_metrics, shard_of
from service_helpers import Server, producer

SEED = {"threshold": 0.75, "shingle": "word:2"}
TEXT = "red fox runs very fast"


def _names() -> tuple[str, str]:
    """Two tenant ids; created in this order they go to workers 0 and 1."""
    return "ta", "tb"


def _children(pid: int) -> list[int]:
    kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(k) for k in kids]


def _worker_pids(front: int, n: int = 2, timeout: float = 60) -> dict[int, int]:
    """worker index -> pid, from the children's command lines."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = {}
        for pid in _children(front):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"neardup.service._worker" in cmd:
                out[int(json.loads(cmd[cmd.index(b"neardup.service._worker") + 1])["shard"])] = pid
        if len(out) == n:
            return out
        time.sleep(0.1)
    raise AssertionError("workers not found")


def test_shard_of_is_stable() -> None:
    # Fixed values (where requests for unknown tenants go): the same in every process.
    assert [shard_of(t, 2) for t in ("t1", "t2", "t3", "t4", "acme")] == [0, 0, 0, 1, 0]
    assert [shard_of(t, 4) for t in ("t1", "t2", "t3", "t4", "acme")] == [2, 0, 2, 1, 0]
    assert {shard_of(f"x{i}", 3) for i in range(50)} == {0, 1, 2}


def test_assignments_spread_tenants_and_stay_put(tmp_path: Path) -> None:
    path = str(tmp_path / "workers.json")
    table = Assignments(path, 2)
    table.sync(["t0", "t1", "t2"])  # t0..t3 all hash to worker 0; the table spreads them
    assert table.owner == {"t0": 0, "t1": 1, "t2": 0}
    assert table.assign("t3") == 1 and table.assign("t4") == 0 and table.assign("t1") == 1
    # A worker process reads the same file (and rereads it when it changes).
    reader = Assignments(path, 2)
    assert reader.owner["t4"] == 0
    table.assign("t5")
    reader.refresh()
    assert reader.owner["t5"] == 1
    # Restarted with the same workers: nothing moves; tenants gone from disk drop out.
    again = Assignments(path, 2)
    again.sync(["t0", "t1", "t2", "t3", "t4"])
    assert again.owner == {"t0": 0, "t1": 1, "t2": 0, "t3": 1, "t4": 0}
    # With fewer workers, only the missing worker's tenants move.
    one = Assignments(path, 1)
    one.sync(["t0", "t1"])
    assert one.owner == {"t0": 0, "t1": 0}


@pytest.mark.slow
def test_tenants_on_each_worker_keys_isolation_audit_metrics(tmp_path: Path) -> None:
    a, b = _names()
    with Server(tmp_path / "data", operator_tenants=(a, b), extra=("--workers", "2")) as s:
        assert s.proc is not None
        pids = _worker_pids(s.proc.pid)
        with s.client(s.operator_token) as op:
            assert op.get("/healthz").json() == {"status": "ok", "workers": 2}
            for t in (a, b):
                assert op.put(f"/v1/tenants/{t}", json=SEED).status_code == 200
            # Keys are issued through worker 0 and must work on worker 1 at once.
            pa, pb = producer(s, op, a), producer(s, op, b)
            for t, p in ((a, pa), (b, pb)):
                r = p.post(f"/v1/tenants/{t}/items", json={"item_id": "A", "content": TEXT})
                assert r.status_code == 200 and r.json()["tenant_id"] == t
                r = p.post(
                    f"/v1/tenants/{t}/items", json={"item_id": "B", "content": TEXT + " today"}
                )
                assert [c["item_id"] for c in r.json()["candidates"]] == ["A"]
            # Isolation across workers: a key of one tenant cannot reach the other.
            assert pa.post(f"/v1/tenants/{b}/candidates", json={"content": TEXT}).status_code == 403
            assert pb.get(f"/v1/tenants/{a}/items/A").status_code == 403
            # Each tenant is open in its owner only, which holds its lock.
            for t, w in ((a, 0), (b, 1)):
                lock = tmp_path / "data" / ".locks" / f"{t}.lock"
                holders = [  # /proc/locks: "1: FLOCK ADVISORY WRITE <pid> <dev>:<inode> ..."
                    int(line.split()[4])
                    for line in Path("/proc/locks").read_text().splitlines()
                    if f":{os.stat(lock).st_ino} " in line and "->" not in line
                ]
                assert holders == [pids[w]], (t, holders, pids)
            ready = op.get("/readyz").json()
            assert ready["ready"] is True and ready["mode"] == "normal"
            assert ready["tenants"] == 2 and ready["workers"] == {"0": "up", "1": "up"}
            text = op.get("/metrics").text
            # As one process would export them: per tenant from its owner, request
            # counters summed over the workers.
            assert f'neardup_items{{tenant="{a}"}} 2.0' in text
            assert f'neardup_items{{tenant="{b}"}} 2.0' in text
            assert 'neardup_requests_total{route="upsert",status="200"} 4.0' in text
            assert 'neardup_worker_up{worker="1"} 1.0' in text
            assert text.count("# TYPE neardup_requests_total counter") == 1
            # Routes outside tenants are answered (404 in the API's JSON shape).
            r = op.get("/nope")
            assert r.status_code == 404 and r.json()["error"] == "not_found"
            assert op.get("/openapi.json").status_code == 200
        out = s.stop()
    # uvicorn re-raises SIGTERM after its graceful shutdown.
    assert s.proc is not None and s.proc.returncode in (0, -signal.SIGTERM), out
    assert "Traceback" not in out, out
    for pid in pids.values():
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
    # One hash chain, appended by both workers.
    audit = tmp_path / "data" / "audit.jsonl"
    AuditLog.verify(str(audit))
    ops = [json.loads(line)["op"] for line in audit.read_text().splitlines()]
    assert ops.count("create_tenant") == 2 and ops.count("add_key") == 2


@pytest.mark.slow
def test_kill9_of_one_worker(tmp_path: Path) -> None:
    a, b = _names()
    with Server(tmp_path / "data", operator_tenants=(a, b), extra=("--workers", "2")) as s:
        assert s.proc is not None
        with s.client(s.operator_token) as op:
            for t in (a, b):
                assert op.put(f"/v1/tenants/{t}", json=SEED).status_code == 200
            pa, pb = producer(s, op, a), producer(s, op, b)
            for i in range(20):
                for t, p in ((a, pa), (b, pb)):
                    r = p.post(
                        f"/v1/tenants/{t}/items",
                        json={"item_id": f"i{i}", "content": f"{TEXT} number {i} of {t}"},
                    )
                    assert r.status_code == 200, r.text
            digest_b = op.get(f"/v1/tenants/{b}/digest").json()
            pids = _worker_pids(s.proc.pid)
            os.kill(pids[1], signal.SIGKILL)
            # The other worker keeps serving; the dead one's tenant answers 503.
            saw_503 = False
            for _ in range(20):
                r = pa.post(f"/v1/tenants/{a}/candidates", json={"content": TEXT})
                assert r.status_code == 200
                r = pb.post(f"/v1/tenants/{b}/candidates", json={"content": TEXT})
                if r.status_code == 503:
                    saw_503 = True
                    assert r.json()["error"] == "worker_unavailable"
                    assert r.headers["retry-after"] == "1"
                    ready = op.get("/readyz").json()
                    assert ready["ready"] is True and ready["mode"] == "degraded"
                    if ready["workers"]["1"] == "down":
                        assert ready["degraded_tenants"][b] == "worker_down"
                    break
                time.sleep(0.02)
            assert saw_503
            # It comes back with every acknowledged write.
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                r = op.get(f"/v1/tenants/{b}/digest")
                if r.status_code == 200:
                    break
                time.sleep(0.2)
            assert r.status_code == 200 and r.json() == digest_b
            assert op.get(f"/v1/tenants/{b}").json()["items"] == 20
            r = pb.post(f"/v1/tenants/{b}/items", json={"item_id": "new", "content": TEXT})
            assert r.status_code == 200
            assert _worker_pids(s.proc.pid)[1] != pids[1]
            assert 'neardup_worker_restarts_total{worker="1"} 1.0' in op.get("/metrics").text
            assert op.get("/readyz").json()["mode"] == "normal"


@pytest.mark.slow
def test_kill9_of_the_front_takes_the_workers(tmp_path: Path) -> None:
    a, b = _names()
    s = Server(tmp_path / "data", operator_tenants=(a, b), extra=("--workers", "2")).start()
    assert s.proc is not None
    pids = _worker_pids(s.proc.pid)
    with s.client(s.operator_token) as op:
        assert op.put(f"/v1/tenants/{b}", json=SEED).status_code == 200
        p = producer(s, op, b)
        assert p.post(f"/v1/tenants/{b}/items", json={"item_id": "A", "content": TEXT}).is_success
    s.kill9()
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() for pid in pids.values()):
        assert time.monotonic() < deadline, "workers outlived the front"
        time.sleep(0.05)
    # A new server over the same directory has the acknowledged write.
    s2 = Server(tmp_path / "data", extra=("--workers", "2"))
    s2.token_file = s.token_file
    with s2, s2.client(s.operator_token) as op:
        assert op.get(f"/v1/tenants/{b}").json()["items"] == 1


def test_one_worker_is_one_process(tmp_path: Path) -> None:
    with Server(tmp_path / "data", extra=("--workers", "1")) as s:
        assert s.proc is not None
        assert httpx.get(s.url + "/healthz").json() == {"status": "ok"}
        assert _children(s.proc.pid) == []


def test_merge_metrics_sums_process_series_and_keeps_one_family() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    w = (
        "# HELP neardup_items live items\n# TYPE neardup_items gauge\n"
        'neardup_items{tenant="a"} 3.0\n'
        "# HELP neardup_requests_total HTTP requests\n# TYPE neardup_requests_total counter\n"
        'neardup_requests_total{route="upsert",status="200"} 5.0\n'
        "# HELP neardup_requests_created HTTP requests\n# TYPE neardup_requests_created gauge\n"
        'neardup_requests_created{route="upsert",status="200"} 100.0\n'
    )
    other = w.replace('"a"', '"b"').replace("100.0", "90.0")
    text = merge_metrics({"0": w, "1": other}, {"0": True, "1": False}, {"0": 0, "1": 2}).decode()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    items = {s.labels["tenant"]: s.value for s in fams["neardup_items"].samples}
    assert items == {"a": 3.0, "b": 3.0}
    reqs = [s for s in fams["neardup_requests"].samples if s.name.endswith("_total")]
    assert [s.value for s in reqs] == [10.0]
    assert [s.value for s in fams["neardup_requests_created"].samples] == [90.0]
    assert text.count("# TYPE neardup_items gauge") == 1
    up = {s.labels["worker"]: s.value for s in fams["neardup_worker_up"].samples}
    assert up == {"0": 1.0, "1": 0.0}
    restarts = {s.labels["worker"]: s.value for s in fams["neardup_worker_restarts"].samples}
    assert restarts == {"0": 0.0, "1": 2.0}


def _append(path: str, who: int, n: int) -> None:
    log = AuditLog(path)
    for i in range(n):
        log.write(None, "test", f"w{who}", i=i)


def test_audit_log_shared_by_processes_is_one_chain(tmp_path: Path) -> None:
    path = str(tmp_path / "audit.jsonl")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append, args=(path, k, 40)) for k in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    _, end = AuditLog.verify(path)
    assert end == os.path.getsize(path)
    assert len(Path(path).read_text().splitlines()) == 120
    # A torn line left by a writer killed mid-append is dropped by the next writer,
    # whether it opened the log before the tear or after.
    log = AuditLog(path)
    with open(path, "ab") as fh:
        fh.write(b'{"torn": ')
    log.write(None, "test", "w8")
    with open(path, "ab") as fh:
        fh.write(b'{"torn": ')
    _append(path, 9, 1)
    _, end = AuditLog.verify(path)
    assert end == os.path.getsize(path)
    assert len(Path(path).read_text().splitlines()) == 122


def test_keyring_follows_its_file(tmp_path: Path) -> None:
    path = str(tmp_path / "keys.json")
    ring = Keyring.load(path)
    token = Keyring().add_saved(path, "producer", ["t1"])
    # Another process added a key: the next authentication sees it.
    assert ring.authenticate(f"Bearer {token}").tenants == ("t1",)
    t2 = ring.add_saved(path, "producer", ["t2"])
    assert len(Keyring.load(path)) == 2
    assert Keyring.load(path).authenticate(f"Bearer {t2}").tenants == ("t2",)
    # A damaged file keeps the keys already loaded.
    Path(path).write_text("{not json")
    assert ring.authenticate(f"Bearer {token}").key_id


def test_serve_refuses_a_bad_master_key_before_starting_workers(tmp_path: Path) -> None:
    from service_helpers import EXE, free_port

    data = tmp_path / "data"
    master = tmp_path / "m.key"
    master.write_text("zz\n")
    r = subprocess.run(
        [EXE, "serve", "--data-dir", str(data), "--master-key-file", str(master),
         "--port", str(free_port()), "--workers", "3"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode != 0 and "master key" in r.stderr

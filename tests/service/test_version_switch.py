"""Version switches (shadow promote / rollback / retire) racing ordinary requests.

Requests hold a lease on the tenant's versions for as long as they run; a switch
waits (bounded) for the requests in flight, switches atomically, and closes and
removes a dropped version only once nothing uses it (docs/service.md, "Shadow
indexes").  These tests run real server processes.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
import pytest

from neardup.core._errors import Busy, Conflict, Degraded
from neardup.service._crypto import MasterSecret
from neardup.service.auth import Principal
from neardup.service.manager import Service, ServiceConfig
from neardup.service.migration import Migration
from neardup.service.tenant import Tenant, TenantConfig
from service_helpers import Server

A = {"threshold": 0.75, "shingle": "word:2", "num_perm": 32, "bands": 32, "rows": 1}
B = {**A, "num_perm": 48, "bands": 48}
CYCLES = 5  # odd: B is live at the end

WORDS = [
    *("amber", "basalt", "cobalt", "dune", "ember", "fjord", "granite", "harbor"),
    *("island", "jasper", "kelp", "lagoon", "meadow", "nectar", "orchid", "pebble"),
    *("quartz", "reef", "summit", "tundra", "umber", "valley", "willow", "yarrow"),
]


def _text(i: int) -> str:
    # Distinct items (no two alike): the index of each word is a digit of i.
    digits = [(i // 24**k) % 24 for k in range(4)]
    return " ".join(WORDS[d] for d in digits) + f" item {i} " + " ".join(WORDS[: 3 + i % 7])


class _Tally:
    """Answers of the data-path threads: status codes and non-200 bodies."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.codes: collections.Counter[tuple[str, int]] = collections.Counter()
        self.bad: list[tuple[str, int, str]] = []

    def note(self, what: str, r: httpx.Response) -> None:
        with self.lock:
            self.codes[(what, r.status_code)] += 1
            if r.status_code != 200 and len(self.bad) < 50:
                self.bad.append((what, r.status_code, r.text[:300]))


def _switch(op: httpx.Client, method: str, path: str, **kw: Any) -> tuple[int, int]:
    """One operator switch, retried while it answers 503 busy; (attempts, status)."""
    for attempt in range(1, 200):
        r = op.request(method, path, **kw)
        if r.status_code == 503 and r.json().get("error") == "busy":
            assert "Retry-After" in r.headers
            time.sleep(0.05)
            continue
        assert r.status_code == 200, (path, r.status_code, r.text)
        return attempt, r.status_code
    raise AssertionError(f"{path} stayed busy")


def _lost(srv: Server, acked: dict[str, str], tombstoned: set[str]) -> list[tuple[str, int]]:
    """Acknowledged writes the live version does not show: an upserted item that is
    not live, a tombstoned one that is (a rebuilt version has no record of items
    tombstoned before it was built: 404 there)."""
    out = []
    with srv.client(srv.operator_token) as o:
        for item in sorted(acked):
            r = o.get(f"/v1/tenants/t1/items/{item}")
            live = r.status_code == 200 and r.json()["live"]
            if live == (item in tombstoned) or r.status_code not in (200, 404):
                out.append((item, r.status_code))
    return out


@pytest.mark.slow
def test_switches_racing_requests_fail_none_and_lose_no_acknowledged_write(
    tmp_path: Path,
) -> None:
    srv = Server(
        tmp_path / "data",
        # Every sampled query runs a background exact audit: versions are closed
        # while audits scan them.
        extra=("--audit-sample-rate", "1", "--audit-interval", "0"),
    )
    with srv, srv.client(srv.operator_token) as op:
        op.put("/v1/tenants/t1", json=A).raise_for_status()
        r = op.post("/v1/keys", json={"role": "producer", "tenants": ["t1"]})
        prod_token = r.raise_for_status().json()["token"]
        tally = _Tally()
        acked: dict[str, str] = {}
        tombstoned: set[str] = set()
        acked_lock = threading.Lock()
        stop = threading.Event()
        counter = iter(range(10**9))
        counter_lock = threading.Lock()

        def upserts() -> None:
            with srv.client(prod_token) as p:
                while not stop.is_set():
                    with counter_lock:
                        i = next(counter)
                    item, text = f"w{i}", _text(i)
                    r = p.post("/v1/tenants/t1/items", json={"item_id": item, "content": text})
                    tally.note("upsert", r)
                    if r.status_code == 200:
                        with acked_lock:
                            acked[item] = text
                    if i % 9 == 4:
                        r = p.delete(f"/v1/tenants/t1/items/{item}")
                        tally.note("tombstone", r)
                        if r.status_code == 200:
                            with acked_lock:
                                tombstoned.add(item)

        def queries() -> None:
            with srv.client(prod_token) as p:
                k = 0
                while not stop.is_set():
                    k += 1
                    r = p.post("/v1/tenants/t1/candidates", json={"content": _text(k % 500)})
                    tally.note("candidates", r)

        def snapshots() -> None:
            with srv.client(srv.operator_token) as o:
                while not stop.is_set():
                    tally.note("snapshot", o.post("/v1/tenants/t1/snapshot"))
                    tally.note("stats", o.get("/v1/tenants/t1"))
                    tally.note("shadow_status", o.get("/v1/tenants/t1/shadow"))

        workers = [
            threading.Thread(target=f)
            for f in (upserts, upserts, upserts, queries, queries, snapshots)
        ]
        for w in workers:
            w.start()
        switches: collections.Counter[str] = collections.Counter()
        busy = 0
        try:
            time.sleep(0.3)
            for cycle in range(CYCLES):
                new = B if cycle % 2 == 0 else A
                old = A if cycle % 2 == 0 else B
                for method, path, body in (
                    ("PUT", "/v1/tenants/t1/shadow", new),
                    ("POST", "/v1/tenants/t1/shadow/promote", None),
                    ("POST", "/v1/tenants/t1/shadow/retire", None),
                    ("PUT", "/v1/tenants/t1/shadow", old),
                    ("POST", "/v1/tenants/t1/shadow/rollback", None),
                ):
                    attempts, _ = _switch(op, method, path, json=body)
                    busy += attempts - 1
                    switches[path.rsplit("/", 1)[1]] += 1
                    time.sleep(0.05)
        finally:
            stop.set()
            for w in workers:
                w.join(timeout=60)
        missing = _lost(srv, acked, tombstoned)
        log = srv.stop()
        srv.start()  # the switches survive a restart too
        missing += _lost(srv, acked, tombstoned)
        with srv.client(srv.operator_token) as o:
            status = o.get("/v1/tenants/t1/shadow").json()
        print(
            "answers:",
            dict(tally.codes),
            "switches:",
            dict(switches),
            "busy:",
            busy,
            "acked:",
            len(acked),
            "missing:",
            len(missing),
            "tracebacks:",
            log.count("Traceback"),
        )
        n = CYCLES
        assert switches == {"shadow": 2 * n, "promote": n, "retire": n, "rollback": n}
        assert status["role"] is None and status["live"]["config"]["bands"] == B["bands"]
        assert not tally.bad, tally.bad
        assert not missing, missing[:20]
        assert len(acked) > 50
        assert "Traceback" not in log, log[-3000:]


# -- the gate, in one process ---------------------------------------------------------


def _service(tmp_path: Path, wait: float) -> tuple[Service, Principal, Principal]:
    cfg = ServiceConfig(
        data_dir=str(tmp_path / "data"),
        master_key_file=str(tmp_path / "master.key"),
        keys_file=str(tmp_path / "keys.json"),
        switch_wait_s=wait,
    )
    svc, token = Service.init(cfg, operator_tenants=["t1"])
    op = svc.keyring.authenticate(f"Bearer {token}")
    svc.create_tenant(op, "t1", A)
    prod = svc.keyring.authenticate("Bearer " + svc.add_key(op, "producer", ["t1"]))
    for i in range(5):
        svc.upsert(prod, "t1", {"item_id": f"x{i}", "content": _text(i)})
    return svc, op, prod


def _hold_snapshots(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """Snapshots wait for ``go`` once they started (``inside``): a request in flight."""
    inside, go = threading.Event(), threading.Event()
    orig = Tenant.snapshot

    def snapshot(self: Tenant) -> bytes:
        inside.set()
        assert go.wait(20)
        return orig(self)

    monkeypatch.setattr(Tenant, "snapshot", snapshot)
    return inside, go


def _in_thread(fn: Any, *args: Any) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn(*args)
        except BaseException as exc:
            out["error"] = exc

    th = threading.Thread(target=run)
    th.start()
    return th, out


def test_a_retire_waits_for_the_request_in_flight_then_answers_busy_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc, op, prod = _service(tmp_path, wait=0.2)
    svc.shadow(op, "t1", "start", B)
    svc.shadow(op, "t1", "promote")
    inside, go = _hold_snapshots(monkeypatch)
    # A snapshot of the live version, and one that started on the previous version
    # just before the promotion, are what a retire must not pull files from under.
    previous = svc.migration("t1").other  # type: ignore[union-attr]
    th, out = _in_thread(svc.snapshot, op, "t1")
    assert inside.wait(10)
    with pytest.raises(Busy, match="1 request"):
        svc.shadow(op, "t1", "retire")
    status = svc.shadow(op, "t1", "status")
    assert status["role"] == "previous" and previous is not None
    assert previous.mode == "normal"  # still open, files in place
    go.set()
    th.join(20)
    assert "error" not in out and out["value"][:0] == b""
    assert svc.shadow(op, "t1", "retire")["role"] is None
    assert svc.upsert(prod, "t1", {"item_id": "y", "content": _text(99)})["item_id"] == "y"
    svc.close()


def test_a_request_arriving_while_a_switch_waits_runs_after_it_on_the_new_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc, op, prod = _service(tmp_path, wait=20)
    svc.shadow(op, "t1", "start", B)
    inside, go = _hold_snapshots(monkeypatch)
    snap, snap_out = _in_thread(svc.snapshot, op, "t1")
    assert inside.wait(10)
    promote, promote_out = _in_thread(svc.shadow, op, "t1", "promote")
    gate = svc._gates["t1"]
    for _ in range(2000):  # until the promotion waits for the snapshot
        if gate._waiting:
            break
        time.sleep(0.005)
    assert gate._waiting == 1 and gate.in_flight == 1
    query, query_out = _in_thread(svc.candidates, prod, "t1", {"content": _text(1)})
    query.join(0.2)
    assert query.is_alive()  # held back behind the waiting promotion
    go.set()
    for th in (snap, promote, query):
        th.join(20)
    assert "error" not in snap_out and "error" not in promote_out
    # The snapshot finished on the version it started on; the query ran on the new one
    # (compared with the previous version, not with a shadow).
    assert query_out["value"]["shadow"]["role"] == "previous"
    assert svc.shadow(op, "t1", "status")["live"]["config"]["bands"] == B["bands"]
    svc.close()


def test_a_shadow_that_missed_a_mirrored_write_is_never_promoted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc, op, prod = _service(tmp_path, wait=5)
    svc.shadow(op, "t1", "start", B)
    shadow = svc.migration("t1").other  # type: ignore[union-attr]
    assert shadow is not None

    def fail(**kw: Any) -> dict[str, Any]:
        raise Degraded("the shadow's store is gone", "test")

    monkeypatch.setattr(shadow, "upsert", fail)
    out = svc.upsert(prod, "t1", {"item_id": "late", "content": _text(50)})
    assert out["item_id"] == "late"  # acknowledged by the live version
    status = svc.shadow(op, "t1", "status")
    assert status["comparison"]["missed_writes"] == 1
    with pytest.raises(Conflict, match="failed to take 1 mirrored write"):
        svc.shadow(op, "t1", "promote")
    assert svc.shadow(op, "t1", "status")["role"] == "shadow"
    monkeypatch.undo()
    svc.shadow(op, "t1", "rollback")
    svc.shadow(op, "t1", "start", B)
    svc.shadow(op, "t1", "promote")
    assert svc.item(op, "t1", "late")["live"] is True
    svc.close()


def test_a_switch_while_a_shadow_is_built_answers_busy_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc, op, prod = _service(tmp_path, wait=20)
    svc.shadow(op, "t1", "start", B)
    svc.shadow(op, "t1", "promote")
    svc.shadow(op, "t1", "retire")
    inside, go = threading.Event(), threading.Event()
    orig = Migration._build

    def build(self: Migration, *args: Any) -> tuple[int, Tenant]:
        inside.set()
        assert go.wait(20)
        return orig(self, *args)

    monkeypatch.setattr(Migration, "_build", build)
    th, out = _in_thread(svc.shadow, op, "t1", "start", A)
    assert inside.wait(10)
    # Not held back for switch_wait_s (20 s): the requests go on meanwhile.
    with pytest.raises(Busy, match="building a shadow"):
        svc.shadow(op, "t1", "promote")
    assert svc.candidates(prod, "t1", {"content": _text(1)})["candidates"]
    go.set()
    th.join(20)
    assert "error" not in out
    assert svc.shadow(op, "t1", "promote")["live"]["config"]["bands"] == A["bands"]
    svc.close()


# -- closing a tenant under a background exact audit ---------------------------------


def _join_audits() -> None:
    for th in threading.enumerate():
        if th.name == "audit-t1":
            th.join(20)


def test_closing_a_tenant_ends_its_background_audit_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crashes: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: crashes.append(args.exc_value))
    cfg = TenantConfig.from_dict(A)
    t = Tenant.create(
        str(tmp_path / "t1"),
        "t1",
        cfg,
        MasterSecret(b"m" * 32),
        audit_rate=1.0,
        audit_interval_s=0.0,
    )
    for i in range(3):
        t.upsert(item_id=f"x{i}", content=_text(i))
    _join_audits()
    scanning, go = threading.Event(), threading.Event()
    orig = t.store.all_features

    def all_features(stride: int = 1) -> Iterator[tuple[int, str, npt.NDArray[np.uint64]]]:
        scanning.set()
        assert go.wait(20)
        yield from orig(stride)

    monkeypatch.setattr(t.store, "all_features", all_features)
    audits = t.counters.audits
    t.candidates(_text(1), limit=5)
    assert scanning.wait(10)  # the audit thread is in its scan
    closer, closed = _in_thread(t.close)
    for _ in range(2000):  # close() has begun (it waits for the audit, or not at all)
        if getattr(t, "_closed", False) or not closer.is_alive():
            break
        time.sleep(0.005)
    go.set()
    closer.join(20)
    assert not closer.is_alive() and "error" not in closed
    _join_audits()
    assert crashes == []
    assert t.counters.audits == audits  # a scan cut short counts nothing
    assert not t.maybe_audit(t.prepare(_text(2)), [])  # none starts on a closed tenant


def test_items_deleted_before_a_shadow_build_stay_deleted_after_promote(
    tmp_path: Path,
) -> None:
    """Found by the model test: a shadow built from live items only made an item
    deleted earlier read as never stored (404) once the shadow was promoted."""
    svc, op, prod = _service(tmp_path, wait=5)
    before = svc.tombstone(prod, "t1", "x1")
    svc.shadow(op, "t1", "start", B)
    svc.shadow(op, "t1", "promote")
    item = svc.item(prod, "t1", "x1")
    assert item["live"] is False and item["tombstone_epoch"] == before["epoch"]
    assert svc.item(prod, "t1", "x2")["live"] is True
    # The deleted item can be stored again, as on the version it came from.
    again = svc.upsert(prod, "t1", {"item_id": "x1", "content": _text(1)})
    assert again["status"] in ("inserted", "replaced")
    assert svc.item(prod, "t1", "x1")["live"] is True
    svc.close()

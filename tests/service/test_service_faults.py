"""Commands that fail to apply, storage errors while applying, and tenants that cannot
start: each is confined to its command or its tenant (library and real servers)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from neardup.core._errors import CommandFailed, NeardupIOError, NotFound, TenantUnavailable
from neardup.service._crypto import MasterSecret
from neardup.service.store import FeatureStore
from neardup.service.tenant import Tenant, TenantConfig
from service_helpers import Server, fault_shim, producer

MASTER = MasterSecret(b"m" * 32)
CFG = TenantConfig.from_dict(
    {"threshold": 0.75, "shingle": "word:2", "num_perm": 32, "bands": 32, "rows": 1}
)
SEED = {"threshold": 0.75, "shingle": "word:2", "num_perm": 32, "bands": 32, "rows": 1}

# Inside a server process: an upsert of an item whose id starts with "poison" fails in
# the store as a command nothing validated could foresee would (a defect).
POISON_SHIM = """
import neardup.service.store as _s
_orig = _s.FeatureStore.apply_upsert
def _apply_upsert(self, seq, **kw):
    if str(kw.get("item_id", "")).startswith("poison"):
        raise UnicodeEncodeError("utf-8", "\\ud800", 0, 1, "surrogates not allowed")
    return _orig(self, seq, **kw)
_s.FeatureStore.apply_upsert = _apply_upsert
"""


def _poison(monkeypatch: pytest.MonkeyPatch, exc: BaseException, *, once: bool = False) -> None:
    orig = FeatureStore.apply_upsert
    fired = []

    def apply_upsert(self: FeatureStore, seq: int, **kw: Any) -> bool:
        if str(kw["item_id"]).startswith("poison") and not (once and fired):
            fired.append(seq)
            raise exc
        return orig(self, seq, **kw)

    monkeypatch.setattr(FeatureStore, "apply_upsert", apply_upsert)


def _new(tmp_path: Path) -> Tenant:
    return Tenant.create(str(tmp_path / "t1"), "t1", CFG, MASTER)


def test_a_command_that_fails_to_apply_is_recorded_and_skipped_on_every_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _poison(monkeypatch, OverflowError("Python int too large to convert to SQLite INTEGER"))
    t = _new(tmp_path)
    t.upsert(item_id="A", content="red fox runs very fast")
    with pytest.raises(CommandFailed, match="recorded as failed") as err:
        t.upsert(item_id="poison-1", content="some other words entirely")
    assert err.value.seq == 2
    # The tenant goes on: the next command follows the failed one.
    b = t.upsert(item_id="B", content="red fox runs very fast today")
    assert b["seq"] == 3 and b["candidates"][0]["item_id"] == "A"
    assert t.stats()["failed_commands"] == 1 and t.mode == "normal"
    reason = "OverflowError: Python int too large to convert to SQLite INTEGER"
    assert t.store.failed_commands() == [{"seq": 2, "op": "upsert", "reason": reason}]
    digest = t.digest()
    t.close()
    # Reopen: nothing to replay, same state.
    t = Tenant.open_dir(str(tmp_path / "t1"), MASTER)
    assert t.digest() == digest and t.failed_commands == 1
    t.close()
    # Rebuild from the log alone: the replay meets the same failure and records it.
    for f in (tmp_path / "t1").glob("features-*"):
        f.unlink()
    t = Tenant.open_dir(str(tmp_path / "t1"), MASTER)
    assert t.replayed == 3 and t.digest() == digest
    assert [c["seq"] for c in t.store.failed_commands()] == [2]
    with pytest.raises(NotFound, match="never stored"):
        t.item("poison-1")
    t.close()


def test_a_storage_error_while_applying_stops_writes_and_start_up_applies_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = _new(tmp_path)
    t.upsert(item_id="A", content="red fox runs very fast")
    with monkeypatch.context() as m:
        _poison(m, sqlite3.OperationalError("disk I/O error"))
        with pytest.raises(NeardupIOError):
            t.upsert(item_id="poison-1", content="some other words entirely")
    # Writes stop (the logged command must be applied before any later one) ...
    assert t.mode == "stopped" and "disk I/O error" in t.stats()["stopped"]
    with pytest.raises(TenantUnavailable, match="stopped writing"):
        t.upsert(item_id="C", content="database backup completed nightly")
    # ... queries still answer.
    assert t.candidates("red fox runs very fast", limit=5)["candidates"][0]["item_id"] == "A"
    t.log.sync(t.log.last_seq)
    t.close()
    # Once the disk is fine, start-up applies the logged command: the state is the
    # one after it (it was logged, never acknowledged; both outcomes are allowed).
    t = Tenant.open_dir(str(tmp_path / "t1"), MASTER)
    assert t.mode == "normal" and t.item("poison-1")["live"] is True
    assert t.upsert(item_id="C", content="database backup completed nightly")["seq"] == 3
    t.close()


@pytest.mark.slow
def test_a_poison_command_over_http_is_confined_to_itself(tmp_path: Path) -> None:
    env = fault_shim(tmp_path / "shim", POISON_SHIM)
    srv = Server(tmp_path / "data", operator_tenants=("t1", "t2"), env=env)
    with srv, srv.client(srv.operator_token) as op:
        for t in ("t1", "t2"):
            op.put(f"/v1/tenants/{t}", json=SEED).raise_for_status()
        with producer(srv, op, "t1") as p:
            u = "/v1/tenants/t1/items"
            assert p.post(u, json={"item_id": "A", "content": "red fox runs"}).status_code == 200
            r = p.post(u, json={"item_id": "poison-1", "content": "other words here"})
            assert r.status_code == 422, r.text
            assert r.json()["error"] == "command_failed" and r.json()["fix"]
            assert str(tmp_path) not in r.text  # no server paths in answers
            b = p.post(u, json={"item_id": "B", "content": "red fox runs fast"})
            assert b.status_code == 200, b.text
            assert p.get("/v1/tenants/t1/items/poison-1").status_code == 404
        assert op.get("/v1/tenants/t1").json()["failed_commands"] == 1
        assert 'neardup_failed_commands{tenant="t1"} 1.0' in op.get("/metrics").text
    # A restart replays nothing fatal; every tenant serves.
    srv2 = Server(tmp_path / "data", operator_tenants=("t1", "t2"), env=env)
    with srv2, srv2.client(srv.operator_token) as op:
        assert op.get("/readyz").json()["mode"] == "normal"
        stats = op.get("/v1/tenants/t1").json()
        assert stats["items"] == 2 and stats["failed_commands"] == 1
        with producer(srv2, op, "t1") as p:
            r = p.post("/v1/tenants/t1/items", json={"item_id": "C", "content": "new words"})
            assert r.status_code == 200, r.text


@pytest.mark.slow
def test_a_tenant_that_cannot_start_fails_alone_and_reopens_once_repaired(
    tmp_path: Path,
) -> None:
    srv = Server(tmp_path / "data", operator_tenants=("t1", "t2"))
    with srv, srv.client(srv.operator_token) as op:
        for t in ("t1", "t2"):
            op.put(f"/v1/tenants/{t}", json=SEED).raise_for_status()
            with producer(srv, op, t) as p:
                for i in range(5):
                    p.post(
                        f"/v1/tenants/{t}/items",
                        json={"item_id": f"x{i}", "content": f"some text number {i} here"},
                    ).raise_for_status()
    tdir = tmp_path / "data" / "tenants" / "t1"
    log = next(tdir.glob("log-*.ndlog"))
    good = log.read_bytes()
    raw = bytearray(good)
    raw[200] ^= 0xFF  # inside the first record: damage in the middle of the log
    log.write_bytes(bytes(raw))
    for f in tdir.glob("features-*"):
        f.unlink()  # start-up must replay, and meets the damage
    srv2 = Server(tmp_path / "data", operator_tenants=("t1", "t2"))
    with srv2, srv2.client(srv.operator_token) as op:
        ready = op.get("/readyz").json()
        assert ready["ready"] is True and ready["mode"] == "degraded"
        failed = ready["failed_tenants"]["t1"]
        assert failed["error"] == "CorruptFile" and "byte offset" in failed["reason"]
        assert "neardup repair" in failed["runbook"] and str(tmp_path) not in json.dumps(ready)
        r = op.get("/v1/tenants/t1")
        assert r.status_code == 503 and r.json()["error"] == "tenant_unavailable"
        assert "neardup repair" in r.json()["fix"]
        assert op.put("/v1/tenants/t1", json=SEED).status_code == 503  # not re-created
        metrics = op.get("/metrics").text
        assert 'neardup_mode{mode="failed",tenant="t1"} 1.0' in metrics
        audit = (tmp_path / "data" / "audit.jsonl").read_text()
        assert '"op":"tenant_failed"' in audit and '"tenant":"t1"' in audit
        # The other tenant serves reads and writes.
        assert op.get("/v1/tenants/t2").json()["items"] == 5
        with producer(srv2, op, "t2") as p:
            r = p.post("/v1/tenants/t2/items", json={"item_id": "y", "content": "more words"})
            assert r.status_code == 200
        # Still damaged: reopen says so.
        assert op.post("/v1/tenants/t1/reopen").status_code == 503
        # The operator puts back a good copy of the log; reopen brings the tenant back.
        log.write_bytes(good)
        r = op.post("/v1/tenants/t1/reopen")
        assert r.status_code == 200, r.text
        assert r.json()["reopened"] is True and r.json()["items"] == 5
        assert op.get("/readyz").json()["mode"] == "normal"
        with producer(srv2, op, "t1") as p:
            assert p.get("/v1/tenants/t1/items/x3").json()["live"] is True
        assert '"op":"reopen_tenant"' in (tmp_path / "data" / "audit.jsonl").read_text()


def test_reopen_needs_the_operator_role(tmp_path: Path) -> None:
    with Server(tmp_path / "data") as srv, srv.client(srv.operator_token) as op:
        op.put("/v1/tenants/t1", json=SEED).raise_for_status()
        with producer(srv, op, "t1") as p:
            assert p.post("/v1/tenants/t1/reopen").status_code == 403
        r = op.post("/v1/tenants/t1/reopen")
        assert r.status_code == 200 and r.json()["reopened"] is False
        assert op.post("/v1/tenants/nope/reopen").status_code in (403, 404)


def _words(seed: int, n: int) -> list[str]:
    import random

    rng = random.Random(seed)
    return [f"w{rng.randrange(50_000)}" for _ in range(n)]


def test_request_work_is_bounded_by_deterministic_budgets(tmp_path: Path) -> None:
    """A ~1 MB near copy: no span explanation past the limit (the counts still
    explain it), and exact verification stops at its budget, reported as capped."""
    words = _words(1, 170_000)
    big = " ".join(words)
    assert len(big) > 1_000_000
    cfg = TenantConfig.from_dict(
        {"threshold": 0.75, "shingle": "word:2", "max_shingles": 1_000_000}
    )
    t = Tenant.create(str(tmp_path / "t1"), "t1", cfg, MASTER, verify_budget=700_000)
    for i in range(3):  # three stored near copies of the same text
        w = list(words)
        w[i::97] = ["edited"] * len(w[i::97])
        t.upsert(item_id=f"c{i}", content=" ".join(w))
    q = " ".join(words)
    probe = t.candidates(q, limit=10)
    # Each comparison costs |Q| + |c_i| (about 2 x 170k): the budget allows two.
    assert probe["capped"] is True and probe["verify_budget_hit"] is True
    assert probe["candidates_verified"] == 2 and probe["candidates_found"] == 3
    # Same state, same query: the same candidates (a work budget, not a clock).
    assert t.candidates(q, limit=10)["candidates"] == probe["candidates"]
    # A verified duplicate stands; the cap only withholds "unique" (see decisions).
    out = t.upsert(item_id="Q", content=big)
    assert out["capped"] is True and out["decision"]["state"] == "duplicate"
    t2 = Tenant.create(str(tmp_path / "t2"), "t2", cfg, MASTER)  # default budget
    t2.upsert(item_id="c0", content=" ".join(words[:-1]))
    d = t2.decide(big)["decision"]
    assert d["state"] == "duplicate"
    spans = d["explanation"]["spans"]
    assert spans["query"] is None and "over the explanation limit" in spans["query_offsets"]
    assert d["explanation"]["shared_shingles"] > 0
    t2.close()
    t.close()


@pytest.mark.slow
def test_retiring_the_first_version_after_a_promotion_keeps_the_tenant(tmp_path: Path) -> None:
    """Found by the model test: retiring the version that lives in the tenant's root
    folder removed the whole folder, the promoted version with it (503 degraded at
    once, the tenant gone after a restart)."""
    srv = Server(tmp_path / "data")
    with srv, srv.client(srv.operator_token) as op:
        op.put("/v1/tenants/t1", json=SEED).raise_for_status()
        with producer(srv, op, "t1") as p:
            for i in range(4):
                r = p.post(
                    "/v1/tenants/t1/items",
                    json={"item_id": f"x{i}", "content": f"some words number {i} here"},
                )
                r.raise_for_status()
            shadow = {**SEED, "num_perm": 48, "bands": 48}
            assert op.put("/v1/tenants/t1/shadow", json=shadow).status_code == 200
            assert op.post("/v1/tenants/t1/shadow/promote").status_code == 200
            assert op.post("/v1/tenants/t1/shadow/retire").status_code == 200
            r = p.post("/v1/tenants/t1/items", json={"item_id": "y", "content": "more words"})
            assert r.status_code == 200, r.text
            digest = op.get("/v1/tenants/t1/digest").json()["digest"]
    srv2 = Server(tmp_path / "data")
    with srv2, srv2.client(srv.operator_token) as op:
        stats = op.get("/v1/tenants/t1")
        assert stats.status_code == 200, stats.text
        assert stats.json()["items"] == 5 and stats.json()["bands"] == 48
        assert op.get("/v1/tenants/t1/digest").json()["digest"] == digest
        # The live version is a shadow-* folder now: the next switch starts from it.
        assert op.put("/v1/tenants/t1/shadow", json=SEED).status_code == 200
        assert op.post("/v1/tenants/t1/shadow/rollback").status_code == 200
        assert op.put("/v1/tenants/t1/shadow", json=SEED).status_code == 200
        digest = op.get("/v1/tenants/t1/digest").json()["digest"]
        srv2.kill9()
    srv3 = Server(tmp_path / "data")
    with srv3, srv3.client(srv.operator_token) as op:
        assert op.get("/v1/tenants/t1/digest").json()["digest"] == digest
        assert op.get("/v1/tenants/t1/shadow").json()["role"] == "shadow"


@pytest.mark.slow
def test_neardup_repair_rebases_a_damaged_log_on_the_store_without_loss(
    tmp_path: Path,
) -> None:
    import subprocess

    from service_helpers import EXE

    srv = Server(tmp_path / "data", operator_tenants=("t1", "t2"))
    with srv, srv.client(srv.operator_token) as op:
        for t in ("t1", "t2"):
            op.put(f"/v1/tenants/{t}", json=SEED).raise_for_status()
        with producer(srv, op, "t1") as p:
            for i in range(6):
                p.post(
                    "/v1/tenants/t1/items",
                    json={"item_id": f"x{i}", "content": f"some text number {i} here"},
                ).raise_for_status()
            p.delete("/v1/tenants/t1/items/x2").raise_for_status()
        digest = op.get("/v1/tenants/t1/digest").json()["digest"]
    log = next((tmp_path / "data" / "tenants" / "t1").glob("log-*.ndlog"))
    raw = bytearray(log.read_bytes())
    raw[200] ^= 0xFF  # the first record: damage in the middle, the store is intact
    log.write_bytes(bytes(raw))

    def repair(*extra: str) -> subprocess.CompletedProcess[str]:
        cmd = [EXE, "repair", "--data-dir", str(tmp_path / "data"), "--tenant", "t1"]
        cmd += ["--master-key-file", str(srv.master_key_file), *extra]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)

    srv2 = Server(tmp_path / "data", operator_tenants=("t1", "t2"))
    with srv2, srv2.client(srv.operator_token) as op:
        assert op.get("/v1/tenants/t1").status_code == 503
        # Examine: damaged, nothing changed, the next step named.
        look = repair()
        assert look.returncode == 3, look.stderr
        rep = json.loads(look.stdout)
        assert rep["status"] == "damaged" and rep["commands_lost"] == 0
        assert rep["survey"]["damaged_offsets"] and "--rebase" in rep["next"]
        assert log.read_bytes() == bytes(raw)
        # Rebase on the store: a new generation; the damaged log is kept.
        fixed = repair("--rebase")
        assert fixed.returncode == 0, fixed.stdout + fixed.stderr
        rep = json.loads(fixed.stdout)
        assert rep["status"] == "repaired" and rep["after"]["items"] == 5
        assert Path(rep["damaged_log_kept"]).read_bytes() == bytes(raw)
        r = op.post("/v1/tenants/t1/reopen")
        assert r.status_code == 200, r.text
        assert op.get("/v1/tenants/t1/digest").json()["digest"] == digest
        with producer(srv2, op, "t1") as p:
            assert p.get("/v1/tenants/t1/items/x5").json()["live"] is True
            assert p.get("/v1/tenants/t1/items/x2").json()["live"] is False
            ok = p.post("/v1/tenants/t1/items", json={"item_id": "y", "content": "new words"})
            assert ok.status_code == 200
        # A tenant the server has open is refused.
        busy = repair()
        assert busy.returncode == 2 and "open in another process" in busy.stderr


def test_snapshots_kept_on_disk_are_bounded(tmp_path: Path) -> None:
    t = Tenant.create(str(tmp_path / "t1"), "t1", CFG, MASTER, snapshot_keep=3)
    for i in range(6):
        t.upsert(item_id=f"x{i}", content=f"some words number {i} here")
        t.snapshot()
    kept = sorted(p.name for p in (tmp_path / "t1" / "snapshots").glob("*.ndsnap"))
    assert len(kept) == 3 and kept[-1] == f"snap-{t.seq:012d}.ndsnap"
    t.close()
    # A damaged store is still rebuilt from the newest snapshot and the log.
    store = next((tmp_path / "t1").glob("features-*.sqlite"))
    store.write_bytes(b"\0" * 8192)
    t = Tenant.open_dir(str(tmp_path / "t1"), MASTER)
    assert t.recovered is not None and t.recovered["snapshot"] == kept[-1]
    assert len(t) == 6
    t.close()


@pytest.mark.slow
def test_reads_on_other_threads_during_writes_never_deadlock(tmp_path: Path) -> None:
    """Found by the service benchmark: the store's row-checksum triggers call Python
    inside SQLite while another thread fetched rows holding the GIL (a deadlock).
    Here a reader scans every row again and again while the writer upserts."""
    import threading

    t = Tenant.create(str(tmp_path / "t1"), "t1", CFG, MASTER)
    for i in range(300):
        t.upsert(item_id=f"x{i}", content=f"some words number {i} here and there")
    stop = threading.Event()
    scans = [0]

    def reader() -> None:
        while not stop.is_set():
            for _ in t.store.all_features():
                pass
            scans[0] += 1

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    done = threading.Event()

    def writer() -> None:
        for i in range(300, 500):
            t.upsert(item_id=f"x{i}", content=f"other words number {i} over here")
        done.set()

    w = threading.Thread(target=writer, daemon=True)
    w.start()
    finished = done.wait(timeout=120)
    stop.set()
    th.join(timeout=30)
    assert finished, "the writer did not finish: a deadlock between writer and reader"
    assert scans[0] >= 1 and len(t) == 500
    t.close()

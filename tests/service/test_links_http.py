"""Cluster links through a real server (issue 20, defect 4): a tombstone hands the
cluster to a new canonical item, nothing links to a tombstoned item or to itself,
and kill -9 + restart, snapshot + restore and old data directories keep the links."""

from __future__ import annotations

import tarfile
from pathlib import Path

import httpx
import pytest

from service_helpers import Server, producer

BASE = {"threshold": 0.75, "shingle": "word:2", "num_perm": 32, "bands": 8, "rows": 4}
A = "the red fox runs very fast across the field"
B = "The red fox runs very fast across the FIELD today"  # J(A, B) = 8/9
ITEMS = ("X1", "X2", "X3", "X5")
LEGACY = Path(__file__).resolve().parents[1] / "data" / "legacy-links-t1.tar.gz"


def _key(op: httpx.Client, role: str) -> str:
    r = op.post("/v1/keys", json={"role": role, "tenants": ["t1"]})
    r.raise_for_status()
    return str(r.json()["token"])


def _links(c: httpx.Client) -> dict[str, tuple[str, str | None]]:
    out = {}
    for item in ITEMS:
        r = c.get(f"/v1/tenants/t1/items/{item}/decision")
        assert r.status_code == 200, r.text
        out[item] = (r.json()["state"], r.json()["canonical"])
    return out


def _state(c: httpx.Client) -> tuple[str, dict[str, tuple[str, str | None]]]:
    return str(c.get("/v1/tenants/t1/digest").json()["digest"]), _links(c)


def _post(p: httpx.Client, item: str, content: str, **kw: object) -> dict:
    r = p.post("/v1/tenants/t1/items", json={"item_id": item, "content": content, **kw})
    assert r.status_code == 200, r.text
    return dict(r.json()["decision"])


@pytest.mark.slow
def test_tombstone_hands_the_cluster_over_and_replays_identically(tmp_path: Path) -> None:
    data = tmp_path / "d"
    srv = Server(data).start()
    try:
        with srv.client(srv.operator_token) as op, producer(srv, op, "t1") as p:
            op.put("/v1/tenants/t1", json=BASE).raise_for_status()
            assert _post(p, "X1", A)["state"] == "unique"
            d = _post(p, "X2", B)
            assert (d["state"], d["canonical"]) == ("duplicate", "X1")
            assert _post(p, "X5", A + " more")["canonical"] == "X1"
            # Tombstone X1: X2 (the oldest live member) becomes the canonical item.
            r = p.delete("/v1/tenants/t1/items/X1")
            assert r.status_code == 200, r.text
            assert r.json()["relinks"] == [
                {"item_id": "X2", "state": "unique", "canonical": None},
                {"item_id": "X5", "state": "duplicate", "canonical": "X2"},
            ]
            st = p.get("/v1/tenants/t1/items/X2/decision").json()
            assert (st["state"], st["canonical"]) == ("unique", None)
            # A new near copy links to the live canonical, never to the tombstoned X1.
            d = _post(p, "X3", A + " again")
            assert (d["state"], d["duplicate_of"], d["canonical"]) == ("duplicate", "X2", "X2")
            # Re-upserting X1: a duplicate of X2's cluster, not a link to itself.
            d = _post(p, "X1", A)
            assert (d["state"], d["canonical"]) == ("duplicate", "X2")
            assert d["duplicate_of"] != "X1"
            # Previews and recorded decisions name live canonical items only.
            for url in ("/v1/tenants/t1/candidates", "/v1/tenants/t1/decide"):
                dd = p.post(url, json={"content": A}).json()["decision"]
                assert dd["state"] == "duplicate" and dd["canonical"] == "X2", dd
            want = {
                "X1": ("duplicate", "X2"),
                "X2": ("unique", None),
                "X3": ("duplicate", "X2"),
                "X5": ("duplicate", "X2"),
            }
            assert _links(p) == want
            with srv.client(_key(op, "reviewer")) as rev:
                log = rev.get("/v1/tenants/t1/decisions").json()["events"]
                # X1, X2, X5; the tombstone's re-link; X3, X1 and the decide (not the preview).
                assert [e["kind"] for e in log] == ["decision"] * 3 + ["relink"] + ["decision"] * 3
            before = _state(op)
            snap = op.post("/v1/tenants/t1/snapshot")
            assert snap.status_code == 200
        # kill -9 and restart: the log replays the same links.
        srv.kill9()
        srv = Server(data).start()
        with srv.client(srv.operator_token) as op:
            assert _state(op) == before
    finally:
        srv.stop()
    # Snapshot + restore into a fresh server: the same links.
    fresh = Server(tmp_path / "fresh", master_key_file=Path(str(data) + ".master.key"))
    with fresh, fresh.client(fresh.operator_token) as op:
        op.put("/v1/tenants/t1", json=BASE).raise_for_status()
        r = op.post("/v1/tenants/t1/restore", content=snap.content)
        assert r.status_code == 200, r.text
        assert _state(op) == before


@pytest.mark.slow
def test_data_directory_of_the_previous_version_opens_with_its_links_repaired(
    tmp_path: Path,
) -> None:
    """``legacy-links-t1.tar.gz`` was written by the previous version (see
    ``tests/data/make_legacy_links.py``): X2, X3 and X5 link to the tombstoned X1,
    and X1, upserted again, links to itself."""
    data = tmp_path / "d"
    root = data / "tenants" / "t1"
    root.mkdir(parents=True)
    with tarfile.open(LEGACY) as tar:
        tar.extractall(root, filter="data")
    want = {
        "X1": ("duplicate", "X2"),
        "X2": ("unique", None),
        "X3": ("duplicate", "X2"),
        "X5": ("duplicate", "X2"),
    }
    with Server(data) as srv, srv.client(srv.operator_token) as op:
        assert _links(op) == want
        with srv.client(_key(op, "reviewer")) as rev:
            log = rev.get("/v1/tenants/t1/decisions").json()
            assert log["chain_verified"] == len(log["events"])
            assert [(e["kind"], e.get("cause")) for e in log["events"]][-1] == (
                "relink",
                "repair",
            )
        before = _state(op)
    # Repaired once, in the log: a restart changes nothing.
    with Server(data) as srv, srv.client(srv.operator_token) as op:
        assert _state(op) == before
        with producer(srv, op, "t1") as p:
            d = _post(p, "X6", A + " once more")
            assert (d["state"], d["canonical"]) == ("duplicate", "X2")


@pytest.mark.slow
def test_exact_hash_only_mode_follows_one_rule(tmp_path: Path) -> None:
    """Defect 10: with the feature store gone, items and links are neither changed nor
    exactly scored (503 degraded, tombstones included), and the candidates preview
    decides exactly as decide does (review, never duplicate, no ids or scores)."""
    import os

    data = tmp_path / "d"
    with Server(data) as srv, srv.client(srv.operator_token) as op:
        op.put("/v1/tenants/t1", json=BASE).raise_for_status()
        rev = srv.client(_key(op, "reviewer"))
        with producer(srv, op, "t1") as p, rev:
            _post(p, "X1", A)
            assert _post(p, "X2", B)["state"] == "duplicate"
            before = _state(op)
            store = data / "tenants" / "t1" / "features-0.sqlite"
            for suffix in ("", "-wal", "-shm"):
                if Path(str(store) + suffix).exists():
                    os.unlink(str(store) + suffix)
            for text in (A, B):
                pre = p.post("/v1/tenants/t1/candidates", json={"content": text}).json()
                dec = p.post("/v1/tenants/t1/decide", json={"content": text}).json()
                assert pre["decision"]["state"] == dec["decision"]["state"] == "review"
                assert pre["decision"]["reason"] == dec["decision"]["reason"]
                assert pre["candidates"] == dec["evidence"] == []
                assert pre["candidates_found"] == dec["candidates_found"] >= 1
            fresh = p.post("/v1/tenants/t1/candidates", json={"content": "zz yy xx ww"}).json()
            assert fresh["decision"]["state"] == "unique"
            refused = [
                p.post("/v1/tenants/t1/items", json={"item_id": "X3", "content": A + " x"}),
                p.delete("/v1/tenants/t1/items/X1"),
                p.post("/v1/tenants/t1/verify", json={"left": "X1", "right": "X2"}),
                rev.post("/v1/tenants/t1/items/X2/unlink", json={"rationale": "r"}),
                rev.post("/v1/tenants/t1/items/X2/release", json={}),
                rev.post(
                    "/v1/tenants/t1/labels",
                    json={"left": "X1", "right": "X2", "label": "duplicate"},
                ),
            ]
            for r in refused:
                assert r.status_code == 503 and r.json()["error"] == "degraded", r.text
            # Reads of recorded state still answer.
            assert _links(p)["X2"] == ("duplicate", "X1")
    # A restart rebuilds the store from the log: same items and links, writes work.
    with Server(data) as srv, srv.client(srv.operator_token) as op:
        assert _links(op) == before[1]
        with producer(srv, op, "t1") as p:
            r = p.delete("/v1/tenants/t1/items/X1")
            assert r.status_code == 200 and r.json()["relinks"][0]["item_id"] == "X2"

"""The service through real ``neardup serve`` processes and HTTP clients."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service_helpers import Server, producer

SEED = {"threshold": 0.75, "shingle": "word:2", "num_perm": 32, "bands": 8, "rows": 4}


def test_seed_demonstration_over_http(tmp_path: Path) -> None:
    with Server(tmp_path / "data") as srv, srv.client(srv.operator_token) as op:
        assert op.put("/v1/tenants/t1", json=SEED).status_code == 200
        bad = op.put("/v1/tenants/t1", json={**SEED, "num_perm": 31})
        assert bad.status_code == 400 and "num_perm" in bad.json()["message"]
        assert "fix" in bad.json()["message"] and bad.json()["fix"]
        other = op.put("/v1/tenants/t1", json={**SEED, "shingle": "word:3"})
        assert other.status_code == 409  # the tenant exists under another scheme
        with producer(srv, op, "t1") as p:
            a = p.post(
                "/v1/tenants/t1/items", json={"item_id": "A", "content": "red fox runs very fast"}
            )
            assert a.status_code == 200 and a.json()["candidates"] == []
            b = p.post(
                "/v1/tenants/t1/items",
                json={"item_id": "B", "content": "red fox runs very fast today"},
            ).json()
            cand = b["candidates"][0]
            assert (cand["item_id"], cand["score"], cand["shared"], cand["union"]) == (
                "A",
                0.8,
                4,
                5,
            )
            assert b["decision"]["state"] == "duplicate"
            for k in ("method", "scheme_fingerprint", "policy_version", "scheme_version"):
                assert k in b
            assert b["decision"]["threshold"] == 0.75
            c = p.post(
                "/v1/tenants/t1/items",
                json={"item_id": "C", "content": "database backup completed nightly"},
            ).json()
            assert c["candidates"] == [] and c["decision"]["state"] == "unique"
            v = p.post("/v1/tenants/t1/verify", json={"left": "A", "right": "B"}).json()
            assert v["score"] == 0.8 and v["state"] == "duplicate"
            assert p.delete("/v1/tenants/t1/items/A").status_code == 200
            q = p.post("/v1/tenants/t1/candidates", json={"content": "red fox runs very fast"})
            assert [x["item_id"] for x in q.json()["candidates"]] == ["B"]
        assert op.post("/v1/tenants/t1/compact").status_code == 200
        digest = op.get("/v1/tenants/t1/digest").json()["digest"]
        snap = op.post("/v1/tenants/t1/snapshot")
        assert snap.status_code == 200
    # A fresh data directory (same master secret, outside both data dirs).
    fresh = Server(tmp_path / "fresh", master_key_file=tmp_path / "data.master.key")
    with fresh, fresh.client(fresh.operator_token) as op:
        assert op.put("/v1/tenants/t1", json=SEED).status_code == 200
        flipped = bytearray(snap.content)
        flipped[len(flipped) // 3] ^= 0x10
        r = op.post("/v1/tenants/t1/restore", content=bytes(flipped))
        assert r.status_code == 400 and r.json()["error"] == "corrupt"
        r = op.post("/v1/tenants/t1/restore", content=snap.content)
        assert r.status_code == 200, r.text
        assert op.get("/v1/tenants/t1/digest").json()["digest"] == digest
        item = op.get("/v1/tenants/t1/items/A").json()
        assert item["live"] is False and item["tombstone_epoch"] is not None


def test_acknowledged_upserts_survive_kill_9_and_a_torn_tail(tmp_path: Path) -> None:
    srv = Server(tmp_path / "data").start()
    op = srv.client(srv.operator_token)
    op.put("/v1/tenants/t1", json={"threshold": 0.8, "shingle": "word:3"}).raise_for_status()
    p = producer(srv, op, "t1")
    acked: list[str] = []
    stop = threading.Event()

    def stream() -> None:
        i = 0
        while not stop.is_set():
            try:
                r = p.post(
                    "/v1/tenants/t1/items",
                    json={
                        "item_id": f"i{i}",
                        "content": f"item number {i} says hello to the world {i * 7}",
                        "idempotency_key": f"k{i}",
                    },
                )
            except httpx.HTTPError:
                return
            if r.status_code == 200:
                acked.append(f"i{i}")
            i += 1

    th = threading.Thread(target=stream)
    th.start()
    while len(acked) < 150:
        time.sleep(0.01)
    srv.kill9()
    stop.set()
    th.join()
    p.close()
    op.close()
    logs = list((tmp_path / "data" / "tenants" / "t1").glob("log-*.ndlog"))
    with open(logs[0], "ab") as fh:
        fh.write(b"\xd5NDR\x40\x00\x00\x00partial")  # a torn record at the tail
    srv2 = Server(tmp_path / "data").start()
    try:
        with srv2.client(srv.operator_token) as op2:
            stats = op2.get("/v1/tenants/t1").json()
            assert stats["trimmed_bytes_at_start"] > 0
            assert stats["items"] >= len(acked)
            for item in acked:
                r = op2.get(f"/v1/tenants/t1/items/{item}")
                assert r.status_code == 200 and r.json()["live"], item
    finally:
        srv2.stop()


def test_corruption_in_the_middle_stops_start_up(tmp_path: Path) -> None:
    with Server(tmp_path / "data") as srv, srv.client(srv.operator_token) as op:
        op.put("/v1/tenants/t1", json=SEED).raise_for_status()
        with producer(srv, op, "t1") as p:
            for i in range(5):
                p.post(
                    "/v1/tenants/t1/items",
                    json={"item_id": f"x{i}", "content": f"some text number {i} here"},
                ).raise_for_status()
    log = next((tmp_path / "data" / "tenants" / "t1").glob("log-*.ndlog"))
    raw = bytearray(log.read_bytes())
    raw[200] ^= 0xFF
    log.write_bytes(bytes(raw))
    # Remove the store so start-up must replay (and meet the damage).
    for f in log.parent.glob("features-*"):
        f.unlink()
    srv = Server(tmp_path / "data")
    with pytest.raises(RuntimeError, match="byte offset"):
        srv.start()


def test_bad_requests_get_4xx_never_5xx(tmp_path: Path) -> None:
    with Server(tmp_path / "data") as srv, srv.client(srv.operator_token) as op:
        op.put("/v1/tenants/t1", json={**SEED, "rate_per_s": 1000.0}).raise_for_status()
        with producer(srv, op, "t1") as p, srv.client() as anon:
            u = "/v1/tenants/t1/items"
            cases = [
                (anon.post(u, json={"item_id": "a", "content": "x y"}), 401),
                (p.post(u, content=b"{not json"), 400),
                (p.post(u, content=b"\xff\xfe\x00"), 400),
                (p.post(u, content=b"x" * (2 << 20)), 413),
                (p.post(u, json=["a", "list"]), 400),
                (p.post(u, json={"item_id": "a"}), 400),
                (p.post(u, json={"item_id": "a", "content": 5}), 400),
                (p.post(u, json={"item_id": "a", "content": "x", "evil": 1}), 400),
                (p.post(u, json={"item_id": "a", "content": "   "}), 422),
                (p.post(u, json={"item_id": "a", "content": "a " + "b" * 5000}), 422),
                (p.post(u, json={"item_id": "a", "content_uri": "http://example.com/x"}), 400),
                (p.post(u, json={"item_id": "a", "content_uri": "file:///etc/passwd"}), 400),
                (p.post("/v1/tenants/t2/items", json={"item_id": "a", "content": "x y"}), 403),
                (p.post("/v1/tenants/t1/snapshot"), 403),
                (p.post("/v1/tenants/t1/candidates", json={"content": "x y", "limit": 10**6}), 422),
                (p.get("/v1/tenants/t1/items/nope"), 404),
                (p.delete("/v1/tenants/t1/items/nope?epoch=x"), 400),
                (p.get("/no/such/route"), 404),
                (op.post("/v1/tenants/t1/restore", content=b"not a snapshot"), 400),
            ]
            for resp, want in cases:
                assert resp.status_code == want, (resp.request.url, resp.text)
                body = resp.json()
                assert body["error"] and body["message"]
            ok = p.post(
                u, json={"item_id": "k", "content": "one two three", "idempotency_key": "z"}
            )
            assert ok.status_code == 200
            again = p.post(
                u, json={"item_id": "k", "content": "one two three", "idempotency_key": "z"}
            )
            assert again.json() == ok.json()
            other = p.post(
                u, json={"item_id": "k2", "content": "four five", "idempotency_key": "z"}
            )
            assert other.status_code == 409
        metrics = httpx.get(f"{srv.url}/metrics").text
        assert 'neardup_requests_total{route="upsert",status="409"} 1.0' in metrics
        assert "neardup_items" in metrics
        spec = httpx.get(f"{srv.url}/openapi.json").json()
        assert "/v1/tenants/{tenant}/items" in spec["paths"]


def test_rate_limit_answers_429_with_retry_after(tmp_path: Path) -> None:
    with Server(tmp_path / "data") as srv, srv.client(srv.operator_token) as op:
        # A slow refill: a loaded machine must not earn a token between the calls.
        op.put("/v1/tenants/t1", json={**SEED, "rate_per_s": 0.01, "burst": 2}).raise_for_status()
        with producer(srv, op, "t1") as p:
            codes = [
                p.post("/v1/tenants/t1/candidates", json={"content": "a b c"}) for _ in range(3)
            ]
            assert [c.status_code for c in codes] == [200, 200, 429]
            assert int(codes[2].headers["Retry-After"]) >= 1


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=12,
)
item_like = st.fixed_dictionaries(
    {},
    optional={
        "item_id": json_values | st.text(max_size=300),
        "content": json_values | st.text(max_size=200),
        "content_uri": st.text(max_size=40) | st.just("file:///etc/hostname"),
        "media_type": json_values,
        "idempotency_key": json_values,
        "replace": json_values,
        "limit": json_values,
        "tenant_id": json_values,
        "normalization_version": json_values,
        "left": json_values,
        "right": json_values,
    },
)


def test_fuzzed_requests_never_get_a_5xx(tmp_path: Path) -> None:
    routes = ["items", "candidates", "decide", "verify"]
    with Server(tmp_path / "data") as srv, srv.client(srv.operator_token) as op:
        op.put(
            "/v1/tenants/t1", json={**SEED, "rate_per_s": 1e6, "burst": 10**6}
        ).raise_for_status()
        with producer(srv, op, "t1") as p:

            @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
            @given(st.sampled_from(routes), item_like | json_values, st.binary(max_size=64))
            def check(route: str, body: object, raw: bytes) -> None:
                r = p.post(f"/v1/tenants/t1/{route}", json=body)
                assert r.status_code < 500, (route, body, r.text)
                r = p.post(f"/v1/tenants/t1/{route}", content=raw)
                assert r.status_code < 500, (route, raw, r.text)
                r = op.put("/v1/tenants/t2", json=body)
                assert r.status_code < 500, (body, r.text)

            check()


def test_retained_text_is_read_by_reviewers_only_and_every_read_is_audited(
    tmp_path: Path,
) -> None:
    import json

    text_cfg = {**SEED, "retain": "text"}
    with Server(tmp_path / "data", operator_tenants=("t1", "t2")) as srv, srv.client(
        srv.operator_token
    ) as op:
        assert op.put("/v1/tenants/t1", json=text_cfg).status_code == 200
        assert op.put("/v1/tenants/t2", json=SEED).status_code == 200  # hashes only
        toks = [
            op.post("/v1/keys", json={"role": "reviewer", "tenants": [t]}).json()["token"]
            for t in ("t1", "t2")
        ]
        with producer(srv, op, "t1") as p1, producer(srv, op, "t2") as p2, srv.client(
            toks[0]
        ) as rev, srv.client(toks[1]) as rev2:
            body = {"item_id": "A", "content": "Red  Fox runs VERY fast"}
            assert p1.post("/v1/tenants/t1/items", json=body).status_code == 200
            assert p2.post("/v1/tenants/t2/items", json=body).status_code == 200
            # Producers and operators never read content.
            assert p1.get("/v1/tenants/t1/items/A/content").status_code == 403
            assert op.get("/v1/tenants/t1/items/A/content").status_code == 403
            r = rev.get("/v1/tenants/t1/items/A/content")
            assert r.status_code == 200, r.text
            assert r.json()["text"] == "red fox runs very fast"
            assert r.json()["normalizer"] == "nfkc-casefold"
            # A hashes-only tenant has no text to give, and says so.
            # A reviewer of t1 cannot read t2 (refused before the tenant is touched).
            assert rev.get("/v1/tenants/t2/items/A/content").status_code == 403
            r2 = rev2.get("/v1/tenants/t2/items/A/content")
            assert r2.status_code == 409 and "retain" in r2.json()["message"]
            assert rev.get("/v1/tenants/t1/items/nope/content").status_code == 404
            assert p1.delete("/v1/tenants/t1/items/A").status_code == 200
            assert rev.get("/v1/tenants/t1/items/A/content").status_code == 404
    audit = [
        json.loads(line)
        for line in (tmp_path / "data" / "audit.jsonl").read_text().splitlines()
        if line
    ]
    # Refused attempts are audited too (who tried, and why it failed).
    reads = [
        (a["role"], a["tenant"], a["item_id"], a["outcome"], a.get("error"))
        for a in audit
        if a["op"] == "content"
    ]
    assert reads == [
        ("producer", "t1", "A", "refused", "Forbidden"),
        ("operator", "t1", "A", "refused", "Forbidden"),
        ("reviewer", "t1", "A", "ok", None),
        ("reviewer", "t2", "A", "refused", "Forbidden"),
        ("reviewer", "t2", "A", "refused", "Conflict"),
        ("reviewer", "t1", "nope", "refused", "NotFound"),
        ("reviewer", "t1", "A", "refused", "NotFound"),
    ]
    ok = next(a for a in audit if a["op"] == "content" and a["outcome"] == "ok")
    assert ok["role"] == "reviewer" and ok["chars"] == len("red fox runs very fast")
    assert "text" not in ok  # the audit log records the read, never the content

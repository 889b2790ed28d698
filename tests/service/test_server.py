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
# The demonstration's own layout: one row per band.  Its pairs sit at Jaccard 0.8,
# so a pair is missed only if all 32 independent minima differ:
# P(miss) = (1 - 0.8) ** 32 ~ 4.3e-23 per pair under any master key (the seed's
# 8 bands x 4 rows misses with 1 - 0.985, one run in 70).
DEMO = {"threshold": 0.75, "shingle": "word:2", "num_perm": 32, "bands": 32, "rows": 1}


@pytest.mark.slow
def test_seed_demonstration_over_http(tmp_path: Path) -> None:
    """The seed's demonstration under a fresh random master key (see DEMO's bound)."""
    srv = Server(tmp_path / "data", random_master=True)
    with srv, srv.client(srv.operator_token) as op:
        made = op.put("/v1/tenants/t1", json=DEMO)
        assert made.status_code == 200 and made.json()["warnings"] == []
        assert made.json()["predicted_recall"] > 1 - 1e-9
        bad = op.put("/v1/tenants/t1", json={**DEMO, "num_perm": 31})
        assert bad.status_code == 400 and "num_perm" in bad.json()["message"]
        assert "fix" in bad.json()["message"] and bad.json()["fix"]
        other = op.put("/v1/tenants/t1", json={**DEMO, "shingle": "word:3"})
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
            # C shares no shingle with A or B: only a 32-bit band-key collision could
            # list one (P <= 2 items * 32 bands * 2**-32 ~ 1.5e-8), and exact
            # verification scores it 0, so the decision is unique under any key.
            assert all(x["score"] == 0.0 for x in c["candidates"])
            assert c["decision"]["state"] == "unique"
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
        assert op.put("/v1/tenants/t1", json=DEMO).status_code == 200
        flipped = bytearray(snap.content)
        flipped[len(flipped) // 3] ^= 0x10
        r = op.post("/v1/tenants/t1/restore", content=bytes(flipped))
        assert r.status_code == 400 and r.json()["error"] == "corrupt"
        r = op.post("/v1/tenants/t1/restore", content=snap.content)
        assert r.status_code == 200, r.text
        assert op.get("/v1/tenants/t1/digest").json()["digest"] == digest
        item = op.get("/v1/tenants/t1/items/A").json()
        assert item["live"] is False and item["tombstone_epoch"] is not None


@pytest.mark.slow
def test_tenant_creation_reports_predicted_recall_and_guards_it(tmp_path: Path) -> None:
    """A layout below the recall target is created with a warning naming a better
    layout; one below the service minimum (the PUT /policy rule) is refused."""
    with Server(tmp_path / "data", operator_tenants=("t1", "t2", "t3")) as srv, srv.client(
        srv.operator_token
    ) as op:
        r = op.put("/v1/tenants/t1", json=SEED)  # 8 x 4 at 0.75: 1 - (1 - 0.75**4)**8
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["predicted_recall"] == pytest.approx(1 - (1 - 0.75**4) ** 8)
        assert round(body["predicted_recall"], 4) == 0.9523
        assert body["recall_target"] == 0.995
        (warning,) = body["warnings"]
        assert "0.9523" in warning and "below the recall target 0.995" in warning
        assert "bands=" in warning and "rows=" in warning  # the layout that reaches it
        # Creating it again with the same configuration answers the same warning.
        assert op.put("/v1/tenants/t1", json=SEED).json()["warnings"] == [warning]
        # The warning is audited with the creation.
        audit = (tmp_path / "data" / "audit.jsonl").read_text().splitlines()
        assert any('"op":"create_tenant"' in a and "0.9523" in a for a in audit)
        # 4 bands x 8 rows at 0.8: 1 - (1 - 0.8**8)**4 ~ 0.52, refused with the fix.
        low = op.put(
            "/v1/tenants/t2",
            json={"threshold": 0.8, "shingle": "word:2", "num_perm": 32, "bands": 4, "rows": 8},
        )
        assert low.status_code == 400, low.text
        err = low.json()
        assert err["error"] == "invalid_parameter" and "0.52" in err["message"]
        assert "below the service minimum 0.9" in err["message"]
        assert "bands=" in err["fix"]
        assert op.get("/v1/tenants/t2").status_code in (403, 404)  # nothing was created
        # The default layout reaches the target without a word.
        ok = op.put("/v1/tenants/t3", json={"threshold": 0.75, "shingle": "word:2"}).json()
        assert ok["warnings"] == [] and ok["predicted_recall"] >= 0.995


@pytest.mark.slow
def test_demonstration_holds_under_200_independent_keys(tmp_path: Path) -> None:
    """200 tenants of one server under a random master secret: each tenant's keyed
    hash is derived from the secret and its id, so these are 200 independent keys.

    Each pair at Jaccard 0.8 is missed with P = 0.2**32 (DEMO's bound); 200 tenants
    miss one with P <= 200 * 4.3e-23."""
    names = tuple(f"k{i}" for i in range(200))
    srv = Server(tmp_path / "data", operator_tenants=names, random_master=True)
    with srv, srv.client(srv.operator_token) as op:
        for t in names:
            assert op.put(f"/v1/tenants/{t}", json=DEMO).status_code == 200
        for t in names:
            with producer(srv, op, t) as p:
                a = p.post(
                    f"/v1/tenants/{t}/items",
                    json={"item_id": "A", "content": "red fox runs very fast"},
                )
                assert a.status_code == 200 and a.json()["candidates"] == []
                b = p.post(
                    f"/v1/tenants/{t}/items",
                    json={"item_id": "B", "content": "red fox runs very fast today"},
                ).json()
                best = b["candidates"][0]
                assert (best["item_id"], best["score"]) == ("A", 0.8), t
                assert b["decision"]["state"] == "duplicate", t


@pytest.mark.slow
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
    deadline = time.monotonic() + 120
    while len(acked) < 150 and th.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    enough = len(acked) >= 150
    srv.kill9()
    stop.set()
    th.join(timeout=60)
    assert enough, f"the writer stopped after {len(acked)} acknowledged upserts"
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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

"""Decisions through a real server: explanations, reversible links, replay, policies,
exact-hash-only mode (issue: decisions, explanations, feedback, migration)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest

from service_helpers import Server, producer

BASE = {"threshold": 0.75, "shingle": "word:2", "num_perm": 32, "bands": 8, "rows": 4}
A = "the red fox runs very fast across the field"
B = "The red fox runs very fast across the FIELD today"  # 8/9 shingles shared with A


def _key(op: httpx.Client, role: str, tenant: str = "t1") -> str:
    r = op.post("/v1/keys", json={"role": role, "tenants": [tenant]})
    r.raise_for_status()
    return str(r.json()["token"])


@pytest.mark.slow
def test_explanation_names_spans_policy_and_bands(tmp_path: Path) -> None:
    with (
        Server(tmp_path / "d", operator_tenants=("t1", "t2")) as srv,
        srv.client(srv.operator_token) as op,
    ):
        assert op.put("/v1/tenants/t1", json={**BASE, "retain": "text"}).status_code == 200
        assert op.put("/v1/tenants/t2", json=BASE).status_code == 200  # hashes only
        for tenant in ("t1", "t2"):
            with producer(srv, op, tenant) as p:
                url = f"/v1/tenants/{tenant}/decide"
                assert (
                    p.post(url, json={"item_id": "A", "content": A}).json()["decision"]["state"]
                    == "unique"
                )
                r = p.post(url, json={"item_id": "B", "content": B})
                assert r.status_code == 200, r.text
                d = r.json()["decision"]
                assert d["state"] == "duplicate" and d["canonical"] == "A"
                assert d["policy_version"] == 1 and d["policy_fingerprint"]
                ex = d["explanation"]
                assert (ex["shared_shingles"], ex["total_shingles"]) == (8, 9)
                assert ex["jaccard"] == 8 / 9 and ex["bands_collided"]
                assert set(ex["bands_collided"]) <= set(range(8))
                # Offsets into the submitted (original) text: everything but "today".
                assert ex["spans"]["query"] == [[0, B.index(" today")]]
                assert (
                    B[slice(*ex["spans"]["query"][0])]
                    == "The red fox runs very fast across the FIELD"
                )
                if tenant == "t1":  # retained text: spans into the candidate too
                    assert ex["spans"]["candidate"] == [[0, len(A)]]
                else:
                    assert ex["spans"]["candidate"] is None
                assert "0.75" in ex["why"] and "0.8889" in ex["why"]
                st = p.get(f"/v1/tenants/{tenant}/items/B/decision").json()
                assert (st["state"], st["canonical"]) == ("duplicate", "A")


def _digest(op: httpx.Client) -> str:
    return str(op.get("/v1/tenants/t1/digest").json()["digest"])


@pytest.mark.slow
def test_unlink_restores_state_and_full_replay_is_identical(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with Server(data) as srv, srv.client(srv.operator_token) as op:
        op.put("/v1/tenants/t1", json=BASE).raise_for_status()
        rev_tok = _key(op, "reviewer")
        with producer(srv, op, "t1") as p, srv.client(rev_tok) as rev:
            p.post("/v1/tenants/t1/items", json={"item_id": "A", "content": A}).raise_for_status()
            before = p.get("/v1/tenants/t1/items/B/decision").json()
            assert before["state"] == "unique"
            b = p.post("/v1/tenants/t1/items", json={"item_id": "B", "content": B}).json()
            assert b["decision"]["state"] == "duplicate"
            assert p.get("/v1/tenants/t1/items/B/decision").json()["state"] == "duplicate"
            # Producers cannot undo a merge; reviewers can, with a rationale.
            assert p.post("/v1/tenants/t1/items/B/unlink", json={}).status_code == 403
            u = rev.post("/v1/tenants/t1/items/B/unlink", json={"rationale": "different SKU"})
            assert u.status_code == 200, u.text
            assert u.json()["event"]["before"] == {"state": "duplicate", "canonical": "A"}
            after = p.get("/v1/tenants/t1/items/B/decision").json()
            assert (after["state"], after["canonical"]) == (before["state"], before["canonical"])
            assert rev.post("/v1/tenants/t1/items/B/unlink", json={}).status_code == 409
            # A third item still links to A (the cluster's canonical item).
            c = p.post(
                "/v1/tenants/t1/items",
                json={"item_id": "C", "content": A + " again"},
            ).json()
            assert c["decision"]["state"] == "duplicate" and c["decision"]["canonical"] == "A"
            log = rev.get("/v1/tenants/t1/decisions").json()
            assert [e["kind"] for e in log["events"]] == [
                "decision",
                "decision",
                "unlink",
                "decision",
            ]
            assert log["chain_verified"] == 4
            assert all(e["policy_version"] == 1 for e in log["events"])
        digest = _digest(op)
    # Replay the whole command log into an empty store: identical state.
    store = data / "tenants" / "t1" / "features-0.sqlite"
    for suffix in ("", "-wal", "-shm"):
        if Path(str(store) + suffix).exists():
            os.unlink(str(store) + suffix)
    with Server(data) as srv2, srv2.client(srv2.operator_token) as op2:
        assert _digest(op2) == digest


def test_review_band_quarantine_release_and_policy_versions(tmp_path: Path) -> None:
    with Server(tmp_path / "d") as srv, srv.client(srv.operator_token) as op:
        op.put("/v1/tenants/t1", json=BASE).raise_for_status()
        rev = srv.client(_key(op, "reviewer"))
        with producer(srv, op, "t1") as p, rev:
            p.post("/v1/tenants/t1/items", json={"item_id": "A", "content": A}).raise_for_status()
            # Bounded changes: outside the safe range, or losing recall, are refused.
            low = op.put("/v1/tenants/t1/policy", json={"threshold": 0.3})
            assert low.status_code == 400 and "safe range" in low.json()["message"]
            lossy = op.put("/v1/tenants/t1/policy", json={"threshold": 0.55})
            assert (
                lossy.status_code == 400
                and "would lower candidate recall" in lossy.json()["message"]
            )
            assert "probability" in lossy.json()["message"]  # the estimate is in the error
            too_many = op.put(
                "/v1/tenants/t1/policy", json={"threshold": 0.8, "max_candidates": 500}
            )
            assert too_many.status_code == 400 and "budget" in too_many.json()["message"]
            assert p.put("/v1/tenants/t1/policy", json={"threshold": 0.8}).status_code == 403
            ok = op.put("/v1/tenants/t1/policy", json={"threshold": 0.9, "review_below": 0.1})
            assert ok.status_code == 200, ok.text
            assert ok.json()["policy"]["version"] == 2
            reuse = op.put("/v1/tenants/t1/policy", json={"version": 2, "threshold": 0.95})
            assert reuse.status_code == 409  # used versions are immutable
            # B (J = 8/9 ~ 0.889) now falls in the review band [0.8, 0.9): quarantined.
            b = p.post("/v1/tenants/t1/items", json={"item_id": "B", "content": B}).json()
            assert b["decision"]["state"] == "review" and b["policy_version"] == 2
            assert "review band" in b["decision"]["reason"]
            assert p.get("/v1/tenants/t1/items/B/decision").json()["state"] == "review"
            # A label for the recorded decision (its item and compared candidate).
            lab = rev.post(
                "/v1/tenants/t1/labels",
                json={"decision_seq": b["seq"], "label": "duplicate", "rationale": "same text"},
            )
            assert lab.status_code == 200, lab.text
            ev = lab.json()["event"]
            assert (ev["left"], ev["right"], ev["decision_seq"]) == ("A", "B", b["seq"])
            assert ev["score"] == 8 / 9 and ev["policy_version"] == 2
            assert (
                rev.post(
                    "/v1/tenants/t1/labels", json={"decision_seq": 999, "label": "duplicate"}
                ).status_code
                == 404
            )
            r = rev.post("/v1/tenants/t1/items/B/release", json={"as": "duplicate", "of": "A"})
            assert r.status_code == 200, r.text
            st = p.get("/v1/tenants/t1/items/B/decision").json()
            assert (st["state"], st["canonical"]) == ("duplicate", "A")
            hist = p.get("/v1/tenants/t1/policy").json()
            assert [h["version"] for h in hist["history"]] == [1, 2]
    audit = [json.loads(x) for x in (tmp_path / "d" / "audit.jsonl").read_text().splitlines() if x]
    pol = [(a["outcome"], a.get("version")) for a in audit if a["op"] == "policy"]
    assert pol.count(("ok", 2)) == 1 and pol.count(("refused", None)) == 4
    assert [a["op"] for a in audit].count("release") == 1


@pytest.mark.slow
def test_removed_feature_store_gives_review_never_duplicate(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with Server(data) as srv, srv.client(srv.operator_token) as op:
        op.put("/v1/tenants/t1", json=BASE).raise_for_status()
        with producer(srv, op, "t1") as p:
            p.post("/v1/tenants/t1/items", json={"item_id": "A", "content": A}).raise_for_status()
            assert (
                p.post("/v1/tenants/t1/decide", json={"content": A}).json()["decision"]["state"]
                == "duplicate"
            )
            assert httpx.get(f"{srv.url}/readyz").json()["mode"] == "normal"
            store = data / "tenants" / "t1" / "features-0.sqlite"
            for suffix in ("", "-wal", "-shm"):
                if Path(str(store) + suffix).exists():
                    os.unlink(str(store) + suffix)
            for text in (A, B):  # identical and near copies
                r = p.post("/v1/tenants/t1/decide", json={"content": text})
                assert r.status_code == 200, r.text
                d = r.json()["decision"]
                assert d["state"] == "review", d
                assert "exact-hash-only" in d["reason"] and d["score"] is None
            fresh = p.post("/v1/tenants/t1/decide", json={"content": "zz yy xx ww vv"}).json()
            assert fresh["decision"]["state"] == "unique"
            ready = httpx.get(f"{srv.url}/readyz").json()
            assert ready["mode"] == "degraded" and ready["degraded_tenants"] == {
                "t1": "exact-hash-only"
            }
            up = p.post("/v1/tenants/t1/items", json={"item_id": "B", "content": B})
            assert up.status_code == 503 and up.json()["error"] == "degraded"


@pytest.mark.slow
def test_feedback_from_honest_and_malicious_reviewers(tmp_path: Path) -> None:
    import numpy as np

    from neardup.service import FeedbackPolicy, Label, evaluate_feedback

    rng = np.random.default_rng(7)
    n_pairs, n_honest, n_bad = 44, 8, 3
    cfg = {"threshold": 0.8, "shingle": "word:1", "num_perm": 32, "bands": 8, "rows": 4}
    with Server(tmp_path / "d") as srv, srv.client(srv.operator_token) as op:
        op.put("/v1/tenants/t1", json=cfg).raise_for_status()
        pairs = []
        with producer(srv, op, "t1") as p:
            for i in range(n_pairs):
                m = i % 11  # J = (40 - m) / (40 + m): 1.0 ... 0.6
                words = [f"p{i}w{j}" for j in range(40)]
                other = words[: 40 - m] + [f"p{i}x{j}" for j in range(m)]
                for item, ws in ((f"a{i}", words), (f"b{i}", other)):
                    p.post(
                        "/v1/tenants/t1/items", json={"item_id": item, "content": " ".join(ws)}
                    ).raise_for_status()
                pairs.append((f"a{i}", f"b{i}", (40 - m) / (40 + m)))
        reviewers = {f"h{k}": "honest" for k in range(n_honest)}
        reviewers.update({f"m{k}": "inverted" for k in range(n_bad)})
        truth_labels = []
        bad_ids = set()
        for _name, kind in sorted(reviewers.items()):
            tok = _key(op, "reviewer")
            if kind != "honest":
                bad_ids.add(tok.split("_")[1])
            with srv.client(tok) as rev:
                for a, b, score in pairs:
                    dup = score >= 0.8
                    if kind == "honest" and rng.random() < 0.06:
                        dup = not dup  # honest mistakes
                    if kind == "inverted":
                        dup = not dup
                    r = rev.post(
                        "/v1/tenants/t1/labels",
                        json={
                            "left": a,
                            "right": b,
                            "label": "duplicate" if dup else "not_duplicate",
                            "rationale": kind,
                        },
                    )
                    assert r.status_code == 200, r.text
                    ev = r.json()["event"]
                    assert ev["score"] == score and ev["policy_version"] == 1
                    if kind == "honest":
                        truth_labels.append(
                            Label(
                                reviewer=ev["reviewer"],
                                left=a,
                                right=b,
                                score=score,
                                label="duplicate" if dup else "not_duplicate",
                            )
                        )
        rep = op.get("/v1/tenants/t1/threshold-report")
        assert rep.status_code == 200, rep.text
        body = rep.json()
        report = body["report"]
        assert body["labels"] == n_pairs * (n_honest + n_bad)
    honest_only = evaluate_feedback(
        truth_labels, current_threshold=0.8, policy=FeedbackPolicy()
    ).suggested_threshold
    suggested = report["suggested_threshold"]
    assert honest_only is not None and suggested is not None
    assert abs(suggested - honest_only) <= 0.03, (suggested, honest_only)
    assert 0.77 <= suggested <= 0.83  # between J = 0.778 and 0.818, the true boundary
    flagged = {r["reviewer"] for r in report["reviewers"] if r["flagged"]}
    assert flagged == bad_ids  # the three inverted reviewers, and only them
    assert report["current"]["precision"] >= 0.9 and report["current"]["recall"] >= 0.9
    assert body["labelled_recall"]["labelled_duplicates"] > 0


def _corpus() -> list[tuple[str, str]]:
    import numpy as np

    rng = np.random.default_rng(3)
    vocab = [f"w{i}" for i in range(400)]
    items = []
    for i in range(24):
        words = [vocab[j] for j in rng.choice(400, size=30, replace=False)]
        items.append((f"x{i}", " ".join(words)))
        for k, edits in enumerate((1, 2, 6)):  # near copies at falling similarity
            w = list(words)
            for j in rng.choice(30, size=edits, replace=False):
                w[j] = f"e{i}_{k}_{j}"
            items.append((f"x{i}_{k}", " ".join(w)))
    return items


@pytest.mark.slow
def test_shadow_index_disagreement_promote_and_rollback(tmp_path: Path) -> None:
    data = tmp_path / "d"
    cfg = {**BASE, "retain": "text"}
    items = _corpus()
    with Server(data, operator_tenants=("t1", "t2")) as srv, srv.client(srv.operator_token) as op:
        op.put("/v1/tenants/t1", json=cfg).raise_for_status()
        op.put("/v1/tenants/t2", json=BASE).raise_for_status()  # hashes only
        with producer(srv, op, "t1") as p:
            for item_id, text in items[:60]:
                p.post(
                    "/v1/tenants/t1/items", json={"item_id": item_id, "content": text}
                ).raise_for_status()
            # A hashes-only tenant cannot change its shingles (no text to rebuild from).
            r = op.put("/v1/tenants/t2/shadow", json={**BASE, "shingle": "word:3"})
            assert r.status_code == 409 and "retains hashed shingles only" in r.json()["message"]
            live_fp = p.post("/v1/tenants/t1/candidates", json={"content": "w1"}).json()[
                "scheme_fingerprint"
            ]
            new = {**cfg, "shingle": "word:3", "scheme_version": 2}
            s = op.put("/v1/tenants/t1/shadow", json=new)
            assert s.status_code == 200, s.text
            assert s.json()["rebuilt_items"] == 60 and s.json()["role"] == "shadow"
            # Writes are mirrored, queries run on both and are compared.
            for item_id, text in items[60:]:
                r = p.post("/v1/tenants/t1/items", json={"item_id": item_id, "content": text})
                assert r.status_code == 200 and "shadow" in r.json()
            for _, text in items[::4]:
                q = p.post("/v1/tenants/t1/candidates", json={"content": text}).json()
                assert q["shadow"]["role"] == "shadow" and q["scheme_fingerprint"] == live_fp
            st = op.get("/v1/tenants/t1/shadow").json()
            cmp = st["comparison"]
            assert cmp["queries"] == len(items[60:]) + len(items[::4])
            # word 3-grams score lower than word 2-grams: some decisions must differ.
            assert cmp["decision_disagreements"] > 0 and cmp["candidate_disagreements"] > 0
            assert cmp["candidates_live"] > 0 and cmp["candidates_other"] > 0
            assert st["other"]["items"] == st["live"]["items"] == len(items)
            assert "labelled_recall" in st["live"] and "labelled_recall" in st["other"]
            # Promote: atomic switch, recorded; the old version stays as "previous".
            pr = op.post("/v1/tenants/t1/shadow/promote")
            assert pr.status_code == 200, pr.text
            assert pr.json()["role"] == "previous"
            assert pr.json()["live"]["config"]["shingle"] == "word:3"
            q = p.post("/v1/tenants/t1/candidates", json={"content": items[0][1]}).json()
            assert q["scheme_fingerprint"] != live_fp and q["scheme_version"] == 2
            assert q["candidates"][0]["item_id"] == items[0][0]
            assert q["shadow"]["role"] == "previous"
    # The switch survives a restart; then retire the previous version.
    with Server(data, operator_tenants=("t1", "t2")) as srv, srv.client(srv.operator_token) as op:
        st = op.get("/v1/tenants/t1/shadow").json()
        assert st["role"] == "previous" and st["live"]["config"]["shingle"] == "word:3"
        rev = srv.client(_key(op, "reviewer"))
        kinds = [
            (e["kind"], e.get("action"))
            for e in rev.get("/v1/tenants/t1/decisions").json()["events"]
        ]
        assert ("shadow", "promoted") in kinds
        assert op.post("/v1/tenants/t1/shadow/rollback").status_code == 409  # not a shadow
        assert op.post("/v1/tenants/t1/shadow/retire").json()["role"] is None
        # A second shadow with another layout, rolled back: live state untouched.
        with producer(srv, op, "t1") as p:
            before = [
                p.post("/v1/tenants/t1/candidates", json={"content": t}).json()["candidates"]
                for _, t in items[:8]
            ]
            items_before = op.get("/v1/tenants/t1").json()["items"]
            # 4 x 8 finds a pair at 0.75 with P = 0.34: refused before anything is built.
            weak = {**cfg, "shingle": "word:3", "scheme_version": 2, "bands": 4, "rows": 8}
            s = op.put("/v1/tenants/t1/shadow", json=weak)
            assert s.status_code == 400 and "0.3442" in s.json()["message"], s.text
            assert op.get("/v1/tenants/t1/shadow").json()["role"] is None
            s = op.put("/v1/tenants/t1/shadow", json={**weak, "bands": 16, "rows": 2})
            assert s.status_code == 200, s.text
            shadow_dir = data / "tenants" / "t1" / s.json()["other"]["dir"]
            assert shadow_dir.exists()
            rb = op.post("/v1/tenants/t1/shadow/rollback")
            assert rb.status_code == 200 and rb.json()["role"] is None
            assert not shadow_dir.exists()
            after = [
                p.post("/v1/tenants/t1/candidates", json={"content": t}).json()["candidates"]
                for _, t in items[:8]
            ]
            assert after == before and op.get("/v1/tenants/t1").json()["items"] == items_before
        rev.close()

"""Access policies through a real ``neardup serve``: items stored with a policy,
reviewer keys limited to policies (HTTP and ``neardup apikey --policy``), content
reads granted, denied and audited, and the policies kept across a restart."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from service_helpers import EXE, Server, producer

TEXT = {
    "threshold": 0.75,
    "shingle": "word:2",
    "num_perm": 32,
    "bands": 8,
    "rows": 4,
    "retain": "text",
}


def _audit(data: Path) -> list[dict[str, Any]]:
    lines = (data / "audit.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line]


def _content_reads(data: Path) -> list[tuple[Any, ...]]:
    return [
        (a["key_id"], a["item_id"], a["outcome"], a.get("access_policy"), a.get("purpose"))
        for a in _audit(data)
        if a["op"] == "content"
    ]


@pytest.mark.slow
def test_reviewers_read_only_the_policies_their_key_allows(tmp_path: Path) -> None:
    data = tmp_path / "data"
    srv = Server(data).start()
    try:
        with srv.client(srv.operator_token) as op:
            assert op.put("/v1/tenants/t1", json=TEXT).status_code == 200

            def key(**extra: Any) -> str:
                r = op.post("/v1/keys", json={"role": "reviewer", "tenants": ["t1"], **extra})
                assert r.status_code == 200, r.text
                return str(r.json()["token"])

            eu, anyone = key(policies=["eu"]), key()
            bad = op.post(
                "/v1/keys", json={"role": "reviewer", "tenants": ["t1"], "policies": ["EU!"]}
            )
            assert bad.status_code == 400 and "policies" in bad.json()["message"]
            # A key issued offline, as an operator would: allowed policy "hr" only.
            args = ["--data-dir", str(data), "--role", "reviewer", "--tenant", "t1"]
            cli = subprocess.run(
                [EXE, "apikey", *args, "--policy", "hr"],
                capture_output=True,
                text=True,
                check=True,
            )
            hr = cli.stdout.strip()
            with producer(srv, op, "t1") as p:
                u = "/v1/tenants/t1/items"
                for item, policy in (("E", "eu"), ("H", "hr"), ("O", None)):
                    body = {"item_id": item, "content": f"note {item} about the quarterly plan"}
                    if policy is not None:
                        body["access_policy"] = policy
                    r = p.post(u, json=body)
                    assert r.status_code == 200, r.text
                before = op.get("/v1/tenants/t1/digest").json()
                for bad_policy in ("EU", "", "a" * 64, "-x", "x y", 7):
                    z = {"item_id": "Z", "content": "x y z", "access_policy": bad_policy}
                    r = p.post(u, json=z)
                    assert r.status_code == 400, (bad_policy, r.text)
                    assert "access_policy" in r.json()["message"]
                # Refused before anything was logged.
                assert op.get("/v1/tenants/t1/digest").json() == before
                assert p.get(f"{u}/E").json()["access_policy"] == "eu"
                assert "access_policy" not in p.get(f"{u}/O").json()
            with srv.client(eu) as r_eu, srv.client(hr) as r_hr, srv.client(anyone) as r_any:
                ok = r_eu.get(f"{u}/E/content", params={"purpose": "ticket 17"})
                assert ok.status_code == 200 and ok.json()["access_policy"] == "eu"
                assert ok.json()["text"] == "note e about the quarterly plan"
                no = r_eu.get(f"{u}/H/content")
                assert no.status_code == 403
                msg = no.json()["message"]
                assert "access policy 'hr'" in msg and "not allowed" in msg
                assert "--policy hr" in no.json()["fix"]
                assert r_eu.get(f"{u}/O/content").status_code == 200  # no policy: any reviewer
                assert r_hr.get(f"{u}/H/content").status_code == 200
                assert r_hr.get(f"{u}/E/content").status_code == 403
                for item in ("E", "H", "O"):  # an unrestricted key reads every policy
                    assert r_any.get(f"{u}/{item}/content").status_code == 200
                long = r_any.get(f"{u}/E/content", params={"purpose": "p" * 201})
                assert long.status_code == 400 and "purpose" in long.json()["message"]
        reads = _content_reads(data)
        kid = {t: t.split("_")[1] for t in (eu, hr, anyone)}
        assert reads[:5] == [
            (kid[eu], "E", "ok", "eu", "ticket 17"),
            (kid[eu], "H", "denied", "hr", None),
            (kid[eu], "O", "ok", None, None),
            (kid[hr], "H", "ok", "hr", None),
            (kid[hr], "E", "denied", "eu", None),
        ]
        assert reads[-1] == (kid[anyone], "E", "refused", None, None)
        added = [a for a in _audit(data) if a["op"] == "add_key" and a.get("policies")]
        assert [a["policies"] for a in added] == [["eu"]]
        # Nothing of the content reaches the audit log.
        assert "quarterly" not in (data / "audit.jsonl").read_text()
    finally:
        srv.stop()
    # A restart reopens the tenant from its files: the policies hold.
    srv = Server(data).start()
    try:
        with srv.client(eu) as r_eu, srv.client(hr) as r_hr:
            assert r_eu.get(f"{u}/H/content").status_code == 403
            assert r_hr.get(f"{u}/H/content").status_code == 200
            assert r_eu.get(f"{u}/E/content").json()["access_policy"] == "eu"
    finally:
        srv.stop()

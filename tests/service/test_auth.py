"""API keys, roles, scopes and the hash-chained audit log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neardup.core._errors import CorruptFile, Forbidden, InvalidConfig, Unauthorized
from neardup.service.auth import AuditLog, Keyring


def test_roles_and_scopes(tmp_path: Path) -> None:
    ring = Keyring()
    prod = ring.add("producer", ["t1"], key_id="p")
    rev = ring.add("reviewer", ["t1"], key_id="r")
    op = ring.add("operator", ["t1", "t2"], key_id="o")
    p = ring.authenticate(f"Bearer {prod}")
    assert p.require("upsert", "t1") is p
    with pytest.raises(Forbidden, match="not scoped to tenant 't2'"):
        p.require("upsert", "t2")
    with pytest.raises(Forbidden, match="may not 'snapshot'"):
        p.require("snapshot", "t1")
    with pytest.raises(Forbidden, match="may not 'upsert'"):
        ring.authenticate(f"Bearer {rev}").require("upsert", "t1")
    o = ring.authenticate(f"Bearer {op}")
    o.require("restore", "t2")
    with pytest.raises(Forbidden):
        o.require("restore", "t3")  # operators are scoped explicitly, no wildcard
    with pytest.raises(InvalidConfig, match="exactly one tenant"):
        ring.add("producer", ["t1", "t2"])
    with pytest.raises(InvalidConfig, match="unknown role"):
        ring.add("admin", ["t1"])


def test_authentication_failures_and_storage(tmp_path: Path) -> None:
    ring = Keyring()
    token = ring.add("producer", ["t1"], key_id="p")
    path = tmp_path / "keys.json"
    ring.save(str(path))
    stored = path.read_text()
    secret = token.split("_", 2)[2]
    assert secret not in stored and "sha256" in stored
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    again = Keyring.load(str(path))
    assert again.authenticate(f"Bearer {token}").key_id == "p"
    for header in (
        None,
        "",
        "Basic abc",
        "Bearer nd_p",
        "Bearer nd_p_wrong",
        "Bearer nd_q_" + secret,
        "Bearer xx_p_" + secret,
    ):
        with pytest.raises(Unauthorized):
            again.authenticate(header)
    again.revoke("p")
    with pytest.raises(Unauthorized, match="unknown or revoked"):
        again.authenticate(f"Bearer {token}")
    (tmp_path / "bad.json").write_text('{"format": "other"}')
    with pytest.raises(CorruptFile):
        Keyring.load(str(tmp_path / "bad.json"))


def test_keys_limited_to_access_policies_round_trip(tmp_path: Path) -> None:
    ring = Keyring()
    limited = ring.add("reviewer", ["t1"], key_id="r", policies=["eu", "hr", "eu"])
    free = ring.add("reviewer", ["t1"], key_id="f")
    path = tmp_path / "keys.json"
    ring.save(str(path))
    entries = {e["key_id"]: e for e in json.loads(path.read_text())["keys"]}
    assert entries["r"]["policies"] == ["eu", "hr"] and "policies" not in entries["f"]
    again = Keyring.load(str(path))
    r = again.authenticate(f"Bearer {limited}")
    assert r.policies == ("eu", "hr")
    assert again.authenticate(f"Bearer {free}").policies is None
    # Nothing allowed (no policy's items readable) is not the same as unrestricted.
    none = ring.authenticate("Bearer " + ring.add("reviewer", ["t1"], key_id="n", policies=[]))
    assert none.policies == ()
    with pytest.raises(InvalidConfig, match="access_policy"):
        ring.add("reviewer", ["t1"], key_id="x", policies=["EU!"])
    with pytest.raises(InvalidConfig, match="list of labels"):
        ring.add("reviewer", ["t1"], key_id="y", policies="eu")
    # A key file written before policies existed loads: its keys are unrestricted.
    old = {"format": "neardup-keys-v1", "keys": [{**entries["f"]}]}
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert Keyring.load(str(tmp_path / "old.json")).authenticate(f"Bearer {free}").policies is None
    bad = {"format": "neardup-keys-v1", "keys": [{**entries["f"], "policies": "eu"}]}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(CorruptFile, match="not a list of labels"):
        Keyring.load(str(tmp_path / "bad.json"))


def test_audit_log_is_hash_chained(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    ring = Keyring()
    p = ring.authenticate("Bearer " + ring.add("operator", ["t1"], key_id="o"))
    log = AuditLog(str(path))
    log.write(p, "snapshot", "t1", seq=3)
    log.write(p, "restore", "t1", outcome="ok")
    lines = path.read_text().splitlines()
    assert [json.loads(x)["op"] for x in lines] == ["snapshot", "restore"]
    assert all("secret" not in x for x in lines)
    # Reopening continues the chain; a torn tail is dropped.
    with open(path, "ab") as fh:
        fh.write(b'{"torn": ')
    log = AuditLog(str(path))
    log.write(p, "compact", "t1")
    assert [json.loads(x)["op"] for x in path.read_text().splitlines()] == [
        "snapshot",
        "restore",
        "compact",
    ]
    # Editing a line breaks the chain.
    edited = path.read_text().replace('"restore"', '"nothing"')
    path.write_text(edited)
    with pytest.raises(CorruptFile, match="line 3 breaks the hash chain"):
        AuditLog(str(path))

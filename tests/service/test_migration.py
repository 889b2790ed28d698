"""neardup.service.migration: a shadow built from the live tenant answers like it,
mirrors writes, and is promoted, rolled back or retired by switching LIVE.json;
the version gate keeps switches and requests apart."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from neardup.core._errors import Busy, Conflict, Forbidden, InvalidConfig
from neardup.service._crypto import MasterSecret
from neardup.service.migration import (
    POINTER,
    Migration,
    VersionGate,
    is_tenant_root,
    load_tenant,
    read_pointer,
)
from neardup.service.tenant import Tenant, TenantConfig

MASTER = MasterSecret(b"m" * 32)
LIVE = {"threshold": 0.6, "shingle": "word:2", "num_perm": 32, "bands": 16, "rows": 2}

FAMILIES = [
    "the quick brown fox jumps over the lazy dog near the river bank today",
    "database backup completed nightly without errors on the primary cluster",
    "quarterly revenue grew eight percent driven by strong sales in europe",
    "the orchestra performed a new symphony to a sold out concert hall",
]


def _variant(text: str, k: int) -> str:
    return f"{text} extra{k}"


def _tenant(tmp_path: Path, retain: str = "text") -> tuple[str, Tenant, Migration]:
    root = str(tmp_path / "t1")
    cfg = TenantConfig.from_dict({**LIVE, "retain": retain})
    Tenant.create(root, "t1", cfg, MASTER).close()
    live, mig = load_tenant(root, MASTER)
    for f, text in enumerate(FAMILIES):
        live.upsert(item_id=f"f{f}", content=text)
    return root, live, mig


def _ids(resp: dict[str, Any]) -> list[str]:
    return [c["item_id"] for c in resp["candidates"]]


def _close(mig: Migration) -> None:
    mig.live.close()
    if mig.other is not None:
        mig.other.close()


@pytest.mark.parametrize(
    "change",
    [
        {"num_perm": 64, "bands": 32},  # layout only: rebuilt from the features
        {"shingle": "word:3"},  # new shingles: rebuilt from the retained text
    ],
)
def test_a_shadow_answers_like_the_source(tmp_path: Path, change: dict[str, Any]) -> None:
    root, live, mig = _tenant(tmp_path)
    try:
        live.tombstone("f3")
        new = TenantConfig.from_dict({**LIVE, **change, "retain": "text"})
        out = mig.start(new, actor="op")
        assert out["rebuilt_items"] == 3 and out["role"] == "shadow"
        shadow = mig.other
        assert shadow is not None and len(shadow) == len(live) == 3
        assert shadow.item("f3")["live"] is False  # deleted items stay deleted
        assert read_pointer(root) == {
            "format": "neardup-live-v1",
            "live": ".",
            "other": out["other"]["dir"],
            "role": "shadow",
        }
        for f, text in enumerate(FAMILIES[:3]):
            probe = _variant(text, f)
            a = live.candidates(probe, limit=5)
            b = shadow.candidates(probe, limit=5)
            assert _ids(a) == _ids(b) == [f"f{f}"]
            cmp = mig.compare_query(probe, a)
            assert cmp is not None and cmp["agree"] and cmp["candidates_other"] == [f"f{f}"]
        st = mig.status()["comparison"]
        assert st["queries"] == 3 and st["candidate_disagreements"] == 0
    finally:
        _close(mig)


def test_writes_are_mirrored_to_the_shadow(tmp_path: Path) -> None:
    _root, live, mig = _tenant(tmp_path)
    try:
        mig.start(TenantConfig.from_dict({**LIVE, "num_perm": 64, "bands": 32}), actor=None)
        kw = {"item_id": "new", "content": _variant(FAMILIES[0], 9)}
        resp = live.upsert(**kw)
        cmp = mig.mirror_upsert(kw, resp)
        assert cmp is not None and cmp["agree"]
        assert mig.other is not None and mig.other.item("new")["live"] is True
        live.tombstone("f1")
        mig.mirror_tombstone("f1")
        assert mig.other.item("f1")["live"] is False
        assert mig.status()["comparison"]["missed_writes"] == 0
    finally:
        _close(mig)


def test_a_hashes_only_tenant_cannot_change_its_shingles(tmp_path: Path) -> None:
    root, _live, mig = _tenant(tmp_path, retain="hashes")
    try:
        with pytest.raises(Conflict, match="retains hashed shingles only"):
            mig.start(TenantConfig.from_dict({**LIVE, "shingle": "word:3"}), actor=None)
        with pytest.raises(InvalidConfig, match="equals the live configuration"):
            mig.start(TenantConfig.from_dict(LIVE), actor=None)
        assert mig.other is None and not os.path.exists(os.path.join(root, POINTER))
        # The layout may change: the features are enough.
        new = TenantConfig.from_dict({**LIVE, "bands": 8, "rows": 4})
        assert mig.start(new, actor=None)["rebuilt_items"] == len(FAMILIES)
        with pytest.raises(Conflict, match="already has a shadow"):
            mig.start(TenantConfig.from_dict({**LIVE, "bands": 4, "rows": 8}), actor=None)
    finally:
        _close(mig)


def test_promote_then_retire_then_reopen(tmp_path: Path) -> None:
    root, _live, mig = _tenant(tmp_path)
    new = TenantConfig.from_dict({**LIVE, "shingle": "word:3", "retain": "text"})
    mig.start(new, actor="op")
    shadow_rel = mig.other_rel
    assert shadow_rel is not None and shadow_rel.startswith("shadow-")
    promoted, _warnings = mig.promote(actor="op")
    assert promoted.config.fingerprint == new.fingerprint
    assert mig.role == "previous" and mig.other_rel == "."
    assert read_pointer(root)["live"] == shadow_rel
    _close(mig)
    # Reopening follows LIVE.json: the promoted version serves, the old is previous.
    live, mig = load_tenant(root, MASTER)
    try:
        assert live.config.fingerprint == new.fingerprint and mig.role == "previous"
        assert _ids(live.candidates(_variant(FAMILIES[2], 1), limit=3)) == ["f2"]
        mig.drop(actor="op", expect="previous")
        # The first version's own files are gone; LIVE.json and the shadow stay.
        assert sorted(os.listdir(root)) == sorted([POINTER, shadow_rel])
        assert is_tenant_root(root)
        assert read_pointer(root) == {
            "format": "neardup-live-v1",
            "live": shadow_rel,
            "other": None,
            "role": None,
        }
        with pytest.raises(Conflict):
            mig.promote(actor="op")
    finally:
        _close(mig)
    live, mig = load_tenant(root, MASTER)
    try:
        assert live.config.fingerprint == new.fingerprint and mig.other is None
    finally:
        _close(mig)


def test_rollback_removes_the_shadow_and_keeps_the_live_tenant(tmp_path: Path) -> None:
    root, live, mig = _tenant(tmp_path)
    try:
        before = live.candidates(FAMILIES[0], limit=3)
        mig.start(TenantConfig.from_dict({**LIVE, "num_perm": 64, "bands": 32}), actor=None)
        rel = mig.other_rel
        assert rel is not None and os.path.isdir(os.path.join(root, rel))
        with pytest.raises(Conflict, match="no previous version"):
            mig.drop(actor=None, expect="previous")
        st = mig.drop(actor=None, expect="shadow")
        assert st["role"] is None and "other" not in st
        assert not os.path.exists(os.path.join(root, rel))
        assert read_pointer(root)["other"] is None
        assert _ids(live.candidates(FAMILIES[0], limit=3)) == _ids(before)
        kinds = [e.get("action") for e in live.store.events() if e["kind"] == "shadow"]
        assert kinds == ["start", "rollback"]
    finally:
        _close(mig)


def test_a_pointer_outside_the_tenant_is_refused(tmp_path: Path) -> None:
    assert read_pointer(str(tmp_path)) == {"live": ".", "other": None, "role": None}
    assert not is_tenant_root(str(tmp_path))
    (tmp_path / POINTER).write_text(json.dumps({"live": "../elsewhere", "other": None}))
    with pytest.raises(InvalidConfig, match="outside the tenant folder"):
        read_pointer(str(tmp_path))
    (tmp_path / POINTER).write_text(json.dumps({"live": ".", "other": "/abs/path"}))
    with pytest.raises(InvalidConfig):
        read_pointer(str(tmp_path))


def test_the_gate_makes_a_switch_wait_for_requests_in_flight() -> None:
    gate = VersionGate("t1")
    gate.acquire(1.0)
    assert gate.in_flight == 1
    with pytest.raises(Busy, match="nothing was changed"), gate.exclusive(0.05, "promote"):
        pass
    gate.acquire(0.05)  # a failed switch does not hold requests back
    gate.release()
    got: list[str] = []

    def switch() -> None:
        with gate.exclusive(5.0, "promote"):
            got.append("switched")

    t = threading.Thread(target=switch)
    t.start()
    time.sleep(0.05)
    assert got == []  # still waiting for the request in flight
    with pytest.raises(Busy, match="switching versions"):
        gate.acquire(0.05)  # new requests wait behind the switch
    gate.release()
    t.join(5)
    assert got == ["switched"] and gate.in_flight == 0
    gate.acquire(0.05)
    gate.release()


@pytest.mark.parametrize("change", [{"num_perm": 64, "bands": 32}, {"shingle": "word:3"}])
def test_a_shadow_keeps_the_access_policies(tmp_path: Path, change: dict[str, Any]) -> None:
    """A shadow build (from features or from retained text) stores every copied item
    with its access policy, deleted ones included; mirrored upserts carry theirs."""
    _root, live, mig = _tenant(tmp_path)
    try:
        live.upsert(
            item_id="eu1", content="a restricted note about the eu office", access_policy="eu"
        )
        live.upsert(item_id="gone", content="another restricted note to delete", access_policy="hr")
        live.tombstone("gone")
        mig.start(TenantConfig.from_dict({**LIVE, **change, "retain": "text"}), actor=None)
        shadow = mig.other
        assert shadow is not None
        assert shadow.item("eu1")["access_policy"] == "eu"
        assert shadow.item("gone")["live"] is False
        assert shadow.item("gone")["access_policy"] == "hr"
        assert "access_policy" not in shadow.item("f0")
        with pytest.raises(Forbidden, match="access policy 'eu'"):
            shadow.content("eu1", allowed=("us",), key_id="r1")
        kw = {"item_id": "new", "content": _variant(FAMILIES[1], 3), "access_policy": "us"}
        mig.mirror_upsert(kw, live.upsert(**kw))
        assert shadow.item("new")["access_policy"] == live.item("new")["access_policy"] == "us"
    finally:
        _close(mig)

"""Tenants and the word tokenizer: new tenants find Chinese near duplicates, tenants
made before tokenizer versions keep answering as before until they are migrated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from neardup import Config, ShingleSpec, hash_documents
from neardup.core._errors import Conflict
from neardup.service import Service, ServiceConfig
from neardup.service._crypto import MasterSecret
from neardup.service.migration import load_tenant
from neardup.service.server import create_app
from neardup.service.tenant import Tenant, TenantConfig
from service_helpers import write_master_key

MASTER = MasterSecret(b"m" * 32)

# A Chinese paragraph (no spaces) and a copy with one character edited.
PARAGRAPH = (
    "自然语言处理是计算机科学领域与人工智能领域中的一个重要方向。"
    "它研究能实现人与计算机之间用自然语言进行有效通信的各种理论和方法。"
    "自然语言处理是一门融语言学、计算机科学、数学于一体的科学。"
    "因此，这一领域的研究将涉及自然语言，即人们日常使用的语言。"
)
EDITED = PARAGRAPH.replace("有效", "高效")
ENGLISH = "the quick brown fox jumps over the lazy dog near the river bank today"


def _expected_counts() -> tuple[int, int]:
    """(shared, union) of the pair's word-5-gram sets under the default tokenizer,
    from the batch path (the tenant's hashes are keyed; the sets' sizes are not)."""
    sets = hash_documents([PARAGRAPH, EDITED], Config(shingle=ShingleSpec(max_shingles=100_000)))
    inter, union = sets.intersection_union(0, 1)
    # One edited character changes the 5 grams that cover it, on each side.
    assert union - inter == 10 and inter / union > 0.8
    return inter, union


@pytest.fixture
def client(tmp_path: Path):
    cfg = ServiceConfig(
        data_dir=str(tmp_path / "d"),
        master_key_file=str(write_master_key(tmp_path / "m.key")),
        keys_file=str(tmp_path / "k.json"),
    )
    svc, token = Service.init(cfg, operator_tenants=["new", "old"])
    c = TestClient(create_app(svc))
    yield c, {"Authorization": f"Bearer {token}"}
    svc.close()


def _producer(c: TestClient, op: dict[str, str], tenant: str) -> dict[str, str]:
    tok = c.post("/v1/keys", json={"role": "producer", "tenants": [tenant]}, headers=op).json()
    return {"Authorization": f"Bearer {tok['token']}"}


def test_a_new_tenant_finds_a_one_character_chinese_edit_with_its_exact_score(client) -> None:
    c, op = client
    shared, union = _expected_counts()
    made = {}
    for tenant, body in (("new", {}), ("old", {"tokenizer": 1})):
        made[tenant] = c.put(f"/v1/tenants/{tenant}", json=body, headers=op)
        assert made[tenant].status_code == 200, made[tenant].text
        p = _producer(c, op, tenant)
        first = c.post(
            f"/v1/tenants/{tenant}/items", json={"item_id": "a", "content": PARAGRAPH}, headers=p
        )
        assert first.status_code == 200 and first.json()["candidates"] == []
        made[tenant] = c.post(
            f"/v1/tenants/{tenant}/items", json={"item_id": "b", "content": EDITED}, headers=p
        ).json()
    new = made["new"]["candidates"]
    assert [(x["item_id"], x["shared"], x["union"]) for x in new] == [("a", shared, union)]
    assert new[0]["score"] == shared / union
    assert made["new"]["decision"]["state"] == "duplicate"
    # Tokenizer 1 sees each paragraph as one or two sentence-long words: no shared shingle.
    assert made["old"]["candidates"] == [] and made["old"]["decision"]["state"] == "unique"


def test_create_again_without_a_tokenizer_keeps_an_old_tenant(client) -> None:
    c, op = client
    assert c.put("/v1/tenants/old", json={"tokenizer": 1}, headers=op).status_code == 200
    again = c.put("/v1/tenants/old", json={}, headers=op)
    assert again.status_code == 200
    assert any("keeps word tokenizer 1" in w for w in again.json()["warnings"])
    assert c.put("/v1/tenants/old", json={"tokenizer": 1}, headers=op).json()["warnings"] == []
    assert c.put("/v1/tenants/old", json={"tokenizer": 2}, headers=op).status_code == 409
    bad = c.put("/v1/tenants/new", json={"tokenizer": 3}, headers=op)
    assert bad.status_code == 400 and "tokenizer" in bad.text


def _old_release_tenant(root: Path) -> None:
    """A tenant as a release before tokenizer versions left it: its ``tenant.json``
    names no tokenizer (and that release's fingerprint of the form)."""
    cfg = TenantConfig.from_dict({"retain": "text", "tokenizer": 1})
    Tenant.create(str(root), "t1", cfg, MASTER).close()
    meta = root / "tenant.json"
    doc = json.loads(meta.read_text())
    assert doc["config"].pop("tokenizer") == 1
    # The fingerprint an older release recorded for its default configuration.
    assert doc["config_fingerprint"] == cfg.fingerprint
    meta.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def test_tenant_config_reads_records_without_tokenizer_as_tokenizer_1() -> None:
    form = {k: v for k, v in TenantConfig().to_dict().items() if k != "tokenizer"}
    assert TenantConfig.from_dict(form, recorded=True).scheme.shingle.tokenizer == 1
    assert TenantConfig.from_dict(form).scheme.shingle.tokenizer == 2
    # What the release before tokenizer versions computed for TenantConfig().
    assert TenantConfig.from_dict(form, recorded=True).fingerprint == "5e2654a741e01f16"
    assert TenantConfig().fingerprint != "5e2654a741e01f16"
    char = TenantConfig.from_dict({"shingle": "char:5"})
    assert "tokenizer" not in char.to_dict() and char.fingerprint == "c0d6e01dcef5109e"
    for cfg in (TenantConfig(), TenantConfig.from_dict({"tokenizer": 1}), char):
        assert TenantConfig.from_dict(cfg.to_dict()) == cfg
        assert TenantConfig.from_dict(cfg.to_dict(), recorded=True) == cfg


def test_an_old_tenant_answers_as_before_until_migrated(tmp_path: Path) -> None:
    root = tmp_path / "t1"
    _old_release_tenant(root)
    live, mig = load_tenant(str(root), MASTER)
    try:
        assert live.config.scheme.shingle.tokenizer == 1
        assert "tokenizer" not in live.scheme.to_dict()  # the descriptor it always had
        live.upsert(item_id="zh", content=PARAGRAPH)
        live.upsert(item_id="en", content=ENGLISH)
        assert live.candidates(EDITED, limit=5)["candidates"] == []
        en = live.candidates(ENGLISH + " again", limit=5)["candidates"]
        assert [x["item_id"] for x in en] == ["en"]
        # The migration: a shadow of the same configuration under the new default,
        # rebuilt from the retained text, then promoted.
        target = TenantConfig.from_dict({**live.config.to_dict(), "tokenizer": 2})
        started = mig.start(target, actor="op")
        assert started["rebuilt_items"] == 2
        promoted, _ = mig.promote(actor="op")
    finally:
        live.close()
    shared, union = _expected_counts()
    try:
        assert promoted.config.scheme.shingle.tokenizer == 2
        got = promoted.candidates(EDITED, limit=5)["candidates"]
        assert [(x["item_id"], x["shared"], x["union"]) for x in got] == [("zh", shared, union)]
        en = promoted.candidates(ENGLISH + " again", limit=5)["candidates"]
        assert [x["item_id"] for x in en] == ["en"]
    finally:
        promoted.close()
        if mig.other is not None:
            mig.other.close()
    # Reopened, the data directory keeps the migrated tenant.
    again, mig2 = load_tenant(str(root), MASTER)
    try:
        assert again.config.scheme.shingle.tokenizer == 2
        assert again.candidates(EDITED, limit=5)["candidates"][0]["item_id"] == "zh"
    finally:
        again.close()
        if mig2.other is not None:
            mig2.other.close()


def test_a_hashes_only_tenant_cannot_change_tokenizer_in_place(tmp_path: Path) -> None:
    root = tmp_path / "t1"
    Tenant.create(str(root), "t1", TenantConfig.from_dict({"tokenizer": 1}), MASTER).close()
    live, mig = load_tenant(str(root), MASTER)
    try:
        with pytest.raises(Conflict, match="tokenizer"):
            mig.start(TenantConfig.from_dict({}), actor="op")
    finally:
        live.close()

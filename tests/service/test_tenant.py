"""Tenant: the seed demonstration, exactness against an oracle, replay, snapshots."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

from neardup.core._errors import (
    Conflict,
    CorruptFile,
    EmptyDocument,
    Forbidden,
    InvalidConfig,
    LimitExceeded,
    NotFound,
    SchemeMismatch,
)
from neardup.service._crypto import MasterSecret
from neardup.service.tenant import SERVICE_SCHEME, Tenant, TenantConfig
from neardup.testing import plant_near_duplicates, synthetic_documents
from neardup.text.hashing import hash_documents

MASTER = MasterSecret(b"m" * 32)
SEED_CFG = TenantConfig.from_dict(
    {"threshold": 0.75, "shingle": "word:2", "num_perm": 32, "bands": 8, "rows": 4}
)


def make(tmp_path: Path, name: str = "t1", cfg: TenantConfig = SEED_CFG, **kw) -> Tenant:
    return Tenant.create(
        str(tmp_path / name), "t1" if name.startswith("t1") else name, cfg, MASTER, **kw
    )


def test_seed_demonstration(tmp_path: Path) -> None:
    t = make(tmp_path)
    assert t.upsert(item_id="A", content="red fox runs very fast")["candidates"] == []
    b = t.upsert(item_id="B", content="red fox runs very fast today")
    assert [(c["item_id"], c["score"], c["shared"], c["union"]) for c in b["candidates"]] == [
        ("A", 0.8, 4, 5)
    ]
    assert b["decision"]["state"] == "duplicate" and b["decision"]["duplicate_of"] == "A"
    assert b["scheme_fingerprint"] == t.scheme.fingerprint and b["policy_version"] == 1
    c = t.upsert(item_id="C", content="database backup completed nightly")
    assert c["candidates"] == [] and c["decision"]["state"] == "unique"
    assert "not proof of uniqueness" in c["decision"]["reason"]
    with pytest.raises(InvalidConfig, match="num_perm=31"):
        TenantConfig.from_dict({"threshold": 0.75, "shingle": "word:2", "num_perm": 31, "bands": 8})
    t.tombstone("A")
    assert t.candidates("red fox runs very fast", limit=10)["candidates"][0]["item_id"] == "B"
    t.compact()
    digest = t.digest()
    snap = t.snapshot()
    fresh = Tenant.create(str(tmp_path / "fresh" / "t1"), "t1", SEED_CFG, MASTER)
    fresh.restore(snap)
    assert fresh.digest() == digest
    with pytest.raises(NotFound):
        fresh.tombstone("A")
    assert [
        c["item_id"] for c in fresh.candidates("red fox runs very fast", limit=5)["candidates"]
    ] == ["B"]


def test_scores_are_exact_against_the_oracle(tmp_path: Path) -> None:
    texts, _ = plant_near_duplicates(
        synthetic_documents(300, seed=3, words=40),
        copies=80,
        edit_rate=[0.0, 0.02, 0.05, 0.1],
        seed=4,
    )
    cfg = TenantConfig.from_dict({"threshold": 0.7, "shingle": "word:3", "bands": 32, "rows": 4})
    t = make(tmp_path, cfg=cfg)
    sets = hash_documents(texts, t.dedup, key=t.key)
    found: set[tuple[int, int]] = set()
    for i, text in enumerate(texts):
        r = t.upsert(item_id=f"d{i}", content=text)
        for c in r["candidates"]:
            j = int(c["item_id"][1:])
            assert c["score"] == pytest.approx(sets.jaccard(i, j), abs=0)
            if c["score"] >= cfg.scheme.threshold:
                found.add((j, i))
    at = cfg.scheme.threshold
    truth = {(a, b) for b in range(len(texts)) for a in range(b) if sets.jaccard(a, b) >= at}
    assert truth and found == truth


def test_replay_restart_and_idempotency(tmp_path: Path) -> None:
    t = make(tmp_path)
    r1 = t.upsert(item_id="A", content="red fox runs very fast", idempotency_key="k")
    assert t.upsert(item_id="A", content="red fox runs very fast", idempotency_key="k") == r1
    with pytest.raises(Conflict, match="different request body"):
        t.upsert(item_id="Z", content="something else here", idempotency_key="k")
    assert t.upsert(item_id="A", content="red fox runs very fast")["status"] == "unchanged"
    with pytest.raises(Conflict, match="replace=true"):
        t.upsert(item_id="A", content="a different text entirely")
    r = t.upsert(item_id="A", content="a different text entirely", replace=True)
    assert r["status"] == "replaced"
    t.upsert(item_id="B", content="red fox runs very fast today")
    with pytest.raises(Conflict, match="older than"):
        t.tombstone("A", epoch=1)
    t.tombstone("B", epoch=r["seq"] + 1)
    digest, seq = t.digest(), t.seq
    t.close()
    again = Tenant.open_dir(str(tmp_path / "t1"), MASTER)
    assert again.digest() == digest and again.seq == seq
    # The store is derived: drop it, and the log alone rebuilds the same state.
    again.close()
    for f in os.listdir(tmp_path / "t1"):
        if f.startswith("features-"):
            os.unlink(tmp_path / "t1" / f)
    rebuilt = Tenant.open_dir(str(tmp_path / "t1"), MASTER)
    assert rebuilt.digest() == digest and rebuilt.replayed == seq


def test_restore_refusals_leave_live_state_untouched(tmp_path: Path) -> None:
    t = make(tmp_path)
    t.upsert(item_id="A", content="red fox runs very fast")
    snap = t.snapshot()
    t.upsert(item_id="B", content="database backup completed nightly")
    digest = t.digest()
    flipped = bytearray(snap)
    flipped[len(flipped) // 2] ^= 0x01
    with pytest.raises(CorruptFile):
        t.restore(bytes(flipped))
    manifest_at = snap.index(b'"last_seq"')
    forged = bytearray(snap)
    forged[manifest_at + 12] = ord("9") if forged[manifest_at + 12] != ord("9") else ord("8")
    with pytest.raises(CorruptFile, match="HMAC"):
        t.restore(bytes(forged))
    with pytest.raises(CorruptFile, match="not a neardup snapshot"):
        t.restore(b"garbage")
    other = Tenant.create(str(tmp_path / "t2"), "t2", SEED_CFG, MASTER)
    with pytest.raises(Conflict, match="tenant 't1'"):
        other.restore(snap)
    cfg = TenantConfig.from_dict({"threshold": 0.75, "shingle": "word:3"})
    third = Tenant.create(str(tmp_path / "t1x"), "t1", cfg, MASTER)
    with pytest.raises(SchemeMismatch):
        third.restore(snap)
    assert t.digest() == digest
    t.restore(snap)
    assert len(t) == 1


def test_rotated_master_secret_is_refused_at_start(tmp_path: Path) -> None:
    t = make(tmp_path)
    t.upsert(item_id="A", content="red fox runs very fast")
    t.close()
    with pytest.raises(SchemeMismatch, match="master secret changed"):
        Tenant.open_dir(str(tmp_path / "t1"), MasterSecret(b"n" * 32))


def test_limits_and_bad_content(tmp_path: Path) -> None:
    cfg = TenantConfig.from_dict(
        {"threshold": 0.75, "shingle": "word:2", "max_items": 2, "max_shingles": 20}
    )
    t = make(tmp_path, cfg=cfg)
    with pytest.raises(EmptyDocument):
        t.upsert(item_id="E", content="   ")
    with pytest.raises(LimitExceeded, match="max_shingles"):
        t.upsert(item_id="L", content=" ".join(f"w{i}" for i in range(100)))
    with pytest.raises(LimitExceeded, match="token"):
        t.upsert(item_id="T", content="x" * 5000, max_token_bytes=256)
    t.upsert(item_id="A", content="one two three")
    t.upsert(item_id="B", content="four five six")
    with pytest.raises(LimitExceeded, match="quota") as e:
        t.upsert(item_id="C", content="seven eight nine")
    assert e.value.status == 429


def test_retained_text_is_sealed_at_rest(tmp_path: Path) -> None:
    cfg = TenantConfig.from_dict({"threshold": 0.75, "shingle": "word:2", "retain": "text"})
    t = make(tmp_path, cfg=cfg)
    t.upsert(item_id="A", content="Secret Marmalade Recipe for the Queen")
    assert t.store.text(0) == "secret marmalade recipe for the queen"
    t.close()
    for f in os.listdir(tmp_path / "t1"):
        p = tmp_path / "t1" / f
        if p.is_file():
            assert b"marmalade" not in p.read_bytes(), f
    snaps = list((tmp_path / "t1" / "snapshots").iterdir())
    assert all(b"marmalade" not in s.read_bytes() for s in snaps)


def test_feature_rows_are_bound_to_their_position(tmp_path: Path) -> None:
    t = make(tmp_path)
    t.upsert(item_id="A", content="red fox runs very fast")
    t.upsert(item_id="B", content="database backup completed nightly")
    db = t.store._db
    _a, b = (bytes(r[0]) for r in db.execute("SELECT features FROM items ORDER BY pos"))
    db.execute("UPDATE items SET features=? WHERE pos=0", (b,))
    with pytest.raises(CorruptFile, match="authentication failed"):
        t.store.features([0])
    assert np.array_equal(t.store.features([1])[1][1].shape, (3,))


def _damage(path: Path) -> None:
    # Overwrite SQLite's header page: the file no longer opens as a database.
    with open(path, "r+b") as fh:
        fh.write(b"\xde\xad" * 2048)


def _items(n: int, seed: int) -> list[str]:
    return synthetic_documents(n, seed=seed, words=30)


def test_damaged_store_is_rebuilt_from_latest_snapshot_and_log(tmp_path: Path) -> None:
    t = make(tmp_path)
    for i, text in enumerate(_items(30, 1)):
        t.upsert(item_id=f"a{i}", content=text)
    t.snapshot()  # older snapshot
    for i, text in enumerate(_items(20, 2)):
        t.upsert(item_id=f"b{i}", content=text)
    t.tombstone("a3")
    t.snapshot()  # the one to use
    for i, text in enumerate(_items(15, 3)):
        t.upsert(item_id=f"c{i}", content=text)
    t.tombstone("b4")
    digest, n = t.digest(), len(t)
    probe = t.candidates(_items(15, 3)[7], limit=3)["candidates"][0]
    t.close()
    store = tmp_path / "t1" / "features-0.sqlite"
    for extra in ("-wal", "-shm"):
        if (tmp_path / "t1" / f"features-0.sqlite{extra}").exists():
            os.unlink(tmp_path / "t1" / f"features-0.sqlite{extra}")
    _damage(store)
    r = Tenant.open_dir(str(tmp_path / "t1"), MASTER)
    assert r.recovered is not None and r.recovered["snapshot"].endswith(".ndsnap")
    assert r.recovered["snapshot_seq"] == 51  # 50 upserts + 1 tombstone
    assert r.replayed == 16  # the log after the snapshot
    assert r.digest() == digest and len(r) == n
    assert r.candidates(_items(15, 3)[7], limit=3)["candidates"][0] == probe
    assert r.stats()["recovered_at_start"]["damaged_store_moved_to"].startswith(str(store))
    assert os.path.exists(r.recovered["damaged_store_moved_to"])  # kept for forensics
    with pytest.raises(NotFound):
        r.tombstone("a3")
    r.close()


def test_damaged_store_without_usable_snapshot(tmp_path: Path) -> None:
    # Generation 0 without snapshots: the log holds everything, so replay rebuilds.
    t = make(tmp_path)
    for i, text in enumerate(_items(12, 4)):
        t.upsert(item_id=f"a{i}", content=text)
    digest = t.digest()
    t.close()
    for extra in ("-wal", "-shm"):
        p = tmp_path / "t1" / f"features-0.sqlite{extra}"
        if p.exists():
            os.unlink(p)
    _damage(tmp_path / "t1" / "features-0.sqlite")
    r = Tenant.open_dir(str(tmp_path / "t1"), MASTER)
    assert r.replayed == 12 and r.digest() == digest and r.recovered is not None
    # After a restore the log starts later; a tampered snapshot is refused, and
    # start-up stops naming the fix rather than serving partial state.
    snap = r.snapshot()
    r.restore(snap)
    r.upsert(item_id="late", content=_items(1, 5)[0])
    gen = r.generation
    r.close()
    snaps = sorted((tmp_path / "t1" / "snapshots").iterdir())
    for s in snaps:
        blob = bytearray(s.read_bytes())
        blob[len(blob) // 2] ^= 0x01
        s.write_bytes(bytes(blob))
    for extra in ("-wal", "-shm"):
        p = tmp_path / "t1" / f"features-{gen}.sqlite{extra}"
        if p.exists():
            os.unlink(p)
    _damage(tmp_path / "t1" / f"features-{gen}.sqlite")
    with pytest.raises(CorruptFile, match="no snapshot can replace it") as err:
        Tenant.open_dir(str(tmp_path / "t1"), MASTER)
    assert "restore a snapshot" in str(err.value)


def test_decisions_are_recorded_replayed_and_reversible(tmp_path: Path) -> None:
    t = make(tmp_path)
    t.upsert(item_id="A", content="red fox runs very fast", actor="k1")
    b = t.upsert(item_id="B", content="red fox runs very fast today", actor="k1")
    assert b["decision"]["state"] == "duplicate" and b["decision"]["canonical"] == "A"
    again = t.upsert(item_id="B", content="red fox runs very fast today")
    assert again["status"] == "unchanged" and again["decision"]["state"] == "duplicate"
    links = t.link_state()
    assert links == {"B": ("duplicate", "A")}
    t.unlink("B", actor="rev", rationale="not the same")
    assert t.link_state() == {}
    ev = t.events()
    assert [e["kind"] for e in ev["events"]] == ["decision", "decision", "unlink"]
    assert ev["chain_verified"] == 3 and ev["events"][0]["actor"] == "k1"
    digest = t.digest()
    t.close()
    # Replaying the whole log into an empty store gives the same state.
    for suffix in ("", "-wal", "-shm"):
        p = tmp_path / "t1" / f"features-0.sqlite{suffix}"
        if p.exists():
            os.unlink(p)
    r = Tenant.open_dir(str(tmp_path / "t1"), MASTER)
    assert r.digest() == digest and r.link_state() == {}
    assert r.events()["head"] == ev["head"]


def test_query_spans_equal_the_text_oracle(tmp_path: Path) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from neardup import ShingleSpec
    from neardup.verify.explain import shared_spans

    t = make(tmp_path)
    words = st.lists(st.sampled_from(["red", "Fox", "runs", "fast", "the", "a", "b"]), max_size=14)

    @settings(max_examples=60, deadline=None)
    @given(words, words)
    def check(wa: list[str], wb: list[str]) -> None:
        a, b = " ".join(wa), "  ".join(wb)
        other = t.prepare(b).features if wb else np.zeros(0, dtype=np.uint64)
        got = t._spans(a, "nfkc-casefold", other)
        want = shared_spans(a, b, ShingleSpec(kind="word", k=2)).spans_a
        assert got == [list(x) for x in want]

    check()


def test_batched_writer_keeps_upsert_semantics_under_concurrency(tmp_path: Path) -> None:
    import threading

    t = make(tmp_path, batch_writes=True)
    docs = synthetic_documents(120, seed=11, words=30)
    results: dict[str, dict] = {}
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        for i in range(k, len(docs), 8):
            try:
                results[f"d{i}"] = t.upsert(item_id=f"d{i}", content=docs[i])
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors and len(results) == len(docs) == len(t)
    assert t.log.fsyncs < len(docs)  # shared fsyncs
    assert sorted(r["seq"] for r in results.values()) == list(range(1, len(docs) + 1))
    # Per-request errors reach their caller only.
    with pytest.raises(Conflict):
        t.upsert(item_id="d0", content="something else entirely here")
    assert t.upsert(item_id="d0", content=docs[0])["status"] == "unchanged"
    digest = t.digest()
    t.close()
    r = Tenant.open_dir(str(tmp_path / "t1"), MASTER)
    assert r.digest() == digest


def test_the_json_form_is_flat_and_round_trips() -> None:
    """The JSON form stays what it was when the fields were declared flat."""
    assert TenantConfig().to_dict() == {
        "threshold": 0.8,
        "shingle": "word:5",
        "tokenizer": 2,  # since tokenizer versions; not for char and byte shingles
        "normalizer": "nfkc-casefold",
        "num_perm": 128,
        "bands": None,
        "rows": None,
        "retain": "hashes",
        "scheme_version": 1,
        "policy_version": 1,
        "max_items": 10_000_000,
        "max_shingles": 100_000,
        "max_candidates": 100,
        "max_bucket_size": 1_000,
        "rate_per_s": 5_000.0,
        "burst": 10_000,
    }
    assert TenantConfig().scheme == SERVICE_SCHEME
    assert SERVICE_SCHEME.hash_algorithm == "siphash24"
    for form in ({"shingle": "word:05", "threshold": 1}, {"normalizer": "nfkc@1", "bands": 8}):
        cfg = TenantConfig.from_dict(form)
        assert TenantConfig.from_dict(cfg.to_dict()) == cfg
        assert {k: cfg.to_dict()[k] for k in form} == form
    with pytest.raises(InvalidConfig, match="unknown field"):
        TenantConfig.from_dict({"seed": 1})
    with pytest.raises(InvalidConfig, match=r"scheme\.seed"):
        TenantConfig(scheme=dataclasses.replace(SERVICE_SCHEME, seed=1))
    with pytest.raises(InvalidConfig, match="max_candidates"):
        TenantConfig.from_dict({"max_candidates": 20_000})


TEXT_CFG = TenantConfig.from_dict({**SEED_CFG.to_dict(), "retain": "text"})


def test_access_policies_survive_replay_and_restore_and_gate_content(tmp_path: Path) -> None:
    t = make(tmp_path, cfg=TEXT_CFG)
    t.upsert(item_id="A", content="red fox runs very fast", access_policy="eu")
    t.upsert(item_id="P", content="database backup completed nightly")
    seq = t.seq
    with pytest.raises(InvalidConfig, match="access_policy"):
        t.upsert(item_id="X", content="a bad label is refused", access_policy="EU Only!")
    assert t.seq == seq  # refused before anything was logged
    assert t.item("A")["access_policy"] == "eu" and "access_policy" not in t.item("P")
    assert t.content("A", allowed=("eu",))["access_policy"] == "eu"
    assert t.content("A")["text"] == "red fox runs very fast"  # no restriction given
    with pytest.raises(Forbidden, match="access policy 'eu'") as err:
        t.content("A", allowed=("us",), key_id="r1")
    assert "'r1'" in str(err.value) and "--policy eu" in err.value.fix
    assert t.content("P", allowed=())["text"] == "database backup completed nightly"
    # The same content under another policy is a new version, like new content.
    assert t.upsert(item_id="A", content="red fox runs very fast", access_policy="eu")[
        "status"
    ] == "unchanged"
    with pytest.raises(Conflict, match="access policy 'eu', not 'us'"):
        t.upsert(item_id="A", content="red fox runs very fast", access_policy="us")
    r = t.upsert(item_id="A", content="red fox runs very fast", access_policy="us", replace=True)
    assert r["status"] == "replaced" and t.item("A")["access_policy"] == "us"
    t.upsert(item_id="B", content="quiet owls sleep all day long", access_policy="hr")
    t.tombstone("B")
    digest = t.digest()
    snap = t.snapshot()
    t.close()
    # The store is derived: the log alone rebuilds the policies.
    for f in os.listdir(tmp_path / "t1"):
        if f.startswith("features-"):
            os.unlink(tmp_path / "t1" / f)
    rebuilt = Tenant.open_dir(str(tmp_path / "t1"), MASTER)
    assert rebuilt.digest() == digest
    assert rebuilt.item("A")["access_policy"] == "us" and rebuilt.item("B")["access_policy"] == "hr"
    with pytest.raises(Forbidden):
        rebuilt.content("A", allowed=("eu",))
    rebuilt.close()
    fresh = make(tmp_path / "fresh", cfg=TEXT_CFG)
    fresh.restore(snap)
    assert fresh.digest() == digest and fresh.item("A")["access_policy"] == "us"
    with pytest.raises(Forbidden):
        fresh.content("A", allowed=("eu",))
    fresh.close()


def test_explanations_withhold_spans_into_restricted_candidates(tmp_path: Path) -> None:
    t = make(tmp_path, cfg=TEXT_CFG)
    t.upsert(item_id="open", content="red fox runs very fast")
    t.upsert(item_id="closed", content="quiet owls sleep all day long", access_policy="hr")
    seen = t.upsert(item_id="B", content="red fox runs very fast today")["decision"]
    spans = seen["explanation"]["spans"]
    assert seen["duplicate_of"] == "open" and spans["candidate"] == [[0, 22]]
    hid = t.upsert(item_id="C", content="quiet owls sleep all day long today")["decision"]
    spans = hid["explanation"]["spans"]
    assert hid["duplicate_of"] == "closed" and spans["candidate"] is None
    assert spans["candidate_offsets"].startswith("withheld")
    assert spans["query"] is not None  # the caller's own content is still explained

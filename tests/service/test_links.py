"""Cluster links: nothing links to a tombstoned item or to itself (issue 20, defect 4).

Library level: a property test over random sequences of upserts, replacements,
tombstones, unlinks and releases; the hand-over rule; replays; and data written
before the rule existed (``tests/data/legacy-links-t1.tar.gz``).
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from neardup.core._errors import Conflict, InvalidConfig, SchemeMismatch
from neardup.service._crypto import MasterSecret
from neardup.service.tenant import Tenant, TenantConfig

MASTER = MasterSecret(b"m" * 32)
# word:1 sets of 10 words; 16 bands x 2 rows finds a pair at 0.6 with P = 0.99996.
CFG = TenantConfig.from_dict(
    {"threshold": 0.75, "shingle": "word:1", "num_perm": 32, "bands": 16, "rows": 2}
)
LEGACY = Path(__file__).resolve().parents[1] / "data" / "legacy-links-t1.tar.gz"


def _family(tag: str) -> list[str]:
    """Near copies of one 10-word text: words added (J >= 0.83: duplicates), two words
    replaced (J = 0.67: the review band) and three replaced (J = 0.54: unique)."""
    base = [f"{tag}{j}" for j in range(10)]
    out = [" ".join(base)]
    for extra in (["e1"], ["e2"], ["e1", "e2"]):
        out.append(" ".join(base + [f"{tag}{e}" for e in extra]))
    for k in (2, 3):
        out.append(" ".join([f"{tag}x{j}" for j in range(k)] + base[k:]))
    return out


TEXTS = _family("a") + _family("b")[:2] + ["lone words nothing shared here at all ok"]
IDS = [f"i{k}" for k in range(6)]


def _live(t: Tenant) -> set[str]:
    links = t.link_state()
    names = set(IDS) | set(links) | {c for _, c in links.values() if c is not None}
    out = set()
    for item in sorted(names):
        cur = t.store.current(item)
        if cur is not None and cur.live:
            out.add(item)
    return out


def check_links(t: Tenant) -> None:
    """No link of a tombstoned item, none to a tombstoned item or to itself; every
    duplicate points at its cluster's canonical item (live, not itself a duplicate)."""
    links = t.link_state()
    live = _live(t)
    for item, (state, canonical) in links.items():
        assert item in live, (item, links)
        if state == "duplicate":
            assert canonical is not None and canonical != item, (item, links)
            assert canonical in live, (item, canonical, links)
            assert links.get(canonical, ("unique", None))[0] != "duplicate", (item, links)
        else:
            assert state == "review" and canonical is None, (item, links)
    assert t.store.broken_links(10) == []


def check_decision(t: Tenant, item: str, d: dict) -> None:
    live = _live(t)
    for k in ("duplicate_of", "canonical"):
        if d.get(k) is not None:
            assert d[k] != item and d[k] in live, (item, k, d[k], live)
    if d["state"] == "duplicate":
        assert t.link_state()[item] == ("duplicate", d["canonical"])


def _new_tenant() -> tuple[Tenant, str]:
    root = os.path.join(tempfile.mkdtemp(prefix="links-"), "t1")
    t = Tenant.create(root, "t1", CFG, MASTER)
    # A review band [0.55, 0.75), so that quarantines (and releases) happen too.
    t.set_policy({"threshold": 0.75, "review_below": 0.2}, actor="op")
    return t, root


OPS = st.lists(
    st.tuples(
        st.sampled_from(["put", "put", "put", "tombstone", "tombstone", "unlink", "release"]),
        st.integers(0, len(IDS) - 1),
        st.integers(0, len(TEXTS) - 1),
    ),
    min_size=6,
    max_size=30,
)


@settings(deadline=None, max_examples=60)
@given(OPS)
def test_links_never_point_at_dead_or_self_items(ops: list[tuple[str, int, int]]) -> None:
    t, root = _new_tenant()
    try:
        for op, k, x in ops:
            item = IDS[k]
            live = _live(t)
            if op == "put":
                r = t.upsert(item_id=item, content=TEXTS[x], replace=True)
                check_decision(t, item, r["decision"])
                event(f"upsert: {r['status']} {r['decision']['state']}")
                if r["status"] == "replaced" and t.events()["events"][-1].get("relinks"):
                    event("replace hands a cluster over")
            elif op == "tombstone" and item in live:
                r = t.tombstone(item)
                event(f"tombstone: {len(r['relinks'])} relink(s)")
                for rl in r["relinks"]:
                    assert rl["item_id"] != item or rl["state"] == "tombstoned"
            elif op in ("unlink", "release"):
                want = "duplicate" if op == "unlink" else "review"
                pick = sorted(i for i, (s, _) in t.link_state().items() if s == want)
                item, other = (pick[k % len(pick)] if pick else None), IDS[x % len(IDS)]
                if item is not None and op == "unlink":
                    t.unlink(item, actor="rev")
                    event("unlink")
                elif item is not None:
                    try:
                        if x % 3 == 0:
                            t.release(item, actor="rev")
                        else:
                            t.release(item, actor="rev", as_state="duplicate", of=other)
                        event(f"release: {t.link_state().get(item, ('unique',))[0]}")
                    except (Conflict, InvalidConfig):
                        event("release refused")  # `of` not live, itself, its own cluster
            check_links(t)
        links, digest = t.link_state(), t.digest()
        t.close()
        # Replay: from the store + log, and from the log alone.
        again = Tenant.open_dir(root, MASTER)
        assert again.link_state() == links and again.digest() == digest
        again.close()
        for f in os.listdir(root):
            if f.startswith("features-"):
                os.unlink(os.path.join(root, f))
        rebuilt = Tenant.open_dir(root, MASTER)
        assert rebuilt.link_state() == links and rebuilt.digest() == digest
        rebuilt.close()
    finally:
        shutil.rmtree(os.path.dirname(root), ignore_errors=True)


A = "the red fox runs very fast across the field"
B = "The red fox runs very fast across the FIELD today"
SEED = TenantConfig.from_dict(
    {"threshold": 0.75, "shingle": "word:2", "num_perm": 32, "bands": 8, "rows": 4}
)
KEY = MasterSecret(bytes(range(32)))  # service_helpers.FIXED_MASTER_KEY


def test_tombstoned_canonical_hands_its_cluster_to_the_oldest_live_member(
    tmp_path: Path,
) -> None:
    t = Tenant.create(str(tmp_path / "t1"), "t1", SEED, KEY)
    t.upsert(item_id="X1", content=A)
    assert t.upsert(item_id="X2", content=B)["decision"]["canonical"] == "X1"
    assert t.upsert(item_id="X5", content=A + " more")["decision"]["canonical"] == "X1"
    r = t.tombstone("X1", actor="k1")
    assert r["relinks"] == [
        {"item_id": "X2", "state": "unique", "canonical": None},
        {"item_id": "X5", "state": "duplicate", "canonical": "X2"},
    ]
    ev = t.events()["events"][-1]
    assert (ev["kind"], ev["cause"], ev["item_id"], ev["actor"]) == (
        "relink",
        "tombstone",
        "X1",
        "k1",
    )
    assert ev["before"] == {"state": "unique", "canonical": None}
    d = t.upsert(item_id="X3", content=A + " again")["decision"]
    assert (d["state"], d["duplicate_of"], d["canonical"]) == ("duplicate", "X2", "X2")
    d = t.upsert(item_id="X1", content=A)["decision"]
    assert (d["state"], d["canonical"]) == ("duplicate", "X2")
    # Replacing the canonical X2: its cluster goes to X5 (oldest), then X2 is decided.
    d = t.upsert(item_id="X2", content=A + " something", replace=True)["decision"]
    assert d["state"] == "duplicate" and d["canonical"] == "X5"
    assert t.link_state() == {
        "X1": ("duplicate", "X5"),
        "X2": ("duplicate", "X5"),
        "X3": ("duplicate", "X5"),
    }
    # A duplicate that is tombstoned just leaves its cluster.
    assert t.tombstone("X3")["relinks"] == [
        {"item_id": "X3", "state": "tombstoned", "canonical": None}
    ]
    # A lone item's tombstone changes no link and records no event.
    t.upsert(item_id="L", content="database backup completed nightly")
    n = len(t.events()["events"])
    assert t.tombstone("L")["relinks"] == [] and len(t.events()["events"]) == n
    check = t.link_state()
    snap = t.snapshot()
    fresh = Tenant.create(str(tmp_path / "fresh" / "t1"), "t1", SEED, KEY)
    fresh.restore(snap)
    assert fresh.link_state() == check and fresh.digest() == t.digest()


def test_release_as_duplicate_keeps_one_hop_and_never_links_to_itself(tmp_path: Path) -> None:
    cfg = TenantConfig.from_dict(
        {"threshold": 0.75, "shingle": "word:1", "num_perm": 32, "bands": 16, "rows": 2}
    )
    t = Tenant.create(str(tmp_path / "t1"), "t1", cfg, KEY)
    t.set_policy({"threshold": 0.75, "review_below": 0.12}, actor="op")
    a, b = _family("a"), _family("b")
    t.upsert(item_id="P", content=a[0])
    assert t.upsert(item_id="Q", content=a[4])["decision"]["state"] == "review"  # J = 0.67
    # R is a near copy of Q only (J(R, P) = 0.54): Q, though quarantined, is canonical.
    r = t.upsert(item_id="R", content=a[4] + " extra")["decision"]
    assert (r["state"], r["canonical"]) == ("duplicate", "Q")
    with pytest.raises(Conflict, match="cannot be a duplicate of its own cluster"):
        t.release("Q", actor="rev", as_state="duplicate", of="R")
    with pytest.raises(InvalidConfig):
        t.release("Q", actor="rev", as_state="duplicate", of="Q")
    # Released as a duplicate of P, Q's members follow it: R -> P, not R -> Q -> P.
    out = t.release("Q", actor="rev", as_state="duplicate", of="P")
    assert out["event"]["relinks"] == [{"item_id": "R", "state": "duplicate", "canonical": "P"}]
    assert t.link_state() == {"Q": ("duplicate", "P"), "R": ("duplicate", "P")}
    t.upsert(item_id="S", content=b[0])
    check_links(t)


def _legacy(tmp_path: Path) -> str:
    root = tmp_path / "legacy" / "t1"
    root.mkdir(parents=True)
    with tarfile.open(LEGACY) as tar:
        tar.extractall(root, filter="data")
    return str(root)


def test_data_written_before_the_rule_opens_and_is_repaired_once(tmp_path: Path) -> None:
    """The fixture (see tests/data/make_legacy_links.py) was written by the previous
    version: X2, X3 and X5 link to X1, which was tombstoned, and X1, upserted again,
    links to itself."""
    root = _legacy(tmp_path)
    t = Tenant.open_dir(root, KEY)
    # The same links the hand-over rule gives for the same sequence (test above).
    want = {"X1": ("duplicate", "X2"), "X3": ("duplicate", "X2"), "X5": ("duplicate", "X2")}
    assert t.link_state() == want
    check = t.events()
    assert check["chain_verified"] == len(check["events"])
    ev = check["events"][-1]
    assert (ev["kind"], ev["cause"]) == ("relink", "repair")
    assert ev["relinks"] == [
        {"item_id": "X1", "state": "duplicate", "canonical": "X2"},
        {"item_id": "X2", "state": "unique", "canonical": None},
        {"item_id": "X3", "state": "duplicate", "canonical": "X2"},
        {"item_id": "X5", "state": "duplicate", "canonical": "X2"},
    ]
    digest, seq = t.digest(), t.seq
    t.close()
    # Opened again: nothing more to repair; the log alone rebuilds the same state.
    again = Tenant.open_dir(root, KEY)
    assert (again.digest(), again.seq) == (digest, seq)
    again.close()
    for f in os.listdir(root):
        if f.startswith("features-"):
            os.unlink(os.path.join(root, f))
    rebuilt = Tenant.open_dir(root, KEY)
    assert rebuilt.digest() == digest and rebuilt.link_state() == want
    # The snapshot the old version took is repaired the same way when restored.
    (snap,) = (tmp_path / "legacy" / "t1" / "snapshots").glob("snap-000000000006.ndsnap")
    # That version had one word tokenizer (tokenizer 1): a tenant of the current
    # default refuses its snapshot as another scheme.
    current = Tenant.create(str(tmp_path / "current" / "t1"), "t1", SEED, KEY)
    with pytest.raises(SchemeMismatch):
        current.restore(snap.read_bytes())
    current.close()
    legacy = SEED.with_tokenizer(1)
    fresh = Tenant.create(str(tmp_path / "fresh" / "t1"), "t1", legacy, KEY)
    fresh.restore(snap.read_bytes())
    assert fresh.link_state() == want
    assert fresh.events()["events"][-1]["cause"] == "repair"

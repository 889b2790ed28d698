"""Scores computed before the write lock (``Tenant.preverify``) and reused under it.

Whatever happened between the pre-pass and the locked search (new near copies,
tombstones, replaced versions, a restore), the locked search with ``known=`` must
answer exactly what a fresh search answers: same candidates, scores, order, caps
and counters.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.core._errors import DeadlineExceeded, NotFound
from neardup.service._crypto import MasterSecret
from neardup.service.tenant import Tenant, TenantConfig

MASTER = MasterSecret(b"v" * 32)
CFG = TenantConfig.from_dict(
    {"threshold": 0.5, "shingle": "word:2", "num_perm": 32, "bands": 16, "rows": 2}
)
WORDS = [f"w{i}" for i in range(40)]


def _text(rng: random.Random, base: list[str], edits: int) -> str:
    words = list(base)
    for _ in range(edits):
        words[rng.randrange(len(words))] = rng.choice(WORDS)
    return " ".join(words)


def _answer(t: Tenant, content: str, **kw: object) -> tuple[object, ...]:
    prep = t.prepare(content)
    cands, info = t.find(prep, limit=50, **kw)  # type: ignore[arg-type]
    return tuple((c.item_id, c.score, c.shared, c.union, c.method) for c in cands), tuple(
        sorted(info.items())
    )


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(0, 10_000),
    budget=st.sampled_from([10, 60, 4_000_000]),
    ops=st.lists(st.sampled_from(["add", "tombstone", "replace"]), max_size=8),
)
def test_known_scores_give_exactly_the_fresh_answer(
    tmp_path_factory: pytest.TempPathFactory, seed: int, budget: int, ops: list[str]
) -> None:
    rng = random.Random(seed)
    t = Tenant.create(
        str(tmp_path_factory.mktemp("t") / "t1"), "t1", CFG, MASTER, verify_budget=budget
    )
    base = [rng.choice(WORDS) for _ in range(12)]
    for i in range(10):
        t.upsert(item_id=f"i{i}", content=_text(rng, base, rng.randrange(4)))
    query = _text(rng, base, 1)
    pre = t.preverify(t.prepare(query))
    assert pre.scores, "the pre-pass scored nothing"
    n = 100
    for op in ops:
        live = [f"i{i}" for i in range(n) if t.store.current(f"i{i}") is not None]
        live = [i for i in live if t.store.current(i).live]  # type: ignore[union-attr]
        if op == "add" or not live:
            t.upsert(item_id=f"i{n}", content=_text(rng, base, rng.randrange(3)))
            n += 1
        elif op == "tombstone":
            t.tombstone(rng.choice(live))
        else:
            t.upsert(item_id=rng.choice(live), content=_text(rng, base, 2), replace=True)
    before = dict(vars(t.counters))
    fresh = _answer(t, query)
    reused = _answer(t, query, known=pre)
    assert reused == fresh
    # The pre-pass counted nothing; each real search counted once.
    t2 = dict(vars(t.counters))
    assert t2["queries"] == before["queries"] + 2
    t.close()


def test_prepass_counts_nothing_and_skips_writes_in_progress(tmp_path: Path) -> None:
    t = Tenant.create(str(tmp_path / "t1"), "t1", CFG, MASTER)
    rng = random.Random(3)
    base = [rng.choice(WORDS) for _ in range(12)]
    for i in range(5):
        t.upsert(item_id=f"i{i}", content=_text(rng, base, 1))
    query = _text(rng, base, 1)
    queries = t.counters.queries
    full = t.preverify(t.prepare(query))
    assert t.counters.queries == queries
    assert len(full.scores) == 5 and full.below == 5
    # A write being applied has its row before the tenant's next position moves on:
    # positions at or past `below` are scored but never kept.
    real = t._next_pos
    t._next_pos = 2
    try:
        part = t.preverify(t.prepare(query))
    finally:
        t._next_pos = real
    assert sorted(part.scores) == [p for p in sorted(full.scores) if p < 2]
    assert _answer(t, query, known=part) == _answer(t, query)
    t.close()


def test_a_restore_between_prepass_and_lock_drops_the_known_scores(tmp_path: Path) -> None:
    t = Tenant.create(str(tmp_path / "t1"), "t1", CFG, MASTER)
    t.upsert(item_id="a", content="alpha beta gamma delta epsilon zeta")
    snap = t.snapshot()
    t.upsert(item_id="b", content="alpha beta gamma delta epsilon eta")
    query = "alpha beta gamma delta epsilon theta"
    pre = t.preverify(t.prepare(query))
    assert {v[0] for v in pre.scores.values()} == {"a", "b"}
    t.restore(snap)
    assert _answer(t, query, known=pre) == _answer(t, query)
    assert [c[0] for c in _answer(t, query)[0]] == ["a"]  # type: ignore[index]
    t.close()


def test_a_write_past_its_deadline_records_nothing(tmp_path: Path) -> None:
    t = Tenant.create(str(tmp_path / "t1"), "t1", CFG, MASTER, request_budget_s=5.0)
    t.upsert(item_id="a", content="one two three four")
    seq = t.seq
    with pytest.raises(DeadlineExceeded, match="time budget of 5 s") as err:
        t.upsert(item_id="b", content="five six seven", deadline=time.monotonic() - 1)
    assert err.value.status == 503 and err.value.code == "deadline_exceeded"
    assert err.value.retry_after >= 1
    with pytest.raises(DeadlineExceeded):
        t.tombstone("a", deadline=time.monotonic() - 1)
    assert t.seq == seq and t.log.last_seq == seq
    assert t.store.current("b") is None and t.store.current("a").live  # type: ignore[union-attr]
    with pytest.raises(NotFound):
        t.tombstone("b")
    # The default deadline (now + request_budget_s) lets ordinary writes through.
    assert t.upsert(item_id="b", content="five six seven")["status"] == "inserted"
    t.close()

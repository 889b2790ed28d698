"""A stateful model test of ``neardup serve``: hypothesis drives a real server over
HTTP (two tenants; upserts, replaces, tombstones, decisions, policies, shadow
indexes, snapshots, restores, compactions, graceful restarts, ``kill -9``, store
rebuilds) against a small in-memory model with an exact all-pairs oracle.

After every step:

* every acknowledged write is there: each tenant's live count equals the model's,
  and (after restarts, restores and promotions) every item's state does;
* candidates are exactly the oracle's: every listed candidate is a live item of the
  same tenant whose score, shared and union counts equal the exact Jaccard of the
  word-bigram sets, and every live item at Jaccard >= 0.5 is listed.  The layouts
  have one row per band, so a pair at 0.5 is missed with P = 0.5**32 per pair
  (about 2e-10; fewer than 1e-6 over every pair of a run);
* no id of the other tenant ever appears, and no duplicate link points at a
  tombstoned item or at the item itself;
* restarting (gracefully, after ``kill -9``, or with the feature store deleted so
  that it is rebuilt from snapshot + log) reproduces the state digest.

Texts are lowercase ASCII words from a small vocabulary joined by single spaces,
so normalization is the identity and the oracle's bigrams are the server's
shingles (keyed 64-bit hashes: a collision has P ~ 2**-64).
"""

from __future__ import annotations

import collections
import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import httpx
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from service_helpers import Server, record_figure

TENANTS = ("sa", "sb")
PREFIX = {"sa": "a", "sb": "b"}
LAYOUT = {"threshold": 0.6, "shingle": "word:2", "num_perm": 32, "bands": 32, "rows": 1}
SHADOW = {**LAYOUT, "num_perm": 48, "bands": 48}
VOCAB = ["red", "fox", "runs", "fast", "blue", "cat", "sleeps", "late", "green", "owl"]
texts = st.lists(st.sampled_from(VOCAB), min_size=3, max_size=8).map(" ".join)


COUNTS: collections.Counter[str] = collections.Counter()
FAULT_KINDS = ("graceful", "kill", "rebuild")
F = TypeVar("F", bound=Callable[..., None])


def counted(fn: F) -> F:
    """Count how often each rule really ran (the test asserts that all did)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        COUNTS[fn.__name__] += 1
        args[0].steps += 1
        fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def bigrams(text: str) -> frozenset[tuple[str, str]]:
    w = text.split()
    return frozenset(itertools.pairwise(w))


def jaccard(a: str, b: str) -> tuple[int, int]:
    x, y = bigrams(a), bigrams(b)
    return len(x & y), len(x | y)


@dataclass
class TenantModel:
    live: dict[str, str] = field(default_factory=dict)  # item id -> text
    dead: set[str] = field(default_factory=set)
    threshold: float = LAYOUT["threshold"]
    role: str | None = None  # None, "shadow" or "previous"
    snapshot: tuple[bytes, dict[str, str], set[str], float, int] | None = None
    layout_version: int = 0  # promotions so far; the layout alternates LAYOUT / SHADOW


class ServiceModel(RuleBasedStateMachine):
    tmp: ClassVar[Path]
    examples: ClassVar[int] = 0
    runs: ClassVar[itertools.count[int]] = itertools.count()

    def __init__(self) -> None:
        super().__init__()
        self.n = 0
        self.steps = 0
        self.last_fault = 0
        self.model = {t: TenantModel() for t in TENANTS}
        self.srv: Server | None = None
        self.op: httpx.Client | None = None
        self.prod: dict[str, httpx.Client] = {}
        self.token = ""

    # -- plumbing --------------------------------------------------------------
    def _start(self) -> None:
        assert self.srv is not None
        self.srv.start()
        self.op = self.srv.client(self.token)
        self.prod = {t: self.srv.client(self.keys[t]) for t in TENANTS}

    def _stop(self, *, kill: bool) -> None:
        for c in [self.op, *self.prod.values()]:
            if c is not None:
                c.close()
        assert self.srv is not None
        if kill:
            self.srv.kill9()
        else:
            self.srv.stop()

    def _ok(self, r: httpx.Response) -> dict[str, Any]:
        assert r.status_code < 500, (r.status_code, r.text)
        assert r.status_code == 200, (r.status_code, r.text)
        return dict(r.json())

    def _digests(self) -> dict[str, str]:
        assert self.op is not None
        return {t: self._ok(self.op.get(f"/v1/tenants/{t}/digest"))["digest"] for t in TENANTS}

    def _check_candidates(self, tenant: str, text: str, cands: list[dict[str, Any]]) -> None:
        m = self.model[tenant]
        other = PREFIX["sb" if tenant == "sa" else "sa"] + "-"
        listed = {c["item_id"] for c in cands}
        for c in cands:
            assert not c["item_id"].startswith(other), ("cross-tenant id", tenant, c)
            assert c["item_id"] in m.live, ("not a live item", tenant, c, sorted(m.live))
            inter, union = jaccard(text, m.live[c["item_id"]])
            assert (c["shared"], c["union"]) == (inter, union), (c, text)
            assert c["score"] == (inter / union if union else 1.0), c
        for item, stored in m.live.items():
            inter, union = jaccard(text, stored)
            if union and inter / union >= 0.5:
                assert item in listed, ("missed", tenant, item, text, stored)

    def _check_all_items(self) -> None:
        for t in TENANTS:
            m = self.model[t]
            c = self.prod[t]
            for item in m.live:
                r = c.get(f"/v1/tenants/{t}/items/{item}")
                assert r.status_code == 200 and r.json()["live"] is True, (t, item, r.text)
                # No link points at a tombstoned item or at the item itself.
                d = self._ok(c.get(f"/v1/tenants/{t}/items/{item}/decision"))
                if d["state"] == "duplicate":
                    assert d["canonical"] in m.live and d["canonical"] != item, (t, item, d)
            for item in m.dead - set(m.live):
                r = c.get(f"/v1/tenants/{t}/items/{item}")
                assert r.status_code == 200 and r.json()["live"] is False, (t, item, r.text)

    # -- set-up ----------------------------------------------------------------
    @initialize()
    def start(self) -> None:
        run = next(self.runs)
        ServiceModel.examples += 1
        self.srv = Server(self.tmp / f"run{run}" / "data", operator_tenants=TENANTS)
        self.srv.start()
        self.token = self.srv.operator_token
        self.op = self.srv.client(self.token)
        self.keys = {}
        for t in TENANTS:
            self._ok(self.op.put(f"/v1/tenants/{t}", json=LAYOUT))
            r = self.op.post("/v1/keys", json={"role": "producer", "tenants": [t]})
            self.keys[t] = self._ok(r)["token"]
        self.prod = {t: self.srv.client(self.keys[t]) for t in TENANTS}

    def teardown(self) -> None:
        if self.srv is not None:
            self._stop(kill=False)

    # -- producer rules --------------------------------------------------------
    @rule(tenant=st.sampled_from(TENANTS), text=texts)
    @counted
    def upsert_new(self, tenant: str, text: str) -> None:
        item = f"{PREFIX[tenant]}-{self.n}"
        self.n += 1
        r = self.prod[tenant].post(
            f"/v1/tenants/{tenant}/items",
            json={"item_id": item, "content": text, "idempotency_key": f"k-{item}"},
        )
        out = self._ok(r)
        self._check_candidates(tenant, text, out["candidates"])
        self.model[tenant].live[item] = text

    @rule(tenant=st.sampled_from(TENANTS), pick=st.integers(0, 1 << 30), text=texts)
    @counted
    def replace(self, tenant: str, pick: int, text: str) -> None:
        m = self.model[tenant]
        if not m.live:
            return
        item = sorted(m.live)[pick % len(m.live)]
        r = self.prod[tenant].post(
            f"/v1/tenants/{tenant}/items",
            json={"item_id": item, "content": text, "replace": True},
        )
        out = self._ok(r)
        if out["status"] != "unchanged":
            before = dict(m.live)
            before.pop(item)
            saved, m.live = m.live, before
            self._check_candidates(tenant, text, out["candidates"])
            m.live = saved
        m.live[item] = text

    @rule(tenant=st.sampled_from(TENANTS), pick=st.integers(0, 1 << 30))
    @counted
    def tombstone(self, tenant: str, pick: int) -> None:
        m = self.model[tenant]
        if not m.live:
            return
        item = sorted(m.live)[pick % len(m.live)]
        self._ok(self.prod[tenant].delete(f"/v1/tenants/{tenant}/items/{item}"))
        del m.live[item]
        m.dead.add(item)
        r = self.prod[tenant].delete(f"/v1/tenants/{tenant}/items/{item}")
        assert r.status_code == 404, r.text  # a tombstone is never applied twice

    @rule(tenant=st.sampled_from(TENANTS), text=texts, decide=st.booleans())
    @counted
    def query(self, tenant: str, text: str, decide: bool) -> None:
        if not decide:
            COUNTS["candidates"] += 1
            r = self.prod[tenant].post(f"/v1/tenants/{tenant}/candidates", json={"content": text})
            self._check_candidates(tenant, text, self._ok(r)["candidates"])
            return
        COUNTS["decide"] += 1
        m = self.model[tenant]
        r = self.prod[tenant].post(f"/v1/tenants/{tenant}/decide", json={"content": text})
        out = self._ok(r)
        self._check_candidates(tenant, text, out["evidence"])
        best = max(
            (i / u for i, u in (jaccard(text, s) for s in m.live.values()) if u), default=None
        )
        d = out["decision"]
        if best is not None and best >= m.threshold:
            assert d["state"] == "duplicate" and d["score"] == best, (d, best)
        else:
            assert d["state"] == "unique", (d, best)

    # -- operator rules --------------------------------------------------------
    @rule(tenant=st.sampled_from(TENANTS), threshold=st.sampled_from([0.6, 0.7, 0.8]))
    @counted
    def policy(self, tenant: str, threshold: float) -> None:
        assert self.op is not None
        r = self.op.put(f"/v1/tenants/{tenant}/policy", json={"threshold": threshold})
        if self.model[tenant].role == "shadow":
            # The shadow brings its own policy when promoted: refused meanwhile.
            assert r.status_code == 409, r.text
            return
        self._ok(r)
        self.model[tenant].threshold = threshold

    @rule(tenant=st.sampled_from(TENANTS))
    @counted
    def compact(self, tenant: str) -> None:
        assert self.op is not None
        self._ok(self.op.post(f"/v1/tenants/{tenant}/compact"))

    @rule(tenant=st.sampled_from(TENANTS), restore=st.booleans())
    @counted
    def snapshot_or_restore(self, tenant: str, restore: bool) -> None:
        assert self.op is not None
        m = self.model[tenant]
        if not restore or m.snapshot is None:
            COUNTS["snapshot"] += 1
            r = self.op.post(f"/v1/tenants/{tenant}/snapshot")
            assert r.status_code == 200, r.text
            m.snapshot = (r.content, dict(m.live), set(m.dead), m.threshold, m.layout_version)
            return
        COUNTS["restore"] += 1
        blob, live, dead, threshold, version = m.snapshot
        r = self.op.post(f"/v1/tenants/{tenant}/restore", content=blob)
        assert r.status_code < 500, r.text
        if version % 2 != m.layout_version % 2 or m.role is not None:
            # A snapshot of another layout (before a promotion), or a restore while a
            # shadow / previous version is attached: refused, nothing changes.
            assert r.status_code >= 400, r.text
            return
        assert r.status_code == 200, r.text
        m.live, m.dead, m.threshold = dict(live), set(dead), threshold
        self._check_all_items()

    @rule(tenant=st.sampled_from(TENANTS), promote=st.booleans())
    @counted
    def shadow(self, tenant: str, promote: bool) -> None:
        assert self.op is not None
        m = self.model[tenant]
        if m.role is None:
            COUNTS["shadow_start"] += 1
            layout = SHADOW if m.layout_version % 2 == 0 else LAYOUT
            self._ok(self.op.put(f"/v1/tenants/{tenant}/shadow", json=layout))
            m.role = "shadow"
            return
        if m.role == "shadow":
            action = "promote" if promote else "rollback"
            COUNTS[action] += 1
            self._ok(self.op.post(f"/v1/tenants/{tenant}/shadow/{action}"))
            if promote:
                m.role = "previous"
                m.layout_version += 1
                m.threshold = LAYOUT["threshold"]
            else:
                m.role = None
        else:
            COUNTS["retire"] += 1
            self._ok(self.op.post(f"/v1/tenants/{tenant}/shadow/retire"))
            m.role = None
        self._check_all_items()

    # -- faults ----------------------------------------------------------------
    # Faults cost a server start each: at most one per six steps, so that the
    # steps between them build state worth recovering.
    # The kind goes round in turn rather than being drawn: the test requires every
    # kind to have run, and a run has only about ten faults (nine random draws
    # miss one of the three kinds in about one run of thirteen).
    @precondition(lambda self: self.steps - self.last_fault >= 6)
    @rule()
    @counted
    def fault(self) -> None:
        """Restart gracefully, after kill -9, or after kill -9 with every feature
        store deleted (start-up rebuilds them from snapshot + log)."""
        kind = FAULT_KINDS[(COUNTS["fault"] - 1) % len(FAULT_KINDS)]
        COUNTS[f"fault_{kind}"] += 1
        self.last_fault = self.steps
        before = self._digests()
        self._stop(kill=kind != "graceful")
        if kind == "rebuild":
            assert self.srv is not None
            for f in (self.srv.data_dir / "tenants").rglob("features-*.sqlite*"):
                f.unlink()
        self._start()
        assert self._digests() == before
        self._check_all_items()

    # -- after every step --------------------------------------------------------
    @invariant()
    def counts_match(self) -> None:
        if self.op is None or self.srv is None or self.srv.proc is None:
            return
        for t in TENANTS:
            stats = self._ok(self.op.get(f"/v1/tenants/{t}"))
            assert stats["items"] == len(self.model[t].live), (t, stats["items"])


@pytest.mark.slow
def test_the_service_matches_its_model(tmp_path: Path) -> None:
    ServiceModel.tmp = tmp_path
    ServiceModel.examples = 0
    COUNTS.clear()
    run_state_machine_as_test(
        ServiceModel,
        settings=settings(
            max_examples=15,
            stateful_step_count=50,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
    rules = [n for n, v in vars(ServiceModel).items() if hasattr(v, "hypothesis_stateful_rule")]
    actions = ["candidates", "decide", "snapshot", "restore", "shadow_start", "promote"]
    actions += ["rollback", "retire", "fault_graceful", "fault_kill", "fault_rebuild"]
    print(f"service model: {sum(COUNTS.values())} steps, {dict(sorted(COUNTS.items()))}")
    missing = sorted(set(rules + actions) - set(COUNTS))
    assert not missing, f"rules or actions that never ran: {missing}"
    rules_run = sum(v for k, v in COUNTS.items() if k in rules)
    record_figure(
        "state_machine",
        examples=ServiceModel.examples,
        steps=rules_run,
        actions=dict(sorted(COUNTS.items())),
        restarts_survived=sum(COUNTS[f"fault_{k}"] for k in ("graceful", "kill", "rebuild")),
        kill9_survived=COUNTS["fault_kill"] + COUNTS["fault_rebuild"],
    )

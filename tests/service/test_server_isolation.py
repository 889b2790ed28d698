"""Tenant isolation through a real server: a hypothesis state machine over three tenants.

Whatever sequence of upserts, queries and tombstones runs, a tenant's answers only
ever name items stored in that tenant and still live, and an identical live item
is always found (exact-content lookup, not a probabilistic one).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import ClassVar

import httpx
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

from service_helpers import Server, producer

TENANTS = ("ta", "tb", "tc")
WORDS = ["red", "fox", "runs", "fast", "blue", "cat", "sleeps", "all", "day", "long"]
texts = st.lists(st.sampled_from(WORDS), min_size=3, max_size=7).map(" ".join)


class Isolation(RuleBasedStateMachine):
    # Shared by every run of the machine: the server's state persists across them.
    clients: ClassVar[dict[str, httpx.Client]] = {}
    stored: ClassVar[dict[str, set[str]]] = {t: set() for t in TENANTS}
    dead: ClassVar[dict[str, set[str]]] = {t: set() for t in TENANTS}
    # Item ids unique across runs, and the same on every run of the suite.
    runs: ClassVar[itertools.count[int]] = itertools.count()

    def __init__(self) -> None:
        super().__init__()
        self.run = f"r{next(self.runs)}"
        self.n = 0
        self.live: dict[str, dict[str, str]] = {t: {} for t in TENANTS}  # id -> normalized text

    def _check(self, tenant: str, body: dict, text: str | None) -> None:
        ids = {c["item_id"] for c in body["candidates"]}
        assert ids <= self.stored[tenant] - self.dead[tenant], (tenant, ids)
        if text is not None:
            same = {i for i, t in self.live[tenant].items() if t == text}
            exact = {c["item_id"] for c in body["candidates"] if c["score"] == 1.0}
            if same:
                assert exact & same, (tenant, text, body["candidates"])

    @rule(tenant=st.sampled_from(TENANTS), text=texts)
    def upsert(self, tenant: str, text: str) -> None:
        item = f"{self.run}-{self.n}"
        self.n += 1
        r = self.clients[tenant].post(
            f"/v1/tenants/{tenant}/items", json={"item_id": item, "content": text}
        )
        assert r.status_code == 200, r.text
        self._check(tenant, r.json(), text)
        self.stored[tenant].add(item)
        self.live[tenant][item] = text

    @rule(tenant=st.sampled_from(TENANTS), text=texts)
    def query(self, tenant: str, text: str) -> None:
        r = self.clients[tenant].post(
            f"/v1/tenants/{tenant}/candidates", json={"content": text, "limit": 100}
        )
        assert r.status_code == 200, r.text
        self._check(tenant, r.json(), text)

    @rule(tenant=st.sampled_from(TENANTS), data=st.data())
    def tombstone(self, tenant: str, data: st.DataObject) -> None:
        if not self.live[tenant]:
            return
        item = data.draw(st.sampled_from(sorted(self.live[tenant])))
        r = self.clients[tenant].delete(f"/v1/tenants/{tenant}/items/{item}")
        assert r.status_code == 200, r.text
        text = self.live[tenant].pop(item)
        self.dead[tenant].add(item)
        after = (
            self.clients[tenant]
            .post(f"/v1/tenants/{tenant}/candidates", json={"content": text, "limit": 100})
            .json()
        )
        assert item not in {c["item_id"] for c in after["candidates"]}

    @rule(tenant=st.sampled_from(TENANTS), other=st.sampled_from(TENANTS))
    def foreign_key_is_refused(self, tenant: str, other: str) -> None:
        if tenant == other:
            return
        r = self.clients[tenant].post(
            f"/v1/tenants/{other}/candidates", json={"content": "red fox"}
        )
        assert r.status_code == 403


@pytest.mark.slow
def test_tenants_never_see_each_other(tmp_path: Path) -> None:
    with (
        Server(tmp_path / "data", operator_tenants=TENANTS) as srv,
        srv.client(srv.operator_token) as op,
    ):
        for t in TENANTS:
            r = op.put(f"/v1/tenants/{t}", json={"threshold": 0.5, "shingle": "word:2"})
            r.raise_for_status()
        Isolation.clients = {t: producer(srv, op, t) for t in TENANTS}
        try:
            run_state_machine_as_test(
                Isolation,
                settings=settings(
                    max_examples=25,
                    stateful_step_count=12,
                    deadline=None,
                    suppress_health_check=list(HealthCheck),
                ),
            )
        finally:
            for c in Isolation.clients.values():
                c.close()
        # Cross-check with the stored counts.
        for t in TENANTS:
            stats = op.get(f"/v1/tenants/{t}").json()
            assert stats["items"] == len(Isolation.stored[t] - Isolation.dead[t])

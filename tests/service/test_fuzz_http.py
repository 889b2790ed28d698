"""Schema-driven fuzzing of a live ``neardup serve`` over real HTTP (issue 20).

Schemathesis generates requests from the server's own ``/openapi.json`` — valid
ones (positive mode) and ones that break the schema (negative mode) — for every
operation, and sends them with an operator, a producer, a reviewer and no token.
Every answer must be a non-5xx that matches the response schema of its status.
The tenant of every path is the fuzzed tenant (a random one would only ever meet
403), and most item ids in paths are ones that exist (one with a "/"), so the
generated cases reach the real handlers; the test checks they did (2xx and 400
answers per role).  The number of cases is printed with every run.
"""

from __future__ import annotations

import collections
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from service_helpers import Server, record_figure

TENANT = "fz"
CONFIG = {
    "threshold": 0.75,
    "shingle": "word:2",
    "num_perm": 32,
    "bands": 32,
    "rows": 1,
    "retain": "text",
    "rate_per_s": 1e6,
    "burst": 1 << 20,
}
SEED = {
    "a/b": "the quick brown fox jumps over the lazy dog",
    "dup": "the quick brown fox jumps over the lazy dog today",
    "x": "an entirely different text about other things",
    "é 1": "one two three four five six seven",
}
#: Wall-clock budget of the requests: the test stays within about 3 minutes.
BUDGET_S = 170.0
#: (role, operations, generation mode, examples): each role mostly on the operations
#: its role may call (``x-roles`` of the document), and some on all of them (the
#: authorization gates); no token on all of them.
PLAN = [
    *[
        (role, ops, mode, n)
        for role in ("operator", "producer", "reviewer")
        for ops, mode, n in (
            ("own", "positive", 750),
            ("own", "negative", 500),
            ("all", "positive", 150),
            ("all", "negative", 100),
        )
    ],
    ("anonymous", "all", "positive", 200),
    ("anonymous", "all", "negative", 100),
]


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_schemathesis_finds_no_5xx_and_no_schema_violation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t0 = time.monotonic()
    with (
        Server(tmp_path / "data", operator_tenants=(TENANT,)) as srv,
        srv.client(srv.operator_token) as op,
    ):
        assert op.put(f"/v1/tenants/{TENANT}", json=CONFIG).status_code == 200
        tokens: dict[str, str | None] = {"operator": srv.operator_token, "anonymous": None}
        for role in ("producer", "reviewer"):
            r = op.post("/v1/keys", json={"role": role, "tenants": [TENANT]})
            tokens[role] = r.json()["token"]
        with srv.client(tokens["producer"]) as p:
            for item_id, text in SEED.items():
                body = {"item_id": item_id, "content": text}
                assert p.post(f"/v1/tenants/{TENANT}/items", json=body).status_code == 200
        # Shadow indexes under other shingle kinds compile their kernels on first use
        # (numba, cached on disk): compile them before the clock of any request runs.
        for kind in ("char", "byte"):
            r = op.put(f"/v1/tenants/{TENANT}/shadow", json={"shingle": f"{kind}:5"}, timeout=600)
            assert r.status_code == 200, r.text
            assert op.post(f"/v1/tenants/{TENANT}/shadow/rollback").status_code == 200
        raw = httpx.get(f"{srv.url}/openapi.json").json()
        schema = schemathesis.openapi.from_dict(raw)
        run = _Run(srv.url, budget_s=BUDGET_S)
        for role, ops, mode, n in PLAN:
            names = [
                f"{method.upper()} {path}"
                for path, item in raw["paths"].items()
                for method, operation in item.items()
                if method != "parameters"
                and (ops == "all" or role in operation.get("x-roles", ()))
            ]
            run.fuzz(schema.include(name=names), role, tokens[role], mode, n)
        log = srv.stop()
    elapsed = time.monotonic() - t0
    with capsys.disabled():  # the case count is part of every run's output
        print(f"\nschemathesis: {run.total} cases in {elapsed:.0f} s ({run.skipped} over budget)")
        slow = sorted(run.slowest)[-3:]
        print("  slowest: " + ", ".join(f"{d:.2f} s {what}" for d, what in slow))
        for role, c in run.statuses.items():
            print(f"  {role}: {sum(c.values())} cases, statuses {dict(sorted(c.items()))}")
    assert not run.failures, "\n\n".join(run.failures[:10]) + "\nserver log:\n" + log[-8000:]
    assert "Traceback" not in log, log[-5000:]
    record_figure(
        "schema_fuzzing",
        cases=run.total,
        seconds=round(elapsed),
        server_errors_5xx=0,
        schema_violations=0,
        statuses={r: dict(sorted(c.items())) for r, c in run.statuses.items()},
    )
    # About 4800 cases in 70-140 s here; a slower machine stops at the budget.
    assert run.total >= 3000
    # The generated cases reached the handlers, not only the 401/403/404 gates.
    for role in ("operator", "producer", "reviewer"):
        c = run.statuses[role]
        assert sum(v for k, v in c.items() if k < 300) >= 200, c
        assert c[400] >= 100, c
    assert set(run.statuses["anonymous"]) <= {200, 401, 404, 405}, run.statuses["anonymous"]


class _Run:
    """Cases sent, their statuses by role, the failures and the slowest calls."""

    def __init__(self, url: str, budget_s: float) -> None:
        import requests

        self.url = url
        self.deadline = time.monotonic() + budget_s
        self.skipped = 0
        self.session = requests.Session()
        self.statuses: dict[str, collections.Counter[int]] = {}
        self.failures: list[str] = []
        self.slowest: list[tuple[float, str]] = []

    @property
    def total(self) -> int:
        return sum(sum(c.values()) for c in self.statuses.values())

    def fuzz(self, schema: Any, role: str, token: str | None, mode: str, n: int) -> None:
        counts = self.statuses.setdefault(role, collections.Counter())
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        generation = {
            "positive": schemathesis.GenerationMode.POSITIVE,
            "negative": schemathesis.GenerationMode.NEGATIVE,
        }[mode]
        strategy = schema.as_strategy(generation, path_parameters={"tenant": TENANT})

        @settings(
            max_examples=n,
            database=None,
            deadline=None,
            derandomize=True,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=strategy, known=st.sampled_from([None, *SEED]))
        def fuzz(case: Any, known: str | None) -> None:
            if time.monotonic() > self.deadline:
                self.skipped += 1
                return
            if known is not None and "item_id" in (case.path_parameters or {}):
                case.path_parameters["item_id"] = known  # an item that exists
            t1 = time.monotonic()
            response = case.call(
                base_url=self.url, headers=headers, session=self.session, timeout=120
            )
            self.slowest.append((time.monotonic() - t1, f"{role} {case.method} {case.path}"))
            counts[response.status_code] += 1
            try:
                case.validate_response(
                    response, checks=[not_a_server_error, response_schema_conformance]
                )
            except (Exception, BaseExceptionGroup) as exc:  # schemathesis' FailureGroup
                # Collected, so that one run reports every kind of failure.
                self.failures.append(f"{role}/{mode}: {exc}"[:3000])

        fuzz()


@pytest.mark.slow
def test_retiring_the_original_version_keeps_the_live_one(tmp_path: Path) -> None:
    """Found by this fuzzing (and the model test): retiring the first version after
    a promotion removed the whole tenant folder."""
    t = f"/v1/tenants/{TENANT}"
    with (
        Server(tmp_path / "data", operator_tenants=(TENANT,)) as srv,
        srv.client(srv.operator_token) as op,
    ):
        assert op.put(t, json=CONFIG).status_code == 200
        r = op.post("/v1/keys", json={"role": "producer", "tenants": [TENANT]})
        with srv.client(r.json()["token"]) as p:
            body = {"item_id": "a/b", "content": SEED["a/b"]}
            assert p.post(f"{t}/items", json=body).status_code == 200
            assert op.put(f"{t}/shadow", json={"shingle": "word:3"}).status_code == 200
            assert op.post(f"{t}/shadow/promote").status_code == 200
            assert op.post(f"{t}/shadow/retire").status_code == 200
            assert op.post(f"{t}/snapshot").status_code == 200
            token = p.headers["authorization"].split()[1]
    # A restart (on a new port): the tenant and its items are there.
    with srv, srv.client(token) as p:
        assert p.get(f"{t}/items/a%2Fb").status_code == 200

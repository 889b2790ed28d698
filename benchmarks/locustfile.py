"""Locust users for ``bench_service_locust.py`` (one request kind per run).

Configured by environment variables (the runner sets them):

* ``ND_KIND`` — ``candidates``, ``decide`` (decision only, recorded; no item stored)
  or ``upsert`` (a new item per request);
* ``ND_TENANTS`` — JSON ``{tenant: producer token}``; user *k* sends to tenant
  ``k mod T`` (users spread evenly over the tenants, so over the workers);
* ``ND_ITEMS`` — items stored per tenant when the run starts (query texts are
  near copies of stored items, see below);
* ``ND_RATE`` — requests/s per user for an open loop; unset or 0: closed loop
  (each user sends its next request when the answer came).  In the open loop user
  *k* of *U* sends at ``start + (k/U + n) / rate`` (users staggered, so arrivals are
  evenly spread, not in bursts); a user that falls behind sends at once, and its
  latency is counted from the scheduled time, so queueing is measured rather than
  hidden (no coordinated omission).  Those latencies are in ``scheduled_ms``;
* ``ND_OUT`` — where to write every request's latency (exact percentiles; Locust's
  own are rounded) when the run stops;
* ``ND_RUN`` — a tag making upserted item ids and texts unique to the run.

Query texts (``candidates``, ``decide``): half are stored paragraphs with 2 of 50
words replaced (each finds and verifies its source, exact Jaccard ~0.64: mostly
below the 0.8 threshold), half are new paragraphs (no duplicate).  Upserts send new
paragraphs.  Uses ``FastHttpUser`` (geventhttpclient): the load generator shares
the machine's cores with the server, so its cost per request matters.

    ND_KIND=candidates ND_TENANTS='{"t0": "nd_..."}' ND_ITEMS=500000 \\
        locust -f benchmarks/locustfile.py --headless -u 8 -r 8 -t 20s -H http://127.0.0.1:8731
"""

from __future__ import annotations

import itertools
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import gevent
from locust import FastHttpUser, constant, events, task

sys.path.insert(0, str(Path(__file__).resolve().parent))

from service_data import documents

KIND = os.environ.get("ND_KIND", "candidates")
TENANTS: dict[str, str] = json.loads(os.environ.get("ND_TENANTS", "{}"))
ITEMS = int(os.environ.get("ND_ITEMS", "100000"))
RATE = float(os.environ.get("ND_RATE", "0") or 0)
RUN = os.environ.get("ND_RUN", str(int(time.time())))
OUT = os.environ.get("ND_OUT")

_names = sorted(TENANTS)
_user_ids = itertools.count()
_new_ids = itertools.count()
_latencies: dict[str, list[float]] = {}
_scheduled: list[float] = []
_span = [float("inf"), 0.0]  # first request start, last request end (time.time())
_errors: dict[str, int] = {}
USERS = int(os.environ.get("ND_USERS", "1"))


def _query_texts(k: int, n: int = 4000) -> list[str]:
    """Queries for tenant ``k``: near copies of its stored items (item ``b<i>`` is
    stored in tenant ``i mod T``) and new paragraphs, shuffled."""
    rng = random.Random(11 + k)
    t = max(len(_names), 1)
    src = documents(0, min(ITEMS * t, 50_000))[k::t]
    out = []
    for _ in range(n // 2):
        words = rng.choice(src).split()
        for _ in range(2):
            words[rng.randrange(len(words))] = f"q{rng.randrange(10**6)}"
        out.append(" ".join(words))
    out += documents(5 * 10**7 + k * n, 5 * 10**7 + k * n + n // 2)
    rng.shuffle(out)
    return out


_QUERIES = (
    {t: _query_texts(k) for k, t in enumerate(_names)} if KIND in ("candidates", "decide") else {}
)
_FRESH = documents(6 * 10**7, 6 * 10**7 + 20_000) if KIND == "upsert" else []


@events.request.add_listener
def _record(
    request_type: str, name: str, response_time: float, exception: Any, **kw: Any
) -> None:
    if exception is not None:
        _errors[name] = _errors.get(name, 0) + 1
        return
    _latencies.setdefault(name, []).append(response_time)
    now = time.time()
    _span[0] = min(_span[0], now - response_time / 1000)
    _span[1] = max(_span[1], now)


@events.quitting.add_listener
def _dump(environment: Any, **kw: Any) -> None:
    if OUT:
        Path(OUT).write_text(
            json.dumps(
                {
                    "latencies_ms": _latencies,
                    "scheduled_ms": _scheduled,
                    "errors": _errors,
                    "span_s": max(_span[1] - _span[0], 1e-9),
                }
            )
        )


class Producer(FastHttpUser):
    wait_time = constant(0)

    def on_start(self) -> None:
        k = next(_user_ids)
        self.tenant = _names[k % len(_names)]
        self.auth = {"Authorization": f"Bearer {TENANTS[self.tenant]}"}
        self.rng = random.Random(k)
        self.next_at = time.monotonic() + (k % USERS) / (USERS * RATE) if RATE > 0 else 0.0

    def _post(self, path: str, body: dict[str, Any]) -> None:
        with self.client.post(
            f"/v1/tenants/{self.tenant}/{path}",
            json=body,
            headers=self.auth,
            name=KIND,
            catch_response=True,
        ) as r:
            if r.status_code != 200:
                r.failure(f"{r.status_code}: {(r.text or '')[:200]}")

    @task
    def one(self) -> None:
        if RATE <= 0:
            self._one()
            return
        delay = self.next_at - time.monotonic()
        if delay > 0:
            gevent.sleep(delay)
        due = self.next_at
        self.next_at += 1.0 / RATE
        self._one()
        _scheduled.append(1000 * (time.monotonic() - due))

    def _one(self) -> None:
        if KIND == "upsert":
            i = next(_new_ids)
            text = _FRESH[i % len(_FRESH)] + f" r{RUN}n{i}"
            self._post("items", {"item_id": f"l{RUN}-{i}", "content": text})
        elif KIND == "decide":
            self._post("decide", {"content": self.rng.choice(_QUERIES[self.tenant])})
        else:
            self._post(
                "candidates", {"content": self.rng.choice(_QUERIES[self.tenant]), "limit": 10}
            )

"""Build ``service-golden.tar.gz`` and ``service-golden.json``: a service data
directory written by a real ``neardup serve``, and the answers it gave, for the
test that a later version opens it and answers the same
(``tests/service/test_service_golden.py``).

Recorded before the redesign of issue 22 (see ``recorded_at`` in the JSON).  Run
it from the repository root with the version to record installed::

    python tests/data/make_service_golden.py

Two tenants of different schemes: ``t1`` (word 3-grams, 60 documents, a third of
them near copies, three tombstones, a snapshot) and ``t2`` (character 5-grams,
21 documents).  The answers are read-only requests only (candidates previews,
exact verification of stored pairs, item decisions, the tenant digest), so asking
them again changes nothing.  The master key is ``service_helpers.FIXED_MASTER_KEY``;
the operator token, the key file (``d.keys.json``) and the producer keys of both
tenants (``d.producers.json``) sit beside the data directory in the archive.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from neardup.testing import plant_near_duplicates, synthetic_documents  # noqa: E402
from service_helpers import Server, producer  # noqa: E402

TENANTS = {
    "t1": {"threshold": 0.7, "shingle": "word:3", "num_perm": 64, "bands": 16, "rows": 4},
    "t2": {"threshold": 0.8, "shingle": "char:5", "num_perm": 64, "bands": 16, "rows": 4},
}
# Fields of an answer that describe the request, not the catalogue's state (none
# of these appear today; named so that adding one later does not break the record).
VOLATILE = frozenset({"request_id", "timings_s", "elapsed_ms", "elapsed_s", "latency_ms"})


def corpus(tenant: str) -> list[str]:
    n = 40 if tenant == "t1" else 14
    base = synthetic_documents(n, seed=31 if tenant == "t1" else 32, words=40)
    texts, _ = plant_near_duplicates(base, copies=n // 2, edit_rate=[0.0, 0.05, 0.1], seed=33)
    return texts


def probes(tenant: str) -> list[str]:
    texts = corpus(tenant)
    edited = [" ".join(t.split()[:-2]) for t in texts[:6]]
    fresh = synthetic_documents(3, seed=34, words=40)
    return [*texts[:4], *edited, *fresh]


def clean(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list):
        return [clean(v) for v in x]
    return x


def answers(srv: Server, operator: str, producers: dict[str, str]) -> dict[str, Any]:
    """The read-only answers the test compares, per tenant."""
    out: dict[str, Any] = {}
    with srv.client(operator) as op:
        for t in TENANTS:
            got: dict[str, Any] = {"digest": op.get(f"/v1/tenants/{t}/digest").json()["digest"]}
            texts = corpus(t)
            with srv.client(producers[t]) as p:
                for i, text in enumerate(probes(t)):
                    r = p.post(f"/v1/tenants/{t}/candidates", json={"content": text})
                    got[f"candidates-{i}"] = [r.status_code, clean(r.json())]
                    pair = {"left": f"i{i:03d}", "right": f"i{(i * 7 + 1) % len(texts):03d}"}
                    r = p.post(f"/v1/tenants/{t}/verify", json=pair)
                    got[f"verify-{i}"] = [r.status_code, clean(r.json())]
                for i in range(len(texts)):
                    r = p.get(f"/v1/tenants/{t}/items/i{i:03d}/decision")
                    got[f"decision-i{i:03d}"] = [r.status_code, clean(r.json())]
            out[t] = got
    return out


def build(root: Path) -> dict[str, Any]:
    data = root / "d"
    srv = Server(data, operator_tenants=tuple(TENANTS)).start()
    tokens: dict[str, str] = {}
    try:
        with srv.client(srv.operator_token) as op:
            for t, cfg in TENANTS.items():
                op.put(f"/v1/tenants/{t}", json=cfg).raise_for_status()
                with producer(srv, op, t) as p:
                    tokens[t] = str(p.headers["Authorization"]).removeprefix("Bearer ")
                    for i, text in enumerate(corpus(t)):
                        r = p.post(
                            f"/v1/tenants/{t}/items", json={"item_id": f"i{i:03d}", "content": text}
                        )
                        r.raise_for_status()
                    if t == "t1":
                        for i in (0, 7, 41):
                            p.delete(f"/v1/tenants/{t}/items/i{i:03d}").raise_for_status()
            op.post("/v1/tenants/t1/snapshot").raise_for_status()
    finally:
        srv.stop()
    # Answered by a restarted server, as the test's will be: work counters such as
    # bucket_entries_scanned differ between a live index (tombstoned entries still
    # in their buckets) and one reopened from the store.
    srv = Server(data, operator_tenants=tuple(TENANTS)).start()
    try:
        got = answers(srv, srv.operator_token, tokens)
    finally:
        srv.stop()
    (root / "d.producers.json").write_text(json.dumps(tokens, sort_keys=True))
    return got


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        got = build(root)
        archive = HERE / "service-golden.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            for name in ("d", "d.keys.json", "d.master.key", "d.token", "d.producers.json"):
                tar.add(root / name, arcname=name)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    record = {"recorded_at": commit, "answers": got}
    (HERE / "service-golden.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(archive, sum(len(v) for v in got.values()), "answers")


if __name__ == "__main__":
    main()

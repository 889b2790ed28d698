"""The service a team would build instead: datasketch ``MinHashLSH`` in process behind
the same HTTP routes as ``neardup serve`` (upsert and candidates, exact Jaccard over
Python shingle sets).  No auth, no durability, no encryption: it does strictly less
work than neardup per request.  Used by ``bench_service.py``.

    python benchmarks/_datasketch_service.py --corpus texts.jsonl --port 8740 --ready F
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import NUM_PERM, SEED, py_shingles


def build(corpus: str, threshold: float, k: int) -> tuple[Any, dict[str, set[str]], dict[str, Any]]:
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=threshold, num_perm=NUM_PERM)
    sets: dict[str, set[str]] = {}
    t0, c0 = time.perf_counter(), time.process_time()
    batch: list[tuple[str, list[bytes]]] = []

    def flush() -> None:
        mhs = MinHash.bulk([b for _, b in batch], num_perm=NUM_PERM, seed=SEED)
        with lsh.insertion_session() as s:
            for (key, _), m in zip(batch, mhs, strict=True):
                s.insert(key, m)
        batch.clear()

    with open(corpus, encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            sh = py_shingles(rec["text"], k)
            sets[rec["id"]] = set(sh)
            batch.append((rec["id"], [s.encode() for s in sh]))
            if len(batch) >= 10_000:
                flush()
    if batch:
        flush()
    info = {
        "preload_s": time.perf_counter() - t0,
        "preload_cpu_s": time.process_time() - c0,
        "items": len(sets),
        "layout_bands_rows": [lsh.b, lsh.r],
    }
    return lsh, sets, info


def app(lsh: Any, sets: dict[str, set[str]], threshold: float, k: int) -> Any:
    from datasketch import MinHash
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    lock = threading.Lock()

    def work(body: dict[str, Any], insert: bool, limit: int) -> dict[str, Any]:
        sh = py_shingles(body["content"], k)
        m = MinHash(num_perm=NUM_PERM, seed=SEED)
        m.update_batch([s.encode() for s in sh])
        mine = set(sh)
        with lock:
            keys = lsh.query(m)
            out = []
            for key in keys:
                other = sets[key]
                inter = len(mine & other)
                union = len(mine) + len(other) - inter
                out.append({"item_id": key, "score": inter / union if union else 1.0})
            out.sort(key=lambda c: (-c["score"], c["item_id"]))
            if insert:
                if body["item_id"] not in sets:
                    lsh.insert(body["item_id"], m)
                sets[body["item_id"]] = mine
        best = out[0]["score"] if out else None
        state = "duplicate" if best is not None and best >= threshold else "unique"
        return {"candidates": out[:limit], "decision": {"state": state}}

    async def upsert(request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        return JSONResponse(await run_in_threadpool(work, body, True, 100))

    async def candidates(request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        return JSONResponse(await run_in_threadpool(work, body, False, body.get("limit", 10)))

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route("/v1/tenants/{tenant}/items", upsert, methods=["POST"]),
            Route("/v1/tenants/{tenant}/candidates", candidates, methods=["POST"]),
        ]
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--ready", required=True, help="file to write preload stats to")
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--k", type=int, default=5)
    a = ap.parse_args()
    import uvicorn

    lsh, sets, info = build(a.corpus, a.threshold, a.k)
    Path(a.ready).write_text(json.dumps(info))
    uvicorn.run(
        app(lsh, sets, a.threshold, a.k), host="127.0.0.1", port=a.port, log_level="warning"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The service under load: ``neardup serve`` vs datasketch ``MinHashLSH`` behind the same API.

One tenant is preloaded with N paragraph-sized items (default 1,000,000; synthetic
50-word paragraphs), then a real ``neardup serve`` process is started over that
data directory and driven over loopback HTTP by an asyncio load generator:

* ``upsert_closed`` / ``candidates_closed`` — C concurrent clients for S seconds:
  throughput and latency percentiles;
* ``mixed_open`` — an open-loop schedule (upserts at ``--upsert-rate``/s plus
  candidates at ``--query-rate``/s); latency is measured from each request's
  scheduled time, so queueing counts (no coordinated omission);
* recall — planted near copies of stored items (exact Jaccard >= threshold) must
  come back with their source among the candidates.

The same phases run against ``_datasketch_service.py`` (datasketch ``MinHashLSH``
in process, exact Jaccard over Python sets; no auth, durability or encryption).
Server CPU seconds come from /proc, so throughput is also given per server core.
Both servers and the load generator share this machine's cores.

    python benchmarks/bench_service.py                       # 1M items (~30 min)
    python benchmarks/bench_service.py --quick --out /tmp/s.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info, write_results

HERE = Path(__file__).resolve().parent
THRESHOLD = 0.8
TENANT_CFG = {
    "threshold": THRESHOLD,
    "shingle": "word:5",
    "bands": 32,
    "rows": 4,
    "rate_per_s": 1e7,
    "burst": 10**8,
    "max_items": 10**9,
}


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _mem(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            out[line.split(":")[0]] = int(line.split()[1]) * 1024
    return out


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _wait(url: str, proc: subprocess.Popen[bytes], timeout: float = 3600) -> float:
    import httpx

    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return time.perf_counter() - t0
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError("server did not start")


def _pct(lat: list[float]) -> dict[str, float | None]:
    if not lat:
        return {"p50_ms": None, "p90_ms": None, "p99_ms": None, "max_ms": None}
    a = np.array(lat) * 1000
    return {
        "p50_ms": round(float(np.percentile(a, 50)), 3),
        "p90_ms": round(float(np.percentile(a, 90)), 3),
        "p99_ms": round(float(np.percentile(a, 99)), 3),
        "max_ms": round(float(a.max()), 3),
    }


class RawClient:
    """Minimal HTTP/1.1 keep-alive client over asyncio streams (the load generator must
    not be the bottleneck: httpx spends ~2 ms of CPU per request, this ~0.1 ms)."""

    def __init__(self, host: str, port: int, headers: dict[str, str]) -> None:
        self.host, self.port = host, port
        self.extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        data = json.dumps(body).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n{self.extra}\r\n"
        ).encode()
        self.writer.write(head + data)
        reader = self.reader
        if reader is None:  # pragma: no cover - set with the writer above
            raise RuntimeError("not connected")
        status_line = await reader.readline()
        length = 0
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b""):
                break
            k, _, v = line.decode("latin-1").partition(":")
            if k.lower() == "content-length":
                length = int(v)
        payload = await reader.readexactly(length)
        return int(status_line.split()[1]), payload

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def _hostport(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


class Load:
    """Request makers for one system (same bodies for both)."""

    def __init__(
        self, fresh: list[str], queries: list[str], headers: dict[str, str], run: str = ""
    ) -> None:
        self.fresh = fresh
        self.queries = queries
        self.headers = headers
        self.n_new = 0
        # Ids and texts unique to this run: a reused data folder must see real inserts,
        # not "unchanged" answers to the previous run's items.
        self.run = run

    def upsert(self) -> tuple[str, dict[str, Any]]:
        i = self.n_new
        self.n_new += 1
        return "/v1/tenants/t1/items", {
            "item_id": f"new-{self.run}{i}",
            "content": self.fresh[i % len(self.fresh)] + f" n{self.run}{i}",
        }

    def query(self) -> tuple[str, dict[str, Any]]:
        return "/v1/tenants/t1/candidates", {"content": random.choice(self.queries), "limit": 10}


async def _closed(
    url: str,
    load: Load,
    make: Callable[[], tuple[str, dict[str, Any]]],
    seconds: float,
    conc: int,
    pid: int,
) -> dict[str, Any]:
    lat: list[float] = []
    errors = 0
    host, port = _hostport(url)
    clients = [RawClient(host, port, load.headers) for _ in range(conc)]
    end = time.perf_counter() + seconds
    cpu0, c0 = _cpu_s(pid), time.process_time()

    async def worker(client: RawClient) -> None:
        nonlocal errors
        while time.perf_counter() < end:
            path, body = make()
            t = time.perf_counter()
            status, _ = await client.post(path, body)
            lat.append(time.perf_counter() - t)
            errors += status != 200
        await client.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in clients))
    wall = time.perf_counter() - t0
    cpu = _cpu_s(pid) - cpu0
    return {
        "requests": len(lat),
        "errors": errors,
        "wall_s": round(wall, 3),
        "per_s": round(len(lat) / wall, 1),
        "server_cpu_s": round(cpu, 2),
        "per_server_cpu_s": round(len(lat) / cpu, 1) if cpu else None,
        "loadgen_cpu_s": round(time.process_time() - c0, 2),
        **_pct(lat),
    }


async def _open(
    url: str,
    load: Load,
    seconds: float,
    up_rate: float,
    q_rate: float,
    pid: int,
    max_conns: int = 256,
) -> dict[str, Any]:
    sched: list[tuple[float, str]] = []
    for rate, kind in ((up_rate, "upsert"), (q_rate, "query")):
        sched += [(i / rate, kind) for i in range(int(seconds * rate))]
    sched.sort()
    lat: dict[str, list[float]] = {"upsert": [], "query": []}
    errors = 0
    host, port = _hostport(url)
    pool: list[RawClient] = [RawClient(host, port, load.headers) for _ in range(64)]
    start = time.perf_counter() + 0.2
    cpu0, c0 = _cpu_s(pid), time.process_time()

    # At most max_conns requests in flight: beyond that a request waits for a free
    # connection, and its latency still counts from its scheduled time (queueing is
    # measured, not hidden); unbounded connections would only exhaust descriptors.
    free = asyncio.Semaphore(max_conns)

    async def one(at: float, kind: str) -> None:
        nonlocal errors
        async with free:
            client = pool.pop() if pool else RawClient(host, port, load.headers)
            path, body = load.upsert() if kind == "upsert" else load.query()
            try:
                status, _ = await client.post(path, body)
            except (OSError, IndexError, asyncio.IncompleteReadError):
                errors += 1
                await client.close()
                return
            lat[kind].append(time.perf_counter() - (start + at))
            errors += status != 200
            pool.append(client)

    tasks = []
    for at, kind in sched:
        delay = start + at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(at, kind)))
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - start
    cpu = _cpu_s(pid) - cpu0
    for c in pool:
        await c.close()
    return {
        "target_upserts_per_s": up_rate,
        "target_queries_per_s": q_rate,
        "achieved_upserts_per_s": round(len(lat["upsert"]) / wall, 1),
        "errors": errors,
        "wall_s": round(wall, 2),
        "server_cpu_s": round(cpu, 2),
        "loadgen_cpu_s": round(time.process_time() - c0, 2),
        "upsert": _pct(lat["upsert"]),
        "candidates": _pct(lat["query"]),
    }


def _recall(url: str, headers: dict[str, str], probes: list[tuple[str, str]]) -> dict[str, Any]:
    import httpx

    hit = 0
    with httpx.Client(base_url=url, headers=headers, timeout=60) as c:
        for text, parent in probes:
            r = c.post("/v1/tenants/t1/candidates", json={"content": text, "limit": 100}).json()
            hit += any(x["item_id"] == parent and x["score"] >= THRESHOLD for x in r["candidates"])
    return {"probes": len(probes), "found": hit, "recall": round(hit / max(len(probes), 1), 5)}


def _phases(url: str, load: Load, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    # Warm-up (not recorded): first calls load compiled kernels and fill caches.
    warm = min(3.0, a.seconds)
    asyncio.run(_closed(url, load, load.upsert, warm, a.concurrency, pid))
    asyncio.run(_closed(url, load, load.query, warm, a.concurrency, pid))
    out["upsert_closed"] = asyncio.run(
        _closed(url, load, load.upsert, a.seconds, a.concurrency, pid)
    )
    out["candidates_closed"] = asyncio.run(
        _closed(url, load, load.query, a.seconds, a.concurrency, pid)
    )
    out["mixed_open"] = asyncio.run(_open(url, load, a.seconds, a.upsert_rate, a.query_rate, pid))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--items", type=int, default=1_000_000)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument(
        "--upsert-rate",
        type=float,
        default=500.0,
        help="open-loop upserts/s: the 500/s-per-core target for one server process "
        "(a tenant is served by one Python process, about one core)",
    )
    ap.add_argument("--query-rate", type=float, default=100.0)
    ap.add_argument("--probes", type=int, default=2000)
    ap.add_argument("--skip-datasketch", action="store_true")
    ap.add_argument("--quick", action="store_true", help="tiny run (smoke test)")
    ap.add_argument("--out", default=str(HERE / "results" / "service.json"))
    ap.add_argument("--work", default=None, help="working folder (default: a temp dir)")
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="reuse the neardup data folder already preloaded in --work (same --items): "
        "skips the preload, issues a fresh producer key",
    )
    a = ap.parse_args(argv)
    if a.quick:
        a.items, a.seconds, a.probes, a.upsert_rate, a.query_rate = 3000, 1.5, 100, 100.0, 20.0

    from neardup import Config, ShingleSpec, hash_documents
    from neardup.service.manager import Service, ServiceConfig
    from neardup.testing import plant_near_duplicates, synthetic_documents

    results: dict[str, Any] = {
        "benchmark": "service",
        "machine": machine_info(),
        "params": {**vars(a), "tenant_config": TENANT_CFG},
    }
    work = Path(a.work or tempfile.mkdtemp(prefix="nd-bench-svc-", dir=str(HERE.parent)))
    work.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        base = synthetic_documents(a.items, seed=20240610, words=50)
        # A reused data folder already holds earlier runs' new items: draw new texts.
        fresh_seed = 20240611 + (int(time.time()) % 10**6 if a.reuse else 0)
        fresh = synthetic_documents(max(a.items // 10, 2000), seed=fresh_seed, words=50)
        near, parents = plant_near_duplicates(
            base[: min(len(base), 200_000)],
            copies=4 * a.probes,
            edit_rate=[0.0, 0.02, 0.04],
            seed=20240612,
        )
        copies = near[min(len(base), 200_000) :]
        parents = parents[min(len(base), 200_000) :]
        cfg = Config(threshold=THRESHOLD, shingle=ShingleSpec(k=5))
        sets = hash_documents([*copies, *[base[p] for p in parents]], cfg)
        m = len(copies)
        probes = [
            (copies[i], f"b{parents[i]}") for i in range(m) if sets.jaccard(i, m + i) >= THRESHOLD
        ][: a.probes]
        queries = copies[: max(len(copies) // 2, 1)] + fresh[:1000]
        results["corpus"] = {
            "items": a.items,
            "words_per_item": 50,
            "build_s": round(time.perf_counter() - t0, 2),
            "probes_j_ge_t": len(probes),
        }
        print(f"corpus ready: {a.items} items, {len(probes)} recall probes", flush=True)

        # -- neardup: preload through the library (the server's own code path) ----
        data = work / "data"
        scfg = ServiceConfig(
            data_dir=str(data),
            master_key_file=str(work / "master.key"),
            keys_file=str(work / "keys.json"),
        )
        pre_file = work / "preload.json"
        if a.reuse and data.exists():
            from neardup.service.auth import Keyring

            ring = Keyring.load(scfg.keys_file)
            prod_token = ring.add("producer", ["t1"])
            ring.save(scfg.keys_file)
            pre = json.loads(pre_file.read_text()) if pre_file.exists() else {}
            pre["reused_preload"] = True
            pre["disk_bytes"] = _du(data)
            pre["disk_bytes_per_item"] = round(pre["disk_bytes"] / a.items, 1)
            print(f"neardup preload reused: {pre}", flush=True)
        else:
            svc, op_token = Service.init(scfg, operator_tenants=["t1"])
            op = svc.keyring.authenticate(f"Bearer {op_token}")
            svc.create_tenant(op, "t1", TENANT_CFG)
            prod_token = svc.add_key(op, "producer", ["t1"])
            tenant = svc.tenants()["t1"]
            t0, c0 = time.perf_counter(), time.process_time()
            for i, text in enumerate(base):
                tenant.upsert(item_id=f"b{i}", content=text)
                if i and i % 100_000 == 0:
                    print(f"  neardup preload {i} ({i / (time.perf_counter() - t0):.0f}/s)", flush=True)
            pre = {
                "preload_s": round(time.perf_counter() - t0, 2),
                "preload_cpu_s": round(time.process_time() - c0, 2),
            }
            stats = tenant.stats()
            svc.close()
            pre["per_s"] = round(a.items / pre["preload_s"], 1)
            pre["index_bytes_per_item"] = round(stats["index_bytes_per_item"], 1)
            pre["disk_bytes"] = _du(data)
            pre["disk_bytes_per_item"] = round(pre["disk_bytes"] / a.items, 1)
            print(f"neardup preload: {pre}", flush=True)
            pre_file.write_text(json.dumps(pre))

        port = _free_port()
        log = open(work / "neardup.log", "wb")  # noqa: SIM115
        exe = shutil.which("neardup") or str(Path(sys.executable).parent / "neardup")
        proc = subprocess.Popen(
            [
                exe,
                "serve",
                "--data-dir",
                str(data),
                "--port",
                str(port),
                "--master-key-file",
                scfg.master_key_file,
                "--keys-file",
                scfg.keys_file,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            pre["startup_s"] = round(_wait(url, proc), 2)
            pre["startup_cpu_s"] = round(_cpu_s(proc.pid), 2)
            pre["rss_after_start_bytes"] = _mem(proc.pid)["VmRSS"]
            run_tag = f"r{int(time.time())}-"
            load = Load(fresh, queries, {"Authorization": f"Bearer {prod_token}"}, run_tag)
            nd = {"preload": pre, **_phases(url, load, proc.pid, a)}
            nd["recall"] = _recall(url, load.headers, probes)
            nd["memory"] = _mem(proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
            log.close()
        results["neardup"] = nd
        print(json.dumps(nd, indent=1), flush=True)

        # -- datasketch behind the same API ---------------------------------------
        if not a.skip_datasketch:
            corpus = work / "corpus.jsonl"
            with open(corpus, "w", encoding="utf-8") as fh:
                for i, text in enumerate(base):
                    fh.write(json.dumps({"id": f"b{i}", "text": text}) + "\n")
            del base
            ready = work / "ds.ready"
            port = _free_port()
            log = open(work / "datasketch.log", "wb")  # noqa: SIM115
            proc = subprocess.Popen(
                [
                    sys.executable,
                    str(HERE / "_datasketch_service.py"),
                    "--corpus",
                    str(corpus),
                    "--port",
                    str(port),
                    "--ready",
                    str(ready),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            url = f"http://127.0.0.1:{port}"
            try:
                _wait(url, proc)
                info = json.loads(ready.read_text())
                info["rss_after_start_bytes"] = _mem(proc.pid)["VmRSS"]
                info["per_s"] = round(a.items / info["preload_s"], 1)
                load = Load(fresh, queries, {}, run_tag)
                ds = {"preload": info, **_phases(url, load, proc.pid, a)}
                ds["recall"] = _recall(url, {}, probes)
                ds["memory"] = _mem(proc.pid)
            finally:
                proc.terminate()
                proc.wait(timeout=60)
                log.close()
            results["datasketch"] = ds
            print(json.dumps(ds, indent=1), flush=True)
            results["ratios"] = _ratios(nd, ds)
        pl = nd["preload"]
        results["cost_per_million_items"] = {
            "neardup_preload_cpu_s": (
                round(pl["preload_cpu_s"] * 1e6 / a.items, 1) if "preload_cpu_s" in pl else None
            ),
            "neardup_disk_bytes": int(pl["disk_bytes"] * 1e6 / a.items),
            "neardup_server_rss_bytes": int(pl["rss_after_start_bytes"] * 1e6 / a.items),
            "neardup_index_bytes": (
                int(pl["index_bytes_per_item"] * 1e6) if "index_bytes_per_item" in pl else None
            ),
        }
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    write_results(Path(a.out), results)
    return 0


def _ratios(nd: dict[str, Any], ds: dict[str, Any]) -> dict[str, Any]:
    def r(x: float | None, y: float | None) -> float | None:
        return round(x / y, 3) if x and y else None

    return {
        "upsert_throughput_neardup_over_datasketch": r(
            nd["upsert_closed"]["per_s"], ds["upsert_closed"]["per_s"]
        ),
        "candidates_throughput_neardup_over_datasketch": r(
            nd["candidates_closed"]["per_s"], ds["candidates_closed"]["per_s"]
        ),
        "candidates_p99_datasketch_over_neardup": r(
            ds["candidates_closed"]["p99_ms"], nd["candidates_closed"]["p99_ms"]
        ),
        "rss_datasketch_over_neardup": r(ds["memory"]["VmRSS"], nd["memory"]["VmRSS"]),
        "peak_rss_datasketch_over_neardup": r(ds["memory"]["VmHWM"], nd["memory"]["VmHWM"]),
        "preload_datasketch_s_over_neardup_s": r(
            ds["preload"]["preload_s"], nd["preload"]["preload_s"]
        ),
    }


if __name__ == "__main__":
    sys.exit(main())

"""Where a server's CPU goes per request: closed-loop phases + optional py-spy profile.

Starts ``neardup serve`` over a *copy* of a cached data folder (``service_data.py``),
drives one request kind at a fixed concurrency with the raw keep-alive client of
``bench_service.py`` (~0.1 ms of client CPU per request) and reports requests/s and
server CPU per request (from /proc, all server processes).  With ``--py-spy`` the
server is sampled during the phase (``py-spy record --gil``: the thread holding
the GIL, i.e. where the Python time goes; raw collapsed stacks) and the stacks are
summarized by leaf frame and by stage.  ``--matrix`` runs a fixed set of phases and
also times each stage of the library call in process (cProfile, no HTTP), writing
``results/service_cpu.json``.

Content modes:

* ``fresh`` — new synthetic 50-word paragraphs (the corpus generator, other seeds):
  a few band candidates each, what ``bench_service.py`` sends;
* ``near`` — stored paragraphs with 2 of 50 words replaced: every upsert finds and
  verifies its source (exact Jaccard of word 5-grams ~0.64, mostly below 0.8);
* ``template`` — one 50-word template with 2 words changed per item: every item
  shares bands with hundreds of stored ones (max_candidates verified per request).

    python benchmarks/profile_service.py --data 100000x1 --kind upsert -c 32 --mode fresh
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_service import RawClient, _free_port, _pct, _wait
from service_data import ROOT, documents

HERE = Path(__file__).resolve().parent


def server_cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    return total


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            kids = []
        todo += [int(k) for k in kids]
    return out


def bodies(mode: str, kind: str, n: int, items: int, run: str) -> list[dict[str, Any]]:
    rng = random.Random(7)
    if mode == "fresh":
        texts = documents(10**8, 10**8 + n)
    elif mode == "near":
        src = documents(0, min(items, 20_000))
        texts = []
        for _ in range(n):
            words = rng.choice(src).split()
            for _ in range(2):
                words[rng.randrange(len(words))] = f"z{rng.randrange(10**6)}"
            texts.append(" ".join(words))
    else:
        base = documents(10**8 + 10**7, 10**8 + 10**7 + 1)[0].split()
        texts = []
        for _ in range(n):
            w = list(base)
            for _ in range(2):
                w[rng.randrange(len(w))] = f"z{rng.randrange(10**6)}"
            texts.append(" ".join(w))
    out = []
    for i, t in enumerate(texts):
        b: dict[str, Any] = {"content": t}
        if kind == "upsert":
            b["item_id"] = f"p-{run}-{i}"
        out.append(b)
    return out


async def closed(
    port: int, token: str, tenant: str, kind: str, reqs: list[dict[str, Any]], conc: int,
    seconds: float,
) -> tuple[list[float], int]:
    path = {
        "upsert": f"/v1/tenants/{tenant}/items",
        "candidates": f"/v1/tenants/{tenant}/candidates",
        "decide": f"/v1/tenants/{tenant}/decide",
    }[kind]
    lat: list[float] = []
    errors = 0
    it = iter(reqs)
    end = time.perf_counter() + seconds
    clients = [RawClient("127.0.0.1", port, {"Authorization": f"Bearer {token}"})
               for _ in range(conc)]

    async def worker(c: RawClient) -> None:
        nonlocal errors
        for body in it:
            if time.perf_counter() > end:
                break
            t = time.perf_counter()
            status, payload = await c.post(path, body)
            lat.append(time.perf_counter() - t)
            if status != 200:
                errors += 1
                if errors < 3:
                    print(status, payload[:300], file=sys.stderr)
        await c.close()

    await asyncio.gather(*(worker(c) for c in clients))
    return lat, errors


def summarize_pyspy(raw: Path, top: int = 25) -> dict[str, Any]:
    """Collapsed stacks -> share of samples by leaf function and by stage."""
    leaf: collections.Counter[str] = collections.Counter()
    stage: collections.Counter[str] = collections.Counter()
    total = 0
    stages = [
        ("fsync", ("fsync", "fdatasync")),
        ("json parse", ("json_body", "loads (json")),
        ("json render", ("render (starlette", "JSONResponse", "dumps (json")),
        ("auth", ("authenticate",)),
        ("prepare (normalize+hash+sign)", ("prepare (neardup/service/tenant/ingest",)),
        ("find: band index", ("query (neardup/service/online",)),
        ("find: store reads+decrypt", ("features (neardup/service/store",)),
        ("find: exact jaccard", ("exact_scores (neardup/service/tenant/_state",)),
        ("explanation", ("_explain (neardup/service/tenant/query",)),
        ("command log write", ("write (neardup/service/cmdlog",)),
        ("store apply (SQLite)", ("apply_upsert (neardup/service/store", "apply_event (neardup/service/store")),
        ("index add", ("add (neardup/service/online",)),
        ("metrics", ("prometheus_client",)),
        ("event loop / uvicorn", ("uvicorn", "asyncio", "uvloop")),
        ("idle wait", ("wait (threading", "_wait_for_tstate_lock", "get (queue", "select",
                       "epoll", "run_forever")),
    ]
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        k = int(n)
        total += k
        frames = stack.split(";")
        leaf[frames[-1]] += k
        for name, marks in stages:
            if any(m in stack for m in marks):
                stage[name] += k
                break
        else:
            stage["other"] += k
    return {
        "samples": total,
        "by_stage": {k: round(v / total, 4) for k, v in stage.most_common()},
        "top_leaf": {k: round(v / total, 4) for k, v in leaf.most_common(top)},
    }


STAGES = {
    "prepare: normalize + keyed hash + signature": "ingest.py:prepare",
    "find: band index + store reads + exact Jaccard": "query.py:find",
    "  of which store reads + AES-GCM open": "store.py:features",
    "  of which exact Jaccard (intersect1d)": "_state.py:exact_scores",
    "decision (policy, explanation)": "query.py:decision",
    "  of which explanation spans": "query.py:_explain",
    "command log write (encode + seal + write)": "cmdlog.py:write",
    "store apply (SQLite + seal)": "recovery.py:_apply",
    "fsync (group commit)": "cmdlog.py:sync",
}


def inprocess(data: Path, kind: str, mode: str, n: int) -> dict[str, Any]:
    """The library part of one request, without HTTP: CPU per operation (no profiler),
    then cumulative time per stage under cProfile (one thread: batched writes off)."""
    import cProfile
    import pstats

    from neardup.service.manager import Service, ServiceConfig

    info = json.loads((data / "build.json").read_text())
    tenant = info["tenants"][0]
    work = Path(tempfile.mkdtemp(prefix="nd-prof-", dir="/tmp"))
    try:
        shutil.copytree(data, work / "d")
        svc = Service(ServiceConfig(
            data_dir=str(work / "d" / "data"), master_key_file=str(work / "d" / "master.key"),
            keys_file=str(work / "d" / "keys.json"),
        ))
        svc.tenants()[tenant]._batch_writes = False
        p = svc.keyring.authenticate("Bearer " + info["producer_tokens"][tenant])
        fn = {"upsert": svc.upsert, "candidates": svc.candidates, "decide": svc.decide}[kind]
        reqs = bodies(mode, kind, 2 * n + 100, info["items"], f"ip{int(time.time())}")
        for b in reqs[:100]:
            fn(p, tenant, b)
        c0, verified = time.process_time(), 0
        for b in reqs[100 : 100 + n]:
            verified += fn(p, tenant, b).get("candidates_verified", 0)
        cpu = (time.process_time() - c0) / n
        prof = cProfile.Profile()
        prof.enable()
        for b in reqs[100 + n :]:
            fn(p, tenant, b)
        prof.disable()
        svc.close()
        st = pstats.Stats(prof).stats  # type: ignore[attr-defined]
        cum: dict[str, float] = {}
        for (file, _, func), (_, _, _, ct, _) in st.items():
            key = f"{Path(file).name}:{func}"
            cum[key] = cum.get(key, 0.0) + ct
        return {
            "kind": kind, "mode": mode, "ops": n,
            "cpu_ms_per_op": round(1000 * cpu, 3),
            "verified_candidates_per_op": round(verified / n, 1),
            "profiled_ms_per_op": {k: round(1000 * cum.get(v, 0.0) / n, 3)
                                   for k, v in STAGES.items()},
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


MATRIX = [
    ("upsert", "fresh", 1), ("upsert", "fresh", 32), ("upsert", "near", 32),
    ("upsert", "template", 1), ("upsert", "template", 32),
    ("candidates", "near", 1), ("candidates", "near", 16), ("decide", "near", 16),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", default="100000x1", help="cached folder under --root")
    ap.add_argument("--root", default=str(ROOT))
    ap.add_argument("--kind", choices=["upsert", "candidates", "decide"], default="upsert")
    ap.add_argument("--mode", choices=["fresh", "near", "template"], default="fresh")
    ap.add_argument("-c", "--concurrency", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--py-spy", action="store_true")
    ap.add_argument("--native", action="store_true", help="py-spy --native")
    ap.add_argument("--serve-arg", action="append", default=[])
    ap.add_argument("--out", default=None)
    ap.add_argument("--matrix", action="store_true",
                    help="every (kind, mode, concurrency) of MATRIX over HTTP, and each "
                    "(kind, mode) in process; writes --out (default results/service_cpu.json)")
    a = ap.parse_args(argv)
    if a.matrix:
        from _common import machine_info, write_results

        res: dict[str, Any] = {"benchmark": "service_cpu", "machine": machine_info(),
                               "params": {"data": a.data, "seconds": a.seconds}}
        res["http"] = []
        for kind, mode, conc in MATRIX:
            one = ["--data", a.data, "--root", a.root, "--kind", kind, "--mode", mode,
                   "-c", str(conc), "--seconds", str(a.seconds), "--out", "/dev/null"]
            res["http"].append(_profile(ap.parse_args(one)))
            print(json.dumps(res["http"][-1]), flush=True)
        res["in_process"] = []
        for kind, mode in dict.fromkeys((k, m) for k, m, _ in MATRIX):
            res["in_process"].append(inprocess(Path(a.root) / a.data, kind, mode, 300))
            print(json.dumps(res["in_process"][-1]), flush=True)
        write_results(Path(a.out or HERE / "results" / "service_cpu.json"), res)
        return 0
    out = _profile(a)
    print(json.dumps(out, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


def _profile(a: argparse.Namespace) -> dict[str, Any]:

    src = Path(a.root) / a.data
    info = json.loads((src / "build.json").read_text())
    tenant = info["tenants"][0]
    work = Path(tempfile.mkdtemp(prefix="nd-prof-", dir="/tmp"))
    try:
        shutil.copytree(src, work / "d", symlinks=True)
        port = _free_port()
        exe = shutil.which("neardup") or str(Path(sys.executable).parent / "neardup")
        log = open(work / "server.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            [exe, "serve", "--data-dir", str(work / "d" / "data"), "--port", str(port),
             "--master-key-file", str(work / "d" / "master.key"),
             "--keys-file", str(work / "d" / "keys.json"),
             *(["--workers", str(a.workers)] if a.workers != 1 else []), *a.serve_arg],
            stdout=log, stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            startup = _wait(url, proc)
            token = info["producer_tokens"][tenant]
            run = f"{int(time.time())}"
            n = int(3000 * (a.seconds + a.warmup)) + 1000
            reqs = bodies(a.mode, a.kind, n, info["items"], run)
            warm, rest = reqs[: 2000], reqs[2000:]
            asyncio.run(closed(port, token, tenant, a.kind, warm, a.concurrency, a.warmup))
            pids = tree(proc.pid)
            spy = None
            if a.py_spy:
                spy_out = work / "spy.txt"
                cmd = [str(Path(sys.executable).parent / "py-spy"), "record", "--format", "raw",
                       "--gil", "--threads", "-r", "200", "-d", str(int(a.seconds)),
                       "-o", str(spy_out), "--pid", str(pids[-1])]
                if a.native:
                    cmd.append("--native")
                spy = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                time.sleep(1.0)
            cpu0, w0 = server_cpu(pids), time.perf_counter()
            lat, errors = asyncio.run(
                closed(port, token, tenant, a.kind, rest, a.concurrency, a.seconds)
            )
            wall, cpu = time.perf_counter() - w0, server_cpu(pids) - cpu0
            out: dict[str, Any] = {
                "data": a.data, "kind": a.kind, "mode": a.mode, "concurrency": a.concurrency,
                "workers": a.workers, "startup_s": round(startup, 2),
                "requests": len(lat), "errors": errors, "per_s": round(len(lat) / wall, 1),
                "server_cpu_ms_per_request": round(1000 * cpu / max(len(lat), 1), 3),
                "server_cores_busy": round(cpu / wall, 2),
                **_pct(lat),
                "loadavg": [round(x, 2) for x in os.getloadavg()],
            }
            if spy is not None:
                spy.wait(timeout=a.seconds + 60)
                if spy_out.exists():
                    out["py_spy"] = summarize_pyspy(spy_out)
                    if a.out and a.out != "/dev/null":
                        shutil.copy(spy_out, Path(a.out).with_suffix(".spy.txt"))
                else:
                    out["py_spy_error"] = (spy.stderr.read() if spy.stderr else b"").decode()[-500:]
        finally:
            proc.terminate()
            proc.wait(timeout=60)
            log.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


if __name__ == "__main__":
    sys.exit(main())

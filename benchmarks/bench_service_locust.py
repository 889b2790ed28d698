"""``neardup serve`` under Locust: closed and open loops, p50/p95/p99 per request kind.

The data folder (default 1,000,000 synthetic 50-word paragraphs over 2 tenants,
32 bands x 4 rows, threshold 0.8) is built once by ``service_data.py`` and cached
under ``benchmarks/.service-data``; each server configuration runs on a fresh copy.
For each ``--workers`` value a real ``neardup serve --workers W`` is started and
driven by Locust (headless, one process, ``FastHttpUser``; users spread evenly
over the tenants):

* closed loop — for ``candidates``, ``decide`` and ``upsert``, at each of
  ``--users`` (default 1, 8, 16): every user sends its next request as soon as the
  answer arrives, for ``--seconds``;
* open loop — ``--open-users`` users sending on a fixed schedule (staggered, so
  requests arrive evenly at ``--open-rate`` per second in total, whatever the
  latency while fewer than ``--open-users`` are outstanding); latency is reported
  from each request's scheduled time (``from_schedule``: queueing included, no
  coordinated omission) next to the achieved rate.

Latency percentiles are exact (every request's time, recorded by the locustfile);
server CPU per request is read from /proc for the front and all workers.  Upserts
run last so that queries see exactly the built item count.  Locust and the server
share this machine's cores.

    python benchmarks/bench_service_locust.py                    # 1M items, workers 1 and 2
    python benchmarks/bench_service_locust.py --items 100000 --seconds 10 --out /tmp/l.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info, write_results
from bench_service import _free_port, _wait
from profile_service import server_cpu, tree
from service_data import ROOT, build

HERE = Path(__file__).resolve().parent

KINDS = ("candidates", "decide", "upsert")


def _pct(lat: list[float]) -> dict[str, float | None]:
    if not lat:
        return {"p50_ms": None, "p95_ms": None, "p99_ms": None, "max_ms": None}
    a = np.asarray(lat)
    return {
        "p50_ms": round(float(np.percentile(a, 50)), 2),
        "p95_ms": round(float(np.percentile(a, 95)), 2),
        "p99_ms": round(float(np.percentile(a, 99)), 2),
        "max_ms": round(float(a.max()), 2),
    }


def run_locust(
    url: str,
    kind: str,
    users: int,
    seconds: float,
    tenants: dict[str, str],
    items_per_tenant: int,
    server_pid: int,
    work: Path,
    rate: float = 0.0,
) -> dict[str, Any]:
    out_file = work / f"lat-{kind}-{users}-{int(rate)}.json"
    env = {
        **os.environ,
        "ND_KIND": kind,
        "ND_TENANTS": json.dumps(tenants),
        "ND_ITEMS": str(items_per_tenant),
        "ND_RATE": str(rate / users if rate else 0),
        "ND_USERS": str(users),
        "ND_OUT": str(out_file),
        "ND_RUN": f"{int(time.time() * 1000)}",
    }
    locust = str(Path(sys.executable).parent / "locust")
    cmd = [
        locust, "-f", str(HERE / "locustfile.py"), "--headless", "--only-summary",
        "--skip-log", "-u", str(users), "-r", str(max(users, 1) * 10),
        "-t", f"{max(1, int(seconds))}s", "-H", url, "--stop-timeout", "30",
    ]  # fmt: skip
    pids = tree(server_pid)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    cpu0, w0 = server_cpu(pids), time.perf_counter()
    ccpu = 0.0
    while proc.poll() is None:
        ccpu = max(ccpu, server_cpu([proc.pid]))  # the load generator's own CPU
        time.sleep(0.2)
    loc_out = proc.stdout.read() if proc.stdout else b""
    wall, cpu = time.perf_counter() - w0, server_cpu(pids) - cpu0
    if not out_file.exists():
        raise RuntimeError(f"locust wrote no results:\n{loc_out.decode()[-3000:]}")
    res = json.loads(out_file.read_text())
    lat = res["latencies_ms"].get(kind, [])
    errors = sum(res["errors"].values())
    out = {
        "loadavg_1m_after": round(os.getloadavg()[0], 2),
        "kind": kind,
        "users": users,
        "target_per_s": rate or None,
        "requests": len(lat),
        "errors": errors,
        # Over the span from the first request to the last answer (Locust's -t also
        # counts its start-up).
        "per_s": round(len(lat) / res["span_s"], 1),
        "server_cpu_ms_per_request": round(1000 * cpu / max(len(lat), 1), 3),
        "server_cores_busy": round(cpu / wall, 2),
        "locust_cpu_ms_per_request": round(1000 * ccpu / max(len(lat), 1), 3),
        **_pct(lat),
    }
    if rate:
        # Open loop: latency from each request's scheduled time (queueing included).
        out["from_schedule"] = _pct(res["scheduled_ms"])
    return out


def _start(
    data: Path, workers: int, log: Path, extra: list[str]
) -> tuple[subprocess.Popen[bytes], str, float]:
    port = _free_port()
    exe = shutil.which("neardup") or str(Path(sys.executable).parent / "neardup")
    fh = open(log, "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [exe, "serve", "--data-dir", str(data / "data"), "--port", str(port),
         "--master-key-file", str(data / "master.key"), "--keys-file", str(data / "keys.json"),
         "--workers", str(workers), *extra],
        stdout=fh, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    return proc, url, _wait(url, proc)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--items", type=int, default=1_000_000)
    ap.add_argument("--tenants", type=int, default=2)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--users", type=int, nargs="+", default=[1, 8, 16])
    ap.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--open-rate", type=float, nargs="+", default=[200.0, 100.0, 100.0],
                    help="open-loop requests/s per kind (candidates, decide, upsert)")
    ap.add_argument("--open-users", type=int, default=32)
    ap.add_argument("--warmup", type=float, default=5.0, help="seconds per kind, unrecorded")
    ap.add_argument("--quick", action="store_true",
                    help="tiny run (smoke test): 2,000 items, 1 and 2 users, 3 s per row")
    ap.add_argument("--root", default=str(ROOT))
    ap.add_argument("--serve-arg", action="append", default=[],
                    help="extra neardup serve argument (repeatable; use --serve-arg=--flag)")
    ap.add_argument("--out", default=str(HERE / "results" / "service_locust.json"))
    ap.add_argument("--append", action="store_true",
                    help="keep the runs of other --workers values already in --out")
    a = ap.parse_args(argv)
    if a.quick:
        a.items, a.users, a.seconds, a.warmup = 2000, [1, 2], 3.0, 2.0
        a.open_rate, a.open_users, a.workers = [20.0, 20.0, 20.0], 4, [2]

    results: dict[str, Any] = {
        "benchmark": "service_locust",
        "machine": machine_info(),
        "params": vars(a),
    }
    src = build(a.items, a.tenants, Path(a.root))
    info = json.loads((src / "build.json").read_text())
    results["data"] = {
        k: info[k]
        for k in ("items", "tenants", "items_per_tenant", "tenant_config", "words_per_item",
                  "build_s", "build_cpu_s")
    }  # fmt: skip
    per_tenant = a.items // a.tenants
    open_rate = dict(zip(KINDS, a.open_rate, strict=False))
    runs: list[dict[str, Any]] = []
    for workers in a.workers:
        work = Path(tempfile.mkdtemp(prefix="run-", dir=str(Path(a.root))))
        try:
            t0 = time.perf_counter()
            shutil.copytree(src, work / "d")
            copy_s = time.perf_counter() - t0
            proc, url, startup = _start(work / "d", workers, work / "server.log", a.serve_arg)
            print(f"workers={workers}: copied in {copy_s:.0f} s, started in {startup:.1f} s",
                  flush=True)
            try:
                pid = proc.pid
                # Warm-up (not recorded): compiled kernels, SQLite and page caches.
                for kind in a.kinds:
                    run_locust(
                        url, kind, 8, a.warmup, info["producer_tokens"], per_tenant, pid, work
                    )
                for kind in a.kinds:
                    for users in a.users:
                        r = run_locust(
                            url, kind, users, a.seconds, info["producer_tokens"], per_tenant,
                            pid, work,
                        )
                        r.update(workers=workers, loop="closed")
                        print(json.dumps(r), flush=True)
                        runs.append(r)
                    if kind in open_rate:
                        r = run_locust(
                            url, kind, a.open_users, a.seconds, info["producer_tokens"],
                            per_tenant, pid, work, rate=open_rate[kind],
                        )
                        r.update(workers=workers, loop="open")
                        print(json.dumps(r), flush=True)
                        runs.append(r)
            finally:
                proc.terminate()
                proc.wait(timeout=120)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    if a.append and Path(a.out).exists():
        old = json.loads(Path(a.out).read_text())
        runs = [r for r in old.get("runs", []) if r["workers"] not in a.workers] + runs
        results["earlier_runs_machine"] = old.get("machine")
    results["runs"] = sorted(runs, key=lambda r: (r["workers"], r["kind"], r["loop"], r["users"]))
    write_results(Path(a.out), results)
    return 0


if __name__ == "__main__":
    sys.exit(main())

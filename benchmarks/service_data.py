"""Build (once) and cache a service data folder for the load tests.

``bench_service_locust.py`` needs a ``neardup serve`` data folder holding many
items; loading them over HTTP (or one upsert at a time through the library, ~330/s
on this machine) takes most of an hour per million.  This script fills tenants
through the library in bulk instead: documents are normalized, hashed and signed
in batches by the batch kernels (the same functions ``Tenant.prepare`` calls for
one item, so the stored features and band keys are identical), then stored with
``Tenant.ingest`` (logged and applied like an upsert, without a decision event)
and fsynced once per batch.  The result is a normal data folder that
``neardup serve`` opens (index rebuilt from the store at start-up).

Layout under ``--root`` (default ``benchmarks/.service-data``, gitignored)::

    <name>/data/                  the data folder (tenants t0 .. t{K-1})
    <name>/master.key, keys.json  outside the data folder, as the service requires
    <name>/build.json             parameters, timings and API tokens (bench only)

Items are synthetic 50-word paragraphs (``neardup.testing.synthetic_documents``, the same
generator and seed as ``bench_service.py``), split over the tenants round-robin.

    python benchmarks/service_data.py --items 100000 --tenants 2
    python benchmarks/service_data.py --items 1000000 --tenants 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE / ".service-data"
SEED = 20240610
WORDS = 50
TENANT_CFG: dict[str, Any] = {
    "threshold": 0.8,
    "shingle": "word:5",
    "bands": 32,
    "rows": 4,
    "rate_per_s": 1e7,
    "burst": 10**8,
    "max_items": 10**9,
}


def folder_name(items: int, tenants: int) -> str:
    return f"{items}x{tenants}"


def tenant_ids(tenants: int) -> list[str]:
    return [f"t{i}" for i in range(tenants)]


def documents(start: int, stop: int) -> list[str]:
    """Documents ``start .. stop-1`` of the benchmark corpus (deterministic per index)."""
    from neardup.testing import synthetic_documents

    # One generator call per block of 10,000 keeps any slice reproducible without
    # generating everything before it.
    out: list[str] = []
    block = 10_000
    for b in range(start // block, (stop + block - 1) // block):
        docs = synthetic_documents(block, seed=SEED + b, words=WORDS)
        lo, hi = max(start, b * block), min(stop, (b + 1) * block)
        out += docs[lo - b * block : hi - b * block]
    return out


def _prepare_batch(tenant: Any, texts: list[str]) -> list[Any]:
    """``Tenant.prepare`` for many texts at once (same features and band keys)."""
    from neardup.service.online import fold_keys
    from neardup.service.tenant import Prepared
    from neardup.text.hashing import hash_encoded
    from neardup.text.normalize import EncodedTexts, encode_text

    norm = [tenant._norm(t) for t in texts]
    sets = hash_encoded(
        EncodedTexts.from_bytes([encode_text(n) for n in norm]), tenant.dedup, tenant.key, tenant.scheme
    )
    keys = fold_keys(tenant.hasher.from_sets(sets).band_keys())
    return [
        Prepared(sets.get(i).copy(), int(sets.content_hash[i]), keys[i].copy(), norm[i])
        for i in range(len(texts))
    ]


def build(items: int, tenants: int, root: Path = ROOT, batch: int = 20_000) -> Path:
    """Build ``root/<items>x<tenants>`` unless a finished build is there; returns it."""
    from neardup.service.manager import Service, ServiceConfig

    work = root / folder_name(items, tenants)
    info_file = work / "build.json"
    if info_file.exists():
        return work
    if work.exists():
        raise SystemExit(f"{work} exists without build.json (an interrupted build): remove it")
    work.mkdir(parents=True)
    cfg = ServiceConfig(
        data_dir=str(work / "data"),
        master_key_file=str(work / "master.key"),
        keys_file=str(work / "keys.json"),
    )
    names = tenant_ids(tenants)
    svc, op_token = Service.init(cfg, operator_tenants=names)
    op = svc.keyring.authenticate(f"Bearer {op_token}")
    producers = {}
    for t in names:
        svc.create_tenant(op, t, TENANT_CFG)
        producers[t] = svc.add_key(op, "producer", [t])
    t0, c0 = time.perf_counter(), time.process_time()
    done = 0
    for lo in range(0, items, batch):
        texts = documents(lo, min(items, lo + batch))
        for k, t in enumerate(names):
            tenant = svc.tenants()[t]
            mine = [(lo + i, x) for i, x in enumerate(texts) if (lo + i) % tenants == k]
            preps = _prepare_batch(tenant, [x for _, x in mine])
            for (i, _), prep in zip(mine, preps, strict=True):
                tenant.ingest(f"b{i}", prep, text=None)
            tenant.flush()
        done += len(texts)
        rate = done / (time.perf_counter() - t0)
        print(f"  {done:>9} items ({rate:.0f}/s)", flush=True)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    stats = {t: svc.tenants()[t].stats()["items"] for t in names}
    svc.close()
    info = {
        "items": items,
        "tenants": names,
        "items_per_tenant": stats,
        "tenant_config": TENANT_CFG,
        "words_per_item": WORDS,
        "seed": SEED,
        "build_s": round(wall, 1),
        "build_cpu_s": round(cpu, 1),
        "operator_token": op_token,
        "producer_tokens": producers,
        "master_key_file": cfg.master_key_file,
        "keys_file": cfg.keys_file,
        "data_dir": cfg.data_dir,
    }
    info_file.write_text(json.dumps(info, indent=1) + "\n")
    os.chmod(info_file, 0o600)
    return work


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--items", type=int, default=1_000_000)
    ap.add_argument("--tenants", type=int, default=2)
    ap.add_argument("--root", default=str(ROOT))
    a = ap.parse_args(argv)
    work = build(a.items, a.tenants, Path(a.root))
    print(json.dumps({k: v for k, v in json.loads((work / "build.json").read_text()).items()
                      if "token" not in k}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Disk used per stored item by a service tenant, and where the bytes go.

Upserts ``--items`` documents of three shapes into a fresh tenant each (through
the library, as a request would: decision, event, log record, store row), then
reports per item: bytes per file (command log, feature store) and, inside the
store, bytes per column (features, band keys, sealed ids, decision records) and
SQLite's own overhead (pages, indexes, free space).  Snapshots are not counted:
each is a copy of the store, ``snapshot_keep`` (3) of them are kept.

Shapes: ``prose`` (120-word synthetic paragraphs, ~800 bytes), ``records`` (short
templated tickets, ~90 bytes) and ``real`` (paragraphs of this machine's Python
sources and docs, median ~200 bytes; see ``corpus.py``).

    python benchmarks/disk_per_item.py --items 5000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import finish, machine_info  # noqa: E402
from corpus import real_paragraphs  # noqa: E402

from neardup.service._crypto import MasterSecret  # noqa: E402
from neardup.service.tenant import Tenant, TenantConfig  # noqa: E402
from neardup.testing import synthetic_documents  # noqa: E402

CFG = TenantConfig.from_dict({"threshold": 0.8, "shingle": "word:5", "bands": 32, "rows": 4})
COLUMNS = {
    "items": ["item_id", "features", "text", "bandkeys", "media_type", "source_time"],
    "events": ["item_id", "record"],
    "links": ["item_id", "canonical"],
    "idem": ["key", "body_sha", "response"],
}


def records(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    kinds = ["printer", "laptop", "VPN", "badge reader", "projector", "phone"]
    states = ["does not start", "shows error", "is slow", "drops the connection"]
    return [
        f"Ticket {rng.randrange(10**6)}: the {rng.choice(kinds)} on floor "
        f"{rng.randrange(1, 30)} {rng.choice(states)} E{rng.randrange(100, 999)} "
        f"since {rng.randrange(1, 28)} May, reported by user {rng.randrange(10**4)}."
        for _ in range(n)
    ]


def shapes(n: int) -> dict[str, list[str]]:
    real, _info = real_paragraphs(limit=n)
    return {
        "prose": synthetic_documents(n, seed=11, words=120),
        "records": records(n, seed=12),
        "real": real,
    }


def _file_sizes(root: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in root.iterdir():
        if p.is_file():
            kind = p.name.split("-")[0].split(".")[0]
            if p.name.endswith(("-wal", "-shm")):
                kind += "-" + p.name.rsplit("-", 1)[1]
            out[kind] = out.get(kind, 0) + p.stat().st_size
    return out


def measure(texts: list[str], master: MasterSecret) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d) / "t"
        t = Tenant.create(str(root), "t", CFG, master)
        start = time.perf_counter()
        for i, text in enumerate(texts):
            t.upsert(item_id=f"item-{i:07d}", content=text)
        elapsed = time.perf_counter() - start
        t.close()
        files = _file_sizes(root)
        store = next(root.glob("features-*.sqlite"))
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
            columns = {
                f"{table}.{c}": int(
                    db.execute(f"SELECT COALESCE(SUM(LENGTH({c})), 0) FROM {table}").fetchone()[0]
                )
                for table, cs in COLUMNS.items()
                for c in cs
            }
            page = int(db.execute("PRAGMA page_size").fetchone()[0])
            free = int(db.execute("PRAGMA freelist_count").fetchone()[0]) * page
    n = len(texts)
    per = {k: round(v / n, 1) for k, v in sorted(files.items())}
    cols = {k: round(v / n, 1) for k, v in columns.items() if v}
    payload = sum(columns.values())
    return {
        "items": n,
        "text_bytes_median": statistics.median(len(x.encode()) for x in texts),
        "upserts_per_s": round(n / elapsed, 1),
        "bytes_per_item_total": round(sum(files.values()) / n, 1),
        "bytes_per_item_by_file": per,
        "store_bytes_per_item_by_column": cols,
        "store_overhead_per_item": round((files.get("features", 0) - payload) / n, 1),
        "store_free_bytes": free,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=5000)
    ap.add_argument("--out", default=str(HERE / "results" / "disk_per_item.json"))
    args = ap.parse_args(argv)
    master = MasterSecret(os.urandom(32))
    out: dict[str, Any] = {
        "machine": machine_info(),
        "config": {"threshold": 0.8, "shingle": "word:5", "bands": 32, "rows": 4},
        "shapes": {},
    }
    for name, texts in shapes(args.items).items():
        out["shapes"][name] = r = measure(texts, master)
        print(name, json.dumps(r), flush=True)
    finish(out, out["machine"]["neardup_source_at_start"])
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Closing a tenant while a background exact audit scans it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from neardup._crypto import MasterSecret
from neardup.tenant import Tenant, TenantConfig

A = {"threshold": 0.75, "shingle": "word:2", "num_perm": 32, "bands": 32, "rows": 1}

WORDS = [
    *("amber", "basalt", "cobalt", "dune", "ember", "fjord", "granite", "harbor"),
    *("island", "jasper", "kelp", "lagoon", "meadow", "nectar", "orchid", "pebble"),
    *("quartz", "reef", "summit", "tundra", "umber", "valley", "willow", "yarrow"),
]


def _text(i: int) -> str:
    # Distinct items (no two alike): the index of each word is a digit of i.
    digits = [(i // 24**k) % 24 for k in range(4)]
    return " ".join(WORDS[d] for d in digits) + f" item {i} " + " ".join(WORDS[: 3 + i % 7])


def _in_thread(fn: Any, *args: Any) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn(*args)
        except BaseException as exc:
            out["error"] = exc

    th = threading.Thread(target=run)
    th.start()
    return th, out


def _join_audits() -> None:
    for th in threading.enumerate():
        if th.name == "audit-t1":
            th.join(20)


def test_closing_a_tenant_ends_its_background_audit_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crashes: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: crashes.append(args.exc_value))
    cfg = TenantConfig(**A)  # type: ignore[arg-type]
    t = Tenant.create(
        str(tmp_path / "t1"),
        "t1",
        cfg,
        MasterSecret(b"m" * 32),
        audit_rate=1.0,
        audit_interval_s=0.0,
    )
    for i in range(3):
        t.upsert(item_id=f"x{i}", content=_text(i))
    _join_audits()
    scanning, go = threading.Event(), threading.Event()
    orig = t.store.all_features

    def all_features(stride: int = 1) -> Iterator[tuple[int, str, npt.NDArray[np.uint64]]]:
        scanning.set()
        assert go.wait(20)
        yield from orig(stride)

    monkeypatch.setattr(t.store, "all_features", all_features)
    audits = t.counters.audits
    t.candidates(_text(1), limit=5)
    assert scanning.wait(10)  # the audit thread is in its scan
    closer, closed = _in_thread(t.close)
    for _ in range(2000):  # close() has begun (it waits for the audit, or not at all)
        if getattr(t, "_closed", False) or not closer.is_alive():
            break
        time.sleep(0.005)
    go.set()
    closer.join(20)
    assert not closer.is_alive() and "error" not in closed
    _join_audits()
    assert crashes == []
    assert t.counters.audits == audits  # a scan cut short counts nothing
    assert not t.maybe_audit(t.prepare(_text(2)), [])  # none starts on a closed tenant

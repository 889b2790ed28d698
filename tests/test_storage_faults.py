"""Storage faults at the library level: a damaged feature store starts with every
acknowledged write intact (rebuilt from snapshot + log) or is refused loudly,
naming the file.  Never a raw sqlite3 traceback."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from neardup._crypto import MasterSecret
from neardup._errors import CorruptFile, NeardupError, NeardupIOError
from neardup.store import FeatureStore, store_error
from neardup.tenant import Tenant, TenantConfig

MASTER = MasterSecret(bytes(range(32)))
CFG = TenantConfig(
    threshold=0.75, shingle="word:2", num_perm=32, bands=8, rows=4, retain="text"
)
PAGE = 4096


def _build(root: Path, *, close: bool = True) -> tuple[Tenant, dict[str, Any]]:
    """A tenant with upserts (some duplicates: decision events and links), idempotency
    keys, a snapshot part-way, a replacement and a tombstone."""
    t = Tenant.create(str(root), "t1", CFG, MASTER)
    for i in range(14):
        base = i - 1 if i % 4 == 3 else i  # every 4th item near-duplicates its predecessor
        t.upsert(
            item_id=f"i{i}",
            content=f"item number {base} says hello to the whole wide world {base * 7}",
            idempotency_key=f"k{i}",
            source_time="2024-01-01T00:00:00Z",
            media_type="text/plain",
        )
        if i == 6:
            t.snapshot()
    t.upsert(item_id="i1", content="a replaced text for item one entirely", replace=True)
    t.tombstone("i5")
    expect = {
        "digest": t.digest(),
        "items": {f"i{i}": t.item(f"i{i}") for i in range(14)},
        "seq": t.seq,
    }
    if close:
        t.close()
    return t, expect


def _outcome(root: Path, expect: dict[str, Any], damaged: str) -> str:
    """'refused', 'recovered' or 'clean'; fails the test on anything else."""
    refusal: str | None
    try:
        t = Tenant.open_dir(str(root), MASTER)
    except (CorruptFile, NeardupIOError) as exc:
        refusal = str(exc)
    else:
        refusal = None
    if refusal is not None:
        assert os.path.basename(damaged) in refusal, refusal
        return "refused"
    try:
        assert t.digest() == expect["digest"], "silent change"
        for item_id, doc in expect["items"].items():
            assert t.item(item_id) == doc, item_id
        assert t.seq == expect["seq"]
        return "recovered" if t.recovered else "clean"
    finally:
        t.close()


def test_zeroed_meta_page_and_header_page_are_rebuilt(tmp_path: Path) -> None:
    base = tmp_path / "base"
    _, expect = _build(base)
    store = base / "features-0.sqlite"
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        (meta_page,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name='meta'").fetchone()
    for page in (meta_page, 1):
        with open(store, "r+b") as fh:
            fh.seek((page - 1) * PAGE)
            fh.write(bytes(PAGE))
        t = Tenant.open_dir(str(base), MASTER)
        try:
            assert t.recovered is not None and t.recovered["snapshot"].endswith(".ndsnap")
            assert t.digest() == expect["digest"]
            assert {i: t.item(i) for i in expect["items"]} == expect["items"]
            assert os.path.exists(t.recovered["damaged_store_moved_to"])
        finally:
            t.close()


def test_a_read_failing_after_open_rebuilds_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "base"
    _, expect = _build(base)
    real = FeatureStore.live_bandkeys
    calls = []

    def failing_once(self: FeatureStore, bands: int) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise sqlite3.DatabaseError("database disk image is malformed")
        return real(self, bands)

    monkeypatch.setattr(FeatureStore, "live_bandkeys", failing_once)
    t = Tenant.open_dir(str(base), MASTER)
    try:
        assert t.recovered is not None and "a read at start-up failed" in t.recovered["damage"]
        assert t.digest() == expect["digest"]
    finally:
        t.close()


def test_environment_errors_are_not_mistaken_for_damage(tmp_path: Path) -> None:
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = sqlite3.SQLITE_FULL  # type: ignore[attr-defined]
    assert isinstance(store_error("s.sqlite", full, "x"), NeardupIOError)
    bad_read = sqlite3.OperationalError("disk I/O error")
    bad_read.sqlite_errorcode = sqlite3.SQLITE_IOERR_READ  # type: ignore[attr-defined]
    assert isinstance(store_error("s.sqlite", bad_read, "x"), CorruptFile)
    corrupt = sqlite3.DatabaseError("database disk image is malformed")
    corrupt.sqlite_errorcode = sqlite3.SQLITE_CORRUPT  # type: ignore[attr-defined]
    err = store_error("s.sqlite", corrupt, "x")
    assert isinstance(err, CorruptFile) and isinstance(err, NeardupError)
    assert str(err).startswith("s.sqlite: x (") and "malformed" in str(err)

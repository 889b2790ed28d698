"""Storage faults through real ``neardup serve`` processes: a damaged feature store
is rebuilt from snapshot + log at restart; a damaged last log record is refused."""

from __future__ import annotations

import sqlite3
import struct
from pathlib import Path

import pytest

from service_helpers import Server, producer

SEED = {"threshold": 0.75, "shingle": "word:2", "num_perm": 32, "bands": 8, "rows": 4}
PAGE = 4096


def _fill(data: Path) -> dict[str, bool]:
    """Acknowledged writes (item id -> live), with a snapshot part-way."""
    acked: dict[str, bool] = {}
    with Server(data) as srv, srv.client(srv.operator_token) as op:
        op.put("/v1/tenants/t1", json=SEED).raise_for_status()
        with producer(srv, op, "t1") as p:
            for i in range(24):
                r = p.post(
                    "/v1/tenants/t1/items",
                    json={
                        "item_id": f"x{i}",
                        "content": f"some text number {i} about item {i * 13} here",
                        "idempotency_key": f"k{i}",
                    },
                )
                r.raise_for_status()
                acked[f"x{i}"] = True
                if i == 10:
                    op.post("/v1/tenants/t1/snapshot").raise_for_status()
            p.delete("/v1/tenants/t1/items/x4").raise_for_status()
            acked["x4"] = False
    return acked


def _zero_pages(store: Path, pages: list[int]) -> None:
    with open(store, "r+b") as fh:
        for page in pages:
            fh.seek((page - 1) * PAGE)
            fh.write(bytes(PAGE))


def _check(data: Path, acked: dict[str, bool]) -> dict[str, object]:
    with Server(data) as srv, srv.client(srv.operator_token) as op:
        stats = op.get("/v1/tenants/t1").json()
        for item, live in acked.items():
            r = op.get(f"/v1/tenants/t1/items/{item}")
            assert r.status_code == 200, (item, r.text)
            assert r.json()["live"] is live, item
        assert stats["items"] == sum(acked.values())
        out: dict[str, object] = stats["recovered_at_start"]
    return out


@pytest.mark.slow
def test_zeroed_meta_page_or_first_pages_rebuild_the_store_from_snapshot_and_log(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    acked = _fill(data)
    tdir = data / "tenants" / "t1"
    store = next(tdir.glob("features-*.sqlite"))
    assert not Path(f"{store}-wal").exists()  # a clean stop checkpoints the WAL
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        (meta_page,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name='meta'").fetchone()
    _zero_pages(store, [meta_page])
    rec = _check(data, acked)
    assert rec is not None and str(rec["snapshot"]).endswith(".ndsnap"), rec
    assert rec["snapshot_seq"] == 11 and "damaged_store_moved_to" in rec
    # Then the first pages (the SQLite header and the schema) of the rebuilt store.
    _zero_pages(store, [1, 2])
    rec = _check(data, acked)
    assert rec is not None and str(rec["snapshot"]).endswith(".ndsnap"), rec
    assert len(list(tdir.glob("features-*.sqlite.damaged-*"))) >= 1
    # A clean restart after that: nothing to recover.
    assert _check(data, acked) is None


@pytest.mark.slow
def test_a_bit_flip_in_the_last_log_record_is_refused_naming_the_log(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _fill(data)
    log = next((data / "tenants" / "t1").glob("log-*.ndlog"))
    raw = bytearray(log.read_bytes())
    off, last = 24, 24
    while off < len(raw):  # find the last record
        last = off
        off += 12 + struct.unpack_from("<I", raw, off + 4)[0]
    raw[(last + 12 + len(raw)) // 2] ^= 0x04
    log.write_bytes(bytes(raw))
    srv = Server(data)
    try:
        srv.start()
    except RuntimeError:
        started = False
    else:
        started = True  # a damaged tenant may fail alone while the server runs
    output = srv.stop()
    assert str(log) in output, output[-2000:]
    assert f"byte offset {last}" in output and "damage, not a torn write" in output
    assert "trimmed" not in output
    if not started:
        assert srv.proc is not None and srv.proc.returncode == 2
    assert len(log.read_bytes()) == len(raw)  # never trimmed


def _row_byte(raw: bytes, page: int) -> int:
    """The offset of a byte inside a row of the table b-tree rooted at ``page``: down
    the rightmost children to a leaf, then a few bytes into its first cell."""
    while True:
        start = (page - 1) * PAGE
        head = start + (100 if page == 1 else 0)
        if raw[head] == 0x0D:  # table leaf
            (cell,) = struct.unpack_from(">H", raw, head + 8)
            return start + cell + 8
        assert raw[head] == 0x05, raw[head]  # table interior
        (page,) = struct.unpack_from(">I", raw, head + 8)


@pytest.mark.slow
@pytest.mark.parametrize("table", ["meta", "items"])
def test_a_row_changed_while_stopped_is_found_and_rebuilt(tmp_path: Path, table: str) -> None:
    # SQLite's own checks see page structure, not row content: the row checksums do.
    data = tmp_path / "data"
    acked = _fill(data)
    store = next((data / "tenants" / "t1").glob("features-*.sqlite"))
    raw = bytearray(store.read_bytes())
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        (page,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name=?", (table,)).fetchone()
    raw[_row_byte(raw, page)] ^= 0x01
    store.write_bytes(bytes(raw))
    rec = _check(data, acked)
    assert rec is not None, "the damaged row went unnoticed"
    assert str(rec["snapshot"]).endswith(".ndsnap")

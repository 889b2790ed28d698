"""Signatures and band keys exported for databases: the SQL band query finds
exactly the candidates of LSHIndex."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from neardup import Config, InputError, InvalidConfig, LSHIndex, MinHasher, ShingleSpec, Signature
from neardup.batch.sigexport import candidates_sql, export_signatures, signature_table
from neardup.testing import plant_near_duplicates, synthetic_documents


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    base = synthetic_documents(150, seed=5, words=40)
    texts, _ = plant_near_duplicates(
        base, copies=90, edit_rate=[0.0, 0.02, 0.08, 0.2, 0.35], seed=6
    )
    return [*texts, "", "   "]


def _sqlite(table: Any) -> sqlite3.Connection:
    """The table in an in-memory SQLite database, one index per band column."""
    db = sqlite3.connect(":memory:")
    names = table.column_names
    db.execute(f"CREATE TABLE sigs ({', '.join(names)})")
    rows = zip(*(table.column(n).to_pylist() for n in names), strict=True)
    db.executemany(f"INSERT INTO sigs VALUES ({', '.join('?' for _ in names)})", rows)
    for n in names:
        if n.startswith("band_"):
            db.execute(f"CREATE INDEX ix_{n} ON sigs ({n})")
    return db


CONFIGS = [
    Config(),
    Config(threshold=0.5, signature="oph", num_perm=64),
    Config(threshold=0.7, bands=10, rows=5, shingle=ShingleSpec(kind="char", k=5)),
]


@pytest.mark.slow
@pytest.mark.parametrize("cfg", CONFIGS, ids=["default", "oph-0.5", "char-10x5"])
def test_the_sql_band_query_returns_exactly_the_index_candidates(
    corpus: list[str], cfg: Config
) -> None:
    ids = [f"doc{i}" for i in range(len(corpus))]
    table = signature_table(corpus, ids, cfg)
    db = _sqlite(table)
    mh = MinHasher(cfg)
    index = LSHIndex(mh.scheme, threshold=cfg.threshold, max_candidates=10_000)
    sigs: dict[str, Signature] = {}
    for i, text in zip(ids, corpus, strict=True):
        if text.strip():
            sigs[i] = mh.signature(text)
            index.insert(i, sigs[i])
    sql = candidates_sql(mh.scheme.bands)
    with_candidates = 0
    for i in ids:
        found = {r[0] for r in db.execute(sql, {"id": i})}
        if i not in sigs:  # empty: no band key, so never a candidate
            assert found == set()
            continue
        expected = set(index.query(sigs[i])) - {i}
        assert found == expected, i
        with_candidates += bool(expected)
    assert index.stats().candidate_overflow == 0 and index.stats().bucket_overflow == 0
    assert with_candidates >= 60  # the planted copies and their sources
    assert {r[0] for r in db.execute("SELECT id FROM sigs WHERE skipped = 'empty'")} == {
        ids[-2],
        ids[-1],
    }


@pytest.mark.slow
def test_band_columns_are_the_band_keys_of_the_index(corpus: list[str]) -> None:
    cfg = Config()
    table = signature_table(corpus[:20], list(range(20)), cfg)
    mh = MinHasher(cfg)
    for row in range(20):
        sig = mh.signature(corpus[row])
        assert Signature.from_bytes(table.column("signature")[row].as_py(), mh.scheme).hex() == (
            sig.hex()
        )
        for b in range(mh.scheme.bands):
            key = table.column(f"band_{b}")[row].as_py()
            assert key == int(np.uint64(sig.band_hash(b)).view(np.int64))


def test_too_large_and_empty_records_have_no_keys() -> None:
    cfg = Config(max_document_bytes=30)
    texts = ["a b c d e f g", "word " * 20, ""]
    t = signature_table(texts, [0, 1, 2], cfg)
    assert t.column("skipped").to_pylist() == [None, "too_large", "empty"]
    assert t.column("signature").null_count == 2
    assert t.column("band_0").to_pylist()[1:] == [None, None]
    meta = json.loads(t.schema.metadata[b"neardup"])
    assert meta["bands"] == MinHasher(cfg).scheme.bands
    assert meta["fingerprint"] == MinHasher(cfg).scheme.fingerprint


def test_export_writes_parquet_and_refuses_to_overwrite(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    texts = synthetic_documents(30, seed=2)
    lines = [json.dumps({"id": f"x{i}", "text": t}) + "\n" for i, t in enumerate(texts)]
    src.write_text("".join(lines))
    out = tmp_path / "sigs.parquet"
    cfg = Config()
    counts = export_signatures([str(src)], str(out), config=cfg, id_field="id")
    assert counts["documents"] == counts["signed"] == 30
    got = pq.read_table(out)
    assert got.column("id").to_pylist() == [f"x{i}" for i in range(30)]
    assert got.equals(signature_table(texts, [f"x{i}" for i in range(30)], cfg))
    with pytest.raises(InvalidConfig, match="exists"):
        export_signatures([str(src)], str(out), config=cfg)
    export_signatures([str(src)], str(out), config=cfg, overwrite=True)
    assert pq.read_table(out).column("id").to_pylist() == list(range(30))
    assert {p.name for p in tmp_path.iterdir()} == {"in.jsonl", "sigs.parquet"}  # no temp left


def test_export_refuses_ids_that_name_two_records(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": "a", "text": "one two three"}\n{"id": "a", "text": "four five"}\n')
    with pytest.raises(InputError, match="'a'"):
        export_signatures([str(src)], str(tmp_path / "s.parquet"), config=Config(), id_field="id")
    assert not (tmp_path / "s.parquet").exists()


@pytest.mark.parametrize("bad", [0, -1, True, "3"])
def test_candidates_sql_refuses_a_bad_band_count(bad: Any) -> None:
    with pytest.raises(InvalidConfig, match="bands"):
        candidates_sql(bad)
    with pytest.raises(InvalidConfig, match="table"):
        candidates_sql(2, table="sigs; DROP TABLE sigs")


def test_the_readme_shows_the_query_candidates_sql_builds() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "```sql\n" + candidates_sql(3) + "\n```" in readme


def test_a_memory_limit_below_the_plan_stops_before_reading(tmp_path: Path) -> None:
    from neardup import MemoryLimitExceeded

    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "one two three four five six"}\n' * 200)
    with pytest.raises(MemoryLimitExceeded, match="memory_limit=100"):
        export_signatures(
            [str(src)], str(tmp_path / "s.parquet"), config=Config(), memory_limit=100
        )
    assert not (tmp_path / "s.parquet").exists()

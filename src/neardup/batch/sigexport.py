"""Signatures and LSH band keys exported for databases (``neardup signatures``).

One Parquet row per record: ``id``, ``signature`` (the MinHash rows as
little-endian ``uint32``, :meth:`neardup.Signature.to_bytes`), one ``band_<t>``
column per LSH band and ``skipped``.  A band key is the 64-bit bucket key that
:class:`neardup.LSHIndex` files the item under, computed by the one band-key
function (:meth:`neardup.SignatureSet.band_keys`), stored as ``int64`` (the same
64 bits read as a signed integer, which every SQL database holds), so that two
items are LSH candidates exactly when some ``band_<t>`` of theirs is equal
(:func:`candidates_sql`).  A record with no shingle (``skipped = 'empty'``) or
over ``max_document_bytes`` (``'too_large'``) has no signature and null band
keys, so that no band equality ever matches it; the batch job keeps such records
and never compares them either.

The scheme (its fingerprint, ``num_perm``, bands, rows) is in the file's schema
metadata under ``neardup``: band keys of two files are comparable only when their
schemes are equal.

Example:
    >>> print(candidates_sql(2))
    SELECT o.id FROM sigs AS q JOIN sigs AS o ON o.band_0 = q.band_0
     WHERE q.id = :id AND o.id <> q.id
    UNION
    SELECT o.id FROM sigs AS q JOIN sigs AS o ON o.band_1 = q.band_1
     WHERE q.id = :id AND o.id <> q.id
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from neardup.batch.plan import in_memory_plan
from neardup.core._errors import InvalidConfig, MemoryLimitExceeded
from neardup.core.config import Config
from neardup.core.ids import unique_ids
from neardup.core.persist import atomic_file
from neardup.io.corpus import Corpus, read_corpus
from neardup.sketch.minhash import MinHasher
from neardup.text.hashing import hash_texts
from neardup.text.normalize import get_normalizer

__all__ = ["BATCH", "candidates_sql", "export_signatures", "signature_table"]

BATCH = 65_536
"""Records hashed and written at a time (one Parquet row group each)."""


def candidates_sql(bands: int, *, table: str = "sigs") -> str:
    """The SQL query that lists the candidates of the item ``:id``: every other item
    with an equal key in at least one band (one ``SELECT`` per band, so that an
    index on each ``band_<t>`` column serves it), each once.

    Standard SQL (SQLite, DuckDB, PostgreSQL with ``:id`` as its parameter syntax);
    its answer is the set :meth:`neardup.LSHIndex.query` returns for the item,
    less the item itself, as long as the index's caps cut nothing.
    """
    if isinstance(bands, bool) or not isinstance(bands, int) or bands < 1:
        raise InvalidConfig("bands", bands, "must be an integer >= 1", "pass the scheme's bands")
    if not table.isidentifier():
        raise InvalidConfig("table", table, "is not an SQL identifier", "use e.g. sigs")
    one = (
        "SELECT o.id FROM {t} AS q JOIN {t} AS o ON o.band_{b} = q.band_{b}\n"
        " WHERE q.id = :id AND o.id <> q.id"
    )
    return "\nUNION\n".join(one.format(t=table, b=b) for b in range(bands))


def _id_column(ids: Sequence[Any]) -> tuple[list[Any], str]:
    if all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        return list(ids), "int64"
    return [i if isinstance(i, str) else json.dumps(i) for i in ids], "string"


def signature_table(
    texts: Sequence[str], ids: Sequence[Any], config: Config, hasher: MinHasher | None = None
) -> Any:
    """A ``pyarrow.Table`` of the columns above for ``texts`` (one row each, in
    order) under ``config``."""
    import pyarrow as pa

    mh = hasher or MinHasher(config)
    scheme = mh.scheme
    sets, too_large = hash_texts(texts, get_normalizer(config.normalizer), config, None, scheme)
    sigs = mh.from_sets(sets)
    empty = (sets.raw_counts == 0) & ~too_large
    signed = ~(empty | too_large)
    keys = sigs.band_keys().view(np.int64)
    rows = sigs.matrix.astype("<u4")
    id_values, id_type = _id_column(ids)
    cols: dict[str, Any] = {
        "id": pa.array(id_values, type=pa.int64() if id_type == "int64" else pa.string()),
        "signature": pa.array(
            [rows[i].tobytes() if signed[i] else None for i in range(len(texts))],
            type=pa.binary(),
        ),
    }
    for b in range(scheme.bands):
        cols[f"band_{b}"] = pa.array(keys[:, b], mask=~signed, type=pa.int64())
    skipped = np.where(too_large, "too_large", np.where(empty, "empty", ""))
    cols["skipped"] = pa.array([s or None for s in skipped.tolist()], type=pa.string())
    meta = {
        "fingerprint": scheme.fingerprint,
        "num_perm": scheme.num_perm,
        "bands": scheme.bands,
        "rows": scheme.rows,
        "signature": "uint32 rows, little-endian",
        "band_keys": "uint64 bucket keys of neardup.LSHIndex, stored as int64 (same bits)",
    }
    table = pa.table(cols)
    return table.replace_schema_metadata({"neardup": json.dumps(meta, sort_keys=True)})


def _where(corpus: Corpus) -> Any:
    lines = corpus.format in ("jsonl", "csv")

    def where(k: int) -> tuple[str, int | None]:
        fi, n = corpus.origins[k]
        return corpus.inputs[fi], n if lines else n + 1

    return where


def export_signatures(
    inputs: Sequence[str],
    output: str,
    *,
    config: Config,
    text_field: str = "text",
    id_field: str | None = None,
    skip_bad: bool = False,
    overwrite: bool = False,
    memory_limit: int | None = None,
) -> dict[str, Any]:
    """Read ``inputs``, write their signatures and band keys to the Parquet file
    ``output`` (atomically: a temporary file renamed into place), and return counts.

    Ids are ``id_field``'s values (each must name one record) or row numbers.  An
    existing ``output`` is refused unless ``overwrite``; a planned memory (the
    corpus is held, :func:`neardup.batch.plan.in_memory_plan`) over ``memory_limit``
    raises :class:`~neardup.MemoryLimitExceeded` before reading.
    """
    import pyarrow.parquet as pq

    if os.path.exists(output) and not overwrite:
        raise InvalidConfig("output", output, "exists", "pass --overwrite or another path")
    if memory_limit is not None:
        plan = in_memory_plan(inputs, config)
        if plan > memory_limit:
            raise MemoryLimitExceeded(plan, memory_limit, "neardup signatures (in memory)")
    corpus = read_corpus(list(inputs), text_field=text_field, id_field=id_field, skip_bad=skip_bad)
    ids = list(corpus.ids)
    unique_ids(ids, 0, _where(corpus), rename=False)
    mh = MinHasher(config)
    counts: dict[str, Any] = {"documents": len(corpus.texts), "empty": 0, "too_large": 0}
    with atomic_file(output, suffix=".parquet", private=False) as tmp:
        writer = None
        for lo in range(0, max(len(corpus.texts), 1), BATCH):
            table = signature_table(
                corpus.texts[lo : lo + BATCH], ids[lo : lo + BATCH], config, mh
            )
            skipped = table.column("skipped").to_pylist()
            counts["empty"] += skipped.count("empty")
            counts["too_large"] += skipped.count("too_large")
            if writer is None:
                writer = pq.ParquetWriter(tmp, table.schema)
            writer.write_table(table)
        if writer is not None:
            writer.close()
    scheme = mh.scheme
    counts.update(
        signed=counts["documents"] - counts["empty"] - counts["too_large"],
        bands=scheme.bands,
        rows=scheme.rows,
        num_perm=scheme.num_perm,
        fingerprint=scheme.fingerprint,
        bad_records=len(corpus.bad),
    )
    return counts

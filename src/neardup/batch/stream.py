"""Dedup as a pipeline stage: streaming over records, batch over a list, and a
filter for Hugging Face ``datasets``.

* :func:`unique_records` — an iterator adapter: yields each record whose text is
  not a verified near duplicate (J >= threshold) of a record it already yielded.
  Memory grows with the number of yielded records (one signature and one
  shingle-hash set each); nothing is buffered, so it works on unbounded streams.
  Order is preserved and the first record of each family is the one kept, exactly
  like ``keep="first"`` in batch — up to LSH recall: a pair missed by LSH is kept.
* :func:`dedup_records` — the batch form: ids of the kept records plus clusters.
* :func:`filter_dataset` — ``Dataset.filter`` keeping one record per family.

Example:
    >>> recs = [{"text": "red fox runs very fast"}, {"text": "red fox runs very fast today"},
    ...         {"text": "database backup completed nightly"}]
    >>> from neardup import Config, ShingleSpec
    >>> cfg = Config(threshold=0.75, shingle=ShingleSpec(k=2))
    >>> [r["text"] for r in unique_records(recs, config=cfg)]
    ['red fox runs very fast', 'database backup completed nightly']
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from neardup.batch.pipeline import Deduplicator, find_duplicates
from neardup.core._errors import DocumentTooLarge, EmptyDocument, InputError, InvalidType, shown
from neardup.core.config import Config
from neardup.graph.cluster import Cluster
from neardup.text.hashing import HashKey

__all__ = ["dedup_records", "filter_dataset", "unique_records"]


def _text(rec: Mapping[str, Any], field: str, i: int) -> str:
    try:
        text = rec.get(field)
    except AttributeError:  # not a mapping: checked only when it fails (no per-record cost)
        raise InputError(
            f"record {i}",
            None,
            f"has type {type(rec).__name__}, expected a mapping of fields",
            "pass records as dicts, e.g. {'text': ...}",
        ) from None
    if text is None:
        raise InputError(
            f"record {i}",
            None,
            f"no text field {field!r}",
            "pass text_field= naming the field that holds the text",
        )
    if not isinstance(text, str):
        raise InputError(
            f"record {i}",
            None,
            f"field {field!r} has type {type(text).__name__}, expected str",
            "decode bytes first, or pass text_field= naming the field that holds the text",
        )
    return text


def _records(records: object) -> Iterable[Mapping[str, Any]]:
    """``records`` if it is iterable (and not one str or bytes)."""
    if isinstance(records, str | bytes) or not hasattr(records, "__iter__"):
        raise InvalidType(
            "records",
            shown(records),
            f"has type {type(records).__name__}, expected an iterable of records",
            "pass e.g. a list of dicts: [{'text': ...}]",
        )
    return records


def unique_records(
    records: Iterable[Mapping[str, Any]],
    *,
    text_field: str = "text",
    config: Config | None = None,
    key: HashKey | None = None,
    keep_empty: bool = True,
) -> Iterator[Mapping[str, Any]]:
    """Yield the records that are not near duplicates of an earlier yielded record.

    A record over ``max_document_bytes`` is yielded and never compared (as the
    batch form keeps it); an empty one is yielded when ``keep_empty``.
    """
    d = Deduplicator(config or Config(), key=key)
    for i, rec in enumerate(_records(records)):
        text = _text(rec, text_field, i)
        try:
            matches = d.query(text)
        except DocumentTooLarge:
            yield rec
            continue
        except EmptyDocument:
            if keep_empty:
                yield rec
            continue
        if any(m.duplicate for m in matches):
            continue
        d.add(i, text)
        yield rec


def dedup_records(
    records: Sequence[Mapping[str, Any]],
    *,
    text_field: str = "text",
    id_field: str | None = None,
    config: Config | None = None,
    key: HashKey | None = None,
    keep: str = "first",
) -> tuple[list[Any], list[Cluster]]:
    """Ids of the kept records (input order) and the clusters (positions).

    Ids are ``record[id_field]`` when given, else positions.
    """
    texts = [_text(r, text_field, i) for i, r in enumerate(_records(records))]
    res = find_duplicates(texts, config=config, key=key, keep=keep)
    ids = [r[id_field] if id_field else i for i, r in enumerate(records)]
    return [ids[int(i)] for i in res.kept], res.clusters


def filter_dataset(
    dataset: Any,
    *,
    text_field: str = "text",
    config: Config | None = None,
    key: HashKey | None = None,
    keep: str = "first",
) -> Any:
    """A ``datasets.Dataset`` with one record per family (batch dedup over the column)."""
    texts = dataset[text_field]
    res = find_duplicates(list(texts), config=config, key=key, keep=keep)
    kept = set(int(i) for i in res.kept)
    return dataset.filter(lambda _row, idx: idx in kept, with_indices=True)

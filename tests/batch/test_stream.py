from __future__ import annotations

import pytest

from neardup import Config, InputError
from neardup.batch.stream import dedup_records, filter_dataset, unique_records
from neardup.testing import plant_near_duplicates, synthetic_documents


def _recs() -> list[dict[str, object]]:
    base = synthetic_documents(80, seed=5, words=50)
    texts, _ = plant_near_duplicates(base, copies=40, edit_rate=[0.0, 0.01, 0.02], seed=6)
    return [{"id": f"x{i}", "text": t} for i, t in enumerate(texts)]


def test_streaming_equals_batch_keep_first() -> None:
    recs = _recs()
    kept_ids, clusters = dedup_records(recs, id_field="id")
    streamed = [r["id"] for r in unique_records(iter(recs))]
    assert streamed == kept_ids
    assert clusters and len(kept_ids) == len(recs) - sum(len(c) - 1 for c in clusters)


def test_streaming_handles_empty_and_missing_text() -> None:
    recs = [{"text": ""}, {"text": "a b c d e f"}, {"text": "a b c d e f"}]
    assert len(list(unique_records(recs))) == 2
    assert len(list(unique_records(recs, keep_empty=False))) == 1
    with pytest.raises(InputError, match="text_field"):
        list(unique_records([{"body": "x"}]))


def test_filter_dataset() -> None:
    datasets = pytest.importorskip("datasets")
    recs = _recs()
    ds = datasets.Dataset.from_list(recs)
    out = filter_dataset(ds, config=Config())
    kept_ids, _ = dedup_records(recs, id_field="id")
    assert out["id"] == kept_ids

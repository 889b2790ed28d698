"""neardup.vectors.reading: vector inputs in, bad records named or counted."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from neardup import InputError, InvalidConfig
from neardup.vectors.reading import count_identical, read_vectors


def test_jsonl_dense_vectors_with_ids_and_texts(tmp_path: Path) -> None:
    p = tmp_path / "v.jsonl"
    rows = [{"id": "a", "v": [1, 0], "text": "x"}, {"id": "b", "v": [0, 1]}]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    vc = read_vectors([str(p)], field_name="v", id_field="id")
    assert vc.ids == ["a", "b"] and len(vc) == 2
    assert vc.dense is not None and vc.dense.shape == (2, 2)
    assert vc.text_of(0) == "x"


def test_bad_records_are_refused_or_counted(tmp_path: Path) -> None:
    p = tmp_path / "v.jsonl"
    p.write_text('{"v": [1, 0]}\n{"v": [0, 0]}\n{"w": [1, 1]}\n')
    with pytest.raises(InputError):
        read_vectors([str(p)], field_name="v")
    vc = read_vectors([str(p)], field_name="v", skip_bad=True)
    assert len(vc) == 1 and len(vc.bad) == 2


def test_npy_rows_are_global_row_numbers(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.eye(3, dtype=np.float32))
    vc = read_vectors([str(tmp_path / "a.npy")], field_name="unused")
    assert vc.ids == [0, 1, 2]


def test_mixed_formats_are_refused(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"v": [1]}\n')
    np.save(tmp_path / "b.npy", np.eye(1))
    with pytest.raises(InvalidConfig, match="mixes formats"):
        read_vectors([str(tmp_path / "a.jsonl"), str(tmp_path / "b.npy")], field_name="v")


def test_count_identical_counts_repeats_not_near_copies() -> None:
    X = np.array([[1.0, 2.0], [1.0, 2.0], [1.0, 2.0000001], [1.0, 2.0]])
    assert count_identical(X) == 2
    assert count_identical(X[:1]) == 0

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from neardup import CorruptFile, NeardupIOError
from neardup.core.persist import atomic_write, read_container, write_container


def test_container_roundtrip(tmp_path: Path) -> None:
    p = str(tmp_path / "c.bin")
    arrays = {
        "a": np.arange(10, dtype=np.uint64),
        "b": np.ones((3, 4), dtype=np.uint32),
        "c": np.array([True, False]),
    }
    write_container(p, "thing", {"x": 1}, arrays)
    meta, back = read_container(p, "thing")
    assert meta == {"x": 1}
    for k, v in arrays.items():
        assert np.array_equal(back[k], v) and back[k].dtype == v.dtype
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".tmp-")]


def test_damage_is_refused(tmp_path: Path) -> None:
    p = str(tmp_path / "c.bin")
    write_container(p, "thing", {}, {"a": np.arange(100, dtype=np.uint64)})
    raw = open(p, "rb").read()
    for bad in (
        raw[:-1],
        raw[: len(raw) // 2],
        raw[:5],
        b"X" + raw[1:],
        raw[:100] + bytes([raw[100] ^ 1]) + raw[101:],
    ):
        open(p, "wb").write(bad)
        with pytest.raises(CorruptFile):
            read_container(p, "thing")
    open(p, "wb").write(raw)
    with pytest.raises(CorruptFile, match="expected"):
        read_container(p, "other")


def test_io_errors_name_the_path(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope" / "x.bin")
    with pytest.raises(NeardupIOError, match="nope"):
        read_container(missing, "thing")
    with pytest.raises(NeardupIOError):
        atomic_write(missing, b"data")


def test_private_files_are_the_owners_and_outputs_follow_the_umask(tmp_path: Path) -> None:
    from neardup.core.persist import atomic_file

    old = os.umask(0o022)
    try:
        for private, mode in ((True, 0o600), (False, 0o644)):
            target = tmp_path / f"f-{private}"
            with atomic_file(str(target), private=private) as tmp, open(tmp, "wb") as fh:
                fh.write(b"x")
            assert target.stat().st_mode & 0o777 == mode
            assert target.read_bytes() == b"x"
    finally:
        os.umask(old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f-False", "f-True"]

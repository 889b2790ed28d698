"""The code-point table cache: the same table as a fresh build, never a damaged,
stale or foreign file, and no error where the cache cannot be written."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from neardup.core.tablecache import cached_table


def _counted(values: list[int]) -> tuple[list[int], Callable[[], npt.NDArray[np.uint8]]]:
    calls: list[int] = []

    def build() -> npt.NDArray[np.uint8]:
        calls.append(1)
        return np.array(values, dtype=np.uint8)

    return calls, build


def test_built_once_then_read_back(tmp_path: Path) -> None:
    calls, build = _counted([3, 1, 2])
    first = cached_table("t", __file__, build, folder=str(tmp_path))
    again = cached_table("t", __file__, build, folder=str(tmp_path))
    assert calls == [1]
    assert first.tolist() == again.tolist() == [3, 1, 2]
    assert not again.flags.writeable and again.dtype == np.uint8


def test_a_damaged_file_is_rebuilt_and_replaced(tmp_path: Path) -> None:
    calls, build = _counted([7] * 100)
    cached_table("t", __file__, build, folder=str(tmp_path))
    (path,) = tmp_path.iterdir()
    data = bytearray(path.read_bytes())
    data[-40] ^= 0xFF  # inside the array, before the checksum
    path.write_bytes(bytes(data))
    got = cached_table("t", __file__, build, folder=str(tmp_path))
    assert calls == [1, 1] and got.tolist() == [7] * 100
    path.write_bytes(path.read_bytes()[:50])  # truncated
    assert cached_table("t", __file__, build, folder=str(tmp_path)).tolist() == [7] * 100
    assert calls == [1, 1, 1]


def test_the_name_and_the_source_key_the_file(tmp_path: Path) -> None:
    src = tmp_path / "builder.py"
    src.write_text("v = 1\n")
    calls, build = _counted([1])
    cached_table("a", str(src), build, folder=str(tmp_path / "c"))
    cached_table("b", str(src), build, folder=str(tmp_path / "c"))
    assert calls == [1, 1] and len(os.listdir(tmp_path / "c")) == 2
    other = tmp_path / "other.py"
    other.write_text("v = 2\n")  # an edited builder is another file
    cached_table("a", str(other), build, folder=str(tmp_path / "c"))
    assert calls == [1, 1, 1] and len(os.listdir(tmp_path / "c")) == 3


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_unwritable_folder_only_costs_the_build(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    calls, build = _counted([5])
    try:
        assert cached_table("t", __file__, build, folder=str(ro)).tolist() == [5]
        assert cached_table("t", __file__, build, folder=str(ro)).tolist() == [5]
    finally:
        ro.chmod(stat.S_IRWXU)
    assert calls == [1, 1] and os.listdir(ro) == []


def test_a_folder_that_is_a_file_only_costs_the_build(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    calls, build = _counted([9])
    got = cached_table("t", __file__, build, folder=str(blocker / "cache"))
    assert got.tolist() == [9] and calls == [1]

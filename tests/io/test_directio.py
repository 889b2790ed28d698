from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import NeardupIOError
from neardup.io._directio import SequentialWriter


@pytest.mark.parametrize("size", [0, 1, 511, 4095, 4096, 4097, 3 * 4096 + 17, 70_000])
def test_bytes_round_trip_at_block_boundaries(tmp_path: Path, size: int) -> None:
    data = bytes((i * 7 + 3) % 251 for i in range(size))
    path = tmp_path / "out.bin"
    # A one-block stage forces many full-stage writes and a padded last block.
    with SequentialWriter(str(path), stage_bytes=4096) as w:
        for i in range(0, size, 1000):
            w.write(data[i : i + 1000])
    assert path.read_bytes() == data
    assert os.path.getsize(path) == size


@settings(max_examples=40, deadline=None)
@given(chunks=st.lists(st.binary(max_size=9000), max_size=12), stage=st.sampled_from([4096, 8192]))
def test_any_chunking_writes_the_concatenation(
    tmp_path_factory: pytest.TempPathFactory, chunks: list[bytes], stage: int
) -> None:
    path = tmp_path_factory.mktemp("w") / "out.bin"
    with SequentialWriter(str(path), stage_bytes=stage) as w:
        for c in chunks:
            w.write(memoryview(c))
    assert path.read_bytes() == b"".join(chunks)


def test_falls_back_to_the_page_cache_without_o_direct(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(os, "O_DIRECT", raising=False)
    path = tmp_path / "out.bin"
    with SequentialWriter(str(path)) as w:
        assert not w.direct
        w.write(b"abc\n")
    assert path.read_bytes() == b"abc\n"


def test_falls_back_when_the_file_system_refuses_o_direct(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_open = os.open

    def refuse_direct(path: str, flags: int, mode: int = 0o777) -> int:
        if flags & getattr(os, "O_DIRECT", 0):
            raise OSError(22, "Invalid argument")
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", refuse_direct)
    path = tmp_path / "out.bin"
    with SequentialWriter(str(path)) as w:
        assert not w.direct
        w.write(b"x" * 5000)
    assert path.read_bytes() == b"x" * 5000


def test_unwritable_path_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(NeardupIOError, match="nope"):
        SequentialWriter(str(tmp_path / "nope" / "out.bin"))


def test_write_after_close_is_refused(tmp_path: Path) -> None:
    w = SequentialWriter(str(tmp_path / "out.bin"))
    w.close()
    w.close()  # idempotent
    with pytest.raises(NeardupIOError, match="closed"):
        w.write(b"x")


def test_falls_back_when_direct_writes_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    real_write = os.write
    calls = {"n": 0}

    def refuse_first(fd: int, data: bytes | memoryview) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", refuse_first)
    path = tmp_path / "out.bin"
    data = bytes(range(256)) * 50  # 12,800 bytes: full stages and a padded tail
    with SequentialWriter(str(path), stage_bytes=4096) as w:
        if not w.direct:
            pytest.skip("this file system refuses O_DIRECT at open")
        for i in range(0, len(data), 3000):
            w.write(data[i : i + 3000])
        assert not w.direct
    assert path.read_bytes() == data
    assert calls["n"] > 1


@settings(max_examples=40, deadline=None)
@given(
    spans=st.lists(st.tuples(st.integers(0, 20_000), st.integers(0, 9000)), max_size=12),
    stage=st.sampled_from([4096, 8192]),
)
def test_span_writes_equal_one_write_per_span(
    tmp_path_factory: pytest.TempPathFactory, spans: list[tuple[int, int]], stage: int
) -> None:
    import numpy as np

    src = np.frombuffer(bytes((i * 13 + 5) % 251 for i in range(30_000)), dtype=np.uint8)
    starts = np.array([a for a, _ in spans], dtype=np.int64)
    ends = np.array([min(a + n, len(src)) for a, n in spans], dtype=np.int64)
    folder = tmp_path_factory.mktemp("s")
    with SequentialWriter(str(folder / "spans.bin"), stage_bytes=stage) as w:
        w.write(b"head")  # spans continue a partly filled stage
        w.write_spans(src, starts, ends)
        w.write(b"tail")
    body = b"".join(src[a:e].tobytes() for a, e in zip(starts, ends, strict=True))
    expected = b"head" + body + b"tail"
    assert (folder / "spans.bin").read_bytes() == expected


def test_a_failed_span_write_raises_naming_the_file(tmp_path: Path) -> None:
    import numpy as np

    src = np.zeros(3 * 4096, dtype=np.uint8)
    w = SequentialWriter(str(tmp_path / "bad.bin"), stage_bytes=4096)
    # The writer's descriptor now names a read-only file: the compiled write
    # fails (EBADF), and the write redone in Python raises, naming the file.
    fd = w._fd
    os.close(fd)
    reopened = os.open(os.devnull, os.O_RDONLY)
    try:
        if reopened != fd:
            os.dup2(reopened, fd)
        with pytest.raises(NeardupIOError, match=r"bad\.bin"):
            w.write_spans(src, np.array([0], dtype=np.int64), np.array([len(src)], np.int64))
        # Closing fails the same way, and unmaps the stage although the first
        # error's traceback still holds a view of it.
        with pytest.raises(NeardupIOError, match=r"bad\.bin"):
            w.close()
        assert w._fd == -1
    finally:
        if reopened != fd:
            os.close(reopened)

"""neardup.io.blocks: JSONL files read a block of lines at a time, and read ahead."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import InputError, NeardupIOError
from neardup.io import blocks as B
from neardup.io import corpus as C


def test_prefetch_gives_what_reading_gives(tmp_path: Path) -> None:
    a = tmp_path / "a.jsonl"
    b = tmp_path / "b.jsonl.gz"
    a.write_bytes(b"".join(json.dumps({"text": f"doc {i}"}).encode() + b"\n" for i in range(50)))
    with gzip.open(b, "wt") as fh:
        fh.write(json.dumps({"text": "zipped"}) + "\n")
    paths = [str(a), str(b), str(a)]  # a compressed file is not prefetched
    pf = C.Prefetch(paths)
    try:
        assert pf.chunks(1, str(b)) is None
        assert pf.chunks(0, str(b)) is None  # not the file prefetched at that position
        got = C.read_corpus(paths, prefetch=pf)
    finally:
        pf.close()
        pf.close()  # idempotent
    ref = C.read_corpus(paths)
    assert got.texts == ref.texts and got.ids == ref.ids and got.origins == ref.origins
    assert list(got.raw_lines) == list(ref.raw_lines)
    missing = str(tmp_path / "missing.jsonl")
    pf = C.Prefetch([missing])
    try:
        with pytest.raises(NeardupIOError, match=r"missing\.jsonl"):
            C.read_corpus([missing], prefetch=pf)
    finally:
        pf.close()

    def failing(path: str, *args: object) -> object:
        raise NeardupIOError(path, OSError(5, "Input/output error"))
        yield

    real = B._file_chunks
    B._file_chunks = failing  # type: ignore[assignment]
    try:
        pf = C.Prefetch([str(a)])
        with pytest.raises(NeardupIOError, match="Input/output error"):
            C.read_corpus([str(a)], prefetch=pf)  # raised in the reader, not the thread
        pf.close()
    finally:
        B._file_chunks = real
    # The plain-pages buffer is an ordinary writable array.
    buf = B._plain_pages(10)
    buf[:] = 7
    assert buf.dtype == np.uint8 and int(buf.sum()) == 70


def _lines_of(path: str, prefetched: object = None) -> list[bytes]:
    out = []
    for buf, starts, ends in B.line_blocks(path, prefetched):  # type: ignore[arg-type]
        view = B.block_view(buf)
        assert len(starts) == len(ends) > 0 and bool(np.all(starts <= ends))
        out += [bytes(view[s:e]) for s, e in zip(starts.tolist(), ends.tolist(), strict=True)]
    return out


def _expected(content: bytes) -> list[bytes]:
    """The lines of a file: split on \\n, no empty piece after a final newline."""
    parts = content.split(b"\n")
    return parts[:-1] if parts[-1] == b"" else parts


_CONTENT = st.lists(
    st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")), max_size=10
).flatmap(lambda lines: st.sampled_from([b"\n".join(lines), b"\n".join(lines) + b"\n"]))


@settings(max_examples=60, deadline=None)
@given(
    content=_CONTENT,
    block=st.sampled_from([1, 5, 64]),
    read=st.sampled_from([(1, 1), (3, 8), (1 << 20, 1 << 20)]),
    compressed=st.booleans(),
)
def test_line_blocks_give_every_line_once_in_order(
    tmp_path_factory: pytest.TempPathFactory,
    content: bytes,
    block: int,
    read: tuple[int, int],
    compressed: bool,
) -> None:
    # Any bytes, with or without a final newline, blank lines, CRs; blocks and
    # reads of any size: the lines handed out are the file's, each once.
    d = tmp_path_factory.mktemp("lb")
    path = d / ("in.jsonl.gz" if compressed else "in.jsonl")
    path.write_bytes(gzip.compress(content, mtime=0) if compressed else content)
    with mock.patch.object(B, "_BLOCK_BYTES", block):
        assert _lines_of(str(path)) == _expected(content)
        if not compressed:
            chunks = B._file_chunks(str(path), *read)
            assert _lines_of(str(path), chunks) == _expected(content)


def test_an_uncompressed_file_is_handed_out_as_spans_of_one_array(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"".join(b"line %d\n" % i for i in range(100)))
    with mock.patch.object(B, "_BLOCK_BYTES", 64):
        blocks = list(B.line_blocks(str(path)))
    assert len(blocks) > 5
    first = blocks[0][0]
    assert isinstance(first, np.ndarray) and first.size == path.stat().st_size
    assert all(buf is first for buf, _, _ in blocks)  # no per-block copy
    # Blocks of about _BLOCK_BYTES: each starts where the previous one ended.
    for (_, _, e0), (_, s1, _) in itertools.pairwise(blocks):
        assert int(s1[0]) == int(e0[-1]) + 1


def test_file_chunks_report_the_newlines_of_each_read(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    content = b"ab\ncd\n\nefg\nh"
    path.write_bytes(content)
    chunks = list(B._file_chunks(str(path), 2, 4))
    assert chunks[-1] == b""  # the file did not grow
    reads = chunks[:-1]
    assert [pos for _, pos, _ in reads] == [2, 6, 10, 12]  # 2 bytes, doubling to 4
    newlines = np.concatenate([nl for _, _, nl in reads]).tolist()
    assert newlines == [i for i, ch in enumerate(content) if ch == 10]
    arr = reads[-1][0]
    assert bytes(arr) == content


def test_a_file_that_grows_or_shrinks_while_read(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"one\ntwo\nthree\n")
    chunks = B._file_chunks(str(path), 4, 4)
    first = next(chunks)
    with open(path, "ab") as fh:
        fh.write(b"four\nfive")
    rest = list(chunks)
    assert rest[-1] == b"four\nfive"  # the bytes past the size it had when opened
    assert _lines_of(str(path), iter([first, *rest])) == [
        b"one",
        b"two",
        b"three",
        b"four",
        b"five",
    ]
    path.write_bytes(b"one\ntwo\nthree\n")
    chunks = B._file_chunks(str(path), 4, 4)
    first = next(chunks)
    with open(path, "r+b") as fh:
        fh.truncate(6)
    # What was there is taken; the read does not wait for the bytes that went.
    assert _lines_of(str(path), iter([first, *chunks])) == [b"one", b"tw"]


def test_a_stop_ends_the_reads(tmp_path: Path) -> None:
    import threading

    path = tmp_path / "a.jsonl"
    path.write_bytes(b"x\n" * 100)
    stop = threading.Event()
    chunks = B._file_chunks(str(path), 4, 4, stop)
    next(chunks)
    stop.set()
    assert list(chunks) == []


def test_reading_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(NeardupIOError, match=r"missing\.jsonl"):
        list(B.line_blocks(str(tmp_path / "missing.jsonl")))
    good = gzip.compress(b'{"text": "a"}\n' * 1000)
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(good[: len(good) // 2])
    with pytest.raises(InputError) as err:
        list(B.line_blocks(str(cut)))
    assert str(err.value).startswith(f"{cut}: cannot decompress (")
    assert str(err.value).endswith("); fix: check that the file is complete and not corrupted")
    junk = tmp_path / "junk.jsonl.gz"
    junk.write_bytes(b"not gzip at all\n")
    with pytest.raises(InputError, match=r"junk\.jsonl\.gz: cannot decompress"):
        list(B.line_blocks(str(junk)))


def test_block_view_of_bytes_and_arrays() -> None:
    assert bytes(B.block_view(b"abc")[1:]) == b"bc"
    arr = np.frombuffer(b"xyz", dtype=np.uint8)
    assert bytes(B.block_view(arr)[:2]) == b"xy"


def test_plain_pages() -> None:
    assert B._plain_pages(0).size == 0
    pages = B._plain_pages(5000, populate=True)
    assert pages.size == 5000 and not pages.any()
    pages[-1] = 1
    assert int(pages.sum()) == 1


def test_prefetch_holds_plain_jsonl_files_only(tmp_path: Path) -> None:
    a = tmp_path / "a.jsonl"
    a.write_bytes(b'{"text": "x"}\n' * 10)
    csv_file = tmp_path / "b.csv"
    csv_file.write_text("text\nx\n", encoding="utf-8")
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "n.txt").write_text("a note", encoding="utf-8")
    pf = B.Prefetch([str(a), str(csv_file), str(folder)])
    try:
        assert pf.chunks(1, str(csv_file)) is None and pf.chunks(2, str(folder)) is None
        assert pf.text_arena(1) is None
        chunks = pf.chunks(0, str(a))
        assert chunks is not None
        assert _lines_of(str(a), chunks) == [b'{"text": "x"}'] * 10
        arena = pf.text_arena(0)  # ready once a chunk was given
        assert arena is not None and arena.size == a.stat().st_size
    finally:
        pf.close()
    assert pf.text_arena(0) is None  # closing lets go of the memory

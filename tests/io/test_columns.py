"""neardup.io.columns: what a read corpus holds (RawLines, TextColumn, Corpus)."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.io import corpus as C
from neardup.io._directio import SequentialWriter
from neardup.io._ids import IdChoice
from neardup.io.columns import BadRecord, Corpus, RawLines, TextColumn
from scanned_blocks import scanned_block


def _raw_lines_from(
    blocks: list[list[bytes]], singles: list[bytes]
) -> tuple[RawLines, list[bytes]]:
    lines = RawLines()
    expected: list[bytes] = []
    for i, block in enumerate(blocks):
        buf = b"".join(line + b"\n" for line in block)
        lengths = np.array([len(x) for x in block], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths + 1)[:-1]]).astype(np.int64)
        lines.add_block(buf, starts, starts + lengths)
        expected.extend(block)
        if i < len(singles):
            lines.append(singles[i])
            expected.append(singles[i])
    return lines, expected


_line = st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"."))


@settings(max_examples=60, deadline=None)
@given(
    blocks=st.lists(st.lists(_line, min_size=1, max_size=8), max_size=5),
    singles=st.lists(_line, max_size=5),
    data=st.data(),
)
def test_raw_lines_behave_as_a_list_and_write_the_chosen_lines(
    blocks: list[list[bytes]], singles: list[bytes], data: st.DataObject
) -> None:
    lines, expected = _raw_lines_from(blocks, singles)
    assert len(lines) == len(expected)
    assert list(lines) == expected
    assert [lines[i] for i in range(len(expected))] == expected
    chosen = sorted(data.draw(st.sets(st.integers(0, max(len(expected) - 1, 0)))))
    chosen = [i for i in chosen if i < len(expected)]
    out: list[bytes] = []
    lines.write(lambda b: out.append(bytes(b)), chosen)
    assert b"".join(out) == b"".join(expected[i] + b"\n" for i in chosen)


def test_raw_lines_write_a_consecutive_run_as_one_slice() -> None:
    lines, _ = _raw_lines_from([[b"a", b"bb", b"ccc", b"d"]], [])
    out: list[bytes] = []
    lines.write(lambda b: out.append(bytes(b)), [0, 1, 2, 3])
    assert out == [b"a\nbb\nccc\nd\n"]
    out.clear()
    lines.write(lambda b: out.append(bytes(b)), [0, 2, 3])
    assert out == [b"a\n", b"ccc\nd\n"]


def test_raw_lines_take_and_prepared_writes(tmp_path: Path) -> None:
    lines, expected = _raw_lines_from([[b"a", b"bb", b"ccc"], [b"dd", b"e"]], [b"solo"])
    lines.append(b"last-without-newline-in-its-block")
    expected.append(b"last-without-newline-in-its-block")
    pick = [0, 1, 3, 4, 5, 6]
    assert lines.take(pick) == [expected[i] for i in pick]
    assert lines.take(np.array([], dtype=np.int64)) == []
    with pytest.raises(IndexError):
        lines.take([len(expected)])
    want = b"".join(expected[i] + b"\n" for i in pick)
    got: list[bytes] = []
    lines.prepare_write(pick)(lambda b: got.append(bytes(b)))
    assert b"".join(got) == want
    path = tmp_path / "w.jsonl"
    with SequentialWriter(str(path), stage_bytes=4096) as w:
        lines.prepare_write(pick)(w.write)
    assert path.read_bytes() == want


def test_text_column_encoded_is_the_utf8_of_each_text(tmp_path: Path) -> None:
    src = tmp_path / "t.jsonl"
    lines = [{"text": "plain ascii"}, {"text": "café"}, {"text": "tab\\there"}, {"text": ""}]
    src.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    texts = C.read_corpus([str(src)]).texts
    assert [texts.encoded(i) for i in range(len(texts))] == [t.encode() for t in texts]
    assert texts.encoded(-1) == b""
    listed = TextColumn(["é", "x"])
    assert listed.encoded(0) == "é".encode()
    with pytest.raises(IndexError):
        texts.encoded(len(texts))


# ---------------------------------------------------------------------------
# RawLines


def test_raw_lines_index_like_a_list() -> None:
    lines, expected = _raw_lines_from([[b"a", b"", b"c"]], [b"d"])
    assert [lines[i] for i in range(-len(expected), 0)] == expected
    for i in (len(expected), -len(expected) - 1):
        with pytest.raises(IndexError):
            lines[i]
    with pytest.raises(IndexError):
        lines.take([-len(expected) - 1])
    assert lines.take([-1, 0]) == [b"d", b"a"]
    assert lines == expected and lines == tuple(expected) and lines != expected[:-1]
    assert lines.__eq__("abc") is NotImplemented
    with pytest.raises(TypeError):
        hash(lines)


def test_empty_raw_lines() -> None:
    lines = RawLines()
    assert len(lines) == 0 and list(lines) == [] and lines == []
    assert lines.spans([]) == [] and lines.take([]) == []
    out: list[bytes] = []
    lines.write(out.append, [])
    assert out == []
    with pytest.raises(IndexError):
        lines[0]


def test_lines_appended_after_reading_start_are_still_seen() -> None:
    # Reading flattens the index arrays; lines added afterwards must show up.
    lines, expected = _raw_lines_from([[b"x", b"y"]], [])
    assert list(lines) == expected
    lines.append(b"z")
    lines.extend([b"w", b"v"])
    assert len(lines) == 5 and list(lines) == [*expected, b"z", b"w", b"v"]
    lines.add_block(b"p\nq\n", np.array([0, 2]), np.array([1, 3]))
    assert list(lines) == [b"x", b"y", b"z", b"w", b"v", b"p", b"q"]


def _one_file(content: list[bytes], cuts: list[int]) -> tuple[RawLines, list[bytes]]:
    """RawLines as a prefetched file gives them: several blocks that are one array
    (the whole file), each holding a run of its lines."""
    arr = np.frombuffer(b"".join(x + b"\n" for x in content), dtype=np.uint8)
    lengths = np.array([len(x) for x in content], dtype=np.int64)
    starts = np.zeros(len(content), dtype=np.int64)
    starts[1:] = np.cumsum(lengths + 1)[:-1]
    lines = RawLines()
    bounds = [0, *sorted(set(cuts)), len(content)]
    for lo, hi in itertools.pairwise(bounds):
        if hi > lo:
            lines.add_block(arr, starts[lo:hi], starts[lo:hi] + lengths[lo:hi])
    return lines, content


@settings(max_examples=40, deadline=None)
@given(
    content=st.lists(_line, min_size=1, max_size=12),
    data=st.data(),
)
def test_lines_of_one_array_are_written_as_spans(
    tmp_path_factory: pytest.TempPathFactory, content: list[bytes], data: st.DataObject
) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(content)), max_size=3))
    lines, expected = _one_file(content, cuts)
    singles = data.draw(st.lists(_line, max_size=2))
    lines.extend(singles)  # a second array after the file's
    expected = [*expected, *singles]
    chosen = sorted(data.draw(st.sets(st.integers(0, len(expected) - 1))))
    want = b"".join(expected[i] + b"\n" for i in chosen)
    # spans() groups positions by the array that holds them.
    spans = lines.spans(chosen)
    rebuilt = [bytes(arr[s:e]) for arr, ss, es, _, _ in spans for s, e in zip(ss, es, strict=True)]
    assert rebuilt == lines.take(chosen)
    assert [lo for *_, lo, _ in spans] == sorted(lo for *_, lo, _ in spans)
    if chosen:
        assert spans[0][3] == 0 and spans[-1][4] == len(chosen)
    # Through a SequentialWriter (compiled span writes) and through any other sink.
    path = tmp_path_factory.mktemp("spans") / "out.jsonl"
    with SequentialWriter(str(path), stage_bytes=4096) as w:
        lines.write(w.write, chosen)
    assert path.read_bytes() == want
    out: list[bytes] = []
    lines.write(lambda b: out.append(bytes(b)), chosen)
    assert b"".join(out) == want


# ---------------------------------------------------------------------------
# TextColumn


@st.composite
def _text_parts(draw: st.DrawFn) -> tuple[TextColumn, list[str]]:
    """A TextColumn built as readers build it: strings appended, and blocks of
    scanned ASCII bytes whose odd documents were given as ``str``."""
    col = TextColumn()
    want: list[str] = []
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            texts = draw(st.lists(st.text(max_size=6), max_size=4))
            col.extend(texts)
            want.extend(texts)
        else:
            ascii_texts = draw(
                st.lists(st.text(st.characters(max_codepoint=0x7F), max_size=6), max_size=4)
            )
            others = {
                j: draw(st.text(max_size=6)) for j in range(len(ascii_texts)) if draw(st.booleans())
            }
            col.add_encoded(*scanned_block(ascii_texts, others))
            want.extend(others.get(j, t) for j, t in enumerate(ascii_texts))
    return col, want


@settings(max_examples=80, deadline=None)
@given(parts=_text_parts(), data=st.data())
def test_text_column_is_the_sequence_of_its_texts(
    parts: tuple[TextColumn, list[str]], data: st.DataObject
) -> None:
    col, want = parts
    assert len(col) == len(want)
    assert list(col) == want and col == want and col == tuple(want)
    assert [col[i] for i in range(len(want))] == want
    assert [col[i] for i in range(-len(want), 0)] == want
    assert [col.encoded(i) for i in range(len(want))] == [t.encode() for t in want]
    assert col.char_count() == sum(map(len, want))
    start, stop = data.draw(st.integers(-8, 8)), data.draw(st.integers(-8, 8))
    step = data.draw(st.sampled_from([1, 2, -1]))
    assert col[start:stop:step] == want[start:stop:step]
    if want:
        index = st.integers(0, len(want) - 1)
        pairs = data.draw(st.lists(st.tuples(index, index), max_size=20))
        a, b = [x for x, _ in pairs], [y for _, y in pairs]
        got = col.equal_encoded(a, b).tolist()
        assert got == [want[x].encode() == want[y].encode() for x, y in pairs]
    assert col.equal_encoded([], []).tolist() == []
    for i in (len(want), -len(want) - 1):
        with pytest.raises(IndexError):
            col[i]
        with pytest.raises(IndexError):
            col.encoded(i)
        with pytest.raises(IndexError):
            col.equal_encoded([0, i] if want else [i], [0, 0] if want else [0])


def test_text_column_appends_after_a_block_and_is_unhashable() -> None:
    col = TextColumn(["a"])
    col.add_encoded(np.frombuffer(b"bc", dtype=np.uint8), np.array([0, 1, 2]), {})
    col.add_encoded(np.zeros(0, dtype=np.uint8), np.array([0]), {})  # no document
    col.append("d")
    assert col == ["a", "b", "c", "d"] and len(col) == 4
    assert col.__eq__(3) is NotImplemented
    with pytest.raises(TypeError):
        hash(col)
    assert TextColumn() == [] and len(TextColumn()) == 0


# ---------------------------------------------------------------------------
# Corpus and BadRecord


def test_corpus_starts_empty_and_counts_its_texts() -> None:
    c = Corpus(format="jsonl", inputs=["a.jsonl"])
    assert len(c) == 0 and c.ids == [] and c.bad == [] and c.raw_lines == []
    assert c.id_choice == IdChoice(None)
    c.texts.extend(["x", "y"])
    assert len(c) == 2
    other = Corpus(format="jsonl", inputs=["a.jsonl"])
    assert other.texts == [] and other.ids is not c.ids  # nothing shared between corpora


def test_bad_record_is_a_frozen_value() -> None:
    b = BadRecord("a.jsonl", 3, "malformed JSON")
    assert b == BadRecord("a.jsonl", 3, "malformed JSON") and b.line == 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.line = 4  # type: ignore[misc]


def test_a_text_column_refuses_what_is_not_a_str() -> None:
    from neardup import InvalidType

    col = TextColumn(["a", "b"])
    with pytest.raises(InvalidType, match=r"texts\[2\]=.*has type int, expected str"):
        col.append(3)  # type: ignore[arg-type]
    with pytest.raises(InvalidType, match=r"texts\[0\]"):
        TextColumn([b"bytes"])  # type: ignore[list-item]
    assert list(col) == ["a", "b"]


def test_checking_a_read_column_builds_none_of_its_strings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from neardup.core.checks import check_texts

    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({"text": f"doc {i}"}) + "\n" for i in range(50)))
    texts = C.read_corpus([str(path)]).texts

    def no_iteration(self: TextColumn) -> None:
        raise AssertionError("check_texts iterated the column (decoding every text)")

    monkeypatch.setattr(TextColumn, "__iter__", no_iteration)
    assert check_texts("texts", texts) is texts


@settings(max_examples=150, deadline=None)
@given(
    texts=st.lists(st.sampled_from(["", "a", "ab", "ba", "abc", "abd", "é", "ab "]), max_size=12),
    layout=st.lists(st.sampled_from(["str", "scanned", "scanned+str"]), min_size=1, max_size=4),
    data=st.data(),
)
def test_equal_encoded_compares_copies_wherever_the_texts_are_held(
    texts: list[str], layout: list[str], data: st.DataObject
) -> None:
    # Few distinct texts, many of one length: equal and unequal pairs, across
    # parts scanned as bytes, held as str, and str overrides inside a block.
    col = TextColumn()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(texts)), max_size=len(layout) - 1)))
    for kind, lo, hi in zip(layout, [0, *cuts], [*cuts, len(texts)], strict=False):
        chunk = texts[lo:hi]
        if kind == "str" or any(not t.isascii() for t in chunk):
            col.extend(chunk)
        else:
            odd = {j: t for j, t in enumerate(chunk) if j % 2} if kind == "scanned+str" else {}
            if chunk:
                col.add_encoded(*scanned_block(chunk, odd))
    assert list(col) == texts
    if not texts:
        return
    index = st.integers(0, len(col) - 1)
    pairs = data.draw(st.lists(st.tuples(index, index), min_size=1, max_size=30))
    got = col.equal_encoded([x for x, _ in pairs], [y for _, y in pairs]).tolist()
    assert got == [texts[x] == texts[y] for x, y in pairs]

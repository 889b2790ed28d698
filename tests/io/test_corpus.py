from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import InputError, NeardupIOError
from neardup.io import blocks as B
from neardup.io import corpus as C
from neardup.io import jsonl as J


def _write(path: Path) -> None:
    lines = [
        json.dumps({"id": 1, "text": "café au lait"}),
        "",
        json.dumps({"id": 2, "text": "x", "v": float("nan")}),
        json.dumps({"id": 3, "text": "big", "n": 2**70}),
        json.dumps({"id": 4, "text": "ok"}),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.parametrize("fast", [True, False])
def test_fast_and_standard_json_paths_agree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fast: bool
) -> None:
    src = tmp_path / "a.jsonl"
    _write(src)
    if not fast:
        monkeypatch.setattr(J, "fast_loads", lambda: None)
    c = C.read_corpus([str(src)], id_field="id")
    assert c.ids == [1, 2, 3, 4]
    assert c.texts == ["café au lait", "x", "big", "ok"]
    assert [line.decode() for line in c.raw_lines] == [
        ln for ln in src.read_text().splitlines() if ln
    ]
    streamed = list(C.iter_jsonl([str(src)], id_field="id"))
    assert [s[1] for s in streamed] == c.texts


def test_streaming_reports_bad_lines(tmp_path: Path) -> None:
    src = tmp_path / "b.jsonl"
    src.write_text('{"text": "a"}\n{oops\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(InputError, match=":2: malformed JSON"):
        list(C.iter_jsonl([str(src)]))
    bad: list[C.BadRecord] = []
    assert [t for _, t, _ in C.iter_jsonl([str(src)], skip_bad=True, bad=bad)] == ["a"]
    assert [(b.line, b.reason.split(" (")[0]) for b in bad] == [
        (2, "malformed JSON"),
        (3, "expected a JSON object, got list"),
    ]
    with pytest.raises(InputError, match="streaming reads JSONL only"):
        list(C.iter_jsonl([str(tmp_path / "x.csv")]))


@pytest.mark.parametrize("prefetch", [False, True])
@pytest.mark.parametrize("block", [7, 64, 1 << 20])
def test_block_reader_matches_line_by_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int, prefetch: bool
) -> None:
    # Blocks that split lines anywhere, blocks mixing valid and bad lines, a blank
    # line, CRLF endings and no final newline: the block reader (bulk fast path
    # plus per-line fallback) must give what the streaming per-line reader gives.
    src = tmp_path / "m.jsonl"
    lines = [json.dumps({"id": i, "text": f"doc {i} é"}) for i in range(40)]
    lines[5] = "{oops"
    lines[9] = ""
    lines[13] = '{"id": 13, "text": null}'
    lines[17] = json.dumps({"id": 17, "text": "crlf"}) + "\r"
    lines[21] = "[1, 2]"
    lines[25] = '{"text": "no id"}'
    src.write_bytes("\n".join(lines).encode())
    monkeypatch.setattr(B, "_BLOCK_BYTES", block)
    # Prefetched reads of other sizes than the blocks: 5 bytes doubling to 80.
    monkeypatch.setattr(C.Prefetch, "_FIRST", 5)
    monkeypatch.setattr(C.Prefetch, "_MOST", 80)
    fed: list[str] = []
    pf = C.Prefetch([str(src)]) if prefetch else None
    try:
        c = C.read_corpus(
            [str(src)], id_field="id", skip_bad=True, on_texts=fed.extend, prefetch=pf
        )
    finally:
        if pf is not None:
            pf.close()
    bad: list[C.BadRecord] = []
    ref = list(C.iter_jsonl([str(src)], id_field="id", skip_bad=True, bad=bad))
    assert c.ids == [r[0] for r in ref]
    assert c.texts == [r[1] for r in ref] == fed
    assert c.raw_lines == [r[2] for r in ref]
    assert [(b.line, b.reason) for b in c.bad] == [(b.line, b.reason) for b in bad]
    assert [o[1] for o in c.origins] == [
        i + 1 for i, ln in enumerate(lines) if i not in (5, 9, 13, 21, 25)
    ]
    with pytest.raises(InputError, match=":6: malformed JSON"):
        C.read_corpus([str(src)], id_field="id")


def test_prefetch_gives_what_reading_gives(tmp_path: Path) -> None:
    import numpy as np

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


def test_scanner_id_kinds_match() -> None:
    from neardup.kernels import _jsonscan

    assert (C.ID_INT_KIND, C.ID_STR_KIND) == (_jsonscan.ID_INT, _jsonscan.ID_STR)


def _raw_lines_from(
    blocks: list[list[bytes]], singles: list[bytes]
) -> tuple[C.RawLines, list[bytes]]:
    import numpy as np

    lines = C.RawLines()
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


def test_jsonl_kept_lines_are_byte_identical_without_final_newline(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(b'{"text": "one two three"}\n\n{"text": "four five six", "x": [1]}')
    corpus = C.read_corpus([str(src)])
    assert list(corpus.raw_lines) == [
        b'{"text": "one two three"}',
        b'{"text": "four five six", "x": [1]}',
    ]
    path = C.write_subset(corpus, [0, 1], str(tmp_path / "kept"))
    assert Path(path).read_bytes() == (
        b'{"text": "one two three"}\n{"text": "four five six", "x": [1]}\n'
    )


def test_extra_fields_are_appended_to_the_original_bytes(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(
        b'{"text":"a b c","n":1.50}\r\n'
        b'{"text": "d e f", "cluster": "old"}\n'
        b'  {"text": "\\u00e9 g h"}  \n'
    )
    corpus = C.read_corpus([str(src)])
    path = C.write_subset(
        corpus,
        [0, 1, 2],
        str(tmp_path / "dups"),
        extra={"cluster": [7, 8, 9], "representative": ["x", 0, "\u00e9"]},
    )
    lines = Path(path).read_bytes().split(b"\n")
    # Original bytes kept (number spelling, no spaces, escapes); fields appended.
    assert lines[0] == b'{"text":"a b c","n":1.50, "cluster": 7, "representative": "x"}'
    # A record that has one of the keys already is re-encoded with it replaced.
    assert json.loads(lines[1]) == {"text": "d e f", "cluster": 8, "representative": 0}
    assert lines[1] == json.dumps(
        {"text": "d e f", "cluster": 8, "representative": 0}, ensure_ascii=False
    ).encode()
    expected = '  {"text": "\\u00e9 g h", "cluster": 9, "representative": "\u00e9"}'
    assert lines[2] == expected.encode()
    assert lines[3] == b""


def test_in_memory_and_out_of_core_duplicates_are_the_same_bytes(tmp_path: Path) -> None:
    from neardup import run_dedup

    src = tmp_path / "in.jsonl"
    base = "the quick brown fox jumps over the lazy dog and then some more words follow"
    rows = [
        {"id": i, "text": f"{base} {i % 5}", "n": 1.50 if i % 2 else None, "cluster": "x"}
        if i % 3 == 0
        else {"id": i, "text": f"{base} {i % 5}", "tags": ["a", "\u00e9"]}
        for i in range(40)
    ]
    # Compact separators: appending to the original bytes keeps them compact.
    src.write_text("\n".join(json.dumps(r, separators=(",", ":")) for r in rows) + "\n")
    run_dedup([str(src)], str(tmp_path / "mem"), id_field="id", report=False)
    run_dedup([str(src)], str(tmp_path / "ooc"), id_field="id", report=False, spill=True)
    mem = (tmp_path / "mem" / "duplicates.jsonl").read_bytes()
    assert mem and mem == (tmp_path / "ooc" / "duplicates.jsonl").read_bytes()
    for line in mem.splitlines():
        rec = json.loads(line)
        assert isinstance(rec["cluster"], int) and "representative" in rec
        if rec.get("tags"):
            assert line.startswith(b'{"id":') and b'"tags":["a","\\u00e9"], "cluster": ' in line


_KEYS = ["cluster", "representative"]


def _appended_by_parsing(line: bytes, values: list[object]) -> bytes:
    """FieldAppender's result, worked out the slow way: parse, then either append
    to the original bytes or re-encode with the keys replaced."""
    rec = json.loads(line)
    body = line.rstrip()
    if not any(k in rec for k in _KEYS):
        fields = ", ".join(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}"
                           for k, v in zip(_KEYS, values, strict=True))
        return body[:-1] + b", " + fields.encode() + b"}"
    rec.update(zip(_KEYS, values, strict=True))
    return json.dumps(rec, ensure_ascii=False).encode()


@pytest.mark.parametrize(
    "line",
    [
        b'{"text": "plain"}',
        b'{"text": "says \\"cluster\\" in quotes"}',
        b'{"text": "x", "note": "cluster"}',  # the name as a value: parsed, appended
        b'{"text": "x", "cluster": 3}',
        b'{"text": "x", "\\u0063luster": 3}',  # the key spelled with an escape
        b'{"text": "\\u00e9t\\u00e9"}',
        b'{"text":"x","representative":null}  ',
        b'{"text": "tab\\there", "n": 1.50}',
    ],
)
@pytest.mark.parametrize("values", [[7, 12], [0, "doc-1"], [True, 1.5]])
def test_field_appender_equals_parsing_every_line(line: bytes, values: list[object]) -> None:
    assert C.FieldAppender(_KEYS)(line, values) == _appended_by_parsing(line, values)


def test_raw_lines_take_and_prepared_writes(tmp_path: Path) -> None:
    import numpy as np

    from neardup.io._directio import SequentialWriter

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
    listed = C.TextColumn(["é", "x"])
    assert listed.encoded(0) == "é".encode()
    with pytest.raises(IndexError):
        texts.encoded(len(texts))


_APPEND_LINES = [
    b'{"text": "plain"}',
    b'{"text": "says \\"cluster\\" in quotes"}',
    b'{"text": "x", "note": "cluster"}',
    b'{"text": "x", "cluster": 3}',
    b'{"text": "x", "\\u0063luster": 3}',
    b'{"text": "\\u00e9t\\u00e9"}',
    b'{"text":"x","representative":null}  ',
    b'{"text": "tab\\there", "n": 1.50}\r',
    b'{"text": "caf\xc3\xa9"}',
]


@settings(max_examples=60, deadline=None)
@given(
    picks=st.lists(st.integers(0, len(_APPEND_LINES) - 1), max_size=12),
    values=st.lists(
        st.tuples(st.integers(-5, 10**12), st.one_of(st.integers(), st.text(max_size=5))),
        min_size=12,
        max_size=12,
    ),
    names=st.sampled_from([_KEYS, ["cluster"], ["a/b", "c"]]),
)
def test_field_appender_many_equals_one_line_at_a_time(
    picks: list[int], values: list[tuple[int, object]], names: list[str]
) -> None:
    lines, _ = _raw_lines_from([[_APPEND_LINES[i] for i in picks]], [])
    columns = [[v[f] for v in values[: len(picks)]] for f in range(len(names))]
    add = C.FieldAppender(names)
    want = b"".join(
        add(_APPEND_LINES[i], [col[t] for col in columns]) + b"\n" for t, i in enumerate(picks)
    )
    assert add.many(lines, list(range(len(picks))), columns) == want

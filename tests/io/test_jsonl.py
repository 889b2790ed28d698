"""neardup.io.jsonl: JSONL read a block at a time into a corpus, or streamed."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import InputError
from neardup.io import blocks as B
from neardup.io import corpus as C
from neardup.io import jsonl as J
from neardup.io.columns import BadRecord, Corpus
from neardup.io.records import RecordReader


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


def test_scanner_id_kinds_match() -> None:
    from neardup.kernels import _jsonscan

    assert (C.ID_INT_KIND, C.ID_STR_KIND) == (_jsonscan.ID_INT, _jsonscan.ID_STR)


# ---------------------------------------------------------------------------
# Round trips


def _read(path: str, id_field: str | None = "id", text_field: str = "text", **kw: Any) -> Corpus:
    """read_jsonl into a fresh corpus, as read_corpus calls it for one input."""
    c = Corpus(format="jsonl", inputs=[path])
    J.read_jsonl(RecordReader(c, text_field, id_field, kw.pop("skip_bad", False)), path, 0, **kw)
    return c


_TEXT = st.text(max_size=30) | st.text(st.characters(max_codepoint=0x7F), max_size=30)
_ID = (
    st.integers(-(2**63), 2**63 - 1)
    | st.text(st.characters(max_codepoint=0x7F), max_size=6)
    | st.text(max_size=6)
)
_EXTRA = st.dictionaries(
    st.sampled_from(["meta", "n", "tags", "t\u00e9", 'q"k']),
    st.none()
    | st.booleans()
    | st.floats()
    | st.integers()
    | st.text(max_size=5)
    | st.lists(st.integers(), max_size=2),
    max_size=3,
)


@st.composite
def _records(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[bytes]]:
    recs, lines = [], []
    for _ in range(draw(st.integers(0, 8))):
        rec = draw(_EXTRA)
        rec["text"] = draw(_TEXT)
        rec["id"] = draw(_ID)
        items = list(rec.items())
        order = draw(st.permutations(range(len(items))))
        rec = dict(items[i] for i in order)
        seps = draw(st.sampled_from([(", ", ": "), (",", ":")]))
        line = json.dumps(rec, ensure_ascii=draw(st.booleans()), separators=seps).encode()
        recs.append(rec)
        lines.append(line + draw(st.sampled_from([b"", b"\r", b"  "])))
    return recs, lines


@settings(max_examples=120, deadline=None)
@given(
    data=_records(),
    block=st.sampled_from([1, 40, 1 << 20]),
    fast=st.booleans(),
    final_newline=st.booleans(),
)
def test_records_round_trip_through_both_readers(
    tmp_path_factory: pytest.TempPathFactory,
    data: tuple[list[dict[str, Any]], list[bytes]],
    block: int,
    fast: bool,
    final_newline: bool,
) -> None:
    # Arbitrary records: non-ASCII and escaped texts, ids of every kind, keys in
    # any order, other fields (NaN included), CR before the newline.  Both the
    # block reader and the streaming reader give back each text and id as
    # json.loads reads it, and each line's bytes as written.
    recs, lines = data
    path = tmp_path_factory.mktemp("rt") / "in.jsonl"
    path.write_bytes(b"\n".join(lines) + (b"\n" if final_newline and lines else b""))
    with (
        mock.patch.object(B, "_BLOCK_BYTES", block),
        mock.patch.object(J, "fast_loads", J.fast_loads if fast else lambda: None),
    ):
        c = _read(str(path))
        streamed = list(J.iter_jsonl([str(path)], id_field="id"))
    assert c.texts == [r["text"] for r in recs]
    assert c.ids == [r["id"] for r in recs]
    assert c.raw_lines == lines
    assert c.origins == [(0, i + 1) for i in range(len(recs))]
    assert c.bad == []
    assert streamed == [(r["id"], r["text"], x) for r, x in zip(recs, lines, strict=True)]
    assert [c.texts.encoded(i) for i in range(len(c))] == [r["text"].encode() for r in recs]


@pytest.mark.parametrize(
    ("field", "scanned"),
    [
        ("text", True),
        ("body_2", True),
        ("t\u00e9xt", False),
        ('a"b', False),
        ("a\\b", False),
        ("", False),
        ("tab\t", False),
    ],
)
def test_any_field_name_is_read_and_plain_ones_by_the_scanner(
    tmp_path: Path, field: str, scanned: bool
) -> None:
    assert (J._scan_keys(RecordReader(Corpus("jsonl", []), field, None, False)) is not None) is (
        scanned
    )
    src = tmp_path / "f.jsonl"
    rows = [{field: f"doc {i}", "id": i} for i in range(5)] + [{field: "caf\u00e9", "id": 5}]
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    c = _read(str(src), text_field=field)
    assert c.texts == [r[field] for r in rows] and c.ids == list(range(6))
    assert [t for _, t, _ in J.iter_jsonl([str(src)], text_field=field)] == c.texts


# ---------------------------------------------------------------------------
# Errors and what is reported


def test_a_line_that_is_not_utf8_is_bad(tmp_path: Path) -> None:
    src = tmp_path / "u.jsonl"
    src.write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n{"text": "end"}\n')
    for read in (lambda: _read(str(src), None), lambda: list(J.iter_jsonl([str(src)]))):
        with pytest.raises(InputError) as err:
            read()
        assert str(err.value) == f"{src}:2: not UTF-8 (byte 13); fix: re-encode the file as UTF-8"
    c = _read(str(src), None, skip_bad=True)
    assert c.texts == ["ok", "end"] and c.origins == [(0, 1), (0, 3)]
    assert c.bad == [BadRecord(str(src), 2, "not UTF-8 (byte 13)")]


def test_malformed_json_names_the_line_and_the_parser_message(tmp_path: Path) -> None:
    src = tmp_path / "m.jsonl"
    src.write_text('{"text": "a"}\n{"text": "b",}\n', encoding="utf-8")
    with pytest.raises(InputError) as err:
        _read(str(src), None)
    msg = str(err.value)
    assert msg.startswith(f"{src}:2: malformed JSON (")
    assert msg.endswith("); fix: fix the line, or pass --skip-bad")


def test_blank_lines_are_skipped_not_bad(tmp_path: Path) -> None:
    src = tmp_path / "b.jsonl"
    src.write_bytes(b'\n  \n{"text": "a"}\n\r\n{"text": "b"}\n\n')
    c = _read(str(src), None)
    assert c.texts == ["a", "b"] and c.bad == [] and c.origins == [(0, 3), (0, 5)]
    assert [t for _, t, _ in J.iter_jsonl([str(src)])] == ["a", "b"]


def test_streaming_several_inputs_in_order(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.ndjson.gz"
    a.write_text('{"text": "one", "id": "x"}\n[]\n', encoding="utf-8")
    with gzip.open(b, "wb") as fh:
        fh.write(b'{"text": "two"}\n{"text": "three", "id": 3}\n')
    bad: list[BadRecord] = []
    got = list(J.iter_jsonl([str(a), str(b)], id_field="id", skip_bad=True, bad=bad))
    assert got == [
        ("x", "one", b'{"text": "one", "id": "x"}'),
        (3, "three", b'{"text": "three", "id": 3}'),
    ]
    assert [(x.path, x.line) for x in bad] == [(str(a), 2), (str(b), 1)]
    # With id_optional a record without the id is read, with no id.
    got = list(J.iter_jsonl([str(b)], id_field="id", id_optional=True))
    assert [(i, t) for i, t, _ in got] == [(None, "two"), (3, "three")]
    # Without id_field every id is None.
    assert [i for i, _, _ in J.iter_jsonl([str(a), str(b)], skip_bad=True)] == [None] * 3
    # Every input is checked before the first record is given.
    stream = J.iter_jsonl([str(a), str(tmp_path / "c.parquet")])
    with pytest.raises(InputError, match=r"c\.parquet: streaming reads JSONL only; fix: conv"):
        next(stream)


def test_texts_and_blocks_are_handed_on_while_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "h.jsonl"
    rows = [json.dumps({"text": f"doc {i}" if i % 3 else f"caf\u00e9 {i}"}) for i in range(30)]
    src.write_text("\n".join(rows) + "\n", encoding="utf-8")
    monkeypatch.setattr(B, "_BLOCK_BYTES", 64)
    calls: list[list[str]] = []
    c = _read(str(src), None, on_texts=calls.append)
    assert len(calls) > 1 and [t for call in calls for t in call] == list(c.texts)
    blocks: list[str] = []

    def on_block(buf: Any, offsets: Any, others: dict[int, str]) -> None:
        for j in range(len(offsets) - 1):
            blocks.append(others.get(j) or bytes(buf[offsets[j] : offsets[j + 1]]).decode())

    seen: list[list[str]] = []
    c2 = _read(str(src), None, on_texts=seen.append, on_block=on_block)
    assert blocks == list(c.texts) == list(c2.texts)
    assert seen == []  # on_block takes the place of on_texts


def test_fast_loads_is_orjson_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    orjson = pytest.importorskip("orjson")
    assert J.fast_loads() is orjson.loads
    monkeypatch.setitem(sys.modules, "orjson", None)  # as if not installed
    assert J.fast_loads() is None

"""neardup.io.writers: a corpus's records written back in the input's format."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.io import corpus as C
from neardup.io.columns import Corpus, RawLines
from neardup.io.writers import FieldAppender, prepare_subset, write_subset


def _one_block(lines: list[bytes]) -> RawLines:
    """RawLines holding ``lines`` in one block, as the reader keeps them."""
    raw = RawLines()
    buf = b"".join(line + b"\n" for line in lines)
    lengths = np.array([len(x) for x in lines], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths + 1)[:-1]]).astype(np.int64)
    raw.add_block(buf, starts, starts + lengths)
    return raw


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
    assert (
        lines[1]
        == json.dumps(
            {"text": "d e f", "cluster": 8, "representative": 0}, ensure_ascii=False
        ).encode()
    )
    expected = '  {"text": "\\u00e9 g h", "cluster": 9, "representative": "\u00e9"}'
    assert lines[2] == expected.encode()
    assert lines[3] == b""


_KEYS = ["cluster", "representative"]


def _appended_by_parsing(line: bytes, values: list[object]) -> bytes:
    """FieldAppender's result, worked out the slow way: parse, then either append
    to the original bytes or re-encode with the keys replaced."""
    rec = json.loads(line)
    body = line.rstrip()
    if not any(k in rec for k in _KEYS):
        fields = ", ".join(
            f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}"
            for k, v in zip(_KEYS, values, strict=True)
        )
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
    lines = _one_block([_APPEND_LINES[i] for i in picks])
    columns = [[v[f] for v in values[: len(picks)]] for f in range(len(names))]
    add = C.FieldAppender(names)
    want = b"".join(
        add(_APPEND_LINES[i], [col[t] for col in columns]) + b"\n" for t, i in enumerate(picks)
    )
    assert add.many(lines, list(range(len(picks))), columns) == want


# ---------------------------------------------------------------------------
# FieldAppender against json.loads

_VALUE = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=6)
    | st.floats(allow_nan=False, allow_infinity=False)
)
_RECORD = st.dictionaries(
    st.sampled_from(["id", "meta", "cluster", "c\u00e9", "a/b", "n"]), _VALUE, max_size=4
).map(lambda d: {"text": "t", **d})


@settings(max_examples=150, deadline=None)
@given(
    rec=_RECORD,
    ensure_ascii=st.booleans(),
    seps=st.sampled_from([(", ", ": "), (",", ":")]),
    names=st.sampled_from([["cluster"], ["cluster", "representative"], ["a/b"], ["c\u00e9"]]),
    data=st.data(),
)
def test_appended_fields_parse_as_the_record_with_them_set(
    rec: dict[str, Any],
    ensure_ascii: bool,
    seps: tuple[str, str],
    names: list[str],
    data: st.DataObject,
) -> None:
    line = json.dumps(rec, ensure_ascii=ensure_ascii, separators=seps).encode()
    values = [data.draw(_VALUE) for _ in names]
    out = FieldAppender(names)(line, values)
    assert json.loads(out) == {**rec, **dict(zip(names, values, strict=True))}
    if not any(n in rec for n in names):
        # Nothing to replace: the record's own bytes are kept as they were.
        assert out.startswith(line[:-1])
    many = FieldAppender(names).many(_one_block([line]), [0], [[v] for v in values])
    assert many == out + b"\n"


# ---------------------------------------------------------------------------
# write_subset and prepare_subset


def _jsonl_corpus(lines: list[bytes]) -> Corpus:
    c = Corpus(format="jsonl", inputs=["in.jsonl"])
    c.raw_lines = _one_block(lines)
    c.texts.extend(json.loads(x)["text"] for x in lines)
    c.ids.extend(range(len(lines)))
    return c


def test_prepare_subset_writes_when_called(tmp_path: Path) -> None:
    corpus = _jsonl_corpus([b'{"text": "a"}', b'{"text": "b"}', b'{"text": "c"}'])
    write = prepare_subset(corpus, np.array([0, 2]), str(tmp_path / "kept"))
    assert not (tmp_path / "kept.jsonl").exists()
    assert write() == str(tmp_path / "kept.jsonl")
    assert (tmp_path / "kept.jsonl").read_bytes() == b'{"text": "a"}\n{"text": "c"}\n'
    # The other formats write through write_subset.
    txt = Corpus(format="txt", inputs=["d"], ids=["a.txt"])
    txt.texts.append("note")
    assert prepare_subset(txt, [0], str(tmp_path / "t"))() == str(tmp_path / "t.jsonl")
    empty = prepare_subset(corpus, [], str(tmp_path / "none"))
    assert Path(empty()).read_bytes() == b""


def test_many_lines_with_extra_fields_are_written_in_order(tmp_path: Path) -> None:
    n = 70_000  # more than one batch of appended lines
    corpus = _jsonl_corpus([b'{"text": "d%d"}' % i for i in range(n)])
    picked = list(range(0, n, 1))
    path = write_subset(corpus, picked, str(tmp_path / "dups"), extra={"cluster": picked})
    got = Path(path).read_bytes().splitlines()
    assert len(got) == n
    assert got[0] == b'{"text": "d0", "cluster": 0}'
    assert got[-1] == b'{"text": "d69999", "cluster": 69999}'
    assert got[65536] == b'{"text": "d65536", "cluster": 65536}'


def test_txt_records_are_written_as_jsonl(tmp_path: Path) -> None:
    c = Corpus(format="txt", inputs=["notes"], ids=["a.txt", "b/c.txt", "d.txt"])
    c.texts.extend(["first", "caf\u00e9\n", "third"])
    path = write_subset(c, [0, 1], str(tmp_path / "dups"), extra={"cluster": [0, 0]})
    assert path == str(tmp_path / "dups.jsonl")
    assert Path(path).read_text(encoding="utf-8").splitlines() == [
        '{"id": "a.txt", "text": "first", "cluster": 0}',
        '{"id": "b/c.txt", "text": "caf\u00e9\\n", "cluster": 0}',  # not ASCII-escaped
    ]


def test_csv_records_are_written_with_their_columns(tmp_path: Path) -> None:
    rows = [
        {"id": "1", "text": 'a, "quoted"', "n": ""},
        {"id": "2", "text": "two\nlines", "n": "x"},
        {"id": "3", "text": "three", "n": "y"},
    ]
    c = Corpus(format="csv", inputs=["in.csv"], csv_fields=["id", "text", "n"], csv_rows=rows)
    path = write_subset(c, [0, 1], str(tmp_path / "dups"), extra={"cluster": [5, 5]})
    assert path == str(tmp_path / "dups.csv")
    with open(path, encoding="utf-8", newline="") as fh:
        back = list(csv.DictReader(fh))
    assert back == [{**rows[0], "cluster": "5"}, {**rows[1], "cluster": "5"}]
    assert rows[0] == {"id": "1", "text": 'a, "quoted"', "n": ""}  # the corpus is untouched
    kept = write_subset(c, [], str(tmp_path / "kept"))
    assert Path(kept).read_text(encoding="utf-8") == "id,text,n\n"


def test_parquet_records_keep_the_schema_and_input_order(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    t1 = pa.table({"id": pa.array([1, 2], pa.int64()), "text": ["a", "b"]})
    t2 = pa.table({"id": pa.array([3, 4], pa.int32()), "text": ["c", "d"]})  # cast on write
    c = Corpus(
        format="parquet",
        inputs=["1.parquet", "2.parquet"],
        tables=[t1, t2],
        row_index=[(0, 0), (0, 1), (1, 0), (1, 1)],
    )
    path = write_subset(c, [1, 2, 3], str(tmp_path / "dups"), extra={"cluster": [7, 7, 8]})
    assert path == str(tmp_path / "dups.parquet")
    back = pq.read_table(path)
    assert back.to_pylist() == [
        {"id": 2, "text": "b", "cluster": 7},
        {"id": 3, "text": "c", "cluster": 7},
        {"id": 4, "text": "d", "cluster": 8},
    ]
    assert back.schema.field("id").type == pa.int64()
    none = pq.read_table(write_subset(c, [], str(tmp_path / "kept")))
    assert none.num_rows == 0 and none.schema == t1.schema
    empty = Corpus(format="parquet", inputs=["e.parquet"])
    assert pq.read_table(write_subset(empty, [], str(tmp_path / "e"))).column_names == [
        "id",
        "text",
    ]

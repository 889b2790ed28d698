"""neardup.io.readers: CSV, ``.txt`` files and Arrow tables read into a corpus."""

from __future__ import annotations

import csv
import gzip
import io
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import InputError
from neardup.io.columns import BadRecord, Corpus
from neardup.io.readers import raw_line_of, read_arrow, read_csv, read_txt
from neardup.io.records import RecordReader


def _reader(
    fmt: str,
    id_field: str | None = None,
    *,
    skip_bad: bool = False,
    id_optional: bool = False,
    text_field: str = "text",
) -> RecordReader:
    return RecordReader(Corpus(format=fmt, inputs=[]), text_field, id_field, skip_bad, id_optional)


# ---------------------------------------------------------------------------
# CSV


def test_csv_rows_are_read_with_their_columns(tmp_path: Path) -> None:
    p = tmp_path / "a.csv"
    p.write_text(
        '\ufeffid,text,n\n1,"a, quoted ""one""",x\n2,"two\nlines",\n3,caf\u00e9,z\n',
        encoding="utf-8",
    )
    r = _reader("csv", "id")
    read_csv(r, str(p), 0)
    # The byte-order mark is not part of the first column's name.
    assert r.c.csv_fields == ["id", "text", "n"]
    assert r.c.ids == ["1", "2", "3"]
    assert r.c.texts == ['a, quoted "one"', "two\nlines", "caf\u00e9"]
    assert r.c.csv_rows[1] == {"id": "2", "text": "two\nlines", "n": ""}
    # Origins are the line where each row ends (a quoted newline spans two).
    assert r.c.origins == [(0, 2), (0, 4), (0, 5)]


def test_compressed_csv_and_a_second_input(tmp_path: Path) -> None:
    a, b = tmp_path / "a.csv.gz", tmp_path / "b.csv"
    with gzip.open(a, "wt", encoding="utf-8", newline="") as fh:
        fh.write("text,id\nfirst,a\n")
    b.write_text("text,id\nsecond,b\n", encoding="utf-8")
    r = _reader("csv")
    read_csv(r, str(a), 0)
    read_csv(r, str(b), 1)
    assert r.c.texts == ["first", "second"] and r.c.ids == [0, 1]
    assert r.c.origins == [(0, 2), (1, 2)]
    c = tmp_path / "c.csv"
    c.write_text("id,text\nc,third\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        read_csv(r, str(c), 2)
    assert str(err.value) == (
        f"{c}:1: CSV columns differ from the first input's; "
        "fix: use the same columns as the first file: ['text', 'id']"
    )


@pytest.mark.parametrize(
    ("body", "line", "reason"),
    [
        ("text,id\na,1\nb,2,extra,more\nc,3\n", 3, "the row has 4 fields, the header 2"),
        ("text,id\na,1\nb\nc,3\n", 3, "the row has 1 field, the header 2"),
        ("text,n,id\na,1,1\nb,2\n", 3, "the row has 2 fields, the header 3"),
    ],
)
def test_csv_rows_that_do_not_match_the_header(
    tmp_path: Path, body: str, line: int, reason: str
) -> None:
    p = tmp_path / "r.csv"
    p.write_text(body, encoding="utf-8")
    with pytest.raises(InputError) as err:
        read_csv(_reader("csv"), str(p), 0)
    assert str(err.value) == (
        f"{p}:{line}: {reason}; fix: quote fields that contain the delimiter, or fix the row"
    )
    r = _reader("csv", skip_bad=True)
    read_csv(r, str(p), 0)
    assert r.c.bad == [BadRecord(str(p), line, reason)]
    assert len(r.c.texts) == len(r.c.csv_rows) == body.count("\n") - 2


def test_csv_errors_name_the_file_and_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match=r"empty\.csv:1: empty CSV file \(no header\); fix: wr"):
        read_csv(_reader("csv"), str(empty), 0)
    quote = tmp_path / "quote.csv"
    quote.write_text('id,text\n1,ok\n2,"an open quote\n3,more\n', encoding="utf-8")
    # Not a record's fault: raised even with skip_bad.  (The line named is where
    # the csv module stopped, the last complete row, not the one the quote opens.)
    with pytest.raises(
        InputError,
        match=r"quote\.csv:\d+: malformed CSV \(unexpected end of data\); fix: close every quoted",
    ):
        read_csv(_reader("csv", skip_bad=True), str(quote), 0)
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"id,text\n1,ok\n2,caf\xe9\n")
    with pytest.raises(InputError, match=r"latin\.csv:3: not UTF-8 \(byte 18\); fix: re-encode"):
        read_csv(_reader("csv"), str(latin), 0)
    r = _reader("csv", skip_bad=True)
    read_csv(r, str(latin), 0)  # the whole file is undecodable: one bad record, no rows
    assert r.c.bad == [BadRecord(str(latin), 3, "not UTF-8 (byte 18)")] and r.c.texts == []


def test_a_csv_without_the_text_column_is_a_bad_record_per_row(tmp_path: Path) -> None:
    p = tmp_path / "a.csv"
    p.write_text("id,body\n1,x\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"a\.csv:2: no field 'text' \(fields: body, id\)"):
        read_csv(_reader("csv"), str(p), 0)


_CELL = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12
)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(_CELL, _CELL), max_size=6))
def test_csv_round_trips_any_text(
    tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[str, str]]
) -> None:
    # Commas, quotes, CR/LF inside fields and non-ASCII: what csv writes is read back.
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(["id", "text"])
    w.writerows(rows)
    p = tmp_path_factory.mktemp("csv") / "x.csv"
    p.write_bytes(buf.getvalue().encode())
    r = _reader("csv", "id")
    read_csv(r, str(p), 0)
    assert r.c.bad == []
    assert list(zip(r.c.ids, r.c.texts, strict=True)) == rows


# ---------------------------------------------------------------------------
# .txt files


def test_a_folder_of_txt_files_is_one_document_per_file(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    (root / "b" / "c").mkdir(parents=True)
    (root / "z.txt").write_text("last", encoding="utf-8")
    (root / "a.txt").write_text("first\nwith two lines\n", encoding="utf-8")
    (root / "b" / "c" / "deep.txt").write_text("caf\u00e9", encoding="utf-8")
    (root / "b" / "skip.md").write_text("not a document", encoding="utf-8")
    (root / "empty.txt").write_bytes(b"")
    r = _reader("txt")
    read_txt(r, str(root), 3)
    # Ids are the relative paths with "/", in sorted order.
    assert r.c.ids == ["a.txt", "b/c/deep.txt", "empty.txt", "z.txt"]
    assert r.c.texts == ["first\nwith two lines\n", "caf\u00e9", "", "last"]
    assert r.c.origins == [(3, 0), (3, 1), (3, 2), (3, 3)]


def test_one_txt_file_is_one_document_named_by_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "note.txt").write_text("a note", encoding="utf-8")
    r = _reader("txt")
    read_txt(r, str(tmp_path / "note.txt"), 0)
    assert (r.c.ids, r.c.texts) == (["note.txt"], ["a note"])
    monkeypatch.chdir(tmp_path)  # a bare file name, no folder part
    r = _reader("txt")
    read_txt(r, "note.txt", 0)
    assert (r.c.ids, r.c.texts) == (["note.txt"], ["a note"])


def test_a_txt_file_that_is_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("good", encoding="utf-8")
    (tmp_path / "b.txt").write_bytes(b"line one\nline \xff two\n")
    with pytest.raises(InputError) as err:
        read_txt(_reader("txt"), str(tmp_path), 0)
    assert str(err.value) == f"{tmp_path / 'b.txt'}:2: not UTF-8 (byte 14); fix: re-encode as UTF-8"
    r = _reader("txt", skip_bad=True)
    read_txt(r, str(tmp_path), 0)
    assert r.c.ids == ["a.txt"] and r.c.bad == [
        BadRecord(str(tmp_path / "b.txt"), 2, "not UTF-8 (byte 14)")
    ]


def test_raw_line_of_counts_the_lines_before_the_bad_byte() -> None:
    for data, line in [(b"\xff", 1), (b"a\nb\n\xff", 3), (b"\n\n\nab\xc3", 4)]:
        with pytest.raises(UnicodeDecodeError) as err:
            data.decode("utf-8")
        assert raw_line_of(err.value) == line


# ---------------------------------------------------------------------------
# Arrow: Parquet and saved datasets


def _parquet(path: Path, columns: dict[str, list[object]]) -> str:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table(columns), path)
    return str(path)


def test_parquet_rows_are_read_with_their_table(tmp_path: Path) -> None:
    p = _parquet(
        tmp_path / "a.parquet",
        {"id": [10, 11, 12], "text": ["x", "caf\u00e9", ""], "n": [1.5, None, 3.0]},
    )
    r = _reader("parquet", "id")
    read_arrow(r, p, 1, "parquet")
    assert r.c.ids == [10, 11, 12] and r.c.texts == ["x", "caf\u00e9", ""]
    assert r.c.origins == [(1, 0), (1, 1), (1, 2)]
    assert r.c.row_index == [(0, 0), (0, 1), (0, 2)]
    assert len(r.c.tables) == 1 and r.c.tables[0].column_names == ["id", "text", "n"]
    read_arrow(r, p, 2, "parquet")  # a second table: row_index names it
    assert r.c.row_index[3:] == [(1, 0), (1, 1), (1, 2)]
    plain = _reader("parquet")
    read_arrow(plain, p, 0, "parquet")
    assert plain.c.ids == [0, 1, 2]


def test_parquet_rows_without_a_text_or_id_are_bad(tmp_path: Path) -> None:
    p = _parquet(tmp_path / "a.parquet", {"id": [1, None, 3], "text": ["a", "b", None]})
    with pytest.raises(InputError) as err:
        read_arrow(_reader("parquet", "id"), p, 0, "parquet")
    assert str(err.value) == (
        f"{p}:2: row 1 has a null id 'id'; fix: give every row an id, or omit --id-field to "
        "number the rows"
    )
    r = _reader("parquet", "id", skip_bad=True)
    read_arrow(r, p, 0, "parquet")
    assert r.c.ids == [1] and [(b.line, b.reason) for b in r.c.bad] == [
        (2, "row 1 has a null id 'id'"),
        (3, "row 2 has a non-text 'text'"),
    ]


def test_parquet_columns_that_are_not_there(tmp_path: Path) -> None:
    p = _parquet(tmp_path / "a.parquet", {"key": ["k"], "body": ["b"]})
    with pytest.raises(InputError) as err:
        read_arrow(_reader("parquet"), p, 0, "parquet")
    assert str(err.value) == (
        f"{p}: no column 'text' (columns: ['key', 'body']); "
        "fix: pass --text-field with one of the columns above"
    )
    with pytest.raises(InputError, match=r"no id column 'id'; fix: pass --id-field with one of"):
        read_arrow(_reader("parquet", "id", text_field="body"), p, 0, "parquet")


def test_a_detected_id_column_may_be_missing_or_null(tmp_path: Path) -> None:
    # A detected id field (io._ids) never stops a run: a record without it is not
    # bad, and settle_ids falls back to row numbers afterwards.
    lacking = _parquet(tmp_path / "a.parquet", {"text": ["a"]})
    nulls = _parquet(tmp_path / "b.parquet", {"id": ["k", None], "text": ["b", "c"]})
    r = _reader("parquet", "id", id_optional=True)
    read_arrow(r, lacking, 0, "parquet")
    read_arrow(r, nulls, 1, "parquet")
    assert r.c.texts == ["a", "b", "c"] and r.c.ids == [None, "k", None] and r.c.bad == []


def test_a_damaged_parquet_file(tmp_path: Path) -> None:
    good = Path(_parquet(tmp_path / "a.parquet", {"text": ["x"] * 100}))
    bad = tmp_path / "b.parquet"
    bad.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    with pytest.raises(InputError, match=r"b\.parquet: cannot read Parquet \(.*\); fix: check"):
        read_arrow(_reader("parquet"), str(bad), 0, "parquet")


def test_a_saved_dataset_is_read_as_a_table(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict({"id": ["a", "b"], "text": ["one", "two"]}).save_to_disk(
        str(tmp_path / "ds")
    )
    r = _reader("hf", "id")
    read_arrow(r, str(tmp_path / "ds"), 0, "hf")
    assert r.c.ids == ["a", "b"] and r.c.texts == ["one", "two"] and len(r.c.tables) == 1
    datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({"text": ["x"]}),
            "test": datasets.Dataset.from_dict({"text": ["y"]}),
        }
    ).save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(InputError, match=r"a DatasetDict with splits \[.*'train'.*\]; fix: point"):
        read_arrow(_reader("hf"), str(tmp_path / "dd"), 0, "hf")
    (tmp_path / "no").mkdir()
    with pytest.raises(InputError, match=r"not a readable saved dataset \(\w+"):
        read_arrow(_reader("hf"), str(tmp_path / "no"), 0, "hf")


def test_reading_arrow_without_pyarrow_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(InputError, match=r"reading parquet needs pyarrow; fix: pip install "):
        read_arrow(_reader("parquet"), str(tmp_path / "a.parquet"), 0, "parquet")

"""The compiled JSONL scanner against ``json.loads`` (the reader's reference)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.io import blocks as B
from neardup.io import corpus as C
from neardup.io import jsonl as J
from neardup.kernels._jsonscan import ID_INT, ID_STR, scan_block

_KEYS = st.sampled_from(["text", "id", "meta", "tags", "t", "text ", "Text", "i\u00e9"])
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=8,
)
_TEXTS = st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=60) | st.text(max_size=20)


@st.composite
def _lines(draw: st.DrawFn) -> bytes:
    rec: dict[str, Any] = draw(st.dictionaries(_KEYS, _VALUES, max_size=4))
    if draw(st.booleans()):
        rec["text"] = draw(_TEXTS)
    if draw(st.booleans()):
        rec["id"] = draw(st.integers(-(10**19), 10**19) | st.text(max_size=8) | _SCALARS)
    seps = draw(st.sampled_from([(", ", ": "), (",", ":"), (" , ", " : ")]))
    line = json.dumps(rec, ensure_ascii=draw(st.booleans()), separators=seps).encode()
    if draw(st.booleans()):
        # Damage it: most damaged lines are invalid, some stay valid JSON.
        pos = draw(st.integers(0, len(line)))
        junk = draw(
            st.sampled_from([b"", b" ", b",", b"}", b"{", b'"', b"\\", b"0", b"-", b"e", b"\t"])
        )
        cut = draw(st.integers(0, 2))
        line = line[:pos] + junk + line[pos + cut :]
    return (
        draw(st.sampled_from([b"", b"  ", b"\r"]))
        + line
        + draw(st.sampled_from([b"", b" ", b"\r"]))
    )


def _scan(lines: list[bytes], text_field: str = "text", id_field: str | None = "id") -> Any:
    buf = b"\n".join(lines) + b"\n"
    lengths = np.array([len(x) for x in lines], dtype=np.int64)
    starts = np.zeros(len(lines), dtype=np.int64)
    starts[1:] = np.cumsum(lengths + 1)[:-1]
    tk = np.frombuffer(text_field.encode(), dtype=np.uint8)
    ik = np.frombuffer((id_field or "").encode(), dtype=np.uint8)
    return buf, scan_block(
        np.frombuffer(buf, dtype=np.uint8), starts, starts + lengths, tk, ik, id_field is not None
    )


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.lists(_lines(), min_size=1, max_size=6), st.booleans())
def test_every_line_it_reads_is_read_as_json_loads_reads_it(
    lines: list[bytes], with_id: bool
) -> None:
    buf, (handled, text, offsets, kind, ints, ids0, ids1) = _scan(
        lines, id_field="id" if with_id else None
    )
    for i, line in enumerate(lines):
        if not handled[i]:
            continue
        rec = json.loads(line)
        assert isinstance(rec, dict)
        assert isinstance(rec["text"], str) and rec["text"].isascii()
        assert bytes(text[offsets[i] : offsets[i + 1]]).decode("ascii") == rec["text"]
        if with_id:
            if kind[i] == ID_INT:
                assert type(rec["id"]) is int and rec["id"] == ints[i]
            else:
                assert kind[i] == ID_STR
                assert rec["id"] == buf[ids0[i] : ids1[i]].decode("ascii")


def test_plain_records_are_read_and_the_rest_left_to_python() -> None:
    lines = [
        b'{"id": 7, "text": "a\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u0041\\u007f"}',
        b' {"meta": {"x": [1, -2.5e-3, true, false, null, {}], "y": []}, "text": "", "id": "k"}\r',
        b'{"id": 1, "text": "caf\\u00e9"}',  # decodes to non-ASCII
        b'{"id": 1, "text": "caf\xc3\xa9"}',  # non-ASCII bytes
        b'{"id": 1.0, "text": "x"}',  # a float id
        b'{"id": 1, "text": "x", "text": "y"}',  # duplicate key
        b'{"id": 1, "te\\u0078t": "x"}',  # escaped key
        b'{"id": 1, "text": "x",}',  # trailing comma
        b'{"id": 01, "text": "x"}',  # leading zero
        b'{"id": 1, "text": NaN}',
        b'{"id": 1, "text": "x"} x',
        b"",
        b'{"id": 123456789012345678901, "text": "x"}',  # beyond 18 digits
    ]
    _, (handled, text, offsets, kind, ints, _, _) = _scan(lines)
    assert handled.tolist() == [True, True] + [False] * 11
    assert bytes(text[offsets[0] : offsets[1]]) == b'a"b\\c/d\b\f\n\r\tA\x7f'
    assert ints[0] == 7 and kind[1] == ID_STR and offsets[2] == offsets[1]


@pytest.mark.parametrize("id_field", [None, "id", "key"])
def test_reader_gives_the_same_corpus_with_and_without_the_scanner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, id_field: str | None
) -> None:
    src = tmp_path / "m.jsonl"
    rows = []
    for i in range(300):
        text = f"doc {i} caf\u00e9" if i % 7 == 0 else f'doc {i}\nline "{i}"'
        rows.append(json.dumps({"id": i, "key": f"k{i}", "text": text}, ensure_ascii=i % 2 == 0))
    rows[10] = "{oops"
    rows[11] = ""
    rows[12] = '{"id": 12, "key": "k12", "text": null}'
    rows[13] = '{"id": 13.5, "key": "k13", "text": "float id"}'
    src.write_bytes(("\r\n".join(rows[:50]) + "\n" + "\n".join(rows[50:])).encode())
    monkeypatch.setattr(B, "_BLOCK_BYTES", 2048)
    fed: list[tuple[bytes, list[int], dict[int, str]]] = []
    with_scan = C.read_corpus(
        [str(src)],
        id_field=id_field,
        skip_bad=True,
        on_block=lambda b, o, d: fed.append((bytes(b), o.tolist(), dict(d))),
    )
    monkeypatch.setattr(J, "_scan_keys", lambda r: None)
    without = C.read_corpus([str(src)], id_field=id_field, skip_bad=True)
    assert with_scan.ids == without.ids
    assert list(with_scan.texts) == list(without.texts)
    assert with_scan.texts.char_count() == sum(map(len, without.texts))
    assert [with_scan.texts[i] for i in range(len(without.texts))] == list(without.texts)
    assert list(with_scan.raw_lines) == list(without.raw_lines)
    assert with_scan.origins == without.origins
    assert [(b.line, b.reason) for b in with_scan.bad] == [(b.line, b.reason) for b in without.bad]
    # What on_block was given is exactly the texts, in order.
    got: list[str] = []
    for buf, offs, others in fed:
        for j in range(len(offs) - 1):
            got.append(others[j] if j in others else buf[offs[j] : offs[j + 1]].decode("ascii"))
    assert got == list(without.texts)


@pytest.mark.parametrize("special", ['\\n', '\\"', "\\\\", "\\u0041", "\\u00e9", "é", "\x01", '"'])
@pytest.mark.parametrize("before", range(0, 19))
def test_special_bytes_at_every_offset_of_the_eight_byte_scan(special: str, before: int) -> None:
    # The text is read eight bytes at a time; a special byte (escape, quote,
    # control or non-ASCII) at each offset of a window must end the window there.
    body = "a" * before + special + "bcdefghijklmnopq"[: (before * 5) % 17]
    line = ('{"id": 1, "text": "' + body + '"}').encode()
    _, (handled, text, offsets, *_) = _scan([line])
    try:
        want = json.loads(line)["text"]
    except ValueError:
        assert not handled[0]
        return
    if handled[0]:
        assert text[offsets[0] : offsets[1]].tobytes().decode("ascii") == want
    else:
        assert not want.isascii() or "\x01" in body  # left to the Python path

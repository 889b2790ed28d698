from __future__ import annotations

import json
from pathlib import Path

import pytest

from neardup import InputError
from neardup import corpus as C


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
        monkeypatch.setattr(C, "_fast_loads", lambda: None)
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


@pytest.mark.parametrize("block", [7, 64, 1 << 20])
def test_block_reader_matches_line_by_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
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
    monkeypatch.setattr(C, "_BLOCK_BYTES", block)
    fed: list[str] = []
    c = C.read_corpus([str(src)], id_field="id", skip_bad=True, on_texts=fed.extend)
    bad: list[C.BadRecord] = []
    ref = list(C.iter_jsonl([str(src)], id_field="id", skip_bad=True, bad=bad))
    assert c.ids == [r[0] for r in ref]
    assert c.texts == [r[1] for r in ref] == fed
    assert c.raw_lines == [r[2] for r in ref]
    assert [(b.line, b.reason) for b in c.bad] == [(b.line, b.reason) for b in bad]
    assert [o[1] for o in c.origins] == [i + 1 for i, ln in enumerate(lines) if i not in
                                         (5, 9, 13, 21, 25)]
    with pytest.raises(InputError, match=":6: malformed JSON"):
        C.read_corpus([str(src)], id_field="id")

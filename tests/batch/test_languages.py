"""Per-language counts of ``stats.json`` and ``report.html``: in memory, out of core
and with a language field, against the planted truth."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.batch.job import run_dedup
from neardup.batch.languages import language_labels, language_stats
from neardup.core.config import RunOptions
from neardup.testing import synthetic_documents
from neardup.text.scripts import SCRIPTS

# Each language's documents are the same synthetic words written in its letters.
_LETTERS = {
    "Latin": lambda c: c,
    "Cyrillic": lambda c: chr(0x430 + ord(c) - ord("a")),
    "Greek": lambda c: chr(0x3B1 + (ord(c) - ord("a")) % 24),
    "Han": lambda c: chr(0x4E00 + 37 * (ord(c) - ord("a"))),
}
_COPIES = {"Latin": 5, "Cyrillic": 3, "Greek": 0, "Han": 4}


def _corpus(path: Path, lang: bool = False) -> dict[str, dict[str, Any]]:
    """Write the corpus; return the expected ``by_language`` (exact copies are the
    only duplicates: the originals share no shingle)."""
    rows = []
    want: dict[str, dict[str, Any]] = {}
    for k, (name, letter) in enumerate(_LETTERS.items()):
        docs = [
            "".join(letter(c) if c.isalpha() else c for c in d.lower())
            for d in synthetic_documents(12, seed=40 + k, words=40)
        ]
        docs += docs[: _COPIES[name]]
        for i, d in enumerate(docs):
            rec: dict[str, Any] = {"id": f"{name}-{i}", "text": d}
            if lang and i % 2 == 0:
                rec["lang"] = f"lang-{name}"
            rows.append(rec)
        want[name] = {"documents": len(docs), "duplicates": _COPIES[name]}
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return want


def _counts(by_language: dict[str, Any]) -> dict[str, dict[str, int]]:
    return {k: {"documents": v["documents"], "duplicates": v["duplicates"]}
            for k, v in by_language.items()}


@pytest.mark.parametrize("spill", [False, True])
def test_stats_count_each_script_as_planted(tmp_path: Path, spill: bool) -> None:
    want = _corpus(tmp_path / "in.jsonl")
    run = run_dedup(
        [str(tmp_path / "in.jsonl")],
        str(tmp_path / "out"),
        options=RunOptions(spill=spill),
    )
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats.get("out_of_core", False) is spill
    assert stats["language_field"] is None
    assert _counts(stats["by_language"]) == want
    for c in stats["by_language"].values():
        assert c["kept"] == c["documents"] - c["duplicates"]
        assert c["duplicate_rate"] == round(c["duplicates"] / c["documents"], 6)
    assert dict(run.stats)["by_language"] == stats["by_language"]
    page = (tmp_path / "out" / "report.html").read_text()
    section = page.split("<section class='languages'>")[1].split("</section>")[0]
    rows = [f"<tr><td>{name}</td><td class='n'>{c['documents']}</td>" for name, c in want.items()]
    assert all(r in section for r in rows)
    # The report lists the most frequent language first.
    by_size = sorted(want, key=lambda n: -want[n]["documents"])
    assert sorted(rows, key=section.index) == [rows[list(want).index(n)] for n in by_size]


@pytest.mark.parametrize("spill", [False, True])
def test_the_language_field_wins_where_records_have_it(tmp_path: Path, spill: bool) -> None:
    _corpus(tmp_path / "in.jsonl", lang=True)
    rows = [json.loads(x) for x in (tmp_path / "in.jsonl").read_text().splitlines()]
    run = run_dedup(
        [str(tmp_path / "in.jsonl")],
        str(tmp_path / "out"),
        options=RunOptions(spill=spill),
        language_field="lang",
    )
    dup_ids = {
        json.loads(x)["id"]
        for x in (tmp_path / "out" / "duplicates.jsonl").read_text().splitlines()
    }
    want: dict[str, dict[str, int]] = {}
    for r in rows:
        label = r.get("lang") or r["id"].split("-")[0]
        c = want.setdefault(label, {"documents": 0, "duplicates": 0})
        c["documents"] += 1
        c["duplicates"] += r["id"] in dup_ids
    assert run.stats["language_field"] == "lang"
    assert _counts(dict(run.stats["by_language"])) == want


def test_a_dry_run_reports_the_counts_too(tmp_path: Path) -> None:
    want = _corpus(tmp_path / "in.jsonl")
    run = run_dedup([str(tmp_path / "in.jsonl")], str(tmp_path / "out"), dry_run=True)
    assert run.output is None
    assert _counts(dict(run.stats["by_language"])) == want


def test_labels_fall_back_to_the_script() -> None:
    ids = np.array([SCRIPTS.index("Latin"), SCRIPTS.index("Han"), 0, 0], dtype=np.uint8)
    assert language_labels(ids, ["en", None, "", 7]) == ["en", "Han", "none", "7"]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(SCRIPTS) - 1), st.booleans()), min_size=1))
def test_counts_add_up(docs: list[tuple[int, bool]]) -> None:
    scripts = np.array([s for s, _ in docs], dtype=np.uint8)
    removed = np.array([r for _, r in docs], dtype=np.bool_)
    st_ = language_stats(scripts, removed)
    by = st_["by_language"]
    assert sum(c["documents"] for c in by.values()) == len(docs)
    assert sum(c["duplicates"] for c in by.values()) == int(removed.sum())
    assert set(by) == {SCRIPTS[s] for s, _ in docs}
    # Counted by script id, the same as by the labels' path (no field values).
    assert st_ == language_stats(scripts, removed, [None] * len(docs))


def test_the_command_line_refuses_the_field_where_it_is_not_counted(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from neardup.cli import main

    _corpus(tmp_path / "in.jsonl")
    res = CliRunner().invoke(
        main,
        ["dedup", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "o"),
         "--language-field", "lang", "--engine", "ray"],
    )
    assert res.exit_code == 2
    assert "language-field" in res.output

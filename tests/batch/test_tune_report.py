"""neardup.batch.tune_report: the memo page and its files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neardup import InvalidConfig
from neardup.batch.tune import TuneConfig, tune
from neardup.batch.tune_report import collision_svg, render_memo, write_memo


def test_theory_memo_files_and_refusal_of_an_existing_memo(tmp_path: Path) -> None:
    memo = tune([], config=TuneConfig(n=1_000_000))
    paths = write_memo(memo, str(tmp_path / "m"))
    assert [Path(p).name for p in paths] == ["memo.json", "memo.html"]
    assert json.loads(Path(paths[0]).read_text())["recommendation"]["layout"]["bands"] == 8
    page = Path(paths[1]).read_text()
    assert "8 bands × 5 rows" in page and "Roll back when" in page
    assert render_memo(memo) == page  # reproducible
    assert oct(Path(paths[0]).stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    with pytest.raises(InvalidConfig, match="exists"):
        write_memo(memo, str(tmp_path / "m"))
    write_memo(memo, str(tmp_path / "m"), overwrite=True)
    src = tmp_path / "data" / "corpus.jsonl"
    src.parent.mkdir()
    src.write_text("{}\n")
    with pytest.raises(InvalidConfig, match="input"):
        write_memo(memo, str(tmp_path / "data"), overwrite=True, protect=[str(src)])
    assert src.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "m"]


def _umask() -> int:
    import os

    old = os.umask(0)
    os.umask(old)
    return old


def test_refused_memo_says_why_and_what_to_change() -> None:
    memo = tune([], config=TuneConfig(n=1_000_000, max_perm=20))
    assert memo["recommendation"]["status"] == "refused"
    page = render_memo(memo)
    assert "Recommendation refused" in page and "What to change" in page


def test_collision_svg_marks_the_buckets_that_do_not_fit() -> None:
    curve = {
        "bands": 8,
        "rows": 5,
        "buckets": [
            {
                "lo": 0.8,
                "hi": 0.85,
                "pairs": 10,
                "collided": 9,
                "share": 0.9,
                "lower": 0.6,
                "upper": 0.98,
                "theory": 0.97,
                "fits": True,
            },
            {
                "lo": 0.85,
                "hi": 0.9,
                "pairs": 10,
                "collided": 2,
                "share": 0.2,
                "lower": 0.06,
                "upper": 0.51,
                "theory": 0.99,
                "fits": False,
            },
        ],
        "failing": [],
    }
    svg = collision_svg(curve, 0.8)
    assert svg.count("<circle") == 2
    assert svg.count("fill='#C6284D'") == 1 and svg.count("fill='#147D84'") == 1

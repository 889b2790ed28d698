"""neardup.batch.report: report.html is self-contained, escapes what the inputs
say, shows the run's counts and is reproducible byte for byte; the S-curve PNG
is a valid image."""

from __future__ import annotations

import re
import struct
import zlib
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from neardup import Config, find_duplicates
from neardup.batch.report import (
    SHOWN_LANGUAGES,
    highlight_spans,
    language_table,
    render_report,
    write_scurve_png,
)
from neardup.testing import plant_near_duplicates, synthetic_documents

HOSTILE = "<script>alert('x')</script>"


def _run() -> tuple[str, dict, list[str], list[str]]:
    base = synthetic_documents(30, seed=3, words=80)
    base[0] = f"{HOSTILE} " + base[0] + " <img src=http://evil.example/x.png>"
    texts, _ = plant_near_duplicates(base, copies=8, edit_rate=0.01, seed=4)
    texts.append(base[0])  # exact copy of the hostile text
    texts[-2] = texts[0] + " & more"  # a near copy of it
    cfg = Config()
    result = find_duplicates(texts, config=cfg)
    ids = [f"{HOSTILE}-{i}" if i in (0, len(texts) - 1) else f"doc{i}" for i in range(len(texts))]
    stats = dict(result.stats, inputs=["<b>in.jsonl</b>"])
    page = render_report(result, result.clusters, ids, dict(enumerate(texts)), cfg, stats)
    return page, stats, ids, texts


def test_the_page_is_self_contained() -> None:
    page, *_ = _run()
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    low = page.lower()
    tags = re.findall(r"<[a-z!][^>]*>", low)
    names = {re.match(r"<!?([a-z]+)", t).group(1) for t in tags}  # type: ignore[union-attr]
    assert not names & {"script", "link", "img", "iframe", "object", "embed", "image", "use"}
    # No markup refers to anything outside the page (the hostile URL is only text).
    assert not [t for t in tags if re.search(r"(src|href)\s*=|https?:|url\(", t)]
    assert "url(" not in low and "@import" not in low
    assert "&lt;img src=http://evil.example/x.png" in low
    assert "<style>" in low and "<svg" in low


def test_hostile_text_and_ids_are_escaped() -> None:
    page, *_ = _run()
    assert HOSTILE not in page
    assert "&lt;script&gt;" in page
    assert "&lt;b&gt;in.jsonl&lt;/b&gt;" in page  # input names too
    assert "<b>in.jsonl</b>" not in page


def test_the_counts_of_the_run_are_shown() -> None:
    page, stats, _ids, _texts = _run()
    assert stats["clusters"] >= 2 and stats["near_duplicates"] >= 1
    for label, key in [
        ("documents in", "documents_in"),
        ("kept", "documents_out"),
        ("exact duplicates", "exact_duplicates"),
        ("near duplicates", "near_duplicates"),
        ("clusters", "clusters"),
    ]:
        assert f"<b>{stats[key]}</b>{label}</div>" in page
    assert f"<td>verified pairs</td><td class='n'>{stats['verified_pairs']}</td>" in page
    assert stats["config_fingerprint"] in page
    assert "<mark>" in page  # shared spans of a near pair are highlighted


def test_the_page_is_reproducible_and_ignores_timings() -> None:
    page1, stats, ids, texts = _run()
    page2, *_ = _run()
    assert page1 == page2
    cfg = Config()
    result = find_duplicates(texts, config=cfg)
    slow = dict(stats, timings_s={"total": 12345.678})
    page3 = render_report(result, result.clusters, ids, dict(enumerate(texts)), cfg, slow)
    assert page3 == page1 and "12345" not in page3


def test_an_empty_run_renders() -> None:
    cfg = Config()
    result = find_duplicates(["one two three four five six", "seven eight nine"], config=cfg)
    page = render_report(result, [], ["a", "b"], {}, cfg, result.stats)
    assert "<b>2</b>documents in" in page and "<b>0</b>clusters" in page


def test_highlight_spans_escapes_marks_and_cuts() -> None:
    text = "a<b> shared & tail"
    out = highlight_spans(text, [(5, 11)])
    assert out == "a&lt;b&gt; <mark>shared</mark> &amp; tail"
    long = "x" * 50
    cut = highlight_spans(long, [(0, 100)], limit=10)
    assert cut.startswith("<mark>" + "x" * 10 + "</mark>") and "40 more characters" in cut


def test_scurve_png_is_a_valid_image(tmp_path: Path) -> None:
    path = tmp_path / "s.png"
    write_scurve_png(str(path), 20, 5, 0.8)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        tag, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n : pos + 12 + n])
        assert crc == zlib.crc32(tag + body) & 0xFFFFFFFF
        chunks[tag] = body
        pos += 12 + n
    assert list(chunks) == [b"IHDR", b"IDAT", b"IEND"]
    w, h = struct.unpack(">II", chunks[b"IHDR"][:8])
    assert (w, h) == (480, 300)
    raw = zlib.decompress(chunks[b"IDAT"])
    assert len(raw) == h * (w + 1)
    assert 0 in raw[1:]  # the curve is drawn in black
    other = tmp_path / "t.png"
    write_scurve_png(str(other), 20, 5, 0.5)
    assert other.read_bytes() != data  # the threshold mark moved


def test_the_language_table_lists_the_most_frequent_first_and_sums_the_rest() -> None:
    by = {
        f"{HOSTILE}{k:02d}": {"documents": 100 - k, "duplicates": k, "kept": 100 - 2 * k}
        for k in range(SHOWN_LANGUAGES + 5)
    }
    html = language_table(by)
    assert HOSTILE not in html  # values from the inputs (a language field) are escaped
    rows = re.findall(r"<tr><td>([^<]*)</td>((?:<td class='n'>[^<]*</td>)+)</tr>", html)
    assert len(rows) == SHOWN_LANGUAGES + 1
    assert rows[0][0].endswith("00") and rows[1][0].endswith("01")
    rest = range(SHOWN_LANGUAGES, SHOWN_LANGUAGES + 5)
    cells = re.findall(r"<td class='n'>([^<]*)</td>", rows[-1][1])
    assert rows[-1][0] == "5 more"
    assert cells[:2] == [str(sum(100 - k for k in rest)), str(sum(rest))]
    assert language_table({}) == ""


@given(sizes=st.lists(st.integers(1, 6), max_size=40), order=st.randoms(use_true_random=False))
def test_largest_clusters_are_the_largest_ties_by_id(sizes: list[int], order: Any) -> None:
    from neardup.batch.report import SHOWN_CLUSTERS, largest_clusters
    from neardup.graph.cluster import Cluster

    clusters = [
        Cluster(id=k, representative=0, members=tuple(range(n)), edges=())
        for k, n in enumerate(sizes)
    ]
    order.shuffle(clusters)
    expected = sorted(clusters, key=lambda c: (-len(c), c.id))[:SHOWN_CLUSTERS]
    assert [c.id for c in largest_clusters(clusters)] == [c.id for c in expected]

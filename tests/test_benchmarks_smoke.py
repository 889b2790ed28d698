"""The benchmark scripts still run (tiny inputs; nothing is asserted about time)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.parametrize("script", ["bench_recall.py", "bench_end_to_end.py"])
def test_benchmark_quick_run(script: str, tmp_path: Path) -> None:
    pytest.importorskip("rensa")
    pytest.importorskip("datasketch")
    out = tmp_path / "r.json"
    args = [sys.executable, str(ROOT / "benchmarks" / script), "--quick", "--out", str(out)]
    if script == "bench_end_to_end.py":
        args.append("--skip-scale")
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=600)
    data = json.loads(out.read_text())
    assert data["truth"] and data["machine"]
    if script == "bench_end_to_end.py":
        q = data["quality"]["neardup_lsh"]
        assert q["edge_check"]["precision"] == 1.0


def test_vector_benchmark_quick_run(tmp_path: Path) -> None:
    pytest.importorskip("faiss")
    out = tmp_path / "v.json"
    args = [sys.executable, str(ROOT / "benchmarks" / "bench_vectors.py"), "--quick", "--out",
            str(out)]
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=600)
    data = json.loads(out.read_text())
    nd = data["neardup"]
    assert nd["edge_check"]["precision"] == 1.0
    assert nd["recall_same_cluster"] >= 0.95
    assert data["faiss_lsh_128"]["queries_searched"] == 5000


@pytest.mark.slow
def test_service_benchmark_quick_run(tmp_path: Path) -> None:
    pytest.importorskip("datasketch")
    out = tmp_path / "s.json"
    args = [sys.executable, str(ROOT / "benchmarks" / "bench_service.py"), "--quick", "--out",
            str(out)]
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=600)
    data = json.loads(out.read_text())
    assert data["neardup"]["upsert_closed"]["errors"] == 0
    assert data["neardup"]["recall"]["probes"] > 0 and data["ratios"]


@pytest.mark.slow
def test_service_locust_benchmark_quick_run(tmp_path: Path) -> None:
    import importlib.util

    # Not imported here: locust patches the standard library (gevent) when imported.
    if importlib.util.find_spec("locust") is None:
        pytest.skip("locust is not installed (the bench extra)")
    out = tmp_path / "l.json"
    args = [sys.executable, str(ROOT / "benchmarks" / "bench_service_locust.py"), "--quick",
            "--root", str(tmp_path / "data"), "--out", str(out)]
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=600)
    runs = json.loads(out.read_text())["runs"]
    assert {(r["kind"], r["loop"]) for r in runs} == {
        (k, loop) for k in ("candidates", "decide", "upsert") for loop in ("closed", "open")
    }
    assert all(r["errors"] == 0 and r["requests"] > 0 for r in runs)


@pytest.mark.slow
@pytest.mark.ray
def test_ray_benchmark_quick_run(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    out = tmp_path / "ray.json"
    args = [sys.executable, str(ROOT / "benchmarks" / "bench_ray.py"), "--quick", "--shards", "3",
            "--out", str(out)]
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=900)
    data = json.loads(out.read_text())
    for name in ("ray", "ray_distributed_cc"):
        assert data["runs"][name]["clusters_identical"] and data["runs"][name]["kept_identical"]
    assert data["runs"]["ray_distributed_cc"]["engine"]["components"]["path"] == (
        "large-star/small-star"
    )
    assert data["projection"]["projected_wall_h"] > 0


def _load_script(name: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# Generated catalogues: random "words" of each script, so that no download is needed.
_SCRIPTS = {
    "zh_CN": (0x4E00, 0x4E00 + 1500, False),
    "ja": (0x3041, 0x3096, False),
    "th_TH": (0x0E01, 0x0E2E, False),
    "ru": (0x0430, 0x044F, True),
    "de": (0x0061, 0x007A, True),
}


def _write_catalogues(root: Path, strings: int = 40, seed: int = 3) -> None:
    import random

    rng = random.Random(seed)
    for loc, (lo, hi, spaced) in _SCRIPTS.items():
        entries = ['msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n']
        for i in range(strings):
            if spaced:
                text = " ".join("".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(2, 9)))
                                for _ in range(rng.randint(5, 15)))
            else:
                text = "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(10, 40)))
            entries.append(f'msgid "source string {loc} {i}"\nmsgstr "{text}"\n')
        entries.append('#, fuzzy\nmsgid "fuzzy one"\nmsgstr "FUZZY"\n')
        entries.append('msgid "same"\nmsgstr "same"\n')
        d = root / loc / "LC_MESSAGES"
        d.mkdir(parents=True)
        (d / "app.po").write_text("\n".join(entries), encoding="utf-8")


def test_multilingual_corpus_builder(tmp_path: Path) -> None:
    mc = _load_script("multilingual_corpus")
    _write_catalogues(tmp_path / "locale")
    out = tmp_path / "c.jsonl"
    meta = mc.build([tmp_path / "locale"], out, max_docs_per_lang=4)
    recs = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in recs] == list(range(len(recs)))
    assert {r["lang"] for r in recs} == {"zh_Hans", "ja", "th", "ru", "de", "en"}
    assert not any("FUZZY" in r["text"] for r in recs)
    # An untranslated entry (msgstr == msgid) is English only.
    assert not any("same" in r["text"].split() for r in recs if r["lang"] != "en")
    for r in recs:
        if r["orig"] is None:
            continue
        o = recs[r["orig"]]
        assert o["orig"] is None and o["lang"] == r["lang"] and r["text"] != o["text"]
        assert mc.EDIT_RATE[0] <= r["edit_rate"] <= mc.EDIT_RATE[1]
        units = (sum(1 for c in mc.clusters(o["text"]) if mc._alnum(c[0]))
                 if r["lang"] in mc.UNSPACED else len(o["text"].split()))
        assert r["edits"] == max(1, round(r["edit_rate"] * units))
        # Each edit changes one unit: the length moves by at most one unit per edit.
        if r["lang"] in mc.UNSPACED:
            assert abs(len(mc.clusters(r["text"])) - len(mc.clusters(o["text"]))) <= r["edits"]
        else:
            assert abs(len(r["text"].split()) - len(o["text"].split())) <= r["edits"]
    assert all(d["base"] == d["copies"] for d in meta["per_lang"].values())
    again = mc.build([tmp_path / "locale"], tmp_path / "again.jsonl", max_docs_per_lang=4)
    assert again["sha256"] == meta["sha256"]


@pytest.mark.slow
def test_multilingual_benchmark_quick_run(tmp_path: Path) -> None:
    pytest.importorskip("rensa")
    pytest.importorskip("datasketch")
    _write_catalogues(tmp_path / "locale")
    corpus, out = tmp_path / "c.jsonl", tmp_path / "m.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "multilingual_corpus.py"),
                    "--source", str(tmp_path / "locale"), "--out", str(corpus)],
                   check=True, capture_output=True, text=True, timeout=300)
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_multilingual.py"),
                    "--corpus", str(corpus), "--quick", "--out", str(out)],
                   check=True, capture_output=True, text=True, timeout=600)
    data = json.loads(out.read_text())
    edges = data["neardup_edges"]
    assert edges["all_edges_verified"] and edges["python_reference"]["string_jaccard_below_t"] == 0
    planted = sum(1 for line in corpus.read_text(encoding="utf-8").splitlines()
                  if json.loads(line)["orig"] is not None)
    assert data["planted_total"]["planted"] == planted > 0
    assert set(data["per_lang"]) == {"zh_Hans", "ja", "th", "ru", "de", "en"}
    assert data["library_throughput"]["cjk"]["mb_per_s"] > 0


@pytest.mark.slow
def test_decontaminate_benchmark_quick_run(tmp_path: Path) -> None:
    out = tmp_path / "d.json"
    args = [sys.executable, str(ROOT / "benchmarks" / "bench_decontaminate.py"), "--quick",
            "--datatrove-python", str(tmp_path / "none"), "--out", str(out)]
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=600)
    data = json.loads(out.read_text())
    runs, planted = data["runs"], data["data"]
    nd = runs["neardup"]
    # Every item pasted unedited is found, and nothing else.
    unedited = planted["planted"] - planted["planted_edited"]
    assert nd["planted_found"] - nd["planted_edited_found"] == unedited
    assert nd["flagged_not_planted"] == 0
    assert runs["neardup_xxh64"]["flagged"] == nd["flagged"]


def test_multilingual_units_and_script_filter() -> None:
    mc = _load_script("multilingual_corpus")
    # A Thai consonant with its vowel sign and tone mark is one character.
    assert mc.clusters("ก่อน ไป") == ["ก่", "อ", "น", " ", "ไ", "ป"]
    assert mc.written_in("数据库连接失败", "zh_Hans")
    # Strings left in English (or placeholders) in a Chinese catalogue are not Chinese.
    assert not mc.written_in("Edit %(name)s page 页", "zh_Hans")
    assert not mc.written_in("%(count)s", "ja")
    assert mc.written_in("Edit the page", "de")


@pytest.mark.slow
def test_layouts_benchmark_quick_run(tmp_path: Path) -> None:
    out = tmp_path / "layouts.json"
    args = [sys.executable, str(ROOT / "benchmarks" / "bench_layouts.py"), "--quick", "--out",
            str(out)]
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=600)
    data = json.loads(out.read_text())
    one, two = data["results"]["one_layout"], data["results"]["two_layouts"]
    assert [r["name"] for r in two["ranges"]] == ["related", "near"]
    assert two["queries"]["near"]["layout_used"] == "near"
    assert one["queries"]["near"]["layout_used"] == "related"
    assert two["memory_per_item"]["band_key_bytes"] > one["memory_per_item"]["band_key_bytes"]

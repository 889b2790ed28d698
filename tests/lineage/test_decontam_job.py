"""The streaming decontamination job: outputs in the input's format, the report,
staged output folders, and memory that does not grow with the corpus."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from neardup import InputError, InvalidConfig
from neardup.lineage.decontam import DecontamConfig
from neardup.lineage.decontam_job import eval_set_name, run_decontaminate
from neardup.testing import synthetic_documents

ITEMS = synthetic_documents(8, seed=11, words=40)
OTHER = synthetic_documents(5, seed=12, words=40)


def write_eval(path: Path, texts: list[str], prefix: str) -> Path:
    path.write_text(
        "".join(json.dumps({"id": f"{prefix}{i}", "q": t}) + "\n" for i, t in enumerate(texts))
    )
    return path


def training(n: int, seed: int) -> list[dict[str, object]]:
    recs: list[dict[str, object]] = []
    for i, t in enumerate(synthetic_documents(n, seed=seed, words=400)):
        if i % 10 == 3:
            w = t.split(" ")
            t = " ".join([*w[:100], ITEMS[(i // 10) % len(ITEMS)], *w[100:]])
        recs.append({"text": t, "n": i, "site": f"s{i % 4}.example", "extra": {"i": i, "k": "ü"}})
    return recs


def test_jsonl_gz_outputs_keep_records_byte_for_byte(tmp_path: Path) -> None:
    recs = training(100, seed=3)
    lines = [json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode() for r in recs]
    src = tmp_path / "shard-0.jsonl.gz"
    with gzip.open(src, "wb") as fh:
        fh.write(b"\n".join(lines) + b"\n")
    ev = write_eval(tmp_path / "bench.jsonl", ITEMS, "b")
    ev2 = write_eval(tmp_path / "other.jsonl", OTHER, "o")
    out = tmp_path / "out"
    res = run_decontaminate(
        [str(src)],
        [("bench", str(ev)), eval_set_name(str(ev2))],
        str(out),
        eval_text_field="q",
        source_field="site",
    )
    dirty = [i for i in range(100) if i % 10 == 3]
    assert (res.documents, res.removed, res.kept) == (100, len(dirty), 100 - len(dirty))
    with gzip.open(out / "clean" / "shard-0.jsonl.gz", "rb") as fh:
        assert fh.read() == b"".join(ln + b"\n" for i, ln in enumerate(lines) if i not in dirty)
    removed = (out / "removed.jsonl").read_bytes().splitlines()
    assert [json.loads(r)["row"] for r in removed] == dirty
    for raw, i in zip(removed, dirty, strict=True):
        assert raw.endswith(b', "record": ' + lines[i] + b"}")
        rec = json.loads(raw)
        (m,) = rec["matches"]
        assert m["eval_set"] == "bench" and m["eval_id"] == f"b{(i // 10) % 8}"
        assert m["containment"] == 1.0 and 0 < m["jaccard"] < 0.2
        a, b = m["doc_spans"][0]
        assert recs[i]["text"][a:b] == ITEMS[(i // 10) % 8]  # type: ignore[index]
    rep = json.loads((out / "report.json").read_text())
    bench, other = rep["sets"]["bench"], rep["sets"]["other"]
    assert bench["contaminated_items"] == 8 and bench["training_documents"] == 10
    assert bench["items"] == bench["checked_items"] == 8
    assert {s["source"] for s in bench["top_sources"]} == {"s3.example", "s1.example"}
    assert sum(s["documents"] for s in bench["top_sources"]) == 10
    assert bench["top_items"][0] == {"id": "b0", "documents": 2}
    assert other["contaminated_items"] == 0 and other["training_documents"] == 0
    html = (out / "report.html").read_text()
    assert "bench" in html and "<script" not in html


def test_parquet_in_parquet_out_with_the_schema(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    recs = training(60, seed=4)
    table = pa.Table.from_pylist(recs)
    src = tmp_path / "part.parquet"
    pq.write_table(table, src, row_group_size=16)
    ev = write_eval(tmp_path / "bench.jsonl", ITEMS, "b")
    out = tmp_path / "out"
    res = run_decontaminate(
        [str(src)],
        [("bench", str(ev))],
        str(out),
        eval_text_field="q",
        config=DecontamConfig(batch_bytes=4096),
    )
    assert res.removed == 6
    clean = pq.read_table(out / "clean" / "part.parquet")
    assert clean.schema == table.schema
    assert clean.to_pylist() == [r for r in recs if int(r["n"]) % 10 != 3]  # type: ignore[call-overload]
    first = json.loads((out / "removed.jsonl").read_text().splitlines()[0])
    assert first["record"]["n"] == 3 and first["row"] == 3


def test_output_is_staged_and_refuses_inputs_and_existing_folders(tmp_path: Path) -> None:
    src = tmp_path / "data" / "train.jsonl"
    src.parent.mkdir()
    src.write_text("".join(json.dumps(r) + "\n" for r in training(20, seed=5)))
    ev = write_eval(tmp_path / "bench.jsonl", ITEMS, "b")
    with pytest.raises(InvalidConfig, match="input"):
        run_decontaminate(
            [str(src)],
            [("b", str(ev))],
            str(tmp_path / "data"),
            overwrite=True,
            eval_text_field="q",
        )
    out = tmp_path / "out"
    out.mkdir()
    (out / "old").write_text("x")
    with pytest.raises(InvalidConfig, match="exists"):
        run_decontaminate([str(src)], [("b", str(ev))], str(out), eval_text_field="q")
    run_decontaminate([str(src)], [("b", str(ev))], str(out), overwrite=True, eval_text_field="q")
    assert sorted(p.name for p in out.iterdir()) == [
        "clean",
        "removed.jsonl",
        "report.html",
        "report.json",
    ]
    assert not list(tmp_path.glob(".neardup-*"))


def test_eval_set_names() -> None:
    assert eval_set_name("mmlu=data/x.jsonl") == ("mmlu", "data/x.jsonl")
    assert eval_set_name("data/gsm8k_test.jsonl.gz") == ("gsm8k_test", "data/gsm8k_test.jsonl.gz")


_PEAK = textwrap.dedent(
    """
    import json, random, resource, sys
    from neardup.lineage.decontam import DecontamConfig
    from neardup.lineage.decontam_job import run_decontaminate
    src, ev, out, mb = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    rng = random.Random(7)
    vocab = [f"w{i}" for i in range(5000)]
    with open(src, "w") as fh:
        written = 0
        while written < mb << 20:
            line = json.dumps({"text": " ".join(rng.choices(vocab, k=2000))}) + "\\n"
            fh.write(line)
            written += len(line)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    run_decontaminate([src], [("e", ev)], out, eval_text_field="q",
                      config=DecontamConfig(batch_bytes=1 << 20))
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"before_kib": before, "after_kib": after}))
    """
)


@pytest.mark.slow
def test_memory_does_not_grow_with_the_corpus(tmp_path: Path) -> None:
    """A corpus 8 times larger adds (almost) nothing to the peak: records stream."""
    ev = write_eval(tmp_path / "bench.jsonl", ITEMS, "b")
    peaks = {}
    for mb in (8, 64):
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                _PEAK,
                str(tmp_path / f"t{mb}.jsonl"),
                str(ev),
                str(tmp_path / f"out{mb}"),
                str(mb),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        peaks[mb] = got["after_kib"]
    # 56 MiB more input: well under 16 MiB more peak memory.
    assert peaks[64] - peaks[8] < 16 * 1024, peaks


def test_zstd_shards_and_bad_records(tmp_path: Path) -> None:
    zstandard = pytest.importorskip("zstandard")
    recs = training(30, seed=8)
    lines = [json.dumps(r).encode() for r in recs]
    src = tmp_path / "a.jsonl.zst"
    src.write_bytes(zstandard.ZstdCompressor().compress(b"\n".join(lines) + b"\n"))
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"text": "fine words here"}\n{not json\n')
    ev = write_eval(tmp_path / "bench.jsonl", ITEMS, "b")
    out = tmp_path / "out"
    res = run_decontaminate(
        [str(src), str(bad)], [("b", str(ev))], str(out), eval_text_field="q", skip_bad=True
    )
    assert (res.documents, res.removed, res.bad) == (31, 3, 1)
    clean = zstandard.ZstdDecompressor().stream_reader((out / "clean" / "a.jsonl.zst").open("rb"))
    assert clean.read() == b"".join(ln + b"\n" for i, ln in enumerate(lines) if i % 10 != 3)
    assert (out / "clean" / "b.jsonl").read_text() == '{"text": "fine words here"}\n'
    with pytest.raises(InputError):
        run_decontaminate([str(bad)], [("b", str(ev))], None, eval_text_field="q")

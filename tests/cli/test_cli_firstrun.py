"""A first run's command line: detected ids, grouped --help, --quiet, incremental keeps.

Every test runs the real ``neardup`` executable."""

from __future__ import annotations

import csv
import gzip
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from neardup.testing import synthetic_documents

EXE = shutil.which("neardup") or str(Path(sys.executable).parent / "neardup")


def run(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([EXE, *args], capture_output=True, text=True)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def write_jsonl(path: Path, recs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _texts() -> list[str]:
    base = synthetic_documents(30, seed=41, words=40)
    # Three pairs of near copies (one word changed) and one exact copy.
    copies = [t.replace(" ", " x ", 1) for t in base[:3]] + [base[5]]
    return base + copies


def stats_of(out: Path) -> dict[str, Any]:
    return json.loads((out / "stats.json").read_text())  # type: ignore[no-any-return]


# -- 1. ids ------------------------------------------------------------------------


def test_a_field_id_is_detected_and_reported(tmp_path: Path) -> None:
    texts = _texts()
    src = write_jsonl(
        tmp_path / "in.jsonl", [{"id": f"k{i}", "text": t} for i, t in enumerate(texts)]
    )
    proc = run("dedup", str(src), "-o", str(tmp_path / "a"))
    assert "ids: field 'id' (detected)" in proc.stdout
    st = stats_of(tmp_path / "a")
    assert (st["id_field"], st["id_field_detected"], st["id_field_fallback"]) == ("id", True, None)
    members = [m for c in read_jsonl(tmp_path / "a" / "clusters.jsonl") for m in c["members"]]
    assert members and all(isinstance(m, str) and m.startswith("k") for m in members)
    # The same as naming it, except for the "detected" flag.
    run("dedup", str(src), "-o", str(tmp_path / "b"), "--id-field", "id")
    assert (tmp_path / "a" / "clusters.jsonl").read_bytes() == (
        tmp_path / "b" / "clusters.jsonl"
    ).read_bytes()
    assert stats_of(tmp_path / "b")["id_field_detected"] is False
    # --row-ids: row numbers.
    proc = run("dedup", str(src), "-o", str(tmp_path / "c"), "--row-ids")
    assert "ids: row numbers" in proc.stdout
    st = stats_of(tmp_path / "c")
    assert (st["id_field"], st["id_field_detected"]) == (None, False)
    members = [m for c in read_jsonl(tmp_path / "c" / "clusters.jsonl") for m in c["members"]]
    assert all(isinstance(m, int) for m in members)
    # Both at once is a usage error.
    proc = run(
        "dedup", str(src), "-o", str(tmp_path / "d"), "--row-ids", "--id-field", "id", ok=False
    )
    assert proc.returncode == 2 and "--id-field" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("duplicate", "records 1 and 2 share the 'id' \"k0\""),
        ("null", "record 4's 'id' has none"),
        ("missing", "record 4's 'id' has none"),
        ("float", "record 4's 'id' is 1.5"),
    ],
)
def test_an_unusable_detected_id_falls_back_to_row_numbers(
    tmp_path: Path, case: str, reason: str
) -> None:
    recs: list[dict[str, Any]] = [{"id": f"k{i}", "text": t} for i, t in enumerate(_texts())]
    if case == "duplicate":
        recs[1]["id"] = "k0"
    elif case == "null":
        recs[3]["id"] = None
    elif case == "missing":
        del recs[3]["id"]
    else:
        recs[3]["id"] = 1.5
    src = write_jsonl(tmp_path / "in.jsonl", recs)
    outs = {}
    for mode in ("mem", "spill"):
        out = tmp_path / mode
        proc = run("dedup", str(src), "-o", str(out), *(["--spill"] if mode == "spill" else []))
        assert f"note: ids are row numbers: {reason}" in proc.stderr
        assert "ids: row numbers" in proc.stdout
        st = stats_of(out)
        assert (st["id_field"], st["id_field_detected"]) == (None, False)
        assert st["id_field_fallback"] == reason
        outs[mode] = (out / "clusters.jsonl").read_bytes()
    assert outs["mem"] == outs["spill"]
    clusters = read_jsonl(tmp_path / "mem" / "clusters.jsonl")
    assert clusters and all(isinstance(m, int) for c in clusters for m in c["members"])
    # Named explicitly, the same field keeps its strict rule for the missing id.
    if case in ("null", "missing"):
        proc = run("dedup", str(src), "-o", str(tmp_path / "x"), "--id-field", "id", ok=False)
        said = "the id field 'id' is null" if case == "null" else "no id field 'id'"
        assert proc.returncode == 3 and said in proc.stderr


def test_ids_are_detected_in_csv_and_parquet(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = _texts()
    with open(tmp_path / "in.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["text", "id"])
        w.writerows([t, f"c{i}"] for i, t in enumerate(texts))
    run("dedup", str(tmp_path / "in.csv"), "-o", str(tmp_path / "csv"))
    assert stats_of(tmp_path / "csv")["id_field_detected"] is True
    first = read_jsonl(tmp_path / "csv" / "clusters.jsonl")[0]
    assert all(str(m).startswith("c") for m in first["members"])
    pq.write_table(
        pa.table({"id": list(range(100, 100 + len(texts))), "text": texts}), tmp_path / "i.parquet"
    )
    run("dedup", str(tmp_path / "i.parquet"), "-o", str(tmp_path / "pq"))
    assert stats_of(tmp_path / "pq")["id_field"] == "id"
    first = read_jsonl(tmp_path / "pq" / "clusters.jsonl")[0]
    assert all(m >= 100 for m in first["members"])
    # A float column named id is not an id.
    pq.write_table(pa.table({"id": [0.5] * len(texts), "text": texts}), tmp_path / "f.parquet")
    run("dedup", str(tmp_path / "f.parquet"), "-o", str(tmp_path / "pqf"))
    assert stats_of(tmp_path / "pqf")["id_field"] is None


# -- 2. --help ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "headings"),
    [
        (
            "dedup",
            [
                "Input:",
                "What is a duplicate, and which one is kept:",
                "Outputs:",
                "Performance:",
                "Engines:",
                "Vectors:",
            ],
        ),
        ("audit", ["Input:", "What is a duplicate:", "Outputs:", "Performance:"]),
        ("split", ["Input:", "What is a duplicate:", "Split:", "Outputs:", "Performance:"]),
        ("eval", ["Input:", "What is a duplicate:", "Outputs:", "Performance:"]),
    ],
)
def test_help_lists_the_options_in_groups(command: str, headings: list[str]) -> None:
    text = run(command, "--help").stdout
    found = re.findall(r"^(\S[^\n]*:)$", text, flags=re.M)
    sections = [h for h in found if not h.startswith(("Usage", "Example"))]
    assert sections[: len(headings)] == headings
    assert sections[len(headings) :] == ["Other options:"]  # --help only
    assert "Options:" not in found
    options = text[text.index("\nInput:\n") :]  # not the examples above

    def at(opt: str) -> int:
        """Where the option's own row starts (not a mention in another's help)."""
        m = re.search(rf"^  (-\w, )?{opt}[ \n]", options, flags=re.M)
        assert m is not None, opt
        return m.start()

    assert at("--text-field") < at("--threshold") < at("--workers")
    if command == "dedup":
        assert at("--threshold") < at("--output") < at("--engine")
        for opt in ("--engine", "--ray-address", "--ray-cpus", "--resume", "--cc-threshold"):
            assert at("--text-field") < at(opt) and at("--threshold") < at(opt)
        assert at("--cc-threshold") < at("--vectors")


# -- 3. --quiet --------------------------------------------------------------------


def test_quiet_keeps_the_summary_line(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [{"text": t} for t in _texts()])
    loud = run("dedup", str(src), "-o", str(tmp_path / "a"))
    quiet = run("dedup", str(src), "-o", str(tmp_path / "b"), "--quiet")
    assert quiet.stdout.replace(str(tmp_path / "b"), "") == loud.stdout.replace(
        str(tmp_path / "a"), ""
    )
    assert quiet.stdout.startswith(f"{len(_texts())} documents: kept ")
    assert quiet.stderr == ""


# -- 5. --against and --keep ------------------------------------------------------


def _words(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i:03d}" for i in range(n)]


@pytest.mark.slow
def test_incremental_kept_sets_for_every_keep_rule(tmp_path: Path) -> None:
    """The README's statement: kept(one run) = (kept(out1) - D) | kept(out2), D the
    non-representative members of out2's clusters; extra documents only from a
    shard-2 document joining shard-1 clusters, or (longest/shortest) a shard-2
    representative of a cluster with shard-1 members."""
    b = _words("b", 100)
    bridge = " ".join(b)  # shard 2: near both A and C, which are not near each other
    a = " ".join(_words("a", 8) + b[8:])  # J(A, B) = 88/104
    c = " ".join(b[:92] + _words("c", 8))  # J(B, C) = 88/104, J(A, C) = 80/112
    d1 = " ".join(_words("d", 100))
    d2 = d1 + " dzzz"  # shard 2, longer
    e1 = " ".join(_words("e", 100))
    e2 = " ".join(_words("e", 99))  # shard 2, shorter
    f1 = " ".join(_words("f", 100))
    f2 = " ".join([*_words("f", 99), "fzzz"])  # shard 2, same length: same fate in both
    filler = synthetic_documents(40, seed=43, words=50)
    shard1 = [("A", a), ("C", c), ("D1", d1), ("E1", e1), ("F1", f1)]
    shard1 += [(f"u{i}", t) for i, t in enumerate(filler[:20])]
    shard2 = [("B", bridge), ("D2", d2), ("E2", e2), ("F2", f2)]
    shard2 += [(f"v{i}", t) for i, t in enumerate(filler[20:])]
    s1 = write_jsonl(tmp_path / "s1.jsonl", [{"id": i, "text": t} for i, t in shard1])
    s2 = write_jsonl(tmp_path / "s2.jsonl", [{"id": i, "text": t} for i, t in shard2])
    both = write_jsonl(tmp_path / "all.jsonl", [{"id": i, "text": t} for i, t in shard1 + shard2])
    ids1 = {i for i, _ in shard1}
    # The extra kept documents, by rule: the bridge (any rule), D2 (longest), E2 (shortest).
    extra = {"first": {"C"}, "longest": {"C", "D1"}, "shortest": {"C", "E1"}}
    for keep in ("first", "longest", "shortest"):
        w = tmp_path / keep
        opts = ["--keep", keep, "--no-report"]
        run("dedup", str(both), "-o", str(w / "u"), *opts)
        run("dedup", str(s1), "-o", str(w / "1"), *opts, "--save-index", str(w / "idx"))
        run("dedup", str(s2), "-o", str(w / "2"), *opts, "--against", str(w / "idx"))
        ku = {r["id"] for r in read_jsonl(w / "u" / "kept.jsonl")}
        k1 = {r["id"] for r in read_jsonl(w / "1" / "kept.jsonl")}
        k2 = {r["id"] for r in read_jsonl(w / "2" / "kept.jsonl")}
        d = {
            m
            for cl in read_jsonl(w / "2" / "clusters.jsonl")
            for m in cl["members"]
            if m != cl["representative"]
        }
        assert ku == (k1 - d) | k2, keep
        assert (k1 | k2) - ku == extra[keep], keep
        assert ku <= k1 | k2 and extra[keep] <= ids1
        # Every shard-2 document has the same fate in both.
        union_dups = {
            r["id"]: r["representative"] for r in read_jsonl(w / "u" / "duplicates.jsonl")
        }
        inc_dups = {r["id"]: r["representative"] for r in read_jsonl(w / "2" / "duplicates.jsonl")}
        assert inc_dups == {k: v for k, v in union_dups.items() if k not in ids1}, keep
        if keep == "first":
            assert {"B", "D2", "E2", "F2"} <= set(inc_dups)


# -- the fixed cost ------------------------------------------------------------------

_HEAVY = ("numpy.ma", "numba", "llvmlite", "concurrent.futures", "multiprocessing", "statistics")


def test_a_dedup_run_loads_no_heavy_module(tmp_path: Path) -> None:
    # Each of these costs every short run 10-100 ms (numba far more) when a call on
    # the way loads it: a run with exact copies, near copies and non-ASCII text
    # needs none of them.
    texts = [*_texts(), "Ünïcödé text, " + _texts()[7], "Ünïcödé text, " + _texts()[7]]
    src = write_jsonl(
        tmp_path / "in.jsonl", [{"id": f"k{i}", "text": t} for i, t in enumerate(texts)]
    )
    assert _heavy_modules_loaded(src, tmp_path) == []
    st = stats_of(tmp_path / "o")
    assert st["exact_duplicates"] >= 2 and st["near_duplicates"] >= 3


def test_a_run_on_one_record_loads_no_heavy_module(tmp_path: Path) -> None:
    # One document's band keys, (1, bands), are C- and F-contiguous at once: they
    # took numba's JIT (a compile, then 0.3 s of every such run) until a build for
    # either layout ran them.
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "only", "text": _texts()[0]}])
    assert _heavy_modules_loaded(src, tmp_path) == []
    assert stats_of(tmp_path / "o")["documents_out"] == 1


@pytest.mark.parametrize("shape", ["gzip", "no final newline"])
def test_compressed_and_unterminated_inputs_load_no_heavy_module(
    tmp_path: Path, shape: str
) -> None:
    # Their lines come in bytes blocks, which the native scanner (built for
    # writable arrays) did not take: numba's JIT read them, in every run.
    lines = "\n".join(json.dumps({"id": i, "text": t}) for i, t in enumerate(_texts()))
    if shape == "gzip":
        src = tmp_path / "in.jsonl.gz"
        src.write_bytes(gzip.compress((lines + "\n").encode()))
    else:
        src = tmp_path / "in.jsonl"
        src.write_text(lines, encoding="utf-8")
    assert _heavy_modules_loaded(src, tmp_path) == []
    assert stats_of(tmp_path / "o")["documents_in"] == len(_texts())


@pytest.mark.parametrize("command", ["audit", "split"])
def test_audit_and_split_load_no_heavy_module(tmp_path: Path, command: str) -> None:
    # They build the kernel groups they run on first use (as dedup does); their
    # families were joined by a union-find call per edge, which took numba's JIT.
    texts = [*_texts(), _texts()[3]]
    src = write_jsonl(
        tmp_path / "in.jsonl", [{"id": f"k{i}", "text": t} for i, t in enumerate(texts)]
    )
    assert _heavy_modules_loaded(src, tmp_path, command) == []


def _heavy_modules_loaded(src: Path, tmp_path: Path, command: str = "dedup") -> list[str]:
    """The modules of :data:`_HEAVY` that a warm ``command`` of ``src`` into
    ``tmp_path / "o"`` loads."""
    # A first run on a machine builds the kernels (in worker processes, through
    # multiprocessing): the later run is the one that must stay light.
    run(command, str(src), "-o", str(tmp_path / "warm"), "--quiet")
    code = (
        "import sys\n"
        "from neardup.cli import main\n"
        "main(args=sys.argv[1:], standalone_mode=False)\n"
        f"print([m for m in {_HEAVY!r} if m in sys.modules])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, command, str(src), "-o", str(tmp_path / "o"), "--quiet"],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr
    loaded: list[str] = json.loads(proc.stdout.strip().splitlines()[-1].replace("'", '"'))
    return loaded

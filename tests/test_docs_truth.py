"""The docs against the code and the committed results.

* Every ``neardup …`` command shown in README.md, benchmarks/README.md and docs/*.md
  (code blocks and inline code) and every one quoted in a string of src/neardup
  (error hints, help examples) names an existing subcommand and only options that
  subcommand accepts, checked against the click command tree.
* Figures the READMEs quote from benchmarks/results/*.json are read from those
  files, formatted as the docs write them, and looked up in the docs.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import click
import pytest

from neardup.cli import main

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BENCH_README = ROOT / "benchmarks" / "README.md"
DOCS = [README, BENCH_README, *sorted((ROOT / "docs").glob("*.md"))]
RESULTS = ROOT / "benchmarks" / "results"
SRC = ROOT / "src" / "neardup"

# ---------------------------------------------------------------------------
# Commands


FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```", re.M | re.S)
SPAN = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
SHELL = {"", "sh", "bash", "shell", "console"}
STARTS_WITH_NEARDUP = re.compile(r"^(?:\$ )?(?:\S*/)?neardup\s")
OPTION = re.compile(r"^--?[A-Za-z]")


def words(command: str) -> list[str]:
    """Shell words of a command line, placeholders and elisions dropped."""
    command = re.sub(r"<[^<>\s]+>", "X", command)  # <x> is a placeholder
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:  # an unbalanced quote in prose around the command
        tokens = command.split()
    tokens = [t.strip("[]") for t in tokens]  # [--opt VALUE] is an optional part
    return [t for t in tokens if t and t not in {"…", "...", "$"}]


def invocations(tokens: list[str]) -> list[list[str]]:
    """The ``neardup`` invocations of a shell line, each without the program name."""
    out: list[list[str]] = []
    segment: list[str] = []
    for t in [*tokens, ";"]:
        if t in {";", "&&", "||", "|", "&"}:
            if segment and re.fullmatch(r"(\S*/)?neardup", segment[0]):
                out.append(segment[1:])
            segment = []
        else:
            segment.append(t)
    return out


def doc_commands(text: str) -> list[list[str]]:
    """Commands in shell code blocks and in inline code that starts with neardup."""
    found = []
    for lang, body in FENCE.findall(text):
        if lang in SHELL:
            for line in body.replace("\\\n", " ").splitlines():
                if "neardup" in line:
                    found += invocations(words(line))
    for _, span in SPAN.findall(FENCE.sub("", text)):
        span = " ".join(span.split())
        if STARTS_WITH_NEARDUP.match(span):
            found += invocations(words(span))
    return found


def source_commands(text: str) -> list[list[str]]:
    """Commands in one string of the package: quoted in backticks, or written out
    with at least one option (``neardup repair --rebase: ...``); prose such as
    "no neardup run is using it" is neither."""
    found = []
    for _, span in SPAN.findall(text):
        span = " ".join(span.split())
        if STARTS_WITH_NEARDUP.match(span):
            found += invocations(words(span))
    for paragraph in re.split(r"\n\s*\n", SPAN.sub(" ", text)):
        for m in re.finditer(r"\bneardup [^,;:()`]*", " ".join(paragraph.split())):
            tokens = words(m.group(0))
            if any(OPTION.match(t) for t in tokens):
                found += invocations(tokens)
    return found


def problem(args: list[str]) -> str | None:
    """Why ``neardup ARGS`` is not a valid command line, or None."""
    cmd: click.Command = main
    path = "neardup"
    rest = list(args)
    while isinstance(cmd, click.Group) and rest and not OPTION.match(rest[0]):
        name = rest.pop(0)
        if name.isupper() or name == "X":  # a placeholder: which command is not said
            return None
        sub = cmd.commands.get(name)
        if sub is None:
            return f"{path} has no subcommand {name!r}"
        cmd, path = sub, f"{path} {name}"
    accepted = {"-h", "--help"}  # main's help_option_names, inherited
    for param in cmd.params:
        accepted |= {*param.opts, *param.secondary_opts}
    for token in rest:
        name = token.split("=", 1)[0]
        if OPTION.match(token) and name not in accepted:
            return f"{path} has no option {name}"
    return None


def string_constants(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def test_the_checker_finds_what_is_wrong() -> None:
    assert problem(["dedup", "IN", "--output", "o", "--threshold=0.9", "-h"]) is None
    assert problem(["dedup", "--vectors", "-", "--metric", "l2"]) is None
    assert problem(["service", "init"]) == "neardup has no subcommand 'service'"
    assert problem(["serve", "--tenant", "a"]) == "neardup serve has no option --tenant"
    assert problem(["COMMAND", "--anything"]) is None
    assert doc_commands(
        "run `neardup audit INPUT ... [-o OUTDIR]` or\n```sh\nx && neardup eval a # c\n```"
    ) == [
        ["eval", "a"],
        ["audit", "INPUT", "-o", "OUTDIR"],
    ]
    assert source_commands("stop the other neardup serve here") == []
    assert source_commands("try neardup repair --rebase: it") == [["repair", "--rebase"]]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_in_the_docs_exists(doc: Path) -> None:
    commands = doc_commands(doc.read_text(encoding="utf-8"))
    wrong = [(" ".join(c), problem(c)) for c in commands if problem(c)]
    assert wrong == []
    if doc in (README, ROOT / "docs" / "service.md"):
        assert len(commands) >= 5  # the parser sees them at all


def test_every_command_in_hints_and_help_exists() -> None:
    checked, wrong = 0, []
    for path in sorted(SRC.rglob("*.py")):
        for line, text in string_constants(path):
            for c in source_commands(text):
                checked += 1
                if problem(c):
                    wrong.append((f"{path.name}:{line}", " ".join(c), problem(c)))
    assert wrong == []
    assert checked >= 20


# ---------------------------------------------------------------------------
# Figures from benchmarks/results


def result(name: str) -> Any:
    return json.loads((RESULTS / name).read_text(encoding="utf-8"))


def says(doc: Path, *figures: str) -> None:
    """``doc`` (line breaks ignored) contains each figure as written."""
    text = " ".join(doc.read_text(encoding="utf-8").split())
    missing = [f for f in figures if f not in text]
    if missing:
        pytest.fail(f"{doc.relative_to(ROOT)} does not say {missing}")


def test_first_run_figures() -> None:
    d = result("first_run.json")
    cold, warm, every = d["cold_s"], d["warm_best_s"], d["warm_s"]
    says(
        README,
        f"ends {cold:.1f} s after pip has finished",
        f"later runs of the same command take {warm:.1f} s",
    )
    says(
        BENCH_README,
        f"| pip install | {d['pip_s']:.1f} |",
        f"prints its progress) | {cold:.1f} |",
        f"all within {min(every):.2f}-{max(every):.2f}) | {warm:.2f} |",
    )


def test_end_to_end_headline() -> None:
    d = result("end_to_end.json")
    best = {k: v["best_s"] for k, v in d["pipelines"].items()}
    median = {k: v["median_s"] for k, v in d["pipelines"].items()}
    nd, ds, rensa = best["neardup_lsh"], best["datasketch"], best["rensa"]
    scale = {k: v["best_s"] for k, v in d["scale"]["pipelines"].items()}
    scale_gib = d["scale"]["pipelines"]["neardup_lsh"]["peak_rss_bytes"] / 2**30
    for doc in (README, BENCH_README):
        says(
            doc,
            f"**{ds / nd:.1f}×** faster than",
            f"{nd:.2f} s",
            f"{rensa:.2f} s",
            f"{best['neardup_exact'] / nd:.2f}× the LSH time",
            f"{scale['neardup_lsh']:.2f} s",
            f"{scale_gib:.2f} GiB",
        )
    says(
        README,
        f"neardup takes {nd:.2f} s — **{rensa / nd:.1f}×** faster",
        f"({ds:.2f} s;",
        f"({scale['rensa'] / scale['neardup_lsh']:.1f}× rensa)",
    )
    m_nd, m_ds = median["neardup_lsh"], median["datasketch"]
    says(
        BENCH_README,
        f"**{rensa / nd:.2f}×** faster than the rensa pipeline",
        f"(best {ds:.2f} s vs {nd:.2f} s;",
        f"{m_ds:.2f} / {m_nd:.2f}, it is {m_ds / m_nd:.1f}×",
    )


def test_end_to_end_earlier_run_is_the_committed_one() -> None:
    commit = "f511fdd"
    git = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{commit}:benchmarks/results/end_to_end.json"],
        capture_output=True,
        text=True,
    )
    if git.returncode != 0:
        pytest.skip(f"no git history with {commit} here (a shallow clone or an export)")
    d = json.loads(git.stdout)
    nd, ds = d["pipelines"]["neardup_lsh"]["best_s"], d["pipelines"]["datasketch"]["best_s"]
    measured_at = d["machine"]["neardup_source_at_end"]["git_commit"]
    says(README, f"{ds / nd:.1f}× in the one earlier run on this corpus, committed in `{commit}`")
    says(
        BENCH_README,
        f"`{commit}`, measured at `{measured_at}`) gave {ds / nd:.1f}× ({nd:.2f} s vs {ds:.2f} s)",
    )


def test_service_memory_is_one_figure_by_peak() -> None:
    d = result("service.json")
    nd, ds = d["neardup"]["memory"], d["datasketch"]["memory"]
    for doc in (README, BENCH_README):
        says(
            doc,
            f"{ds['VmHWM'] / nd['VmHWM']:.1f}× less peak resident memory",
            f"VmHWM {nd['VmHWM'] / 2**30:.2f} vs {ds['VmHWM'] / 2**30:.2f} GiB",
        )
        end_of_run = f"{ds['VmRSS'] / nd['VmRSS']:.0f}× less"
        assert end_of_run not in doc.read_text(encoding="utf-8")


def test_semantic_example_figures() -> None:
    d = result("semantic.json")["example"]
    sem, lex = d["semantic"], d["minhash"]
    sweep = {round(c["threshold"], 2): c for c in d["cosine_sweep"]}
    says(
        README,
        f"at cosine ≥ {d['cosine_threshold']:g} the semantic path finds "
        f"{sem['paraphrase_found']} of {d['planted_paraphrase_pairs']} planted paraphrase pairs "
        f"with precision {sem['precision']:.1f}",
        f"(word 3-grams, J ≥ {d['jaccard_threshold']:g}) finds {lex['paraphrase_found']} of them",
        f"Jaccard is at most {d['paraphrase_jaccard_max']:.2f}",
        f"({sem['copy_found']}/{d['planted_copy_pairs']} and "
        f"{lex['copy_found']}/{d['planted_copy_pairs']})",
        f"a cosine threshold of 0.85 would keep only "
        f"{sweep[0.85]['paraphrase_recall']:.0%}".replace("%", " %"),
    )


def test_vector_headline_says_what_was_measured() -> None:
    d = result("vectors.json")
    nd, r = d["neardup"], d["ratios"]
    mh = d["faiss_multihash"]
    assert d["faiss_lsh_256"]["extrapolated"] and mh["extrapolated"]
    queries = min(d[k]["queries_searched"] for k in ("faiss_lsh_256", "faiss_multihash"))
    says(
        README,
        f"takes {nd['seconds']:.0f} s on 2 cores, at pair recall {nd['recall_same_cluster']:.3f}",
        f"**extrapolated from about {round(queries, -3):,} of the 1M queries**",
        f"it takes {r['faiss_lsh_256_seconds_over_neardup']:.0f}× as long with `IndexLSH`",
        f"{r['faiss_lsh_1024_seconds_over_neardup']:.0f}× at 1024 bits",
        f"{r['faiss_multihash_seconds_over_neardup']:.0f}× with `IndexBinaryMultiHash`",
        f"is {mh['timings_s']['train_add']:.0f} of its {mh['seconds']:.0f} s",
    )
    # FAISS's own setting for the job, beside the forced ones: IVF range search with
    # nprobe from the sweep on the recall sample; extrapolated, and said so.
    ivf = d["faiss_ivf"]
    sweep = {x["nprobe"]: x["recall_on_sample"] for x in ivf["nprobe_sweep"]}
    reached = sweep[ivf["nprobe"]] >= ivf["recall_target"]
    ratio = r["faiss_ivf_seconds_over_neardup"]
    says(
        README,
        f"`IndexIVFFlat` inner-product range search at radius {d['corpus']['threshold']:g}",
        f"({ivf['nlist']:,} lists",
        f"recall on the sample {ivf['recall_on_sample']:.3f} at nprobe {ivf['nprobe']}",
        f"{ivf['seconds']:.0f} s, {ratio:.0f}× neardup's time",
    )
    if ivf["extrapolated"]:
        n = d["corpus"]["n"]
        says(README, f"extrapolated from {ivf['queries_searched']:,} of the {n:,} queries")
    if not reached:
        says(README, f"no `nprobe` up to {max(sweep)} reached the {ivf['recall_target']:g} recall")


def _report() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_report", ROOT / "benchmarks" / "report.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_benchmarks_vector_section_is_generated_and_read() -> None:
    """benchmarks/README's vector table is report.py's output for the committed
    results, and its reading of the table quotes the same figures."""
    d = result("vectors.json")
    says(BENCH_README, " ".join(_report().vectors_table(d).split()))
    nd, r, ivf = d["neardup"], d["ratios"], d["faiss_ivf"]
    sweep = {x["nprobe"]: x["recall_on_sample"] for x in ivf["nprobe_sweep"]}
    below = max(p for p in sweep if p < ivf["nprobe"])
    queries = min(d[k]["queries_searched"] for k in ("faiss_lsh_256", "faiss_multihash"))
    share = nd["timings_s"]["signatures"] / nd["seconds"]
    says(
        BENCH_README,
        f"vectors in {nd['seconds']:.0f} s end to end",
        f"`IndexLSH` takes {r['faiss_lsh_256_seconds_over_neardup']:.0f}× as long at 256 bits",
        f"({r['faiss_lsh_1024_seconds_over_neardup']:.0f}× at 1024 bits)",
        f"neardup's layout {r['faiss_multihash_seconds_over_neardup']:.0f}×",
        f"needs `nprobe` {ivf['nprobe']} of {ivf['nlist']:,} lists",
        f"({ivf['recall_on_sample']:.4f} on the sample; {below} gives {sweep[below]:.3f})",
        f"{r['faiss_ivf_seconds_over_neardup']:.0f}× neardup's time",
        f"measured at {nd['recall_same_cluster']:.3f}",
        f"only {nd['exact_scores']:,} exact cosines",
        f"{nd['edge_check']['checked']:,} of neardup's edges",
        f"about {round(queries, -3):,} (IndexLSH, MultiHash) and "
        f"{ivf['queries_searched']:,} (IVF) searched queries",
        f"take about {round(share * 10) * 10} % of its time",
        f"the MultiHash build took {d['faiss_multihash']['timings_s']['train_add']:.0f} s here",
    )



def test_benchmarks_multilingual_tables_are_generated() -> None:
    """benchmarks/README's multilingual tables are report.py's output for the
    committed results (the run before script-aware tokens, and the later one once
    it is committed)."""
    assert (RESULTS / "multilingual_before.json").exists()
    for name in ("multilingual_before.json", "multilingual.json"):
        if (RESULTS / name).exists():
            table = _report().multilingual_table(result(name))
            says(BENCH_README, " ".join(table.split()), f"(`results/{name}`)")

def test_layouts_table_quotes_the_results() -> None:
    d = result("layouts.json")["results"]
    labels = {"one_layout": "one layout (0.5)", "two_layouts": "two layouts (0.5 + 0.9)"}
    for name, label in labels.items():
        q, m = d[name]["queries"], d[name]["memory_per_item"]
        says(
            BENCH_README,
            f"| {label} | {q['near']['recall']} | {q['near']['candidates_mean']} / "
            f"{q['near']['candidates_p99']:g} | {q['related']['recall']} | "
            f"{q['related']['candidates_mean']} / {q['related']['candidates_p99']:g} | "
            f"{m['band_key_bytes']:g} | {m['table_bytes']:,} |",
        )
    ratios = result("layouts.json")["ratios_two_over_one"]
    says(BENCH_README, f"candidates to {ratios['near_candidates_mean']}×",
         f"({ratios['table_bytes_per_item']:.2f}× the one-layout tables")


def test_machine_of_each_results_file() -> None:
    by_cpu: dict[str, list[str]] = {}
    for path in sorted(RESULTS.glob("*.json")):
        machine = json.loads(path.read_text(encoding="utf-8")).get("machine")
        if isinstance(machine, dict) and "cpu_model" in machine:
            by_cpu.setdefault(machine["cpu_model"], []).append(path.name)
    for cpu, names in by_cpu.items():
        says(BENCH_README, f"| `{cpu}` | {', '.join(f'`{n}`' for n in names)} |")


def test_every_benchmark_script_is_listed() -> None:
    intro = BENCH_README.read_text(encoding="utf-8").split("## How to run")[0]
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        assert f"`{path.name}`" in intro, path.name


# ---------------------------------------------------------------------------
# Statements about the code


def test_exit_codes_agree_with_the_code() -> None:
    cli = sorted((SRC / "cli").glob("*.py"))
    trees = [ast.parse(p.read_text(encoding="utf-8")) for p in cli]
    tree = ast.parse((SRC / "cli" / "__init__.py").read_text(encoding="utf-8"))
    codes = {130, 143}  # leftovers / _launch: a dedup stopped by SIGINT, SIGTERM
    for node in (n for t in trees for n in ast.walk(t)):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "sys.exit":
            codes |= {
                c.value
                for c in ast.walk(node)
                if isinstance(c, ast.Constant) and isinstance(c.value, int)
            }
    readme = " ".join(README.read_text(encoding="utf-8").split())
    sentence = readme.split("Exit codes:")[1].split(". ")[0]
    doc = ast.get_docstring(tree) or ""
    documented = {int(n) for n in re.findall(r"\b\d+\b", sentence)}
    assert codes <= documented
    assert codes <= {int(n) for n in re.findall(r"\b\d+\b", doc.split("Exit codes:")[1])}
    assert "reserved" not in doc


def test_modules_without_a_test_module_are_named() -> None:
    """tests/ mirrors src/neardup/: tests/<package>/test_<module>.py, or the README
    names the module among those tested through others."""
    dev = README.read_text(encoding="utf-8").split("## Development")[1]
    named = dev.split("`tests/<package>/test_<module>.py`;")[1].split("have none of their own")[0]
    modules = {
        (p.parent.name, p.stem)
        for p in SRC.glob("*/*.py")
        if not p.stem.startswith("_") and p.parent.name != "cli"
    }
    untested = {
        f"{pkg}.{m}" for pkg, m in modules if not (ROOT / "tests" / pkg / f"test_{m}.py").exists()
    }
    assert set(re.findall(r"`([\w.]+)`", named)) == untested

"""``neardup signatures``: the command writes what the library builds."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
from click.testing import CliRunner

from neardup import Config, ShingleSpec
from neardup.batch.sigexport import signature_table
from neardup.cli import main
from neardup.testing import synthetic_documents


def test_the_command_writes_the_library_table_and_refuses_an_existing_file(
    tmp_path: Path,
) -> None:
    texts = synthetic_documents(40, seed=9)
    src = tmp_path / "in.jsonl"
    lines = [json.dumps({"k": f"k{i}", "text": t}) + "\n" for i, t in enumerate(texts)]
    src.write_text("".join(lines))
    out = tmp_path / "sigs.parquet"
    args = ["signatures", str(src), "-o", str(out), "--id-field", "k", "--shingle", "word:3"]
    res = CliRunner().invoke(main, [*args, "--bands", "8", "--rows", "4", "--num-perm", "32"])
    assert res.exit_code == 0, res.output
    assert "wrote 40 signatures (8 bands x 4 rows of 32)" in res.output
    cfg = Config(shingle=ShingleSpec(kind="word", k=3), bands=8, rows=4, num_perm=32)
    want = signature_table(texts, [f"k{i}" for i in range(40)], cfg)
    assert pq.read_table(out).equals(want)
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 4 and "exists" in again.output
    assert CliRunner().invoke(main, [*args, "--overwrite"]).exit_code == 0
    bad = CliRunner().invoke(main, [*args, "--overwrite", "--num-perm", "0"])
    assert bad.exit_code == 2 and "num_perm" in bad.output

"""The Ray engine's manifest: reused stages belong to the same run and are undamaged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neardup.core._errors import CorruptFile, InvalidConfig
from neardup.engines.ray.manifest import Manifest


def test_manifest_refuses_other_runs_and_damage(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("not neardup's")
    with pytest.raises(InvalidConfig, match="not a neardup ray work folder"):
        Manifest(str(tmp_path / "mine"), {"config": "a"}, resume=False)
    assert (tmp_path / "mine" / "notes.txt").exists()
    work = str(tmp_path / "w")
    m = Manifest(work, {"config": "a"}, resume=False)
    f = tmp_path / "w" / "x.parquet"
    f.write_bytes(b"data")
    m.record("exact", [str(f)], {"identical_edges": 3}, 0.5)
    again = Manifest(work, {"config": "a"}, resume=True)
    assert again.done("exact") == {"identical_edges": 3}
    with pytest.raises(InvalidConfig, match="another run"):
        Manifest(work, {"config": "b"}, resume=True)
    f.write_bytes(b"changed")  # a damaged stage file: the stage is redone
    assert Manifest(work, {"config": "a"}, resume=True).done("exact") is None
    doc = json.loads((tmp_path / "w" / "manifest.json").read_text())
    doc["stages"]["exact"]["info"]["identical_edges"] = 4
    (tmp_path / "w" / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(CorruptFile, match="checksum"):
        Manifest(work, {"config": "a"}, resume=True)

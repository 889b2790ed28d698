"""A service data directory written before the redesign opens and answers the same.

``tests/data/service-golden.tar.gz`` was written by a real ``neardup serve`` (two
tenants of different schemes, upserts, tombstones, a snapshot) and
``service-golden.json`` holds the answers it gave to read-only requests; see
``tests/data/make_service_golden.py``.  A later version must open that directory
and give the same answers, byte for byte after JSON parsing.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

from service_helpers import Server

DATA = Path(__file__).resolve().parents[1] / "data"


def _maker() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "make_service_golden", DATA / "make_service_golden.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.timeout(300)
def test_the_recorded_data_directory_answers_as_recorded(tmp_path: Path) -> None:
    maker = _maker()
    with tarfile.open(DATA / "service-golden.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    recorded = json.loads((DATA / "service-golden.json").read_text())["answers"]
    producers = json.loads((tmp_path / "d.producers.json").read_text())
    srv = Server(tmp_path / "d", operator_tenants=tuple(maker.TENANTS)).start()
    try:
        got = maker.answers(srv, srv.operator_token, producers)
    finally:
        srv.stop()
    for tenant, want in recorded.items():
        diff = [
            k for k in sorted(set(want) | set(got[tenant])) if want.get(k) != got[tenant].get(k)
        ]
        assert diff == [], f"{tenant}: {len(diff)} answers differ, first {diff[:5]}"
    # The record is not trivial: duplicates found, pairs verified, tombstones seen.
    states = [
        v[1]["decision"]["state"] for k, v in recorded["t1"].items() if k.startswith("candidates-")
    ]
    assert "duplicate" in states and "unique" in states
    assert sum(v[0] == 404 for v in recorded["t1"].values() if isinstance(v, list)) >= 1

"""Regenerate ``src/neardup/kernels/manifest.json``: the compiled kernels (and their
argument types) that each kind of run calls, with their compile times.

Each workload runs in a fresh process against a copy of ``src/neardup`` without
any numba cache, with a hook on numba's dispatch from Python: every kernel called
from Python with new argument types is recorded once, with how long it took to
compile.  ``neardup.kernels._manifest`` reads the file (``kernel_groups``, package data
shipped in the wheel) and compiles the entries of a run's groups in parallel
before the run starts.  Run this after changing a kernel's signature, or the
types a caller passes (a test checks that the manifest names existing kernels
and that a first vector and text run compile nothing beyond it):

    python scripts/kernel_manifest.py            # every group
    python scripts/kernel_manifest.py dedup      # only the groups named
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "neardup" / "kernels" / "manifest.json"
SAMPLE = ROOT / "data" / "sample.jsonl"

# group -> Python source run in a fresh process (``TMP`` is a scratch folder).
WORKLOADS: dict[str, str] = {
    "dedup": f"""
import os
from neardup.cli import main
try:
    main(["dedup", {str(SAMPLE)!r}, "-o", os.path.join(TMP, "x"), "--overwrite", "--quiet"],
         standalone_mode=False)
except SystemExit:
    pass
""",
    "dedup-index": f"""
import os
from neardup.cli import main
sample = {str(SAMPLE)!r}
idx = os.path.join(TMP, "idx")
for argv in (["--save-index", idx], ["--against", idx]):
    try:
        main(["dedup", sample, "-o", os.path.join(TMP, argv[0][2:]), *argv, "--overwrite",
              "--quiet"], standalone_mode=False)
    except SystemExit:
        pass
""",
    "dedup-exact": f"""
import os
from neardup.cli import main
try:
    main(["dedup", {str(SAMPLE)!r}, "-o", os.path.join(TMP, "x"), "--method", "exact",
          "--overwrite", "--quiet"], standalone_mode=False)
except SystemExit:
    pass
""",
    "library": f"""
import json
from neardup import Config, Deduplicator, find_duplicates
recs = [json.loads(x) for x in open({str(SAMPLE)!r}, encoding="utf-8") if x.strip()]
texts = [r["text"] for r in recs]
find_duplicates(texts, config=Config())
d = Deduplicator(Config())
for i, t in enumerate(texts[:50]):
    d.add(str(i), t)
""",
    "vectors": """
import os
import numpy as np
from neardup.cli import main
rng = np.random.default_rng(1)
x = rng.normal(size=(300, 32)).astype(np.float32)
x[150:] = x[:150] + rng.normal(scale=0.01, size=(150, 32)).astype(np.float32)
p = os.path.join(TMP, "emb.npy"); np.save(p, x)
for metric, t in (("cosine", "0.9"), ("l2", "0.5")):
    try:
        main(["dedup", p, "-o", os.path.join(TMP, metric), "--vectors", "-", "--metric",
              metric, "--threshold", t, "--overwrite", "--quiet"], standalone_mode=False)
    except SystemExit:
        pass
""",
    "service": """
import os
from neardup.service._crypto import MasterSecret
from neardup.service.tenant import Tenant, TenantConfig
t = Tenant.create(os.path.join(TMP, "t"), "t", TenantConfig(), MasterSecret(b"k" * 32))
base = "the quick brown fox jumps over the lazy dog while the cat sleeps on the mat"
for i in range(20):
    t.upsert(item_id=f"i{i}", content=base + f" {i} {i * 7}")
t.candidates(base, limit=10)
t.decide(base) if hasattr(t, "decide") else None
t.close()
""",
}

HOOK = """
import json, sys, time
from numba.core.dispatcher import Dispatcher
RECORDS = []
_orig = Dispatcher._compile_for_args
def _spec(t):
    from numba.core import types
    if isinstance(t, types.Array):
        return ["array", str(t.dtype), t.ndim, t.layout, not t.mutable]
    if isinstance(t, types.DictType):
        return ["dict", _spec(t.key_type), _spec(t.value_type)]
    if isinstance(t, types.UniTuple):
        return ["unituple", _spec(t.dtype), t.count]
    if isinstance(t, (types.Integer, types.Float, types.Boolean, types.NoneType)):
        return str(t)
    raise TypeError(repr(t))
def _hook(self, *args, **kws):
    before = set(self.overloads)
    t0 = time.perf_counter()
    try:
        return _orig(self, *args, **kws)
    finally:
        dt = time.perf_counter() - t0
        for sig in set(self.overloads) - before:
            f = self.py_func
            try:
                specs = [_spec(a) for a in sig]
            except TypeError as exc:
                print("skipped", f.__qualname__, exc, file=sys.stderr)
                continue
            RECORDS.append([f.__module__, f.__qualname__, specs, round(dt, 2)])
Dispatcher._compile_for_args = _hook
import neardup.kernels._warm
from neardup.kernels._native import use_native
# Record what the run itself compiles: no compiling ahead in worker processes, and
# no native module (every kernel called from Python goes through numba's dispatch).
neardup.kernels._warm.compile_kernels = lambda *a, **k: {}
use_native(False)
"""


def record(group: str, code: str, src_copy: Path) -> list[list[object]]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "records.json"
        prog = (
            f"TMP = {tmp!r}\n{HOOK}\n"
            f"try:\n    exec(compile({code!r}, 'workload', 'exec'))\n"
            f"finally:\n    open({str(out)!r}, 'w').write(json.dumps(RECORDS))\n"
        )
        env = {**os.environ, "PYTHONPATH": str(src_copy)}
        subprocess.run([sys.executable, "-c", prog], env=env, check=True, cwd=tmp)
        recs: list[list[object]] = json.loads(out.read_text())
    print(f"{group}: {len(recs)} kernels, {sum(float(r[3]) for r in recs):.1f} s", flush=True)  # type: ignore[arg-type]
    return recs


def manifest_text(groups: dict[str, list[Any]]) -> str:
    """The manifest as JSON: group -> [module, function, argument types, compile
    seconds measured on the machine that generated it], one entry a line so that a
    regeneration's diff shows which kernels changed."""
    blocks = []
    for group in sorted(groups):
        lines = ",\n".join(f"    {json.dumps(list(e))}" for e in groups[group])
        blocks.append(f"  {json.dumps(group)}: [\n{lines}\n  ]")
    return "{\n" + ",\n".join(blocks) + "\n}\n"


def main(argv: list[str] | None = None) -> int:
    only = set(argv if argv is not None else sys.argv[1:])
    groups: dict[str, list[Any]] = {}
    if only:
        from neardup.kernels._manifest import kernel_groups

        groups = {g: list(es) for g, es in kernel_groups().items() if g not in only}
    for group, code in WORKLOADS.items():
        if only and group not in only:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            # A fresh copy per group: no kernel is cached, so compile times are real.
            shutil.copytree(
                ROOT / "src" / "neardup",
                Path(tmp) / "neardup",
                ignore=shutil.ignore_patterns("__pycache__"),
            )
            recs = record(group, code, Path(tmp))
        seen: set[str] = set()
        entries = []
        for mod, name, specs, secs in recs:
            key = json.dumps([mod, name, specs])
            if key not in seen and str(mod).startswith("neardup."):
                seen.add(key)
                entries.append((str(mod).removeprefix("neardup."), name, specs, secs))
        groups[group] = sorted(entries, key=lambda e: (e[0], str(e[1]), json.dumps(e[2])))
    OUT.write_text(manifest_text(groups), encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

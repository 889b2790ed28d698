"""The curated public API."""

from __future__ import annotations

import importlib
import inspect

import pytest

import neardup
import neardup.service
from fresh_python import fresh_python

EXPECTED = {
    "Cluster",
    "Config",
    "CorruptFile",
    "DedupIndex",
    "DedupResult",
    "Deduplicator",
    "DocumentTooLarge",
    "Edge",
    "EmptyDocument",
    "HashKey",
    "InputError",
    "InvalidConfig",
    "InvalidType",
    "LSHIndex",
    "Layout",
    "Match",
    "MemoryLimitExceeded",
    "MinHasher",
    "NeardupError",
    "NeardupIOError",
    "NoFeasibleParameters",
    "RunOptions",
    "SchemeMismatch",
    "ShingleSpec",
    "Signature",
    "SignatureSet",
    "VectorConfig",
    "VectorDedupResult",
    "VectorIndex",
    "ZeroVector",
    "__version__",
    "candidate_probability",
    "compile_kernels",
    "dedup_records",
    "default_layout",
    "evaluate",
    "filter_dataset",
    "find_duplicates",
    "find_vector_duplicates",
    "get_normalizer",
    "hash_documents",
    "jaccard",
    "optimal_params",
    "run_audit",
    "run_dedup",
    "run_split",
    "shingles",
    "unique_records",
    "verify_pairs",
}


def test_all_is_exactly_the_curated_list() -> None:
    assert set(neardup.__all__) == EXPECTED
    assert sorted(neardup.__all__) == list(neardup.__all__)


def test_every_public_name_resolves_and_is_documented() -> None:
    for name in neardup.__all__:
        obj = getattr(neardup, name)
        if name != "__version__":
            assert inspect.getdoc(obj), f"{name} has no docstring"


def test_every_exception_is_in_one_tree() -> None:
    errors = [
        getattr(neardup, n)
        for n in neardup.__all__
        if isinstance(getattr(neardup, n), type) and issubclass(getattr(neardup, n), Exception)
    ]
    assert len(errors) == 12
    service_errors = [
        getattr(neardup.service, n)
        for n in neardup.service.__all__
        if isinstance(getattr(neardup.service, n), type)
        and issubclass(getattr(neardup.service, n), Exception)
    ]
    assert len(service_errors) == 9
    for e in errors + service_errors:
        assert issubclass(e, neardup.NeardupError)


FACADES = {
    "neardup.service": {"Service", "ServiceConfig", "Tenant", "TenantConfig", "NotFound"},
    "neardup.vectors": {
        "HyperplaneHasher",
        "VectorConfig",
        "angular_distance",
        "cosine_from_hamming",
        "hamming_distance",
        "find_vector_duplicates",
    },
    "neardup.testing": {"synthetic_documents", "plant_near_duplicates", "stdlib_paragraphs"},
}


@pytest.mark.parametrize("package", sorted(FACADES))
def test_facades_export_their_public_names_with_docstrings(package: str) -> None:
    mod = importlib.import_module(package)
    assert FACADES[package] <= set(mod.__all__)
    assert sorted(mod.__all__) == list(mod.__all__)
    for name in mod.__all__:
        assert inspect.getdoc(getattr(mod, name)), f"{package}.{name} has no docstring"
    with pytest.raises(AttributeError, match="no attribute"):
        _ = mod.not_a_public_name


def test_the_root_names_each_public_name_once() -> None:
    """A name moved to a facade is not also exported from the root, except the
    vector entry points, which the root keeps beside the text ones."""
    shared = {"VectorConfig", "VectorDedupResult", "VectorIndex", "find_vector_duplicates"}
    for package in FACADES:
        both = set(importlib.import_module(package).__all__) & set(neardup.__all__)
        assert both <= shared


@pytest.mark.parametrize(
    "module",
    [
        "neardup.text.normalize",
        "neardup.text.hashing",
        "neardup.sketch.minhash",
        "neardup.sketch.lsh",
        "neardup.verify.exact",
        "neardup.graph.cluster",
        "neardup.sketch.screen",
        "neardup.verify.oracle",
        "neardup.batch.pipeline",
        "neardup.batch.results",
        "neardup.batch.index",
        "neardup.batch.identical",
        "neardup.batch.feeder",
        "neardup.batch.online",
        "neardup.core.persist",
        "neardup.core.config",
        "neardup.io.synth",
        "neardup.io.corpus",
        "neardup.io.columns",
        "neardup.io.records",
        "neardup.io.blocks",
        "neardup.io.jsonl",
        "neardup.io.readers",
        "neardup.io.writers",
        "neardup.batch.external",
        "neardup.batch.job",
        "neardup.batch.jobwrite",
        "neardup.batch.outputs",
        "neardup.batch.report",
        "neardup.verify.explain",
        "neardup.batch.evaluate",
        "neardup.batch.stream",
        "neardup.cli",
        "neardup.vectors.sketches",
        "neardup.vectors.vconfig",
        "neardup.vectors.vlayout",
        "neardup.vectors.hamming",
        "neardup.vectors.vpipeline",
        "neardup.batch.vjob",
        "neardup.text.scheme",
        "neardup.lineage.families",
        "neardup.lineage.splits",
        "neardup.lineage.audit",
        "neardup.service.online",
        "neardup.service.cmdlog",
        "neardup.service.store",
        "neardup.service.auth",
        "neardup.service.tenant",
        "neardup.service.manager",
        "neardup.service.server",
        "neardup.service.models",
        "neardup.service.router",
        "neardup.service.feedback",
        "neardup.graph.components",
        "neardup.engines.ray",
        "neardup.engines.ray.candidates",
        "neardup.engines.ray.clusters",
        "neardup.engines.ray.common",
        "neardup.engines.ray.components",
        "neardup.engines.ray.driver",
        "neardup.engines.ray.features",
        "neardup.engines.ray.manifest",
        "neardup.engines.ray.outputs",
        "neardup.engines.ray.runner",
        "neardup.engines.ray.verify",
    ],
)
def test_stage_modules_declare_all(module: str) -> None:
    mod = importlib.import_module(module)
    assert mod.__doc__ and len(mod.__doc__) > 80
    for name in mod.__all__:
        assert hasattr(mod, name)


def test_importing_has_no_side_effects_on_numba_compilation() -> None:
    # Importing the package must not compile or run kernels (no import-time work):
    # a fresh interpreter imports it quickly and creates no module-level state.
    code = "import neardup, sys; print(sorted(k for k in sys.modules if k.startswith('neardup')))"
    assert "neardup" in fresh_python(code)


def test_importing_does_not_import_ray() -> None:
    """The local engine needs no Ray: it is imported only when --engine ray runs."""
    code = "import neardup, neardup.cli, sys; print('ray' in sys.modules)"
    assert fresh_python(code).strip() == "False"


def test_command_line_imports_no_compiled_kernels() -> None:
    """The command line loads numba only inside the commands that run kernels, so
    that ``dedup`` can start reading its input while numba loads."""
    code = (
        "import neardup.cli, sys; "
        "print('numba' in sys.modules, "
        "any(m in sys.modules for m in ('neardup.kernels._hashes', 'neardup.kernels._tokens', "
        "'neardup.kernels._bandjoin', 'neardup.kernels._cache')))"
    )
    assert fresh_python(code).split() == ["False", "False"]


def test_console_script_sets_thread_defaults_before_numpy() -> None:
    """OpenBLAS reads its thread count when NumPy loads, so the console script's
    entry point sets it first (an explicit user setting wins)."""
    import os

    code = (
        "import os, sys, neardup._launch as L; L.process_defaults(); "
        "print('numpy' in sys.modules, os.environ['OPENBLAS_NUM_THREADS'], "
        "os.environ['OMP_WAIT_POLICY'])"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS",)}
    env["OMP_WAIT_POLICY"] = "ACTIVE"
    assert fresh_python(code, env=env).split() == ["False", "1", "ACTIVE"]


def test_start_numba_leaves_the_probed_packages_unloaded_but_importable() -> None:
    code = (
        "import sys, importlib.util as u; "
        "from neardup.kernels._jit import start_numba; start_numba(); "
        "before = 'numba' in sys.modules; "
        "from neardup.kernels._jitprobe import touch; touch.dispatcher(1); "
        "mods = ('scipy.linalg', 'cffi', 'yaml'); "
        "print(before, 'numba' in sys.modules, "
        "any(sys.modules.get(m) is not None for m in mods), "
        "all(m not in sys.modules for m in mods))"
    )
    out = fresh_python(code)
    # start_numba only arranges numba's start: it happens when a kernel first needs it.
    assert out.split() == ["False", "True", "False", "True"]


_FAST_LOAD_SCRIPT = """
import sys
from neardup.kernels._jit import start_numba
from neardup.kernels._native import use_native
use_native(False)  # the JIT's cache loads are what is tested here
start_numba()
from neardup import Config, find_duplicates
base = "the quick brown fox jumps over the lazy dog near the river bank today "
texts = [base * 3, base * 3 + "again", "something else entirely, with other words " * 4]
result = find_duplicates(texts, config=Config(threshold=0.5))
print(sorted(result.pairs()), "numba.np.arraymath" in sys.modules)
"""


def test_start_numba_loads_cached_kernels_without_the_compiler_registry() -> None:
    def run(code: str) -> list[str]:
        return fresh_python(code).strip().rsplit(" ", 1)

    run(_FAST_LOAD_SCRIPT)  # compiles whatever is not cached yet
    pairs, registry_loaded = run(_FAST_LOAD_SCRIPT)
    assert pairs == "[(0, 1)]"
    # Everything came from the cache, so numba's lowering rules were never imported.
    assert registry_loaded == "False"


def test_start_numba_falls_back_to_numbas_own_load_when_a_fast_load_fails() -> None:
    code = (
        "from numba.core import caching\n"
        "caching.Cache._load_overload_orig = caching.Cache._load_overload\n"
        "calls = []\n"
        "def flaky(self, sig, ctx):\n"
        "    calls.append(1)\n"
        "    if len(calls) == 1:\n"
        "        raise RuntimeError('needs the registry')\n"
        "    return caching.Cache._load_overload_orig(self, sig, ctx)\n"
        "caching.Cache._load_overload = flaky\n" + _FAST_LOAD_SCRIPT
    )
    assert fresh_python(code).strip().rsplit(" ", 1)[0] == "[(0, 1)]"

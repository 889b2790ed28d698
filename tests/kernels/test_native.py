"""The kernels' native build: the same results as numba's JIT, used only where it
fits, and a failed or absent build that costs nothing but speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.kernels import _native
from neardup.kernels._kernel import Kernel, arg_key
from neardup.kernels._manifest import kernel_groups
from neardup.kernels._manifest import numba_type as _type

_DTYPES = ["uint8", "int64", "uint64", "uint32", "float32", "float64", "bool", "int8"]


@settings(max_examples=200, deadline=None)
@given(
    dtype=st.sampled_from(_DTYPES),
    shape=st.lists(st.integers(0, 4), min_size=1, max_size=3),
    order=st.sampled_from(["C", "F", "strided"]),
    readonly=st.booleans(),
    scalar=st.one_of(
        st.integers(-(2**63), 2**64 - 1),
        st.floats(allow_nan=False),
        st.booleans(),
        st.sampled_from([np.uint64(3), np.int64(-2), np.float32(1.5), np.bool_(True)]),
    ),
)
def test_arg_key_is_numbas_own_typing(
    dtype: str, shape: list[int], order: str, readonly: bool, scalar: object
) -> None:
    """A call goes to a native build only when numba would type its arguments
    exactly as the build's recorded types."""
    import numba

    a = np.zeros([s * (2 if order == "strided" else 1) for s in shape], dtype=dtype, order="C")
    if order == "F":
        a = np.asfortranarray(a)
    elif order == "strided":
        a = a[tuple(slice(None, None, 2) for _ in shape)]
    a.flags.writeable = not readonly
    key = arg_key((a, scalar))
    assert _type(list(key[0])) == numba.typeof(a)
    assert _type(key[1]) == numba.typeof(scalar)


def test_an_argument_numba_cannot_type_matches_no_build() -> None:
    assert arg_key(("text", None, [1])) == (None, None, None)


def test_kernel_modules_import_without_numba() -> None:
    code = (
        "import sys\n"
        "from neardup.kernels import _arrays, _bandjoin, _exact, _hashes, _jsonscan, "
        "_okernels, _scripts, _signatures, _tokens, _unionfind, _vkernels, _writes\n"
        "import neardup.batch.pipeline, neardup.cli.dedup, neardup.service.online\n"
        "print('numba' in sys.modules, 'llvmlite' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.split() == ["False", "False"]


def test_every_manifest_kernel_is_a_lazy_kernel_and_parts_cover_each_group() -> None:
    import importlib

    for group, entries in kernel_groups().items():
        parts = _native.parts(entries)
        assert sorted(i for p in parts for i in p) == list(range(len(entries))), group
        assert 1 <= len(parts) <= _native.PARTS
        for mod, func, _, _ in entries:
            assert isinstance(getattr(importlib.import_module(f"neardup.{mod}"), func), Kernel)


def test_a_failed_build_is_not_retried_and_leaves_the_jit() -> None:
    entries = kernel_groups()["vectors"]
    name = _native._module_name("vectors", entries, 0)
    folder = _native._folders()[0]
    folder.mkdir(parents=True, exist_ok=True)
    note = folder / (name + ".failed")
    existed = note.exists()
    note.write_text("RuntimeError: simulated\n", encoding="utf-8")
    try:
        assert _native.state("vectors") == "failed"
    finally:
        if not existed:
            note.unlink()


_RUN = """
import json, sys
from neardup.kernels import _native
_native.use_native(sys.argv[1] == "native")
from neardup import Config, find_duplicates
texts = json.load(open(sys.argv[2]))
r = find_duplicates(texts, config=Config(threshold=0.7))
used = "numba" in sys.modules
print(json.dumps({"pairs": sorted(map(list, r.pairs())), "numba": used}))
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_native_and_jit_builds_give_the_same_duplicates(tmp_path: Path) -> None:
    """Thousands of documents (so that the row-split kernels run on several
    threads), planted near copies: the same pairs from either build."""
    from neardup import compile_kernels

    compile_kernels(["library"])
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(3000)]
    texts = [" ".join(rng.choice(words, 40)) for _ in range(3000)]
    for i in range(0, 3000, 10):
        edited = texts[i].split()
        edited[int(rng.integers(0, 40))] = "changed"
        texts.append(" ".join(edited))
    path = tmp_path / "texts.json"
    path.write_text(json.dumps(texts), encoding="utf-8")

    def run(mode: str) -> dict[str, object]:
        out = subprocess.run(
            [sys.executable, "-c", _RUN, mode, str(path)],
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
        return result

    native, jit = run("native"), run("jit")
    assert native["pairs"] == jit["pairs"]
    assert len(native["pairs"]) >= 300  # type: ignore[arg-type]
    assert native["numba"] is False and jit["numba"] is True


_ONE_BAND = """
import json, sys
import numpy as np
from neardup.kernels import _bandjoin as KB
keys = np.asfortranarray(np.array([[5], [3], [5], [7], [3], [5]], dtype=np.uint64))
counts = KB.band_runs(keys, np.ones(6, dtype=np.bool_), 1)
start = int(KB._RUN_START)
col = [(int(v) & ~start, bool(int(v) & start)) for v in keys[: int(counts[0]), 0]]
print(json.dumps({"col": col, "numba": "numba" in sys.modules}))
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_an_array_both_c_and_f_contiguous_runs_in_a_build_for_either() -> None:
    """One band of keys, (n, 1), is C- and F-contiguous at once and numba types it
    C; the build made for F band keys runs it (a single document's keys, (1, b),
    took numba's JIT and a compile before), with the buckets the JIT gives."""
    from fresh_python import fresh_python
    from neardup import compile_kernels

    compile_kernels(["dedup"])
    got = json.loads(fresh_python(_ONE_BAND).strip().splitlines()[-1])
    # Buckets in key order (3, then 5; 7 is alone), members in document order.
    assert got["col"] == [[1, True], [4, False], [0, True], [2, False], [5, False]]
    assert got["numba"] is False

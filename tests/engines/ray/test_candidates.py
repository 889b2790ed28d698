"""The Ray engine's candidate pairs are the local band join's."""

from __future__ import annotations

import numpy as np

from neardup.engines.ray.candidates import bucket_pairs


def test_bucket_pairs_match_the_local_band_join() -> None:
    """Candidates of the per-bucket reduce are the local kernel's candidates."""
    from neardup.kernels import _bandjoin as KB

    rng = np.random.default_rng(3)
    n, nb, cap = 300, 4, 3
    keys = rng.integers(0, 12, size=(n, nb)).astype(np.uint64)
    active = rng.random(n) > 0.2
    sig = np.zeros((n, 8), dtype=np.uint32)
    data = np.zeros(0, dtype=np.uint64)
    indptr = np.zeros(n + 1, dtype=np.int64)
    parent = np.arange(n, dtype=np.int64)
    ra, rb, rband, *_, c1, _c2, c3, _c4 = KB.band_join(
        keys.copy(),  # band_join consumes its keys
        0,
        active,
        sig,
        data,
        indptr,
        0.5,
        cap,
        KB.MODE_CANDIDATES,
        False,
        parent,
        KB.new_seen(),
    )
    want = {(int(a), int(b)): int(bd) for a, b, bd in zip(ra, rb, rband, strict=True)}
    idx = np.flatnonzero(active)
    band = np.repeat(np.arange(nb, dtype=np.int64)[None, :], idx.size, axis=0).reshape(-1)
    key = keys[idx].reshape(-1)
    pos = np.repeat(idx, nb)
    zero = np.zeros(pos.size, dtype=np.uint64)
    # Distinct content per document: no exact copies to drop.
    a, b, bd, _k, overflow = bucket_pairs(band, key, pos, pos.astype(np.uint64), zero, zero, cap)
    got: dict[tuple[int, int], int] = {}
    for x, y, z in zip(a.tolist(), b.tolist(), bd.tolist(), strict=True):
        got[(x, y)] = min(z, got.get((x, y), z))
    assert got == want
    assert overflow == c3 and len(got) == c1
